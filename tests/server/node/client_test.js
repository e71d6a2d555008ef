'use strict';
// A client in another ecosystem: Node.js with @grpc/grpc-js and
// @grpc/proto-loader (the npm packages most Node services use; versions
// pinned in package-lock.json beside this file) against rbmrec-server, the
// .proto files loaded at run time. Starts a server on a free loopback port
// with a temporary database and checks: health (liveness SERVING,
// rbmrec.v1.Rbmrec NOT_SERVING before a model), an AddRatings client stream
// and PutItems (a catalogue with categories), the Train server stream to
// SUCCEEDED, PredictRatings (distributions that sum to 1), Recommend with
// categories, required categories, exclusions and an offset, SimilarItems,
// GetItem and GetUserRatings, the RecommendAll stream (listed users in order, every stored user in id
// order, the cold-start fallback), and error statuses with their messages
// (NOT_FOUND naming the user; RESOURCE_EXHAUSTED with the
// rbmrec-error-reason trailer LIMIT_EXCEEDED); then SIGTERM and exit code 0.
//
// usage: node client_test.js --server-bin build/bin/rbmrec-server
//                            --proto-dir REPOSITORY_ROOT
// (run_node_test.sh installs the packages and runs it under ctest.)

const assert = require('node:assert/strict');
const {spawn} = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

function flag(name) {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) {
    throw new Error(`missing ${name} (usage in the file comment)`);
  }
  return process.argv[i + 1];
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const {port} = s.address();
      s.close(() => resolve(port));
    });
  });
}

const deadline = (seconds) => ({deadline: Date.now() + seconds * 1000});

// A unary call as a promise.
function unary(client, method, request, seconds = 10) {
  return new Promise((resolve, reject) => {
    client[method](request, deadline(seconds), (err, response) =>
      err ? reject(err) : resolve(response));
  });
}

// Every message of a server stream.
function collect(call) {
  return new Promise((resolve, reject) => {
    const messages = [];
    call.on('data', (m) => messages.push(m));
    call.on('error', reject);
    call.on('end', () => resolve(messages));
  });
}

// The error of a call that must fail.
async function failure(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('the call did not fail');
}

