#!/usr/bin/env python3
"""The gRPC and SQLite side of bench/faults.sh.

Every batch a subcommand sends is first written to a journal (JSON lines), and
its acknowledgement after the call's OK:
  {"batch": ID, "rows": [[user, item, rating], ...]}   before sending
  {"ack": ID}                                           after an OK response
  {"cli": ID, "batches": [...], "rc": RC, "committed": N or null}
                                                        an `rbmrec import` run
Keys (user, item) are unique over a journal, so `verify` can tell for each
batch whether it is stored entirely, not at all, or partially, and whether an
acknowledged row holds its value.

Subcommands (each prints one line of key=value results on stdout):
  stubs        generate the Python stubs (once, before the trials)
  journal-file record a file imported by the CLI as acknowledged batches
  ack-import   one batch per AddRatings call; SIGKILLs --kill-pid after
               --kill-after-acks K acks (+ random jitter) or after
               --kill-after-seconds S
  cli-import   `rbmrec import` of a slice (multi-batch stream), SIGKILLs the
               server after S seconds, keeps the CLI's "N rows ... certainly
               committed"
  verify       PRAGMA integrity_check (read-only) and the journal against the
               stored ratings
  locked       holds BEGIN EXCLUSIVE on the database while AddRatings and
               PredictRatings run; then releases it and writes again
  diskfull     imports new rows one batch per call until a call fails; then
               checks the server still answers Health and PredictRatings
"""

import argparse
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rbmrec_grpc  # noqa: E402

G = None  # the stub modules, loaded by main() when a subcommand needs them


# ---- journal ----------------------------------------------------------------

class Journal:
    def __init__(self, path):
        self.path = path

    def read(self):
        batches, acked, clis = {}, set(), []
        if not os.path.exists(self.path):
            return batches, acked, clis
        with open(self.path) as f:
            for line in f:
                if not line.strip():
                    continue
                e = json.loads(line)
                if "batch" in e:
                    batches[e["batch"]] = [tuple(r) for r in e["rows"]]
                elif "ack" in e:
                    acked.add(e["ack"])
                elif "cli" in e:
                    clis.append(e)
        return batches, acked, clis

    def used_keys(self):
        batches, _, _ = self.read()
        return {(u, i) for rows in batches.values() for u, i, _ in rows}

    def append(self, entry):
        with open(self.path, "a") as f:
            f.write(json.dumps(entry) + "\n")


def read_udata(path):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split("\t")
            if len(p) >= 3:
                rows.append((p[0], p[1], float(p[2])))
    return rows


class RowSource:
    """Rows with keys not used before in the journal.

    data:  a slice of u.data from a random offset, user ids prefixed with
           `ns` (new users; every (user, item) of u.data occurs once).
    known: the users and items of u.data (known to a model trained on it),
           pairs that u.data does not rate; changed ratings of known users
           trigger the server's online updates.
    """

    def __init__(self, mode, data, ns, used, rnd):
        self.mode, self.ns, self.used, self.rnd = mode, ns, used, rnd
        self.rows = read_udata(data)
        self.pos = rnd.randrange(len(self.rows))
        self.users = sorted({u for u, _, _ in self.rows})
        self.items = sorted({i for _, i, _ in self.rows})
        self.rated = {(u, i) for u, i, _ in self.rows}

    def take(self, n):
        out = []
        while len(out) < n:
            if self.mode == "data":
                u, i, r = self.rows[self.pos % len(self.rows)]
                self.pos += 1
                key = (f"{self.ns}-{u}", i)
            else:
                key = (self.rnd.choice(self.users), self.rnd.choice(self.items))
                r = float(self.rnd.randint(1, 5))
                if key in self.rated:
                    continue
            if key in self.used:
                continue
            self.used.add(key)
            out.append((key[0], key[1], r))
        return out


def request(rows):
    req = G.pb.AddRatingsRequest()
    for u, i, r in rows:
        req.ratings.add(user_id=u, item_id=i, rating=r)
    return req


def stub(addr):
    import grpc
    channel = grpc.insecure_channel(addr)
    return G.pbg.RbmrecStub(channel), G.healthg.HealthStub(channel)


