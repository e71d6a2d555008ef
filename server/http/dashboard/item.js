// An item: its catalogue row and the served model's histogram of its
// ratings drawn as bars (GET /v1/items/{id}), then the items most similar
// to it (GET /v1/items/{id}/similar) with their scores as bars.

import { get, query } from './api.js';
import { distribution, meter } from './chart.js';
import { cards, count, errorBox, h, num, table } from './dom.js';

// The catalogue row (title, categories, hidden, attributes) and the
// ratings histogram: one bar per rating value.
async function itemAndRatings(itemId) {
  const got = await get(`/v1/items/${encodeURIComponent(itemId)}`);
  const it = got.item || {};
  const attrs = Object.entries(it.attributes || {}).sort(([a], [b]) => (a < b ? -1 : 1));
  const out = [cards([
    ['title', it.title || '-', 'item-title'],
    ['categories', (it.categories || []).join(', ') || '-', 'item-categories'],
    ['hidden', it.hidden ? 'yes (never recommended)' : 'no', 'item-hidden'],
    ...attrs.map(([k, v]) => [k, v]),
  ]), h('h3', {}, 'Ratings')];
  const counts = (got.ratingCounts || []).map(Number);
  if (counts.length === 0) {
    out.push(h('p', { class: 'note' }, 'No model is served: no ratings histogram.'));
    return out;
  }
  const total = Number(got.ratings) || 0;
  const values = (got.scale && got.scale.values) || [];
  out.push(h('p', { class: 'note', id: 'item-ratings' }, `model version ${got.modelVersion}: ` +
    `${count(total)} ratings${total > 0 ? `, mean ${num(got.meanRating, 2)}` : ''}`));
  // Heights relative to the most frequent value; the tooltips the counts.
  const top = Math.max(1, ...counts);
  const share = (c) => (total > 0 ? ` (${((100 * c) / total).toFixed(1)}%)` : '');
  out.push(distribution(counts.map((c) => c / top), values, {
    id: 'item-hist', label: 'ratings histogram', scale: 2,
    title: (i, label) => `${label}: ${count(counts[i])} ratings${share(counts[i])}`,
  }));
  return out;
}

function form(itemId, n) {
  const f = h('form', { id: 'item-form', class: 'inline' },
    h('label', {}, 'item ', h('input', { name: 'item', value: itemId, required: true, size: 10 })),
    h('label', {}, 'n ', h('input', { name: 'n', type: 'number', min: 1, value: n, size: 4 })),
    h('button', { type: 'submit' }, 'Similar items'));
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = `#/item/${encodeURIComponent(f.elements.item.value.trim())}/${f.elements.n.value}`;
  });
  return f;
}

export async function render(main, ctx, arg) {
  const [itemId, nText] = (arg || '').split('/');
  const n = nText || '10';
  main.append(h('h2', {}, itemId ? `Item ${itemId}` : 'Item'), form(itemId || '', n));
  if (!itemId) {
    main.append(h('p', { class: 'note' }, 'Enter an item id.'));
    return;
  }
  const box = h('div', { id: 'item' });
  main.append(box);
  try {
    box.append(...(await itemAndRatings(itemId)));
  } catch (e) {
    box.append(errorBox(e));
  }
  try {
    const sim = await get(`/v1/items/${encodeURIComponent(itemId)}/similar${query({ n })}`);
    const items = sim.items || [];
    const top = Math.max(1e-9, ...items.map((x) => Math.abs(x.score)));
    box.append(h('h3', {}, 'Similar items'),
      h('p', { class: 'note' }, `model version ${sim.modelVersion}`),
      items.length === 0 ? h('p', { class: 'note' }, 'none') : table(['rank', 'item', 'title', 'score', ''],
        items.map((x) => h('tr', { class: 'similar-row' },
          h('td', { class: 'num' }, String(x.rank)),
          h('td', {}, h('a', { href: `#/item/${encodeURIComponent(x.itemId)}` }, x.itemId)),
          h('td', {}, x.title || ''), h('td', { class: 'num' }, num(x.score, 4)),
          h('td', {}, meter(x.score / top, num(x.score, 4))))), { id: 'similar-table' }));
  } catch (e) {
    box.append(errorBox(e));
  }
}
