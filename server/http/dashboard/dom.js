// Small DOM helpers: elements from (tag, attributes, children) without
// innerHTML (no markup is ever parsed from data) and number formats.

const SVG_NS = 'http://www.w3.org/2000/svg';

function fill(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2), value);
    } else if (key === 'text') {
      node.textContent = String(value);
    } else {
      node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// An HTML element: h('a', {href: '#/x', class: 'y'}, 'text', otherNode).
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

// An SVG element, as h().
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

// A number with `digits` decimals; '-' for missing values.
export function num(x, digits = 3) {
  const v = Number(x);
  return Number.isFinite(v) ? v.toFixed(digits) : '-';
}

// An integer count (the API sends 64-bit integers as strings).
export function count(x) {
  const v = Number(x);
  return Number.isFinite(v) ? v.toLocaleString('en-US') : '-';
}

export function bytes(x) {
  let v = Number(x);
  if (!Number.isFinite(v) || v <= 0) return '-';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u += 1;
  }
  return `${v.toFixed(u === 0 ? 0 : 1)} ${units[u]}`;
}

export function when(unixMs) {
  const v = Number(unixMs);
  return v > 0 ? new Date(v).toISOString().replace('T', ' ').slice(0, 19) : '-';
}

// A comma-separated field as a list of trimmed, non-empty strings.
export function list(text) {
  return String(text || '')
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
}

// A message box for an error (ApiError or any Error).
export function errorBox(e) {
  const reason = e && e.reason ? ` (${e.reason})` : '';
  return h('p', { class: 'error' }, `${e && e.message ? e.message : e}${reason}`);
}

// A labelled definition list of [label, value] pairs, as cards.
export function cards(pairs) {
  return h('dl', { class: 'cards' },
    pairs.map(([label, value, id]) =>
      h('div', { class: 'card', id },
        h('dt', {}, label), h('dd', {}, value))));
}

// A table: header labels and rows of cells (strings or nodes).
export function table(labels, rows, attrs) {
  return h('table', attrs || {},
    h('thead', {}, h('tr', {}, labels.map((l) => h('th', {}, l)))),
    h('tbody', {}, rows));
}
