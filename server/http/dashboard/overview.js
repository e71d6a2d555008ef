// Overview: store counts (GET /v1/stats), the serving model, the active and
// pinned versions (GET /v1/models) and the training slot; refreshed every
// 5 s while shown.

import { get } from './api.js';
import { bytes, cards, count, errorBox, h, num, table, when } from './dom.js';

function serving(stats) {
  if (stats.modelLoadError) {
    return h('span', { class: 'bad' }, `not serving: ${stats.modelLoadError}`);
  }
  const v = Number(stats.activeModelVersion);
  return v > 0 ? h('span', { class: 'good' }, `serving model version ${v}`)
    : h('span', { class: 'bad' }, 'not serving: no model trained yet');
}

function trainingState(t) {
  if (!t || !t.running) return 'idle';
  const rmse = t.validationRmse > 0 ? `, validation RMSE ${num(t.validationRmse, 4)}` : '';
  return `running: ${t.rbm || 'preparing'} epoch ${t.epoch} of ${t.maxEpochs}${rmse}, ` +
    `${num(t.elapsedSeconds, 0)} s`;
}

function draw(box, stats, list) {
  const db = Number(stats.databaseMaxBytes) > 0
    ? `${bytes(stats.databaseFileBytes)} of ${bytes(stats.databaseMaxBytes)}` : bytes(stats.databaseBytes);
  const kept = (list.models || []).filter((m) => m.active || m.pinned);
  box.replaceChildren(
    h('p', { id: 'serving' }, serving(stats)),
    cards([
      ['users', count(stats.users), 'stat-users'],
      ['items', count(stats.items), 'stat-items'],
      ['ratings', count(stats.ratings), 'stat-ratings'],
      ['model versions', count(stats.modelVersions), 'stat-versions'],
      ['online updates', count(stats.onlineUpdates)],
      ['database', db],
      ['leader', stats.leader ? 'this server' : stats.leaderAddress || 'another server'],
    ]),
    h('h3', {}, 'Training'),
    h('p', { id: 'training-state' }, trainingState(stats.training), ' ',
      h('a', { href: '#/training' }, 'training page')),
    h('h3', {}, 'Active and pinned versions'),
    kept.length === 0 ? h('p', { class: 'note' }, 'none')
      : table(['version', 'kind', 'created (UTC)', 'validation RMSE', 'state'],
        kept.map((m) => h('tr', {},
          h('td', {}, String(m.version)), h('td', {}, m.kind), h('td', {}, when(m.createdUnixMs)),
          h('td', {}, num(m.validationRmse, 4)),
          h('td', {}, [m.active ? 'active' : '', m.pinned ? 'pinned' : ''].filter(Boolean).join(', '))))),
    h('p', { class: 'note' }, `updated ${new Date().toLocaleTimeString()}`));
}

export async function render(main, ctx) {
  main.append(h('h2', {}, 'Overview'));
  const box = h('div', { id: 'overview' });
  main.append(box);
  const refresh = async () => {
    try {
      const [stats, list] = await Promise.all([get('/v1/stats'), get('/v1/models')]);
      draw(box, stats, list);
    } catch (e) {
      box.replaceChildren(errorBox(e));
    }
  };
  await refresh();
  ctx.every(5000, refresh);
}
