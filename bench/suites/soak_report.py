#!/usr/bin/env python3
"""The table and verdict of bench/soak.sh.

  soak_report.py SAMPLES_TSV --duration S [--version-limit N]
                 [--wal-limit-mb MB] [--errors-log FILE]

SAMPLES_TSV has a header line and one row per 10-s load window:
  t  predict_qps  predict_p99  recommend_qps  recommend_p99  load_errors
  rss_kb  db_bytes  wal_bytes  versions_full  versions_online  other_errors
(load_errors: failed Predict/Recommend calls of that window; rss_kb: the
lowest of 10 reads over a second, so a publish's serialized model held for
a fraction of a second is not read as growth; db_bytes: the
database file, wal_bytes: its -wal file; other_errors: failed imports,
deletes and trains so far.)

Verdict (targets):
  errors                 0 over the run
  RSS, database file     growth over the last third < 5% (the database
                         file less the model versions it stores, their
                         size_bytes from `rbmrec models`: a version stored
                         while the versions are below the retention limit
                         is content, not growth; retention has its own
                         target below): the last sample
                         vs the last one before 2/3 of the run (medians of 3
                         samples each when the last third holds >= 9, which
                         smooths WAL checkpoints). In short runs (fewer than 9
                         samples in the last third, e.g. --ci's 60 s) RSS is
                         compared with its highest sample before 2/3 of the
                         run instead: one 10-s sample cannot tell a leak from
                         a model copy freed into the middle of a malloc heap
                         (a ~7 MB step at ML-100k, seen once in CI), but a
                         server that leaks per publish or per request climbs
                         past the high-water mark its training already set
  WAL                    its largest sample <= --wal-limit-mb (default 64,
                         the store's journal_size_limit). The WAL is not
                         content: it keeps its high-water mark, which steps
                         up by a model blob when a write finds a checkpoint
                         held back by a reader, until a reset truncates it
                         to the limit (CI saw file + WAL go 37.1 -> 42.1 MB
                         between the last two samples of a 60-s run: less
                         than one ML-100k model blob, 6.7 MB, so the WAL).
                         A WAL past the limit means checkpoints starve.
  Predict p99            the last minute <= 1.5x the first minute; a
                         minute's p99 is the median of its windows' p99s
                         (a "minute": the first / last 6 windows, or
                         duration / 30 windows in shorter runs)
  model versions         the most stored at any sample <= the retention
                         limit, when the server has retention flags
Exits 1 when a target is missed.
"""