def out(**kv):
    print(" ".join(f"{k}={v}" for k, v in kv.items()), flush=True)


def kill_later(pid, seconds):
    t = threading.Timer(seconds, lambda: os.kill(pid, signal.SIGKILL))
    t.daemon = True
    t.start()
    return t


# ---- subcommands ------------------------------------------------------------

def cmd_journal_file(a):
    j = Journal(a.journal)
    rows = read_udata(a.file)
    for k in range(0, len(rows), a.batch):
        bid = f"{a.id}b{k // a.batch}"
        j.append({"batch": bid, "rows": rows[k:k + a.batch]})
        j.append({"ack": bid})
    out(rows=len(rows))


def cmd_ack_import(a):
    import grpc
    rnd = random.Random(a.seed)
    j = Journal(a.journal)
    src = RowSource(a.mode, a.data, a.id, j.used_keys(), rnd)
    rbm, _ = stub(a.addr)
    timer = None
    if a.kill_after_seconds is not None:
        timer = kill_later(a.kill_pid, a.kill_after_seconds)
    elif a.kill_after_acks == 0:
        timer = kill_later(a.kill_pid, rnd.uniform(0, a.jitter_ms) / 1000)
    acked_batches = acked_rows = sent = 0
    last_error = "none"
    t0 = time.monotonic()
    while sent < a.max_batches:
        rows = src.take(rnd.randint(a.batch_min, a.batch_max))
        bid = f"{a.id}b{sent}"
        j.append({"batch": bid, "rows": rows})
        sent += 1
        try:
            rbm.AddRatings(iter([request(rows)]), timeout=60)
        except grpc.RpcError as e:
            last_error = e.code().name
            break
        j.append({"ack": bid})
        acked_batches += 1
        acked_rows += len(rows)
        if a.pace_ms:
            time.sleep(a.pace_ms / 1000)
        if timer is None and acked_batches == a.kill_after_acks:
            timer = kill_later(a.kill_pid, rnd.uniform(0, a.jitter_ms) / 1000)
    killed = timer is not None
    if not killed:  # ran out of batches first: kill now, between calls
        os.kill(a.kill_pid, signal.SIGKILL)
    out(sent_batches=sent, acked_batches=acked_batches, acked_rows=acked_rows,
        seconds=f"{time.monotonic() - t0:.2f}", error=last_error)


