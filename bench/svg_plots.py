#!/usr/bin/env python3
"""Draws rbmrec-eval --json output as SVG (python3 standard library only).

  svg_plots.py [--title NAME] JSON OUT_DIR

Writes OUT_DIR/reliability.svg: one panel per rating value, mean predicted
probability vs observed frequency per bin for the model and the item
histogram baseline, the diagonal of perfect calibration, and under each
panel the rows per bin. With a "topn_at" field (rbmrec-eval --topn N) also
writes OUT_DIR/precision_recall.svg: precision@N, recall@N and NDCG@N vs N
for every ranking in the output. Prints one line per file written.
"""

import argparse
import json
import math
import os
import sys
from xml.sax.saxutils import escape

# Colour-blind-safe palette (Okabe-Ito), then greys.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7",
           "#56B4E9", "#F0E442", "#000000", "#999999", "#666666"]
MARKERS = ["circle", "square", "diamond", "triangle"]
FONT = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""


def attr(s):
    """Text for a double-quoted attribute value."""
    return escape(str(s), {"\"": "&quot;"})


def fmt(x):
    """A coordinate with two decimals."""
    return f"{x:.2f}"


def nice_ticks(lo, hi, count=5):
    """About `count` round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    return [round(i * step, 10) for i in range(first, last + 1)]


def tick_label(t):
    if abs(t - round(t)) < 1e-9:
        return str(int(round(t)))
    return f"{t:g}"


class Svg:
    def __init__(self, width, height):
        self.width, self.height = width, height
        self.parts = []

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, size=12, anchor="start", weight="normal",
             rotate=None, fill="#000"):
        tr = f" transform=\"rotate({rotate} {fmt(x)} {fmt(y)})\"" if rotate else ""
        self.add(f"<text x=\"{fmt(x)}\" y=\"{fmt(y)}\" font-size=\"{size}\" "
                 f"text-anchor=\"{anchor}\" font-weight=\"{weight}\" "
                 f"fill=\"{fill}\"{tr}>{escape(s)}</text>")

    def line(self, x1, y1, x2, y2, stroke="#000", width=1, dash=None):
        d = f" stroke-dasharray=\"{dash}\"" if dash else ""
        self.add(f"<line x1=\"{fmt(x1)}\" y1=\"{fmt(y1)}\" x2=\"{fmt(x2)}\" "
                 f"y2=\"{fmt(y2)}\" stroke=\"{stroke}\" stroke-width=\"{width}\"{d}/>")

    def rect(self, x, y, w, h, fill="none", stroke="none", opacity=None):
        o = f" fill-opacity=\"{opacity}\"" if opacity is not None else ""
        self.add(f"<rect x=\"{fmt(x)}\" y=\"{fmt(y)}\" width=\"{fmt(w)}\" "
                 f"height=\"{fmt(h)}\" fill=\"{fill}\" stroke=\"{stroke}\"{o}/>")

    def marker(self, kind, x, y, color, r=3.5):
        if kind == "square":
            self.rect(x - r, y - r, 2 * r, 2 * r, fill=color)
        elif kind == "diamond":
            self.add(f"<polygon points=\"{fmt(x)},{fmt(y - r * 1.3)} "
                     f"{fmt(x + r * 1.3)},{fmt(y)} {fmt(x)},{fmt(y + r * 1.3)} "
                     f"{fmt(x - r * 1.3)},{fmt(y)}\" fill=\"{color}\"/>")
        elif kind == "triangle":
            self.add(f"<polygon points=\"{fmt(x)},{fmt(y - r * 1.3)} "
                     f"{fmt(x + r * 1.2)},{fmt(y + r)} {fmt(x - r * 1.2)},"
                     f"{fmt(y + r)}\" fill=\"{color}\"/>")
        else:
            self.add(f"<circle cx=\"{fmt(x)}\" cy=\"{fmt(y)}\" r=\"{fmt(r)}\" "
                     f"fill=\"{color}\"/>")

    def polyline(self, pts, color, width=2, dash=None):
        if len(pts) < 2:
            return
        d = f" stroke-dasharray=\"{dash}\"" if dash else ""
        p = " ".join(f"{fmt(x)},{fmt(y)}" for x, y in pts)
        self.add(f"<polyline points=\"{p}\" fill=\"none\" stroke=\"{color}\" "
                 f"stroke-width=\"{width}\"{d}/>")

    def write(self, path):
        head = (f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{self.width}\" "
                f"height=\"{self.height}\" viewBox=\"0 0 {self.width} "
                f"{self.height}\" {FONT}>\n"
                f"<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n")
        with open(path, "w", encoding="utf-8") as f:
            f.write("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
            f.write(head + "\n".join(self.parts) + "\n</svg>\n")


class Axes:
    """A plot area at (x, y, w, h) in pixels mapping data [x0,x1] x [y0,y1]."""

    def __init__(self, svg, x, y, w, h, xr, yr, log_y=False):
        self.svg, self.x, self.y, self.w, self.h = svg, x, y, w, h
        self.x0, self.x1 = xr
        self.y0, self.y1 = yr
        self.log_y = log_y

    def px(self, v):
        return self.x + (v - self.x0) / (self.x1 - self.x0) * self.w

    def py(self, v):
        if self.log_y:
            v = math.log10(max(v, 10 ** self.y0))
        return self.y + self.h - (v - self.y0) / (self.y1 - self.y0) * self.h

    def frame(self, xticks, yticks, xlabel=None, ylabel=None, grid=True,
              ylabels=None, xlabels=True):
        s = self.svg
        for t in yticks:
            yy = self.y + self.h - (t - self.y0) / (self.y1 - self.y0) * self.h
            if grid:
                s.line(self.x, yy, self.x + self.w, yy, stroke="#e5e5e5")
            s.line(self.x - 4, yy, self.x, yy)
            label = ylabels(t) if ylabels else tick_label(t)
            s.text(self.x - 6, yy + 4, label, size=10, anchor="end")
        for t in xticks:
            xx = self.px(t)
            if grid:
                s.line(xx, self.y, xx, self.y + self.h, stroke="#e5e5e5")
            s.line(xx, self.y + self.h, xx, self.y + self.h + 4)
            if xlabels:
                s.text(xx, self.y + self.h + 16, tick_label(t), size=10,
                       anchor="middle")
        s.rect(self.x, self.y, self.w, self.h, stroke="#333")
        if xlabel:
            s.text(self.x + self.w / 2, self.y + self.h + 32, xlabel, size=11,
                   anchor="middle")
        if ylabel:
            s.text(self.x - 44, self.y + self.h / 2, ylabel, size=11,
                   anchor="middle", rotate=-90)


def legend(svg, x, y, entries):
    """entries: (label, color, dash, marker) drawn in one row from (x, y)."""
    for label, color, dash, mark in entries:
        svg.line(x, y - 4, x + 26, y - 4, stroke=color, width=2, dash=dash)
        if mark:
            svg.marker(mark, x + 13, y - 4, color)
        svg.text(x + 32, y, label, size=12)
        x += 32 + 7.2 * len(label) + 24


def class_ece(table, n):
    return sum(c / n * abs(p - o) for c, p, o in
               zip(table["count"], table["predicted"], table["observed"])
               if c > 0) if n > 0 else 0.0


def reliability_svg(data, title, path):
    rel = data["reliability"]
    values = rel["values"]
    bins = rel["bins"]
    K = len(values)
    n = data.get("n_test", 0)
    cols = min(K, 5)
    rows = (K + cols - 1) // cols
    pw, ph, bh = 190, 190, 60  # plot, its height, the count strip
    cell_w, cell_h = pw + 70, ph + bh + 100
    svg = Svg(cols * cell_w + 40, rows * cell_h + 100)
    svg.text(svg.width / 2, 26, f"Reliability of the predicted rating "
             f"distributions — {title}", size=16, anchor="middle",
             weight="bold")
    svg.text(svg.width / 2, 46, f"{n} test ratings, {bins} bins per value; "
             f"classwise ECE model {data['ece']:.4f}, item histogram "
             f"{data['hist_ece']:.4f}", size=12, anchor="middle")
    series = [("model", "model (RBM)", PALETTE[0], None, "circle"),
              ("hist", "item histogram (add-one)", PALETTE[1], None, "square")]
    legend(svg, 60, 72, [(label, color, dash, mark)
                         for _, label, color, dash, mark in series] +
           [("perfect calibration", "#888", "5,4", None)])
    max_count = max([c for key, *_ in series for t in rel[key]
                     for c in t["count"]] + [1])
    log_top = math.ceil(math.log10(max_count)) if max_count > 1 else 1
    ticks01 = [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    for k, value in enumerate(values):
        cx = 20 + (k % cols) * cell_w + 55
        cy = 100 + (k // cols) * cell_h
        ax = Axes(svg, cx, cy + 20, pw, ph, (0, 1), (0, 1))
        ax.frame(ticks01, ticks01, xlabels=False,
                 ylabel="observed frequency" if k % cols == 0 else None)
        svg.line(ax.px(0), ax.py(0), ax.px(1), ax.py(1), stroke="#888",
                 dash="5,4")
        eces = []
        for key, label, color, dash, mark in series:
            t = rel[key][k]
            pts = [(ax.px(p), ax.py(o)) for c, p, o in
                   zip(t["count"], t["predicted"], t["observed"]) if c > 0]
            svg.add(f"<g class=\"series\" data-name=\"{attr(key)}\" "
                    f"data-value=\"{value:g}\">")
            svg.polyline(pts, color, dash=dash)
            for x, y in pts:
                svg.marker(mark, x, y, color, r=3)
            svg.add("</g>")
            eces.append(class_ece(t, n))
        svg.text(cx + pw / 2, cy + 12, f"rating {value:g}", size=13,
                 anchor="middle", weight="bold")
        svg.text(cx + 4, cy + 34, f"ECE model {eces[0]:.4f}", size=10,
                 fill=PALETTE[0])
        svg.text(cx + 4, cy + 47, f"ECE hist {eces[1]:.4f}", size=10,
                 fill=PALETTE[1])
        # Rows per bin, log scale, model and histogram side by side.
        cax = Axes(svg, cx, cy + 20 + ph + 14, pw, bh, (0, 1), (0, log_top),
                   log_y=True)
        cax.frame(ticks01, list(range(log_top + 1)),
                  xlabel="mean predicted p", grid=False,
                  ylabels=lambda t: ("1" if t == 0 else f"1e{int(t)}")
                  if t in (0, log_top) else "")
        if k % cols == 0:
            svg.text(cx - 44, cax.y + bh / 2, "rows (log)", size=11,
                     anchor="middle", rotate=-90)
        bw = pw / bins / 2 - 1
        for j, (key, _, color, _, _) in enumerate(series):
            for b, c in enumerate(rel[key][k]["count"]):
                if c <= 0:
                    continue
                x = cax.px(b / bins) + 1 + j * (bw + 0.5)
                y = cax.py(c)
                svg.rect(x, y, bw, cax.y + bh - y, fill=color, opacity=0.8)
    svg.write(path)


def precision_recall_svg(data, title, path):
    curves = data["topn_at"]
    topn = data.get("topn", {})
    names = list(curves)
    N = max((len(c["precision"]) for c in curves.values()), default=0)
    panels = [("precision", "precision@N"), ("recall", "recall@N"),
              ("ndcg", "NDCG@N")]
    pw, ph = 300, 260
    svg = Svg(len(panels) * (pw + 80) + 40,
              ph + 150 + 20 * ((len(names) - 1) // 4))
    svg.text(svg.width / 2, 26, f"Top-N rankings — {title}", size=16,
             anchor="middle", weight="bold")
    svg.text(svg.width / 2, 46, f"{topn.get('users', '?')} test users with a "
             f"relevant item (test rating >= {topn.get('relevant', '?')}); "
             f"candidates: items not rated in training", size=12,
             anchor="middle")
    entries = [(name, PALETTE[i % len(PALETTE)], None,
                MARKERS[i % len(MARKERS)]) for i, name in enumerate(names)]
    for row in range(0, len(entries), 4):
        legend(svg, 60, 72 + 20 * (row // 4), entries[row:row + 4])
    top = 92 + 20 * ((len(names) - 1) // 4)
    xticks = nice_ticks(1, max(N, 2), 6)
    xticks = [t for t in xticks if 1 <= t <= N] or [1]
    for p, (key, label) in enumerate(panels):
        ymax = max([v for c in curves.values() for v in c[key]] + [1e-6])
        yticks = nice_ticks(0, ymax, 5)
        ax = Axes(svg, 60 + p * (pw + 80), top, pw, ph,
                  (1, max(N, 2)), (0, yticks[-1]))
        ax.frame(xticks, yticks, xlabel="N (list length)", ylabel=label)
        for i, name in enumerate(names):
            color, mark = entries[i][1], entries[i][3]
            ys = curves[name][key]
            pts = [(ax.px(j + 1), ax.py(v)) for j, v in enumerate(ys)]
            svg.add(f"<g class=\"series\" data-name=\"{attr(name)}\" "
                    f"data-metric=\"{key}\">")
            svg.polyline(pts, color)
            every = max(1, len(pts) // 20)
            for x, y in pts[::every]:
                svg.marker(mark, x, y, color, r=3)
            svg.add("</g>")
    svg.write(path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--title", default="", help="data set name for titles")
    ap.add_argument("json", help="rbmrec-eval --json output ('-': stdin)")
    ap.add_argument("out_dir")
    a = ap.parse_args(argv)
    with (sys.stdin if a.json == "-" else open(a.json, encoding="utf-8")) as f:
        data = json.load(f)
    title = a.title or os.path.basename(a.json)
    os.makedirs(a.out_dir, exist_ok=True)
    if "reliability" not in data:
        print("svg_plots.py: no \"reliability\" in the JSON (an older "
              "rbmrec-eval?)", file=sys.stderr)
        return 1
    path = os.path.join(a.out_dir, "reliability.svg")
    reliability_svg(data, title, path)
    print(path)
    if "topn_at" in data:
        path = os.path.join(a.out_dir, "precision_recall.svg")
        precision_recall_svg(data, title, path)
        print(path)
    else:
        print("svg_plots.py: no \"topn_at\" (run rbmrec-eval with --topn N): "
              "no precision_recall.svg", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
