// The official `openai` npm client (pinned in package.json) driving cgn-router in front of two
// cgn-fake-engine processes: chat (streaming and not), completions, embeddings, models, and the
// error cases, as a client nobody here wrote sees them. Run by ./run.sh.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { binDir, start, stopAll, waitHealthy } from './processes.mjs';

const KEY = 'sk-cognitora-test-key-0123456789';
const dir = mkdtempSync(join(tmpdir(), 'cgn-node-'));

let router;
let client;
let base;

before(async () => {
  assert.ok(existsSync(join(binDir, 'cgn-router')), `cgn-router not built in ${binDir}`);
  const enginePorts = [];
  for (const name of ['e0', 'e1']) {
    const pf = join(dir, `${name}.port`);
    enginePorts.push(await start('cgn-fake-engine', ['--name', name, '--port-file', pf], pf));
  }
  writeFileSync(join(dir, 'keys'), `# test key\n${KEY}\n`);
  const pf = join(dir, 'router.port');
  const args = ['--listen', '127.0.0.1:0', '--port-file', pf, '--api-keys-file', join(dir, 'keys'),
    '--poll-interval-ms', '100'];
  for (const p of enginePorts) args.push('--node', `http://127.0.0.1:${p}`);
  const port = await start('cgn-router', args, pf);
  base = `http://127.0.0.1:${port}`;
  client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0, timeout: 10000 });
  await waitHealthy(base, 2);  // both engines passed a health check
});

after(() => {
  stopAll();
  rmSync(dir, { recursive: true, force: true });
});

test('models.list is the union of the nodes\' models', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, ['test-model']);
});

test('chat completion (buffered) names the serving node', async () => {
  const { data, response } = await client.chat.completions
    .create({ model: 'test-model', messages: [{ role: 'user', content: 'hello' }] })
    .withResponse();
  assert.equal(data.choices[0].message.content, 'tok0 tok1 tok2 tok3 ');
  assert.equal(data.usage.completion_tokens, 4);
  assert.match(response.headers.get('x-cgn-node'), /^127\.0\.0\.1:\d+$/);
  assert.ok(response.headers.get('x-request-id'));
});

test('chat completion (streaming) delivers every delta and usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'test-model',
    messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'stream please' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) text += chunk.choices[0].delta.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, 'tok0 tok1 tok2 tok3 ');
  assert.equal(usage.total_tokens, 11);
});

test('completions (buffered and streaming)', async () => {
  const c = await client.completions.create({ model: 'test-model', prompt: 'once upon a time' });
  assert.equal(c.choices[0].text, 'tok0 tok1 tok2 tok3 ');
  const s = await client.completions.create({ model: 'test-model', prompt: 'again', stream: true });
  let text = '';
  for await (const chunk of s) text += chunk.choices[0].text;
  assert.equal(text, 'tok0 tok1 tok2 tok3 ');
});

test('embeddings', async () => {
  const e = await client.embeddings.create({ model: 'test-model', input: 'embed me', encoding_format: 'float' });
  assert.deepEqual(e.data[0].embedding, [0.25, -0.5, 1.0]);
});

test('unknown model is a NotFoundError with code model_not_found', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404 && err.code === 'model_not_found' &&
      err.param === 'model',
  );
});

test('empty messages is a BadRequestError naming the parameter', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'test-model', messages: [] }),
    (err) => err instanceof OpenAI.BadRequestError && err.status === 400 && err.param === 'messages',
  );
});

test('a wrong API key is an AuthenticationError', async () => {
  const bad = new OpenAI({ apiKey: 'sk-wrong-key-0123456789abcdef', baseURL: `${base}/v1`, maxRetries: 0 });
  await assert.rejects(bad.models.list(), (err) => err instanceof OpenAI.AuthenticationError && err.status === 401);
  await assert.rejects(
    bad.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'x' }] }),
    (err) => err instanceof OpenAI.AuthenticationError,
  );
});

test('X-CGN-Deadline-Ms passes through the client; a malformed one is a BadRequestError', async () => {
  // Every node idle: a generous deadline passes; the header goes through the client untouched.
  const ok = await client.chat.completions.create(
    { model: 'test-model', messages: [{ role: 'user', content: 'x' }] },
    { headers: { 'X-CGN-Deadline-Ms': '60000' } },
  );
  assert.equal(ok.choices.length, 1);
  await assert.rejects(
    client.chat.completions.create(
      { model: 'test-model', messages: [{ role: 'user', content: 'x' }] },
      { headers: { 'X-CGN-Deadline-Ms': 'soon' } },
    ),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'X-CGN-Deadline-Ms',
  );
});