def cmd_cli_import(a):
    rnd = random.Random(a.seed)
    j = Journal(a.journal)
    src = RowSource("data", a.data, a.id, j.used_keys(), rnd)
    rows = src.take(a.rows)
    path = os.path.join(a.tmp, f"{a.id}.tsv")
    with open(path, "w") as f:
        for u, i, r in rows:
            f.write(f"{u}\t{i}\t{int(r)}\t0\n")
    ids = []
    for k in range(0, len(rows), a.batch):
        ids.append(f"{a.id}b{k // a.batch}")
        j.append({"batch": ids[-1], "rows": rows[k:k + a.batch]})
    proc = subprocess.Popen(
        [a.cli, "--server", a.addr, "import", path, "--format", "tsv",
         "--batch", str(a.batch)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    timer = None  # a negative delay: no kill (calibration)
    if a.kill_after_seconds >= 0:
        timer = kill_later(a.kill_pid, a.kill_after_seconds)
    stdout, stderr = proc.communicate(timeout=120)
    seconds = time.monotonic() - t0
    if timer is not None:
        timer.join()
    # The CLI's statement after a failure: "committed: N rows in the first B
    # of S batches sent are certainly stored ..." or, without the server's
    # counts, "... 0 rows are certainly stored ...".
    m = (re.search(r"committed: ([\d,]+) rows? in the first", stderr) or
         re.search(r"([\d,]+) rows? are certainly stored", stderr))
    committed = int(m.group(1).replace(",", "")) if m else None
    j.append({"cli": a.id, "batches": ids, "rc": proc.returncode,
              "committed": committed})
    if proc.returncode == 0:
        for bid in ids:
            j.append({"ack": bid})
    os.unlink(path)
    if a.log:
        with open(a.log, "a") as f:
            f.write(f"--- {a.id} rc={proc.returncode}\n{stdout}{stderr}")
    out(rc=proc.returncode, rows=len(rows), batches=len(ids),
        committed="none" if committed is None else committed,
        seconds=f"{seconds:.2f}")


def cmd_verify(a):
    conn = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True, timeout=60)
    check = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    integrity = "ok" if check == ["ok"] else "FAILED"
    stored = {(u, i): r for u, i, r in conn.execute(
        "SELECT u.ext_id, i.ext_id, r.rating FROM ratings r "
        "JOIN users u ON u.idx = r.user_idx JOIN items i ON i.idx = r.item_idx")}
    conn.close()
    batches, acked, clis = Journal(a.journal).read()
    problems = []
    acked_rows = lost = partial = 0
    present = {}
    for bid, rows in batches.items():
        n = sum(1 for u, i, _ in rows if (u, i) in stored)
        present[bid] = n
        if 0 < n < len(rows):
            partial += 1
            problems.append(f"batch {bid}: {n} of {len(rows)} rows stored")
        if bid in acked:
            acked_rows += len(rows)
            for u, i, r in rows:
                if stored.get((u, i)) != r:
                    lost += 1
                    if len(problems) < 20:
                        problems.append(f"acked row ({u}, {i}) = {r} of batch "
                                        f"{bid}: stored {stored.get((u, i))}")
    cli_checked = cli_bad = 0
    for c in clis:
        counts = [present[b] for b in c["batches"]]
        full = [n == len(batches[b]) for n, b in zip(counts, c["batches"])]
        # The stored batches of one stream are a leading run of it.
        if any(full[k] and not full[k - 1] for k in range(1, len(full))):
            cli_bad += 1
            problems.append(f"cli {c['cli']}: stored batches not a prefix")
        if c["committed"] is not None:
            cli_checked += 1
            if c["committed"] > sum(counts):
                cli_bad += 1
                problems.append(f"cli {c['cli']}: says {c['committed']} rows "
                                f"certainly committed, {sum(counts)} stored")
    for p in problems:
        print(f"verify: {p}", file=sys.stderr)
    if integrity != "ok":
        print(f"verify: integrity_check: {check[:5]}", file=sys.stderr)
    out(integrity=integrity, acked_rows=acked_rows, lost=lost, partial=partial,
        cli_checked=cli_checked, cli_bad=cli_bad, ratings=len(stored))


def predict_ok(rbm, user, item):
    import grpc
    try:
        rbm.PredictRatings(G.pb.PredictRatingsRequest(user_id=user,
                                                      item_ids=[item]),
                           timeout=10)
        return 1
    except grpc.RpcError as e:
        print(f"PredictRatings: {e.code().name}: {e.details()}",
              file=sys.stderr)
        return 0


def cmd_locked(a):
    import grpc
    rnd = random.Random(a.seed)
    j = Journal(a.journal)
    rows = RowSource("data", a.data, a.id, j.used_keys(), rnd).take(a.rows)
    rbm, _ = stub(a.addr)
    holder = sqlite3.connect(a.db, timeout=30, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    held_at = time.monotonic()
    predict_before = predict_ok(rbm, a.user, a.item)
    bid = f"{a.id}b0"
    j.append({"batch": bid, "rows": rows})
    code, reason = "OK", "none"
    t0 = time.monotonic()
    try:
        rbm.AddRatings(iter([request(rows)]), timeout=a.busy_s + 30)
        j.append({"ack": bid})  # stored although locked: reported as OK
    except grpc.RpcError as e:
        code = e.code().name
        reason = rbmrec_grpc.trailing(e, "rbmrec-error-reason") or "none"
    elapsed = time.monotonic() - t0
    predict_during = predict_ok(rbm, a.user, a.item)
    held = time.monotonic() - held_at
    holder.execute("ROLLBACK")
    holder.close()
    after = 1
    try:
        rbm.AddRatings(iter([request(rows)]), timeout=60)
        j.append({"ack": bid})
    except grpc.RpcError as e:
        print(f"AddRatings after release: {e.code().name}: {e.details()}",
              file=sys.stderr)
        after = 0
    predict_ok_both = int(predict_before and predict_during)
    out(code=code, reason=reason, add_seconds=f"{elapsed:.2f}",
        held_seconds=f"{held:.2f}", predict_ok=predict_ok_both,
        write_after_release=after)


def cmd_diskfull(a):
    import grpc
    rnd = random.Random(a.seed)
    j = Journal(a.journal)
    src = RowSource("data", a.data, a.id, j.used_keys(), rnd)
    rbm, health = stub(a.addr)
    code, reason, acked_rows = "OK", "none", 0
    for b in range(a.max_batches):
        rows = src.take(a.batch)
        bid = f"{a.id}b{b}"
        j.append({"batch": bid, "rows": rows})
        try:
            rbm.AddRatings(iter([request(rows)]), timeout=60)
        except grpc.RpcError as e:
            code = e.code().name
            reason = rbmrec_grpc.trailing(e, "rbmrec-error-reason") or "none"
            print(f"AddRatings batch {b}: {code}: {e.details()}",
                  file=sys.stderr)
            break
        j.append({"ack": bid})
        acked_rows += len(rows)
        src.ns = f"{a.id}x{b}"  # new users in every batch: the data can wrap
    try:
        resp = health.Check(G.health.HealthCheckRequest(service=""), timeout=5)
        health_ok = int(resp.status == G.health.HealthCheckResponse.SERVING)
    except grpc.RpcError:
        health_ok = 0
    out(code=code, reason=reason, acked_rows=acked_rows, health_ok=health_ok,
        predict_ok=predict_ok(rbm, a.user, a.item))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stubs", required=True, help="stub directory")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("stubs")
    p = sub.add_parser("journal-file")
    p.add_argument("--journal", required=True)
    p.add_argument("--file", required=True)
    p.add_argument("--batch", type=int, default=10000)
    p.add_argument("--id", required=True)
    for name in ("ack-import", "cli-import", "locked", "diskfull"):
        p = sub.add_parser(name)
        p.add_argument("--addr", required=True)
        p.add_argument("--journal", required=True)
        p.add_argument("--id", required=True)
        p.add_argument("--data", required=True)
        p.add_argument("--seed", type=int, default=1)
        if name == "ack-import":
            p.add_argument("--mode", choices=["data", "known"], default="data")
            p.add_argument("--batch-min", type=int, default=1)
            p.add_argument("--batch-max", type=int, default=2000)
            p.add_argument("--max-batches", type=int, default=1000)
            p.add_argument("--kill-pid", type=int, required=True)
            p.add_argument("--kill-after-acks", type=int)
            p.add_argument("--kill-after-seconds", type=float)
            p.add_argument("--jitter-ms", type=float, default=20)
            p.add_argument("--pace-ms", type=float, default=0,
                           help="pause after each acknowledged call")
        if name == "cli-import":
            p.add_argument("--cli", required=True)
            p.add_argument("--tmp", required=True)
            p.add_argument("--rows", type=int, default=20000)
            p.add_argument("--batch", type=int, default=500)
            p.add_argument("--kill-pid", type=int, required=True)
            p.add_argument("--kill-after-seconds", type=float, required=True)
            p.add_argument("--log")
        if name in ("locked", "diskfull"):
            p.add_argument("--user", default="196")
            p.add_argument("--item", default="242")
        if name == "locked":
            p.add_argument("--db", required=True)
            p.add_argument("--rows", type=int, default=100)
            p.add_argument("--busy-s", type=float, default=5)
        if name == "diskfull":
            p.add_argument("--batch", type=int, default=1000)
            p.add_argument("--max-batches", type=int, default=3000)
    p = sub.add_parser("verify")
    p.add_argument("--db", required=True)
    p.add_argument("--journal", required=True)
    a = ap.parse_args()
    global G
    if a.cmd not in ("journal-file", "verify"):
        G = rbmrec_grpc.load(a.stubs)
    if a.cmd == "stubs":
        out(stubs=a.stubs)
        return
    {"journal-file": cmd_journal_file, "ack-import": cmd_ack_import,
     "cli-import": cmd_cli_import, "verify": cmd_verify, "locked": cmd_locked,
     "diskfull": cmd_diskfull}[a.cmd](a)


if __name__ == "__main__":
    main()
