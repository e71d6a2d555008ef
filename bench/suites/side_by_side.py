#!/usr/bin/env python3
"""Table and JSON report for bench/run_benchmarks.sh.

Reads the raw runs (JSON lines written by run_benchmarks.sh: split, system,
kind, repeat, flags, result) and prints one Markdown table row per split:
rbmrec RMSE, LIBMF RMSE, their difference, median training seconds of both,
the time ratio rbmrec/LIBMF, the same with rbmrec's ranking model (the
"ranking" runs, --topn 10), rbmrec's peak RSS and epochs. The "median" run
is the run with the median training time (the lower median for an even
number of runs); the RMSEs shown are those of that run, with LIBMF's min-max
over all runs (its parallel SGD is not deterministic). With --json FILE it
also writes every raw run, the table rows and the run's metadata.
"""
import argparse
import datetime
import json
import sys

NAMES = {
    "ml100k-u1": "ML-100k u1",
    "ml100k-r90": "ML-100k r90",
    "mlsmall-r90": "ML-latest-small r90",
    "ml1m-r90": "ML-1M r90",
    "filmtrust-r90": "FilmTrust r90",
}


def median_run(runs):
    ordered = sorted(runs, key=lambda r: r["result"]["train_seconds"])
    return ordered[(len(ordered) - 1) // 2]


def summarise(runs):
    splits = []
    for r in runs:
        if r["kind"] == "main" and r["split"] not in splits:
            splits.append(r["split"])
    rows = []
    for s in splits:
        rbm = [r for r in runs if r["split"] == s and r["kind"] == "main"
               and r["system"] == "rbmrec"]
        mf = [r for r in runs if r["split"] == s and r["kind"] == "main"
              and r["system"] == "libmf"]
        grid = [r for r in runs if r["split"] == s and r["kind"] == "grid"]
        ranking = [r for r in runs if r["split"] == s and r["kind"] == "ranking"]
        rm, lm = median_run(rbm), median_run(mf)
        km = median_run(ranking) if ranking else None
        rbm_rmses = sorted({r["result"]["rmse"] for r in rbm})
        mf_rmses = [r["result"]["rmse"] for r in mf]
        rows.append({
            "split": s,
            "name": NAMES.get(s, s),
            "runs": len(rbm),
            "rbmrec_rmse": rm["result"]["rmse"],
            "rbmrec_mae": rm["result"]["mae"],
            "rbmrec_rmse_all_equal": len(rbm_rmses) == 1,
            "rbmrec_rmse_min": rbm_rmses[0],
            "rbmrec_rmse_max": rbm_rmses[-1],
            "libmf_rmse": lm["result"]["rmse"],
            "libmf_rmse_min": min(mf_rmses),
            "libmf_rmse_max": max(mf_rmses),
            # Rounded like the table (+0.0 turns -0.0 into 0.0).
            "delta_rmse": round(rm["result"]["rmse"] - lm["result"]["rmse"], 6) + 0.0,
            "rbmrec_train_seconds": rm["result"]["train_seconds"],
            "libmf_train_seconds": lm["result"]["train_seconds"],
            "time_ratio": rm["result"]["train_seconds"] /
                          max(lm["result"]["train_seconds"], 1e-9),
            # The runs with the ranking model (--topn 10): the median-time
            # run's training seconds, of which the p(rated) RBM's, and the
            # ratio to LIBMF's (None when not run).
            "ranking_train_seconds": km["result"]["train_seconds"] if km else None,
            "ranking_rated_seconds":
                (km["result"].get("rated") or {}).get("seconds") if km else None,
            "ranking_regression_seconds":
                (km["result"].get("item_regression") or {}).get("seconds") if km else None,
            "ranking_time_ratio": km["result"]["train_seconds"] /
                                  max(lm["result"]["train_seconds"], 1e-9) if km else None,
            "ranking_valid_ndcg":
                (km["result"].get("rated") or {}).get("valid_ndcg") if km else None,
            "rbmrec_peak_rss_mb": max(r["result"]["peak_rss_mb"] for r in rbm + ranking),
            "rbmrec_epochs_run": rm["result"]["epochs_run"],
            "rbmrec_n_test": rm["result"]["n_test"],
            "rbmrec_n_fallback": rm["result"]["n_fallback"],
            "libmf_flags": lm["flags"],
            "libmf_tuned_on_test": bool(grid),
            "libmf_grid": [{"flags": g["flags"], "rmse": g["result"]["rmse"]}
                           for g in grid],
        })
    return rows


def print_table(rows, meta):
    print(f"rbmrec {meta['commit']} (rbmrec-eval default flags, --threads 2) vs "
          f"LIBMF, {meta['cores']} cores ({meta['cpu']}), {meta['date']}, "
          f"median of {meta['repeats']} run(s) per system")
    print()
    print("| split | rbmrec RMSE | LIBMF RMSE (min-max) | ΔRMSE | rbmrec train s "
          "| LIBMF train s | time ratio | with ranking models s (of which rated RBM + item regression) "
          "| ratio with it | rbmrec peak RSS MB | epochs | LIBMF flags |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
          "| ---: | --- |")
    notes = []
    for r in rows:
        rbm = f"{r['rbmrec_rmse']:.4f}"
        if not r["rbmrec_rmse_all_equal"]:
            rbm += "†"
        mf = f"{r['libmf_rmse']:.4f}"
        if r["runs"] > 1:
            mf += f" ({r['libmf_rmse_min']:.4f}-{r['libmf_rmse_max']:.4f})"
        flags = f"`{r['libmf_flags']}`" + ("*" if r["libmf_tuned_on_test"] else "")
        if r["ranking_train_seconds"] is None:
            with_ranking, ratio_with = "", ""
        else:
            parts = f"{r['ranking_rated_seconds'] or 0:.2f}"
            if r["ranking_regression_seconds"] is not None:
                parts += f" + {r['ranking_regression_seconds']:.2f}"
            with_ranking = f"{r['ranking_train_seconds']:.2f} ({parts})"
            ratio_with = f"{r['ranking_time_ratio']:.1f}x"
        print(f"| {r['name']} | {rbm} | {mf} | {round(r['delta_rmse'], 4) + 0.0:+.4f} "
              f"| {r['rbmrec_train_seconds']:.2f} | {r['libmf_train_seconds']:.2f} "
              f"| {r['time_ratio']:.1f}x | {with_ranking} | {ratio_with} "
              f"| {r['rbmrec_peak_rss_mb']:.0f} "
              f"| {r['rbmrec_epochs_run']} | {flags} |")
        if r["libmf_tuned_on_test"]:
            grid = ", ".join(f"`{g['flags']}` {g['rmse']:.4f}" for g in r["libmf_grid"])
            notes.append(f"* {r['name']}: LIBMF setting picked by its TEST RMSE from "
                         f"{len(r['libmf_grid'])} settings (an optimistic, test-tuned "
                         f"anchor, like benchmarks.md's): {grid}.")
        if not r["rbmrec_rmse_all_equal"]:
            notes.append(f"† {r['name']}: rbmrec RMSE differed between runs "
                         f"({r['rbmrec_rmse_min']:.6f}-{r['rbmrec_rmse_max']:.6f}): "
                         "not deterministic.")
    print()
    print("ΔRMSE = rbmrec - LIBMF (negative: rbmrec more accurate); time ratio = "
          "rbmrec / LIBMF median training seconds (rbmrec: training only; LIBMF: "
          "mf-train wall time including reading its file); peak RSS: the largest over "
          "rbmrec's runs, with the ranking model or not; epochs: rbmrec's epochs_run over both RBMs. "
          "rbmrec train s is the rating model, what default flags train and the "
          "RMSE comes from; with ranking models s: rbmrec-eval --topn 10, which "
          "also trains the p(rated) RBM and fits the item regression (where its "
          "size rule builds it) that Recommend ranks with (their seconds in "
          "brackets), as the service's Train does; LIBMF has no such models.")
    for n in notes:
        print(n)


def print_ablations(runs):
    abl = [r for r in runs if r["kind"].startswith("ablation:")]
    if not abl:
        return
    print()
    print("Ablations (rbmrec-eval only, one run each):")
    print()
    print("| row | RMSE | MAE | n_test | n_fallback | epochs | train s | ratings/s "
          "| peak RSS MB | flags |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in abl:
        name = f"{NAMES.get(r['split'], r['split'])} {r['kind'][len('ablation:'):]}"
        d = r["result"]
        if "rmse" not in d:
            print(f"| {name} | | | | | | {d['wall_seconds']:.2f} | | | `{r['flags']}` |")
            continue
        print(f"| {name} | {d['rmse']:.4f} | {d['mae']:.4f} | {d['n_test']} "
              f"| {d['n_fallback']} | {d['epochs_run']} | {d['train_seconds']:.2f} "
              f"| {d['train_ratings_per_second']:.0f} | {d['peak_rss_mb']:.0f} "
              f"| `{r['flags']}` |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", required=True, help="JSON lines from run_benchmarks.sh")
    ap.add_argument("--json", help="write every raw run and the table here")
    ap.add_argument("--repeats", type=int, required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--cpu", default="unknown")
    ap.add_argument("--cores", default="?")
    ap.add_argument("--data", default="")
    args = ap.parse_args()
    with open(args.raw, encoding="utf-8") as f:
        runs = [json.loads(line) for line in f if line.strip()]
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": args.commit, "cpu": args.cpu, "cores": args.cores,
        "repeats": args.repeats, "data": args.data,
    }
    rows = summarise(runs)
    if rows:
        print_table(rows, meta)
    print_ablations(runs)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "rows": rows, "runs": runs}, f, indent=1)
            f.write("\n")
        print(f"\nraw results: {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
