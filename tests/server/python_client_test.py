#!/usr/bin/env python3
"""A client in another ecosystem: Python (Debian's python3-grpcio) against
rbmrec-server, using stubs generated from proto/ into a temp dir at test time.

Calls grpc.health.v1.Health/Check and rbmrec.v1.Rbmrec/PredictRatings (after
loading a small synthetic data set with a catalogue and training), the
product calls (Recommend with categories, required categories, exclusions,
a candidate set and an offset; SimilarItems, also filtered; the RecommendAll
stream; the cold-start fallback of a user without ratings), GetItem and
GetUserRatings, checks an error
code, then stops the server with SIGTERM and expects exit code 0.

With --server-bin this runs twice: a plain server, then one with TLS and
client tokens (--tls-cert/--tls-key/--auth-tokens; certificates and an admin
and a reader token from docker/make-certs.sh), which the client reaches with
grpc.ssl_channel_credentials and the admin token as gRPC call credentials
(`authorization: Bearer TOKEN`). That pass also checks that health needs no
token, a call without a token (or with an unknown one) fails with
UNAUTHENTICATED, the reader token predicts but cannot train
(PERMISSION_DENIED) nor read a user's stored ratings, and a client without
TLS cannot connect.

  python_client_test.py --server-bin build/bin/rbmrec-server [--proto-dir .]
                        [--passes plain,tls]
  python_client_test.py --server 127.0.0.1:50051   # use a running server
                                                   # (it must have ratings;
                                                   # plain pass only)

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
    protos = ["proto/google/api/http.proto", "proto/google/api/annotations.proto",
              "proto/rbmrec.proto", "proto/health.proto"]
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


def run_pass(args, tmp, tls):
    """One pass against a server (started here unless --server)."""
    import grpc
    from proto import health_pb2, health_pb2_grpc
    from proto import rbmrec_pb2 as pb, rbmrec_pb2_grpc as pbg

    name = "tls" if tls else "plain"
    proc = None
    log_path = os.path.join(tmp, f"server-{name}.log")
    try:
        server_flags = []
        if tls:
            certs = os.path.join(tmp, "certs")
            script = os.path.join(os.path.abspath(args.proto_dir), "docker",
                                  "make-certs.sh")
            subprocess.run(["bash", script, certs, "--tokens",
                            os.path.abspath(args.server_bin)], check=True,
                           capture_output=True)
            read = lambda f: open(os.path.join(certs, f), "rb").read()  # noqa
            admin = read("admin.token").decode().strip()
            reader = read("reader.token").decode().strip()
            server_flags = ["--tls-cert", os.path.join(certs, "server.pem"),
                            "--tls-key", os.path.join(certs, "server.key"),
                            "--auth-tokens", os.path.join(certs, "tokens")]
        addr = args.server
        if not addr:
            addr = f"127.0.0.1:{free_port()}"
            log = open(log_path, "w")
            proc = subprocess.Popen(
                [args.server_bin, "--listen", addr, "--db",
                 os.path.join(tmp, f"{name}.db"), "--hidden", "8",
                 "--epochs", "10", "--train-threads", "1"] + server_flags,
                stdout=log, stderr=log)
        if tls:
            ssl = grpc.ssl_channel_credentials(root_certificates=read("ca.pem"))
            # The admin's channel: the token as standard call credentials.
            channel = grpc.secure_channel(addr, grpc.composite_channel_credentials(
                ssl, grpc.access_token_call_credentials(admin)))
            bare = grpc.secure_channel(addr, ssl)  # TLS, no token
        else:
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
        print(f"[{name}] health: SERVING (rbmrec.v1.Rbmrec: no model yet)")

        stub = pbg.RbmrecStub(channel)
        if tls:
            # Health needs no token; everything else does.
            bare_health = health_pb2_grpc.HealthStub(bare)
            assert bare_health.Check(health_pb2.HealthCheckRequest(),
                                     timeout=5).status == SERVING
            bare_stub = pbg.RbmrecStub(bare)
            for md in [None, [("authorization", "Bearer rbmrec_unknown")]]:
                try:
                    bare_stub.GetStats(pb.GetStatsRequest(), timeout=5,
                                       metadata=md)
                    raise AssertionError("GetStats without a token worked")
                except grpc.RpcError as e:
                    assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e
            print("[tls] health without a token: SERVING; GetStats without "
                  "a known token: UNAUTHENTICATED")
            # A plaintext client cannot talk to the TLS server.
            plain = grpc.insecure_channel(addr)
            try:
                health_pb2_grpc.HealthStub(plain).Check(
                    health_pb2.HealthCheckRequest(), timeout=3)
                raise AssertionError("a plaintext client reached the TLS "
                                     "server")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.UNAVAILABLE, e
            plain.close()
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
                if u == 0:  # a view (no rating) of an item py0 did not rate
                    batch.ratings.add(user_id="py0", item_id="m0",
                                      kind=pb.Rating.VIEW)
                batches.append(batch)
            added = stub.AddRatings(iter(batches), timeout=30)
            assert added.rejected == 0 and added.batches == 40, added
            assert added.views == 1, added
            # The catalogue: even items are "even", every item "all".
            items = pb.PutItemsRequest(items=[
                pb.Item(item_id=f"m{i}", title=f"Movie {i}",
                        categories=(["even", "all"] if i % 2 == 0
                                    else ["all"]))
                for i in range(30)])
            assert stub.PutItems(items, timeout=5).stored == 30
            final = None
            for p in stub.Train(pb.TrainRequest(), timeout=120):
                final = p
            assert final.state == pb.TrainProgress.SUCCEEDED, final
            print(f"[{name}] trained model v{final.model_version}")

        deadline = time.time() + 10
        while check("rbmrec.v1.Rbmrec") != SERVING:
            assert time.time() < deadline, "rbmrec.v1.Rbmrec not SERVING"
            time.sleep(0.05)
        print(f"[{name}] health of rbmrec.v1.Rbmrec: SERVING")

        req = pb.PredictRatingsRequest(user_id="py0", item_ids=["m0", "m1"])
        resp = stub.PredictRatings(req, timeout=5)
        assert resp.model_version > 0, resp
        assert len(resp.predictions) == 2
        for p in resp.predictions:
            assert len(p.probabilities) == len(resp.scale.values)
            assert all(math.isfinite(x) and x >= 0 for x in p.probabilities)
            assert abs(sum(p.probabilities) - 1.0) < 1e-3, p
            assert resp.scale.min <= p.expected_rating <= resp.scale.max
            print(f"[{name}] predict py0 {p.item_id}: "
                  f"expected {p.expected_rating:.3f}")

        sim = stub.SimilarItems(pb.SimilarItemsRequest(
            item_ids=["m0"], n=3, user_id="py0"), timeout=5)
        assert sim.model_version > 0 and len(sim.items) <= 3, sim
        assert all(s.item_id != "m0" for s in sim.items), sim
        assert [s.rank for s in sim.items] == list(range(1, len(sim.items) + 1))
        print(f"[{name}] similar to m0: {[s.item_id for s in sim.items]}")

        # GetItem (the catalogue row and the model's ratings histogram) and
        # GetUserRatings (a page of stored ratings; the admin token or none).
        item = stub.GetItem(pb.GetItemRequest(item_id="m0"), timeout=5)
        assert item.item.item_id == "m0" and item.model_version > 0, item
        assert len(item.rating_counts) == len(item.scale.values), item
        assert item.ratings == sum(item.rating_counts) > 0, item
        page = stub.GetUserRatings(pb.GetUserRatingsRequest(
            user_id="py0", limit=2), timeout=5)
        assert page.total >= len(page.ratings) and len(page.ratings) <= 2
        assert page.ratings and all(r.rating in item.scale.values
                                    for r in page.ratings), page
        print(f"[{name}] item m0: {item.ratings} ratings, mean "
              f"{item.mean_rating:.2f}; py0: {page.total} stored ratings")
        if proc is not None:
            # One filtered, paged Recommend: only "even" items, never m4.
            rec = stub.Recommend(pb.RecommendRequest(
                user_id="py0", n=3, offset=1, categories=["even"],
                required_categories=["all"], exclude_item_ids=["m4"]),
                timeout=5)
            assert rec.candidates > 3, rec
            assert len(rec.recommendations) == 3, rec
            for r in rec.recommendations:
                assert int(r.item_id[1:]) % 2 == 0 and r.item_id != "m4", r
            assert [r.rank for r in rec.recommendations] == [2, 3, 4], rec
            print(f"[{name}] filtered recommend py0: "
                  f"{[r.item_id for r in rec.recommendations]} of "
                  f"{rec.candidates} candidates")
            # A candidate set: only its unrated, known items (m1 is rated
            # by py0, m999 unknown).
            pool = {"m8", "m12", "m20"}
            cand = stub.Recommend(pb.RecommendRequest(
                user_id="py0", n=5,
                candidate_item_ids=sorted(pool) + ["m1", "m999"]), timeout=5)
            got_items = [r.item_id for r in cand.recommendations]
            assert got_items and set(got_items) <= pool, cand
            print(f"[{name}] recommend py0 from a candidate set: {got_items}")
            # SimilarItems with the filters of Recommend.
            fsim = stub.SimilarItems(pb.SimilarItemsRequest(
                item_ids=["m0"], n=4, categories=["even"],
                exclude_item_ids=["m2"]), timeout=5)
            assert fsim.items, fsim
            for s in fsim.items:
                assert int(s.item_id[1:]) % 2 == 0, fsim
                assert s.item_id not in ("m0", "m2"), fsim
            print(f"[{name}] similar to m0, even only, not m2: "
                  f"{[s.item_id for s in fsim.items]}")

        try:
            stub.PredictRatings(pb.PredictRatingsRequest(
                user_id="nobody-at-all", item_ids=["m0"]), timeout=5)
            raise AssertionError("unknown user did not fail")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND, e
            assert "nobody-at-all" in e.details(), e.details()

        # Cold start: a user without ratings is answered from the fallback
        # (by default the most-rated items), marked as such (PredictRatings
        # above stays NOT_FOUND).
        cold = stub.Recommend(pb.RecommendRequest(user_id="nobody-at-all",
                                                  n=3), timeout=5)
        assert cold.fallback == pb.FALLBACK_POPULAR, cold
        assert len(cold.recommendations) == 3, cold
        warm = stub.Recommend(pb.RecommendRequest(user_id="py0", n=3),
                              timeout=5)
        assert warm.fallback == pb.FALLBACK_NONE, warm
        print(f"[{name}] recommend for an unknown user: cold-start fallback "
              f"{[r.item_id for r in cold.recommendations]}")

        # RecommendAll: a listed user set in request order, each answer
        # that of Recommend; then every stored user in id order.
        listed = ["py5", "nobody-at-all", "py0"]
        got = []
        for m in stub.RecommendAll(pb.RecommendAllRequest(
                template=pb.RecommendRequest(n=3), user_ids=listed),
                timeout=30):
            assert m.model_version > 0 and len(m.users) >= 1, m
            got.extend(m.users)
        assert [u.user_id for u in got] == listed, got
        assert got[2].response == warm, (got[2], warm)
        assert got[1].response.fallback == pb.FALLBACK_POPULAR
        every = [u.user_id for m in stub.RecommendAll(
            pb.RecommendAllRequest(template=pb.RecommendRequest(n=2)),
            timeout=30) for u in m.users]
        assert every == sorted(f"py{u}" for u in range(40)), every
        print(f"[{name}] RecommendAll: {len(every)} users in id order")

        if tls:
            # The reader's token as explicit metadata: it reads, but cannot
            # train.
            md = [("authorization", f"Bearer {reader}")]
            bare_stub = pbg.RbmrecStub(bare)
            assert bare_stub.PredictRatings(req, timeout=5,
                                            metadata=md).model_version > 0
            try:
                for _ in bare_stub.Train(pb.TrainRequest(), timeout=10,
                                         metadata=md):
                    pass
                raise AssertionError("the reader could train")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e
                assert "admin" in e.details(), e.details()
                denied = e.details()
            print("[tls] reader token: PredictRatings ok, Train "
                  f"PERMISSION_DENIED ({denied})")
            # Privacy: ad-hoc ratings over a stored user's need write.
            probe = pb.PredictRatingsRequest(
                user_id="py0", item_ids=["m1"],
                ratings=[pb.ItemRating(item_id="m0", rating=5.0)])
            try:
                bare_stub.PredictRatings(probe, timeout=5, metadata=md)
                raise AssertionError("the reader probed a stored user")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e
                assert "write" in e.details(), e.details()
            probe.user_id = ""
            assert bare_stub.PredictRatings(probe, timeout=5,
                                            metadata=md).folded_in
            print("[tls] reader token: ad-hoc ratings over py0 "
                  "PERMISSION_DENIED, anonymous ad-hoc ok")
            # Nor may it read the stored ratings themselves.
            try:
                bare_stub.GetUserRatings(pb.GetUserRatingsRequest(
                    user_id="py0"), timeout=5, metadata=md)
                raise AssertionError("the reader read stored ratings")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e
                assert "write" in e.details(), e.details()
            assert bare_stub.GetItem(pb.GetItemRequest(item_id="m0"),
                                     timeout=5, metadata=md).ratings > 0
            print("[tls] reader token: GetUserRatings PERMISSION_DENIED, "
                  "GetItem ok")
            bare.close()
        channel.close()

        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=20)
            proc = None
            assert rc == 0, f"server exit code {rc} after SIGTERM"
        print(f"[{name}] PASS")
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
            try:
                sys.stderr.write(open(log_path).read())
            except OSError:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-bin")
    ap.add_argument("--server")
    ap.add_argument("--passes", default="plain,tls",
                    help="with --server-bin: plain, tls or plain,tls")
    ap.add_argument("--proto-dir",
                    default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = ap.parse_args()
    if not args.server and not args.server_bin:
        ap.error("give --server-bin or --server")
    passes = args.passes.split(",") if args.server_bin and not args.server \
        else ["plain"]
    if not set(passes) <= {"plain", "tls"}:
        ap.error("--passes: plain, tls or plain,tls")

    try:
        import grpc  # noqa: F401
    except ImportError:
        # pyenv & co. shadow Debian's python3, which has python3-grpcio.
        if sys.executable != "/usr/bin/python3" and os.path.exists(
                "/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
        raise

    tmp = tempfile.mkdtemp(prefix="rbmrec-py-")
    try:
        generate_stubs(os.path.abspath(args.proto_dir), tmp)
        sys.path.insert(0, tmp)
        for p in passes:
            run_pass(args, tmp, p == "tls")
        print("PASS")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
