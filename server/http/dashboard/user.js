// A user: their recommendations (GET /v1/users/{id}/recommendations with
// Recommend's filters: n, offset, categories, excluded items) and, for the
// items recommended, the predicted rating distribution (POST
// /v1/users/{id}:predict) drawn as bars; then their stored ratings (GET
// /v1/users/{id}/ratings, the first page) for a write or admin token. A
// read token may not see stored ratings (the server refuses it: 403), so
// the page says so instead of asking.

import { get, post, query } from './api.js';
import { distribution } from './chart.js';
import { count, errorBox, h, list, num, table, when } from './dom.js';

const RATINGS_PAGE = 100;

const filters = { n: '10', offset: '0', categories: '', exclude: '' };

function form(userId) {
  const f = h('form', { id: 'user-form', class: 'inline' },
    h('label', {}, 'user ', h('input', { name: 'user', value: userId, required: true, size: 10 })),
    h('label', {}, 'n ', h('input', { name: 'n', type: 'number', min: 1, value: filters.n, size: 4 })),
    h('label', {}, 'offset ', h('input', { name: 'offset', type: 'number', min: 0,
      value: filters.offset, size: 4 })),
    h('label', {}, 'categories ', h('input', { name: 'categories', value: filters.categories,
      placeholder: 'a,b', size: 12 })),
    h('label', {}, 'exclude items ', h('input', { name: 'exclude', value: filters.exclude,
      placeholder: 'id,id', size: 12 })),
    h('button', { type: 'submit' }, 'Recommend'));
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    for (const k of ['n', 'offset', 'categories', 'exclude']) filters[k] = f.elements[k].value;
    const next = `#/user/${encodeURIComponent(f.elements.user.value.trim())}`;
    if (location.hash === next) {
      window.dispatchEvent(new HashChangeEvent('hashchange'));
    } else {
      location.hash = next;
    }
  });
  return f;
}

async function recommendations(userId) {
  const id = encodeURIComponent(userId);
  const recs = await get(`/v1/users/${id}/recommendations${query({
    n: filters.n, offset: filters.offset, categories: list(filters.categories),
    exclude_item_ids: list(filters.exclude),
  })}`);
  const items = (recs.recommendations || []).map((r) => r.itemId);
  let pred = { predictions: [], scale: {} };
  if (items.length > 0) pred = await post(`/v1/users/${id}:predict`, { itemIds: items });
  const byItem = new Map((pred.predictions || []).map((p) => [p.itemId, p]));
  const values = (pred.scale && pred.scale.values) || [];
  const rows = (recs.recommendations || []).map((r) => {
    const p = byItem.get(r.itemId);
    return h('tr', { class: 'rec-row', 'data-item': r.itemId },
      h('td', { class: 'num' }, String(r.rank)),
      h('td', {}, h('a', { href: `#/item/${encodeURIComponent(r.itemId)}` }, r.itemId)),
      h('td', {}, r.title || ''),
      h('td', { class: 'num' }, num(r.expectedRating, 2)),
      h('td', { class: 'num' }, num(r.probabilityAtLeast, 3)),
      h('td', {}, p ? distribution(p.probabilities || [], values) : '-'));
  });
  return [
    h('p', { class: 'note' }, `model version ${recs.modelVersion}; ${recs.candidates} candidate items; ` +
      `P(rating ≥ ${recs.threshold}) in the fifth column; bars: P(each rating)` +
      `${pred.foldedIn ? '; the model did not know this user (folded in from their ratings)' : ''}`),
    rows.length === 0 ? h('p', { class: 'note' }, 'No recommendations (every candidate filtered out?)')
      : table(['rank', 'item', 'title', 'expected rating', `P(≥ ${recs.threshold})`,
        'predicted distribution'], rows, { id: 'rec-table' }),
  ];
}

async function storedRatings(userId) {
  const page = await get(`/v1/users/${encodeURIComponent(userId)}/ratings${query({
    limit: RATINGS_PAGE,
  })}`);
  const rows = (page.ratings || []).map((r) => h('tr', { class: 'rating-row', 'data-item': r.itemId },
    h('td', {}, h('a', { href: `#/item/${encodeURIComponent(r.itemId)}` }, r.itemId)),
    h('td', {}, r.title || ''),
    h('td', { class: 'num' }, String(r.rating)),
    h('td', {}, when(Number(r.timestamp) * 1000))));
  const total = Number(page.total) || 0;
  return [
    h('p', { class: 'note', id: 'ratings-total' }, `${count(total)} stored ratings` +
      (total > rows.length ? `; the first ${rows.length} shown (in the order the items were first stored)` : '')),
    rows.length === 0 ? '' : table(['item', 'title', 'rating', 'time (UTC)'], rows, { id: 'ratings-table' }),
  ];
}

export async function render(main, ctx, arg) {
  const userId = arg || '';
  main.append(h('h2', {}, userId ? `User ${userId}` : 'User'), form(userId));
  if (!userId) {
    main.append(h('p', { class: 'note' }, 'Enter a user id.'));
    return;
  }
  const box = h('div', { id: 'user' });
  main.append(box);
  try {
    box.append(h('h3', {}, 'Recommendations'), ...(await recommendations(userId)));
  } catch (e) {
    box.append(errorBox(e));
  }
  box.append(h('h3', {}, 'Ratings'));
  if (!ctx.canWrite) {
    box.append(h('p', { class: 'note', id: 'ratings-denied' },
      "A read token cannot see a user's stored ratings: that needs a write or admin token."));
    return;
  }
  try {
    box.append(...(await storedRatings(userId)));
  } catch (e) {
    box.append(errorBox(e));
  }
}
