#!/usr/bin/env python3
"""The rating writer and the loss check of bench/scale_bench.sh (failover).

  scale_writer.py write --server HOST:PORT --acks FILE --stop FILE --stubs DIR
                        [--items ITEM,...] [--prefix P]
      Sends one new rating per AddRatings call (user P<n>, an item from
      --items, rating 1-5) until the file --stop exists. After each OK
      response the rating is appended to --acks ("user<TAB>item<TAB>rating")
      and flushed: the file holds exactly the acknowledged ratings. A failed
      call (e.g. UNAVAILABLE while its replica dies) is counted and not
      retried; the next call writes the next rating. Prints one line:
      sent=N acked=N failed=N first_error=... max_gap_ms=N (the longest time
      between two acknowledgements: how long writes stalled).

  scale_writer.py verify --acks FILE --stored FILE
      --stored: "user<TAB>item<TAB>rating" lines read from the database.
      Prints acked=N missing=N wrong_value=N and exits 1 unless both are 0.

Needs Debian's python3-grpcio (scripts/install-deps.sh); the stubs are
generated into --stubs by bench/suites/rbmrec_grpc.py.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "suites"))
import rbmrec_grpc  # noqa: E402


def write(args):
    import grpc
    g = rbmrec_grpc.load(args.stubs)
    stub = g.pbg.RbmrecStub(grpc.insecure_channel(args.server))
    items = args.items.split(",")
    sent = acked = failed = 0
    first_error = ""
    last_ack = time.monotonic()
    max_gap = 0.0
    with open(args.acks, "w") as acks:
        while not os.path.exists(args.stop):
            user = "%s%d" % (args.prefix, sent)
            item = items[sent % len(items)]
            rating = 1 + sent % 5
            sent += 1
            req = g.pb.AddRatingsRequest(ratings=[g.pb.Rating(
                user_id=user, item_id=item, rating=rating)])
            try:
                resp = stub.AddRatings(iter([req]), timeout=5)
            except grpc.RpcError as e:
                failed += 1
                if not first_error:
                    first_error = "%s: %s" % (e.code().name, e.details())
                time.sleep(0.05)
                continue
            if resp.accepted != 1:
                failed += 1
                if not first_error:
                    first_error = "accepted=%d rejected=%d" % (
                        resp.accepted, resp.rejected)
                continue
            acks.write("%s\t%s\t%d\n" % (user, item, rating))
            acks.flush()
            acked += 1
            now = time.monotonic()
            max_gap = max(max_gap, now - last_ack)
            last_ack = now
    print("sent=%d acked=%d failed=%d max_gap_ms=%d first_error=%s" % (
        sent, acked, failed, max_gap * 1000, first_error.replace(" ", "_")))


def verify(args):
    def read(path):
        out = {}
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 3:
                    out[(parts[0], parts[1])] = float(parts[2])
        return out
    acked = read(args.acks)
    stored = read(args.stored)
    missing = [k for k in acked if k not in stored]
    wrong = [k for k in acked if k in stored and stored[k] != acked[k]]
    print("acked=%d missing=%d wrong_value=%d%s" % (
        len(acked), len(missing), len(wrong),
        (" first_missing=%s/%s" % missing[0]) if missing else ""))
    return 0 if not missing and not wrong else 1


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--server", required=True)
    w.add_argument("--acks", required=True)
    w.add_argument("--stop", required=True)
    w.add_argument("--stubs", required=True)
    w.add_argument("--items", default="1,2,3,4,5,6,7,8,9,10")
    w.add_argument("--prefix", default="failover-writer-")
    v = sub.add_parser("verify")
    v.add_argument("--acks", required=True)
    v.add_argument("--stored", required=True)
    args = p.parse_args()
    if args.cmd == "write":
        write(args)
        return 0
    return verify(args)


if __name__ == "__main__":
    sys.exit(main())
