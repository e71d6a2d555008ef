#!/usr/bin/env python3
"""A client in another ecosystem: Python (Debian's python3-grpcio) against
rbmrec-server, using stubs generated from proto/ into a temp dir at test time.

Calls grpc.health.v1.Health/Check and rbmrec.v1.Rbmrec/PredictRatings (after
loading a small synthetic data set and training), checks an error code, then
stops the server with SIGTERM and expects exit code 0.

  python_client_test.py --server-bin build/bin/rbmrec-server [--proto-dir .]
  python_client_test.py --server 127.0.0.1:50051   # use a running server
                                                   # (it must have ratings)

Stub generation: Debian 12's python3-grpc-tools (1.14) bundles a protoc too
old for proto3 `optional`, so the system protoc (protobuf-compiler) with
grpc_python_plugin (protobuf-compiler-grpc) is tried first, grpc_tools second.
"""

import argparse
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def generate_stubs(proto_dir, out_dir):
    protos = ["proto/rbmrec.proto", "proto/health.proto"]
    plugin = shutil.which("grpc_python_plugin")
    protoc = shutil.which("protoc")
    errors = []
    if protoc and plugin:
        cmd = [protoc, f"-I{proto_dir}", f"--python_out={out_dir}",
               f"--grpc_python_out={out_dir}",
               f"--plugin=protoc-gen-grpc_python={plugin}"] + protos
        r = subprocess.run(cmd, cwd=proto_dir, capture_output=True, text=True)
        if r.returncode == 0:
            return
        errors.append(r.stderr)
    try:
        from grpc_tools import protoc as grpc_protoc  # noqa: WPS433
        rc = grpc_protoc.main(["protoc", f"-I{proto_dir}",
                               f"--python_out={out_dir}",
                               f"--grpc_python_out={out_dir}"] + protos)
        if rc == 0:
            return
        errors.append(f"grpc_tools.protoc exited {rc}")
    except ImportError as e:
        errors.append(str(e))
    sys.exit("cannot generate Python stubs:\n" + "\n".join(errors))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-bin")
    ap.add_argument("--server")
    ap.add_argument("--proto-dir",
                    default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = ap.parse_args()
    if not args.server and not args.server_bin:
        ap.error("give --server-bin or --server")

    try:
        import grpc  # noqa: F401
    except ImportError:
        # pyenv & co. shadow Debian's python3, which has python3-grpcio.
        if sys.executable != "/usr/bin/python3" and os.path.exists(
                "/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
        raise

    tmp = tempfile.mkdtemp(prefix="rbmrec-py-")
    proc = None
    try:
        generate_stubs(os.path.abspath(args.proto_dir), tmp)
        sys.path.insert(0, tmp)
        import grpc
        from proto import health_pb2, health_pb2_grpc
        from proto import rbmrec_pb2 as pb, rbmrec_pb2_grpc as pbg

        addr = args.server
        if not addr:
            addr = f"127.0.0.1:{free_port()}"
            log = open(os.path.join(tmp, "server.log"), "w")
            proc = subprocess.Popen(
                [args.server_bin, "--listen", addr, "--db",
                 os.path.join(tmp, "py.db"), "--hidden", "8", "--epochs", "10",
                 "--train-threads", "1"], stdout=log, stderr=log)
        channel = grpc.insecure_channel(addr)
        grpc.channel_ready_future(channel).result(timeout=15)

        health = health_pb2_grpc.HealthStub(channel)

        def check(service):
            return health.Check(health_pb2.HealthCheckRequest(service=service),
                                timeout=5).status

        SERVING = health_pb2.HealthCheckResponse.SERVING
        # "" is liveness; "rbmrec.v1.Rbmrec" is SERVING only once a model
        # can serve (a fresh database has none).
        assert check("") == SERVING
        if proc is not None:
            assert check("rbmrec.v1.Rbmrec") == \
                health_pb2.HealthCheckResponse.NOT_SERVING
        print("health: SERVING (rbmrec.v1.Rbmrec: no model yet)")

        stub = pbg.RbmrecStub(channel)
        if proc is not None:
            batches = []
            for u in range(40):
                batch = pb.AddRatingsRequest()
                for i in range(30):
                    if (u * 7 + i * 3) % 4 == 0:
                        continue
                    likes = (i % 2) == (u % 2)
                    batch.ratings.add(user_id=f"py{u}", item_id=f"m{i}",
                                      rating=5.0 if likes else 1.0)
                batches.append(batch)
            added = stub.AddRatings(iter(batches), timeout=30)
            assert added.rejected == 0 and added.batches == 40, added
            final = None
            for p in stub.Train(pb.TrainRequest(), timeout=120):
                final = p
            assert final.state == pb.TrainProgress.SUCCEEDED, final
            print(f"trained model v{final.model_version}")

        deadline = time.time() + 10
        while check("rbmrec.v1.Rbmrec") != SERVING:
            assert time.time() < deadline, "rbmrec.v1.Rbmrec not SERVING"
            time.sleep(0.05)
        print("health of rbmrec.v1.Rbmrec: SERVING")

        req = pb.PredictRatingsRequest(user_id="py0", item_ids=["m0", "m1"])
        resp = stub.PredictRatings(req, timeout=5)
        assert resp.model_version > 0, resp
        assert len(resp.predictions) == 2
        for p in resp.predictions:
            assert len(p.probabilities) == len(resp.scale.values)
            assert all(math.isfinite(x) and x >= 0 for x in p.probabilities)
            assert abs(sum(p.probabilities) - 1.0) < 1e-3, p
            assert resp.scale.min <= p.expected_rating <= resp.scale.max
            print(f"predict py0 {p.item_id}: expected {p.expected_rating:.3f}")

        try:
            stub.PredictRatings(pb.PredictRatingsRequest(
                user_id="nobody-at-all", item_ids=["m0"]), timeout=5)
            raise AssertionError("unknown user did not fail")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND, e
            assert "nobody-at-all" in e.details(), e.details()
        channel.close()

        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=20)
            proc = None
            assert rc == 0, f"server exit code {rc} after SIGTERM"
        print("PASS")
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
            try:
                sys.stderr.write(open(os.path.join(tmp, "server.log")).read())
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
