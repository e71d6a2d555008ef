// Models: every stored version with its metrics (GET /v1/models), a chart
// of validation RMSE per version, and for admins the activate and pin
// actions (POST /v1/models/{v}:activate, :pin). A read token is shown no
// action (the server would refuse it anyway: 403).

import { get, post } from './api.js';
import { barChart } from './chart.js';
import { bytes, count, errorBox, h, num, table, when } from './dom.js';

function actions(m, ctx, refresh, box) {
  if (!ctx.isAdmin) return '';
  const act = async (path, body) => {
    try {
      await post(path, body);
      await refresh();
    } catch (e) {
      box.prepend(errorBox(e));
    }
  };
  return [
    m.active || m.corrupt ? '' : h('button', {
      class: 'admin-action activate', type: 'button', 'data-version': m.version,
      onclick: () => act(`/v1/models/${m.version}:activate`),
    }, 'Activate'),
    h('button', {
      class: 'admin-action pin secondary', type: 'button', 'data-version': m.version,
      onclick: () => act(`/v1/models/${m.version}:pin`, { pinned: !m.pinned }),
    }, m.pinned ? 'Unpin' : 'Pin'),
  ];
}

function row(m, ctx, refresh, box) {
  const state = [m.active ? 'active' : '', m.pinned ? 'pinned' : '',
    m.corrupt ? `corrupt: ${m.corrupt}` : ''].filter(Boolean).join(', ');
  return h('tr', { class: `model-row${m.active ? ' active' : ''}`, 'data-version': m.version },
    h('td', {}, String(m.version)), h('td', {}, m.kind), h('td', {}, when(m.createdUnixMs)),
    h('td', { class: 'num' }, count(m.nUsers)), h('td', { class: 'num' }, count(m.nItems)),
    h('td', { class: 'num' }, count(m.nRatings)), h('td', { class: 'num' }, num(m.validationRmse, 4)),
    h('td', { class: 'num' }, String(m.epochs)), h('td', { class: 'num' }, bytes(m.sizeBytes)),
    h('td', {}, state),
    ctx.isAdmin ? h('td', {}, h('span', { class: 'actions' }, actions(m, ctx, refresh, box))) : '');
}

export async function render(main, ctx) {
  main.append(h('h2', {}, 'Models'));
  const box = h('div', { id: 'models' });
  main.append(box);
  const refresh = async () => {
    const list = (await get('/v1/models')).models || [];
    const ordered = [...list].sort((a, b) => Number(a.version) - Number(b.version));
    box.replaceChildren(
      list.length === 0 ? h('p', { class: 'note' }, 'No model stored yet: train one.') : '',
      h('h3', {}, 'Validation RMSE per version (green: the active one; lower is better)'),
      h('div', { class: 'chart-box' }, barChart(ordered.map((m) => ({
        label: `v${m.version}`, value: Number(m.validationRmse) || 0, cls: m.active ? 'active' : '',
      })), { yLabel: 'validation RMSE' })),
      table(['version', 'kind', 'created (UTC)', 'users', 'items', 'ratings', 'validation RMSE',
        'epochs', 'size', 'state', ...(ctx.isAdmin ? ['actions'] : [])],
      list.map((m) => row(m, ctx, refresh, box)), { id: 'model-table' }),
      ctx.isAdmin ? '' : h('p', { class: 'note' }, 'Activating and pinning need an admin token.'));
  };
  try {
    await refresh();
  } catch (e) {
    box.replaceChildren(errorBox(e));
  }
}
