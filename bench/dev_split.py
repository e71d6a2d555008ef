#!/usr/bin/env python3
"""Holds out part of a TRAINING file, for choosing settings without the test.

  dev_split.py TRAIN OUT_PREFIX [--fraction 0.1] [--seed 7]

Writes OUT_PREFIX.train and OUT_PREFIX.test: each line of TRAIN (after a
header line, if the first line does not start with a digit; it is copied to
both) goes to .test with probability --fraction, drawn from Python's
random.Random(--seed) in line order, else to .train. The same input and seed
give the same files. bench/dev_tune.sh trains rbmrec-eval on .train and
reports the RMSE on .test: a second hold-out inside the training data, so
that the benchmark's test file is never used to choose a default (README
"Accuracy").
"""

import argparse
import random
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train")
    ap.add_argument("out_prefix")
    ap.add_argument("--fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    if not 0 < a.fraction < 1:
        sys.exit("dev_split.py: --fraction must be in (0, 1)")
    with open(a.train, encoding="utf-8", errors="surrogateescape") as f:
        lines = f.read().splitlines(True)
    header = []
    if lines and not lines[0][:1].isdigit():
        header, lines = [lines[0]], lines[1:]
    rng = random.Random(a.seed)
    train, test = [], []
    for line in lines:
        (test if rng.random() < a.fraction else train).append(line)
    for suffix, part in ((".train", train), (".test", test)):
        with open(a.out_prefix + suffix, "w", encoding="utf-8",
                  errors="surrogateescape") as f:
            f.writelines(header + part)
    print(f"{a.out_prefix}: {len(train)} train, {len(test)} held out")


if __name__ == "__main__":
    main()
