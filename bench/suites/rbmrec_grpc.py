"""Python gRPC stubs of proto/rbmrec.proto and proto/health.proto for the
bench suites (faults.sh, soak.sh).

load(stub_dir) generates the stubs into stub_dir on first use (the system
protoc with grpc_python_plugin, else grpc_tools) and returns the modules
(rbmrec_pb2, rbmrec_pb2_grpc, health_pb2, health_pb2_grpc) as a namespace.
Needs Debian's python3-grpcio (scripts/test.sh installs it); the suites run
this file with /usr/bin/python3 for that reason.
"""

import os
import shutil
import subprocess
import sys
import types

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROTOS = ["proto/google/api/http.proto", "proto/google/api/annotations.proto",
          "proto/rbmrec.proto", "proto/health.proto"]


def _generate(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    errors = []
    if protoc and plugin:
        r = subprocess.run(
            [protoc, f"-I{ROOT}", f"--python_out={out_dir}",
             f"--grpc_python_out={out_dir}",
             f"--plugin=protoc-gen-grpc_python={plugin}"] + PROTOS,
            cwd=ROOT, capture_output=True, text=True)
        if r.returncode == 0:
            return
        errors.append(r.stderr)
    try:
        from grpc_tools import protoc as grpc_protoc
        if grpc_protoc.main(["protoc", f"-I{ROOT}", f"--python_out={out_dir}",
                             f"--grpc_python_out={out_dir}"] + PROTOS) == 0:
            return
        errors.append("grpc_tools.protoc failed")
    except ImportError as e:
        errors.append(str(e))
    sys.exit("cannot generate Python stubs:\n" + "\n".join(errors))


def load(stub_dir):
    if not os.path.exists(os.path.join(stub_dir, "proto", "rbmrec_pb2.py")):
        _generate(stub_dir)
    if stub_dir not in sys.path:
        sys.path.insert(0, stub_dir)
    from proto import health_pb2, health_pb2_grpc
    from proto import rbmrec_pb2, rbmrec_pb2_grpc
    return types.SimpleNamespace(pb=rbmrec_pb2, pbg=rbmrec_pb2_grpc,
                                 health=health_pb2, healthg=health_pb2_grpc)


def trailing(err, key):
    """The value of trailing metadata `key` of a failed call, or None."""
    try:
        md = err.trailing_metadata() or ()
    except Exception:  # not a call error (e.g. a local failure)
        return None
    for k, v in md:
        if k == key:
            return v
    return None