async function main() {
  const protoDir = path.resolve(flag('--proto-dir'));
  const serverBin = path.resolve(flag('--server-bin'));
  const definition = protoLoader.loadSync(
      ['proto/rbmrec.proto', 'proto/health.proto'], {
        includeDirs: [protoDir],
        keepCase: true,  // proto field names (user_id), as in the .proto
        longs: String,
        enums: String,
        defaults: true,
      });
  const pkg = grpc.loadPackageDefinition(definition);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rbmrec-node-'));
  const addr = `127.0.0.1:${await freePort()}`;
  const log = fs.openSync(path.join(tmp, 'server.log'), 'w');
  const server = spawn(serverBin, [
    '--listen', addr, '--db', path.join(tmp, 'node.db'), '--hidden', '8',
    '--epochs', '10', '--train-threads', '1'], {stdio: ['ignore', log, log]});
  const exited = new Promise((resolve) => server.on('exit', (code) => resolve(code)));
  let ok = false;
  try {
    const credentials = grpc.credentials.createInsecure();
    const health = new pkg.grpc.health.v1.Health(addr, credentials);
    const rbmrec = new pkg.rbmrec.v1.Rbmrec(addr, credentials);
    await new Promise((resolve, reject) => rbmrec.waitForReady(
        Date.now() + 15000, (err) => err ? reject(err) : resolve()));
    const check = async (service) =>
      (await unary(health, 'Check', {service})).status;
    assert.equal(await check(''), 'SERVING');
    assert.equal(await check('rbmrec.v1.Rbmrec'), 'NOT_SERVING');
    console.log('health: SERVING (rbmrec.v1.Rbmrec: no model yet)');

    // AddRatings: a client stream of 40 batches, one per user; users of
    // even and odd number like the items of their parity.
    const added = await new Promise((resolve, reject) => {
      const call = rbmrec.AddRatings(deadline(30),
          (err, response) => err ? reject(err) : resolve(response));
      for (let u = 0; u < 40; ++u) {
        const ratings = [];
        for (let i = 0; i < 30; ++i) {
          if ((u * 7 + i * 3) % 4 === 0) continue;
          ratings.push({user_id: `n${u}`, item_id: `m${i}`,
            rating: (i % 2) === (u % 2) ? 5 : 1});
        }
        // A view (no rating) of an item n0 did not rate, its kind by name.
        if (u === 0) ratings.push({user_id: 'n0', item_id: 'm0', kind: 'VIEW'});
        call.write({ratings});
      }
      call.end();
    });
    assert.equal(added.batches, '40');
    assert.equal(added.rejected, '0');
    assert.equal(added.views, '1');
    console.log(`AddRatings stream: ${added.accepted} ratings in 40 batches`);
    const items = [];
    for (let i = 0; i < 30; ++i) {
      items.push({item_id: `m${i}`, title: `Movie ${i}`,
        categories: i % 2 === 0 ? ['even', 'all'] : ['all']});
    }
    assert.equal((await unary(rbmrec, 'PutItems', {items})).stored, '30');

    const progress = await collect(rbmrec.Train({}, deadline(120)));
    const last = progress[progress.length - 1];
    assert.equal(last.state, 'SUCCEEDED', JSON.stringify(last));
    console.log(`Train stream: ${progress.length} messages, model ` +
                `v${last.model_version}`);
    const until = Date.now() + 10000;
    while (await check('rbmrec.v1.Rbmrec') !== 'SERVING') {
      assert.ok(Date.now() < until, 'rbmrec.v1.Rbmrec not SERVING');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }

    const predicted = await unary(rbmrec, 'PredictRatings',
        {user_id: 'n0', item_ids: ['m0', 'm1']});
    assert.ok(Number(predicted.model_version) > 0);
    assert.equal(predicted.predictions.length, 2);
    for (const p of predicted.predictions) {
      assert.equal(p.probabilities.length, predicted.scale.values.length);
      const sum = p.probabilities.reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(sum - 1) < 1e-3, `probabilities sum to ${sum}`);
      assert.ok(p.expected_rating >= predicted.scale.min &&
                p.expected_rating <= predicted.scale.max);
    }
    console.log('PredictRatings n0: ' + predicted.predictions.map(
        (p) => `${p.item_id} ${p.expected_rating.toFixed(3)}`).join(', '));

    // Recommend with filters: "even" items only, never m4, page 2.
    const filtered = await unary(rbmrec, 'Recommend', {
      user_id: 'n0', n: 3, offset: 1, categories: ['even'],
      required_categories: ['all'], exclude_item_ids: ['m4']});
    assert.equal(filtered.recommendations.length, 3);
    for (const r of filtered.recommendations) {
      assert.equal(Number(r.item_id.slice(1)) % 2, 0, r.item_id);
      assert.notEqual(r.item_id, 'm4');
    }
    assert.deepEqual(filtered.recommendations.map((r) => r.rank), [2, 3, 4]);
    console.log('Recommend n0, even, not m4, offset 1: ' +
                filtered.recommendations.map((r) => r.item_id).join(' '));

    const similar = await unary(rbmrec, 'SimilarItems',
        {item_ids: ['m0'], n: 3});
    assert.ok(similar.items.length > 0 && similar.items.length <= 3);
    assert.ok(similar.items.every((s) => s.item_id !== 'm0'));
    assert.deepEqual(similar.items.map((s) => s.rank),
        similar.items.map((_, i) => i + 1));
    console.log('SimilarItems m0: ' +
                similar.items.map((s) => s.item_id).join(' '));

    // GetItem: the row and the served model's ratings histogram (int64
    // as strings); GetUserRatings: a page of n0's stored ratings.
    const item = await unary(rbmrec, 'GetItem', {item_id: 'm0'});
    assert.equal(item.item.item_id, 'm0');
    assert.equal(item.rating_counts.length, item.scale.values.length);
    const counted = item.rating_counts.reduce((a, c) => a + Number(c), 0);
    assert.ok(counted > 0);
    assert.equal(Number(item.ratings), counted);
    const page = await unary(rbmrec, 'GetUserRatings',
        {user_id: 'n0', offset: 1, limit: 2});
    assert.equal(page.ratings.length, 2);
    assert.ok(Number(page.total) >= 3);
    console.log(`GetItem m0: ${counted} ratings; GetUserRatings n0: ` +
                `${page.total} stored`);

    // RecommendAll: listed users in request order (one without ratings:
    // the cold-start fallback), then every stored user in id order.
    const listed = ['n5', 'nobody-at-all', 'n0'];
    const listedUsers = (await collect(rbmrec.RecommendAll(
        {template: {n: 3}, user_ids: listed}, deadline(30))))
        .flatMap((m) => m.users);
    assert.deepEqual(listedUsers.map((u) => u.user_id), listed);
    assert.equal(listedUsers[1].response.fallback, 'FALLBACK_POPULAR');
    assert.equal(listedUsers[2].response.fallback, 'FALLBACK_NONE');
    const own = await unary(rbmrec, 'Recommend', {user_id: 'n0', n: 3});
    assert.deepEqual(listedUsers[2].response.recommendations.map((r) => r.item_id),
        own.recommendations.map((r) => r.item_id));
    const every = (await collect(rbmrec.RecommendAll(
        {template: {n: 2}}, deadline(30))))
        .flatMap((m) => m.users.map((u) => u.user_id));
    const ids = Array.from({length: 40}, (_, u) => `n${u}`).sort();
    assert.deepEqual(every, ids);
    console.log(`RecommendAll: ${every.length} users in id order; ` +
                'an unknown user gets the cold-start fallback');

    // Errors: the status code and the message reach a Node client.
    const unknown = await failure(unary(rbmrec, 'PredictRatings',
        {user_id: 'nobody-at-all', item_ids: ['m0']}));
    assert.equal(unknown.code, grpc.status.NOT_FOUND);
    assert.ok(unknown.details.includes('nobody-at-all'), unknown.details);
    const huge = await failure(unary(rbmrec, 'Recommend',
        {user_id: 'n0', n: 1000000}));
    assert.equal(huge.code, grpc.status.RESOURCE_EXHAUSTED, huge.details);
    assert.deepEqual(huge.metadata.get('rbmrec-error-reason'),
        ['LIMIT_EXCEEDED']);
    console.log(`errors: NOT_FOUND (${unknown.details}); ` +
                `RESOURCE_EXHAUSTED LIMIT_EXCEEDED (${huge.details})`);

    health.close();
    rbmrec.close();
    server.kill('SIGTERM');
    const code = await exited;
    assert.equal(code, 0, `server exit code ${code} after SIGTERM`);
    ok = true;
    console.log('PASS');
  } finally {
    if (!ok) {
      server.kill('SIGKILL');
      process.stderr.write(fs.readFileSync(path.join(tmp, 'server.log')));
    }
    fs.rmSync(tmp, {recursive: true, force: true});
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
