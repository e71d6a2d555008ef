// An item: the items most similar to it (GET /v1/items/{id}/similar) with
// their scores as bars. The API has no call that returns an item's
// ratings, so there is no ratings histogram.

import { get, query } from './api.js';
import { meter } from './chart.js';
import { errorBox, h, num, table } from './dom.js';

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
  box.append(h('h3', {}, 'Ratings'),
    h('p', { class: 'note' }, "The API has no call that returns an item's ratings, so there is " +
      'no ratings histogram here.'));
}
