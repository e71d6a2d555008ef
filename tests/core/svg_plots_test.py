#!/usr/bin/env python3
"""bench/plots.sh --from-json and bench/svg_plots.py on a small synthetic
rbmrec-eval JSON: both SVGs parse, and hold one series per rating value and
source (reliability) and per ranking and metric (precision_recall), with one
point per non-empty bin and per cut-off.

  svg_plots_test.py REPO_ROOT
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

ROOT = None
NS = "{http://www.w3.org/2000/svg}"
NAMES = ["expected_rating", "p_at_least", "popularity", "p_rated<x>&\"q\""]
N = 7


def synthetic():
    values = [1, 2, 3, 4, 5]
    bins = 10

    def table(shift, empty_from):
        out = []
        for k in range(len(values)):
            count = [0 if b >= empty_from - k else 100 * (b + 1) + k
                     for b in range(bins)]
            predicted = [(b + 0.5) / bins if c else 0.0
                         for b, c in enumerate(count)]
            observed = [min(1.0, p + shift) if c else 0.0
                        for p, c in zip(predicted, count)]
            out.append({"count": count, "predicted": predicted,
                        "observed": observed})
        return out

    curves = {}
    for i, name in enumerate(NAMES):
        p = [0.1 / (i + 1) * (1 - j / 20) for j in range(N)]
        r = [0.02 * (j + 1) / (i + 1) for j in range(N)]
        curves[name] = {"precision": p, "recall": r, "ndcg": p}
    topn = {"n": N, "relevant": 4, "users": 123}
    for name in NAMES:
        topn[name] = {k: v[-1] for k, v in curves[name].items()}
    return {"rmse": 0.9, "mae": 0.7, "n_test": 5500, "nll": 1.2,
            "ece": 0.02, "hist_nll": 1.3, "hist_ece": 0.01, "topn": topn,
            "reliability": {"bins": bins, "values": values,
                            "model": table(0.05, 8), "hist": table(-0.05, 9)},
            "topn_at": curves}


def points(group):
    pl = group.find(f"{NS}polyline")
    if pl is None:
        return []
    return [tuple(map(float, p.split(","))) for p in pl.get("points").split()]


class PlotsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="rbmrec_plots_")
        self.addCleanup(self.tmp.cleanup)

    def run_plots(self, data, *args):
        tmp = self.tmp.name
        src = os.path.join(tmp, "in.json")
        with open(src, "w") as f:
            json.dump(data, f)
        out = os.path.join(tmp, "out")
        proc = subprocess.run(
            ["bash", os.path.join(ROOT, "bench", "plots.sh"), "--from-json",
             src, "--title", "tiny & synthetic", *args, out],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return out, proc.stdout

    def test_reliability_has_a_series_per_value_and_source(self):
        data = synthetic()
        out, stdout = self.run_plots(data)
        self.assertIn("nll 1.2000 (item histogram 1.3000)", stdout)
        root = ET.parse(os.path.join(out, "reliability.svg")).getroot()
        self.assertEqual(root.tag, f"{NS}svg")
        groups = [g for g in root.iter(f"{NS}g")
                  if g.get("class") == "series"]
        self.assertEqual(len(groups), 2 * 5)
        texts = " ".join(t.text or "" for t in root.iter(f"{NS}text"))
        self.assertIn("tiny & synthetic", texts)
        for g in groups:
            key, value = g.get("data-name"), int(g.get("data-value"))
            table = data["reliability"][key][value - 1]
            nonempty = sum(1 for c in table["count"] if c > 0)
            pts = points(g)
            self.assertEqual(len(pts), nonempty, (key, value))
            # x grows with the bin; above the diagonal (SVG y grows down)
            # for the model, whose observed frequency is p + 0.05.
            xs = [x for x, _ in pts]
            self.assertEqual(xs, sorted(xs))
            self.assertEqual(len(g.findall(f"{NS}circle")) +
                             len(g.findall(f"{NS}rect")), nonempty)
        # Count bars: one per non-empty bin of each table.
        bars = [r for r in root.iter(f"{NS}rect")
                if r.get("fill-opacity") is not None]
        want = sum(1 for key in ("model", "hist")
                   for t in data["reliability"][key] for c in t["count"]
                   if c > 0)
        self.assertEqual(len(bars), want)

    def test_precision_recall_has_a_series_per_ranking(self):
        out, stdout = self.run_plots(synthetic())
        for name in NAMES:
            self.assertIn(name, stdout)
        root = ET.parse(os.path.join(out, "precision_recall.svg")).getroot()
        groups = [g for g in root.iter(f"{NS}g")
                  if g.get("class") == "series"]
        self.assertEqual(len(groups), 3 * len(NAMES))
        self.assertEqual({g.get("data-name") for g in groups}, set(NAMES))
        self.assertEqual({g.get("data-metric") for g in groups},
                         {"precision", "recall", "ndcg"})
        for g in groups:
            pts = points(g)
            self.assertEqual(len(pts), N)
            ys = [y for _, y in pts]
            if g.get("data-metric") == "recall":  # rises: SVG y falls
                self.assertEqual(ys, sorted(ys, reverse=True))
        legend = [t.text for t in root.iter(f"{NS}text")]
        for name in NAMES:
            self.assertIn(name, legend)

    def test_without_topn_only_the_reliability_plot(self):
        data = synthetic()
        del data["topn"], data["topn_at"]
        out, _ = self.run_plots(data)
        self.assertTrue(os.path.exists(os.path.join(out, "reliability.svg")))
        self.assertFalse(
            os.path.exists(os.path.join(out, "precision_recall.svg")))


if __name__ == "__main__":
    ROOT = sys.argv.pop(1)
    unittest.main()
