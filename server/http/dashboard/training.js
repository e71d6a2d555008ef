// Training: starts a Train job (admin; POST /v1/train, its progress as
// server-sent events) and draws validation RMSE (user and item RBMs) and
// validation NDCG@10 (the rated RBM) per epoch as the events come. A job
// started elsewhere (the CLI, another tab) has no event stream to join:
// it is followed by polling GET /v1/stats every 2 s, which carries the
// latest epoch's validation RMSE only (no NDCG, and an epoch that ends
// between two polls is missed).

import { get, post, stream } from './api.js';
import { lineChart } from './chart.js';
import { errorBox, h, num } from './dom.js';

// The job last followed; kept while the tab lives, so the page can be left
// and opened again.
const job = { source: '', running: false, last: null, series: {}, error: null };
let view = null;

function upsert(points, x, y) {
  const lastPoint = points[points.length - 1];
  if (lastPoint && lastPoint[0] === x) {
    lastPoint[1] = y;
  } else {
    points.push([x, y]);
  }
}

function reset(source) {
  Object.assign(job, { source, running: true, last: null, series: {}, error: null });
}

function add(p) {
  job.last = p;
  if (p.state === 'RUNNING' && p.rbm && p.epoch > 0) {
    const se = job.series[p.rbm] || (job.series[p.rbm] = { rmse: [], ndcg: [] });
    if (p.validationRmse > 0) upsert(se.rmse, p.epoch, p.validationRmse);
    if (p.validationNdcg > 0) upsert(se.ndcg, p.epoch, p.validationNdcg);
  }
  if (['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(p.state)) job.running = false;
  redraw();
}

function statusText() {
  const p = job.last;
  if (!p) return job.running ? 'starting...' : 'no job followed in this tab yet';
  const parts = [p.state];
  if (p.state === 'RUNNING') {
    const model = p.rbm === 'factorisation' ? 'matrix factorisation' : `${p.rbm} RBM`;
    parts.push(`${model} epoch ${p.epoch} of ${p.maxEpochs}`);
    if (p.trainRmse > 0) parts.push(`train RMSE ${num(p.trainRmse, 4)}`);
    if (p.validationRmse > 0) parts.push(`validation RMSE ${num(p.validationRmse, 4)}`);
    if (p.etaSeconds > 0) parts.push(`about ${num(p.etaSeconds, 0)} s left`);
  }
  if (p.state === 'SUCCEEDED') {
    parts.push(`model version ${p.modelVersion}${p.activated ? ' (active)' : ' (not activated)'}`);
    if (p.validationRmse > 0) parts.push(`validation RMSE ${num(p.validationRmse, 4)}`);
  }
  if (p.message) parts.push(p.message);
  if (p.elapsedSeconds > 0) parts.push(`${num(p.elapsedSeconds, 1)} s`);
  return parts.join(' · ');
}

function series(key) {
  return Object.entries(job.series)
    .filter(([, se]) => se[key].length > 0)
    .map(([name, se]) => ({ name, points: se[key] }));
}

function redraw() {
  if (!view || !view.status.isConnected) return;
  view.status.textContent = statusText();
  view.status.dataset.state = job.last ? job.last.state : '';
  view.source.textContent = job.source === 'polled'
    ? 'This job was started elsewhere: it is followed by polling GET /v1/stats every 2 s ' +
      '(the latest epoch only; no NDCG; epochs that end between polls are missed).' : '';
  view.error.replaceChildren(job.error ? errorBox(job.error) : '');
  view.rmse.replaceChildren(lineChart(series('rmse'), {
    xLabel: 'epoch', yLabel: 'validation RMSE', integerX: true,
    empty: 'validation RMSE per epoch appears here' }));
  view.ndcg.replaceChildren(lineChart(series('ndcg'), {
    xLabel: 'epoch', yLabel: 'validation NDCG@10', integerX: true,
    height: 260, empty: 'NDCG@10 per epoch of the rated RBM (it trains last) appears here' }));
  if (view.start) view.start.disabled = job.running;
}

function optionalInt(form, name) {
  const v = form.elements[name].value.trim();
  return v === '' ? undefined : Number.parseInt(v, 10);
}

async function startJob(form) {
  const options = {};
  for (const name of ['epochs', 'hidden']) {
    const v = optionalInt(form, name);
    if (v !== undefined) options[name] = v;
  }
  const body = { options, activation: form.elements.activation.value };
  reset('here');
  redraw();
  try {
    await stream('/v1/train', body, add);
  } catch (e) {
    job.error = e;
  }
  job.running = false;
  redraw();
}

function controls(ctx) {
  if (!ctx.isAdmin) {
    return h('p', { class: 'note' }, 'Starting and cancelling training needs an admin token.');
  }
  const form = h('form', { id: 'train-form', class: 'inline admin-action' },
    h('label', {}, 'epochs ', h('input', { name: 'epochs', type: 'number', min: 1, max: 1000,
      placeholder: 'default', size: 6 })),
    h('label', {}, 'hidden units ', h('input', { name: 'hidden', type: 'number', min: 1,
      placeholder: 'default', size: 6 })),
    h('label', {}, 'activate ', h('select', { name: 'activation' },
      h('option', { value: 'ACTIVATION_POLICY_UNSPECIFIED' }, 'server default'),
      h('option', { value: 'ACTIVATE_IF_BETTER' }, 'if better'),
      h('option', { value: 'ACTIVATE_ALWAYS' }, 'always'),
      h('option', { value: 'ACTIVATE_NEVER' }, 'never'))),
    h('button', { id: 'train-start', type: 'submit' }, 'Start training'),
    h('button', { id: 'train-cancel', type: 'button', class: 'secondary',
      onclick: () => post('/v1/train:cancel').catch((e) => { job.error = e; redraw(); }) },
    'Cancel'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    startJob(form);
  });
  return form;
}

// Follows a job started elsewhere through GET /v1/stats.
async function poll() {
  const t = (await get('/v1/stats')).training || {};
  if (t.running) {
    if (job.source !== 'polled' || !job.running) reset('polled');
    add({ state: 'RUNNING', rbm: t.rbm, epoch: t.epoch, maxEpochs: t.maxEpochs,
      validationRmse: t.validationRmse, elapsedSeconds: t.elapsedSeconds });
  } else if (job.source === 'polled' && job.running) {
    job.running = false;
    job.last = { state: 'finished', message: 'the result is on the Models page' };
    redraw();
  }
}

export async function render(main, ctx) {
  main.append(h('h2', {}, 'Training'));
  view = {
    start: null,
    status: h('p', { id: 'train-status', class: 'status' }),
    source: h('p', { class: 'note', id: 'train-source' }),
    error: h('div'),
    rmse: h('div', { id: 'chart-rmse', class: 'chart-box' }),
    ndcg: h('div', { id: 'chart-ndcg', class: 'chart-box' }),
  };
  const form = controls(ctx);
  view.start = form.querySelector ? form.querySelector('#train-start') : null;
  main.append(form, view.status, view.source, view.error, h('div', { class: 'charts' },
    h('section', {}, h('h3', {}, 'Validation RMSE per epoch (lower is better)'), view.rmse),
    h('section', {}, h('h3', {}, 'Validation NDCG@10 per epoch (higher is better)'), view.ndcg)));
  redraw();
  const followedHere = () => job.source === 'here' && job.running;
  const tick = () => poll().catch((e) => { job.error = e; redraw(); });
  if (!followedHere()) await tick();
  ctx.every(2000, () => {
    if (!followedHere()) tick();
  });
}
