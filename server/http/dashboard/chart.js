// Charts drawn as SVG: a line chart of series of (x, y) points (the
// training curves) and small bar charts (a predicted rating distribution,
// a score). Sizes are in SVG units; CSS scales the drawing.

import { s } from './dom.js';

// Round "nice" tick values covering [lo, hi].
function ticks(lo, hi, count) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((st) => st >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push(Number(v.toPrecision(12)));
  }
  return out;
}

// series: [{name, points: [[x, y], ...]}]; opts: {xLabel, yLabel, width,
// height, integerX}. Each point is a <circle class="point">; each series a
// <polyline class="line sN"> (N its index, for its colour).
export function lineChart(series, opts = {}) {
  const width = opts.width || 560;
  const height = opts.height || 260;
  const m = { left: 56, right: 16, top: 14, bottom: 40 };
  const all = series.flatMap((se) => se.points);
  const svg = s('svg', {
    class: 'chart',
    viewBox: `0 0 ${width} ${height}`,
    role: 'img',
    'aria-label': opts.yLabel || 'chart',
  });
  if (all.length === 0) {
    svg.append(s('text', { x: width / 2, y: height / 2, class: 'empty', 'text-anchor': 'middle' },
      opts.empty || 'no points yet'));
    return svg;
  }
  let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
  if (x1 === x0) x1 = x0 + 1;
  const pad = (y1 - y0) * 0.08 || Math.abs(y0) * 0.05 || 0.1;
  y0 -= pad;
  y1 += pad;
  const px = (x) => m.left + ((x - x0) / (x1 - x0)) * (width - m.left - m.right);
  const py = (y) => height - m.bottom - ((y - y0) / (y1 - y0)) * (height - m.top - m.bottom);
  const axes = s('g', { class: 'axes' });
  for (const t of ticks(y0, y1, 5)) {
    axes.append(s('line', { x1: m.left, x2: width - m.right, y1: py(t), y2: py(t), class: 'grid' }));
    axes.append(s('text', { x: m.left - 6, y: py(t) + 4, 'text-anchor': 'end' }, String(t)));
  }
  const xt = ticks(x0, x1, 8).filter((t) => !opts.integerX || Number.isInteger(t));
  for (const t of xt) {
    axes.append(s('text', { x: px(t), y: height - m.bottom + 16, 'text-anchor': 'middle' }, String(t)));
  }
  axes.append(s('line', { x1: m.left, x2: m.left, y1: m.top, y2: height - m.bottom, class: 'axis' }));
  axes.append(s('line', {
    x1: m.left, x2: width - m.right, y1: height - m.bottom, y2: height - m.bottom, class: 'axis',
  }));
  if (opts.xLabel) {
    axes.append(s('text', { x: (m.left + width - m.right) / 2, y: height - 6, 'text-anchor': 'middle' },
      opts.xLabel));
  }
  if (opts.yLabel) {
    axes.append(s('text', {
      x: 12, y: (m.top + height - m.bottom) / 2, 'text-anchor': 'middle',
      transform: `rotate(-90 12 ${(m.top + height - m.bottom) / 2})`,
    }, opts.yLabel));
  }
  svg.append(axes);
  series.forEach((se, i) => {
    const g = s('g', { class: `series s${i % 6}`, 'data-series': se.name });
    const pts = se.points.map((p) => `${px(p[0]).toFixed(1)},${py(p[1]).toFixed(1)}`);
    g.append(s('polyline', { class: 'line', points: pts.join(' ') }));
    for (const p of se.points) {
      g.append(s('circle', { class: 'point', cx: px(p[0]), cy: py(p[1]), r: 3 },
        s('title', {}, `${se.name}: epoch ${p[0]}, ${p[1].toFixed(4)}`)));
    }
    svg.append(g);
  });
  const legend = s('g', { class: 'legend' });
  series.forEach((se, i) => {
    const x = m.left + 8 + i * 110;
    legend.append(s('rect', { x, y: m.top, width: 10, height: 10, class: `swatch s${i % 6}` }));
    legend.append(s('text', { x: x + 14, y: m.top + 9 }, se.name));
  });
  svg.append(legend);
  return svg;
}

// A predicted rating distribution: one <rect class="bar"> per rating
// value, its height the probability, the value below. opts (for other
// shares per rating value, e.g. a ratings histogram): {id, label (the
// aria-label), title(i, label, p) (each bar's tooltip), scale (the
// drawing's size factor, default 1.5)}.
export function distribution(probabilities, values, opts = {}) {
  const n = probabilities.length;
  const bw = 16;
  const height = 44;
  const k = opts.scale || 1.5;
  const svg = s('svg', {
    id: opts.id,
    class: 'dist',
    viewBox: `0 0 ${n * bw} ${height}`,
    width: n * bw * k,
    height: height * k,
    role: 'img',
    'aria-label': opts.label || 'predicted rating distribution',
  });
  probabilities.forEach((p, i) => {
    const bh = Math.max(0.5, p * 30);
    const label = values && values[i] !== undefined ? String(values[i]) : String(i + 1);
    const title = opts.title ? opts.title(i, label, p) : `P(${label}) = ${(p * 100).toFixed(1)}%`;
    svg.append(s('rect', { class: 'bar', x: i * bw + 2, y: 32 - bh, width: bw - 4, height: bh },
      s('title', {}, title)));
    svg.append(s('text', { x: i * bw + bw / 2, y: 42, 'text-anchor': 'middle' }, label));
  });
  return svg;
}

// A horizontal bar of `fraction` (0..1) of its width.
export function meter(fraction, title) {
  const f = Math.max(0, Math.min(1, Number(fraction) || 0));
  return s('svg', { class: 'meter', viewBox: '0 0 100 10', width: 120, height: 12 },
    s('rect', { class: 'track', x: 0, y: 0, width: 100, height: 10 }),
    s('rect', { class: 'bar', x: 0, y: 0, width: (f * 100).toFixed(1), height: 10 },
      s('title', {}, title || '')));
}

// Vertical bars of labelled values (e.g. validation RMSE per version).
export function barChart(items, opts = {}) {
  const width = opts.width || 560;
  const height = opts.height || 180;
  const m = { left: 48, right: 10, top: 10, bottom: 30 };
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': opts.yLabel || 'bars' });
  const vals = items.map((it) => it.value).filter((v) => v > 0);
  if (vals.length === 0) return svg;
  const top = Math.max(...vals) * 1.1;
  const bw = Math.min(48, (width - m.left - m.right) / items.length);
  const py = (v) => height - m.bottom - (v / top) * (height - m.top - m.bottom);
  for (const t of ticks(0, top, 4)) {
    svg.append(s('line', { x1: m.left, x2: width - m.right, y1: py(t), y2: py(t), class: 'grid' }));
    svg.append(s('text', { x: m.left - 6, y: py(t) + 4, 'text-anchor': 'end' }, String(t)));
  }
  items.forEach((it, i) => {
    const x = m.left + i * bw;
    if (it.value > 0) {
      svg.append(s('rect', { class: `bar${it.cls ? ` ${it.cls}` : ''}`, x: x + 3, y: py(it.value),
        width: bw - 6, height: py(0) - py(it.value) }, s('title', {}, `${it.label}: ${it.value.toFixed(4)}`)));
    }
    svg.append(s('text', { x: x + bw / 2, y: height - m.bottom + 16, 'text-anchor': 'middle' }, it.label));
  });
  return svg;
}