import argparse
import statistics
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("samples")
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--version-limit", type=int)
    ap.add_argument("--wal-limit-mb", type=float, default=64)
    ap.add_argument("--errors-log")
    a = ap.parse_args()
    with open(a.samples) as f:
        header = f.readline().split()
        rows = [dict(zip(header, map(float, line.split()))) for line in f
                if line.strip()]
    if len(rows) < 3:
        sys.exit(f"soak: only {len(rows)} samples; run longer")

    print(f"{'t(s)':>6} {'Predict QPS':>11} {'p99 ms':>7} {'Recommend QPS':>13} "
          f"{'p99 ms':>7} {'RSS MB':>7} {'DB MB':>7} {'WAL MB':>7} "
          f"{'versions':>13} "
          f"{'errors':>6}")
    load_errors = 0
    for r in rows:
        load_errors += r["load_errors"]
        errors = load_errors + r["other_errors"]
        versions = (f"{int(r['versions_full'] + r['versions_online'])} "
                    f"({int(r['versions_full'])}f/{int(r['versions_online'])}o)")
        print(f"{r['t']:6.0f} {r['predict_qps']:11.0f} {r['predict_p99']:7.2f} "
              f"{r['recommend_qps']:13.0f} {r['recommend_p99']:7.2f} "
              f"{r['rss_kb'] / 1024:7.1f} {r['db_bytes'] / 2**20:7.1f} "
              f"{r['wal_bytes'] / 2**20:7.1f} "
              f"{versions:>13} {errors:6.0f}")

    verdicts = []

    def verdict(name, ok, figures):
        status = "n/a" if ok is None else ("MET" if ok else "MISSED")
        verdicts.append(ok)
        print(f"  {name:<46} {figures:<52} {status}")

    print()
    print("verdict:")
    errors = load_errors + rows[-1]["other_errors"]
    detail = f"{errors:.0f} (Predict/Recommend {load_errors:.0f}, " \
             f"import/delete/train {rows[-1]['other_errors']:.0f})"
    verdict("errors == 0", errors == 0, detail)

    # The level at the start of the last third (samples up to 2/3 of the
    # run) vs at the end; each the median of k samples, k = 3 when the last
    # third holds >= 9 samples, else 1 (short runs).
    third = a.duration * 2 / 3
    before = [r for r in rows if r["t"] <= third] or rows[:1]
    after = [r for r in rows if r["t"] > third] or rows[-1:]
    k = 3 if len(after) >= 9 else 1

    def growth(key):
        begin = statistics.median(r[key] for r in before[-k:])
        end = statistics.median(r[key] for r in after[-k:])
        return (end / begin - 1) if begin else 0, begin, end

    if k == 3:
        g, b, e = growth("rss_kb")
        verdict("RSS grows < 5% over the last third", g < 0.05,
                f"{b / 1024:.1f} -> {e / 1024:.1f} MB ({100 * g:+.1f}%)")
    else:
        b = max(r["rss_kb"] for r in before)
        e = after[-1]["rss_kb"]
        g = e / b - 1
        verdict("RSS ends < 5% above its earlier peak", g < 0.05,
                f"{b / 1024:.1f} -> {e / 1024:.1f} MB ({100 * g:+.1f}%)")
    for r in rows:
        r["db_less_models"] = r["db_bytes"] - r.get("model_bytes", 0)
    g, b, e = growth("db_less_models")
    verdict("database file less its models grows < 5% over the last third",
            g < 0.05,
            f"{b / 2**20:.1f} -> {e / 2**20:.1f} MB ({100 * g:+.1f}%; "
            f"file {before[-1]['db_bytes'] / 2**20:.1f} -> "
            f"{after[-1]['db_bytes'] / 2**20:.1f} MB)")
    wal = max(r["wal_bytes"] for r in rows) / 2**20
    verdict(f"WAL <= {a.wal_limit_mb:g} MB (journal_size_limit)",
            wal <= a.wal_limit_mb,
            f"largest {wal:.1f} MB, last {rows[-1]['wal_bytes'] / 2**20:.1f} MB")

    windows = max(1, round(min(60.0, a.duration / 3) / 10))
    first = [r["predict_p99"] for r in rows[:windows]]
    last = [r["predict_p99"] for r in rows[-windows:]]
    p_first, p_last = statistics.median(first), statistics.median(last)
    verdict("Predict p99 last <= 1.5x first minute",
            p_last <= 1.5 * p_first,
            f"{p_first:.2f} -> {p_last:.2f} ms ({p_last / p_first:.2f}x; "
            f"{len(first)} and {len(last)} windows)")

    most = max(int(r["versions_full"] + r["versions_online"]) for r in rows)
    if a.version_limit is None:
        verdict("model versions within retention", None,
                f"most stored {most}, final "
                f"{int(rows[-1]['versions_full'] + rows[-1]['versions_online'])}"
                "; not applicable until retention lands")
    else:
        verdict("model versions within retention", most <= a.version_limit,
                f"most stored {most}, limit {a.version_limit}")

    if a.errors_log:
        with open(a.errors_log) as f:
            lines = f.readlines()
        if lines:
            print(f"\nfirst errors ({len(lines)} failed CLI calls):")
            for line in lines[:5]:
                print("  " + line.rstrip())
    missed = any(v is False for v in verdicts)
    print(f"\nsoak: targets {'MISSED' if missed else 'MET'}")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
