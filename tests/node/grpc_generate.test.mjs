// cognitora.v1.Router/Generate with the npm gRPC client (@grpc/grpc-js + @grpc/proto-loader,
// pinned in package.json) against cgn-router processes in front of cgn-engine-sim: streamed,
// buffered, tool-call deltas, cancel (the engine counts the abort), keys, admission
// (RESOURCE_EXHAUSTED with retry-after), health and mutual TLS. Run by ./run.sh.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import { binDir, start, stopAll, waitHealthy } from './processes.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const protoDir = join(here, '../../proto');
const KEY = 'sk-cognitora-grpc-key-0123456789';
const MODEL = 'sim-model';
const dir = mkdtempSync(join(tmpdir(), 'cgn-grpc-'));

const def = protoLoader.loadSync(['cognitora/v1/router.proto', 'grpc/health/v1/health.proto'],
  { includeDirs: [protoDir], keepCase: true, longs: Number, enums: String, defaults: true });
const pkg = grpc.loadPackageDefinition(def);

let simBase;     // the engine simulator's HTTP base (its /metrics counts aborts)
let plain;       // { target, base }: keys, max_queue = 1, plaintext
let mutual;      // { target }: mutual TLS
let certs;

// A port nothing listens on right now (the router is told to listen there).
function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function openssl(...args) {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

// A CA and a leaf it signs for 127.0.0.1 (serverAuth and clientAuth), as PEM files in `dir`.
function makeCa(name) {
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
    '-subj', `/CN=${name}`, '-keyout', `${name}-ca-key.pem`, '-out', `${name}-ca.pem`);
}
function issue(ca, name) {
  writeFileSync(join(dir, `${name}.ext`),
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=${name}`,
    '-keyout', `${name}-key.pem`, '-out', `${name}.csr`);
  openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}-ca.pem`, '-CAkey', `${ca}-ca-key.pem`,
    '-CAcreateserial', '-days', '1', '-extfile', `${name}.ext`, '-out', `${name}.pem`);
  return { cert: join(dir, `${name}.pem`), key: join(dir, `${name}-key.pem`) };
}

async function startRouter(name, simPort, grpcSection, extraArgs = []) {
  const grpcPort = await freePort();
  const config = join(dir, `${name}.toml`);
  writeFileSync(config, `[router.grpc]\nlisten = "127.0.0.1:${grpcPort}"\n${grpcSection}\n`);
  const pf = join(dir, `${name}.port`);
  const args = ['--config', config, '--listen', '127.0.0.1:0', '--port-file', pf, '--poll-interval-ms', '100',
    '--node', `http://127.0.0.1:${simPort}`, ...extraArgs];
  const base = `http://127.0.0.1:${await start('cgn-router', args, pf)}`;
  await waitHealthy(base, 1);
  return { base, target: `127.0.0.1:${grpcPort}` };
}

before(async () => {
  assert.ok(existsSync(join(binDir, 'cgn-router')), `cgn-router not built in ${binDir}`);
  assert.ok(existsSync(join(binDir, 'cgn-engine-sim')), `cgn-engine-sim not built in ${binDir}`);
  const spf = join(dir, 'sim.port');
  // 20x real time: a long answer still streams for seconds, so a cancel lands mid-stream.
  const simPort = await start('cgn-engine-sim', ['--flavor', 'vllm', '--model', MODEL, '--time-scale', '0.05',
    '--port', '0', '--port-file', spf], spf);
  simBase = `http://127.0.0.1:${simPort}`;
  writeFileSync(join(dir, 'keys'), `${KEY}\n`);
  plain = await startRouter('plain', simPort, '[router.admission]\nmax_queue = 1',
    ['--api-keys-file', join(dir, 'keys')]);
  makeCa('good');
  makeCa('other');
  certs = { server: issue('good', 'server'), client: issue('good', 'client'), stranger: issue('other', 'stranger') };
  mutual = await startRouter('mutual', simPort,
    `tls_cert = "${certs.server.cert}"\ntls_key = "${certs.server.key}"\ntls_client_ca = "${join(dir, 'good-ca.pem')}"`);
});

after(() => {
  stopAll();
  rmSync(dir, { recursive: true, force: true });
});

// Over TLS the certificate is checked for "localhost" (a name: an IP is no TLS server name).
const routerClient = (target, creds = grpc.credentials.createInsecure()) =>
  new pkg.cognitora.v1.Router(target, creds, { 'grpc.ssl_target_name_override': 'localhost' });

function auth(key = KEY) {
  const md = new grpc.Metadata();
  if (key) md.set('authorization', `Bearer ${key}`);
  return md;
}

const chat = (content, extra = {}) => ({ model: MODEL, messages: [{ role: 'user', content }], ...extra });

// Runs one Generate to the end: { messages, error }.
function generate(client, req, md = auth()) {
  return new Promise((resolve) => {
    const messages = [];
    const call = client.Generate(req, md, { deadline: Date.now() + 20000 });
    call.on('data', (m) => messages.push(m));
    call.on('error', (error) => resolve({ messages, error }));
    call.on('end', () => resolve({ messages, error: null }));
  });
}

async function simAborts() {
  const page = await (await fetch(`${simBase}/metrics`)).text();
  const line = page.split('\n').find((l) => l.startsWith('vllm:request_success_total{') && l.includes('finished_reason="abort"'));
  assert.ok(line, 'the simulator exports no abort counter');
  return Number(line.split(' ').pop());
}

async function until(pred, what) {
  const deadline = Date.now() + 20000;
  while (Date.now() < deadline) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`timed out waiting for ${what}`);
}

test('streamed Generate: text deltas, finish reason, usage and the serving node', async () => {
  const { messages, error } = await generate(routerClient(plain.target), chat('hello there', { max_tokens: 8 }));
  assert.equal(error, null, error?.details);
  assert.ok(messages.length >= 3, `only ${messages.length} messages`);
  assert.match(messages[0].node, /^127\.0\.0\.1:\d+$/);
  assert.ok(messages[0].request_id);
  const text = messages.map((m) => m.text).join('');
  assert.ok(text.length > 0);
  assert.ok(messages.some((m) => m.finish_reason === 'length' || m.finish_reason === 'stop'));
  const usage = messages.at(-1).usage;
  assert.equal(usage.completion_tokens, 8);
  assert.equal(usage.total_tokens, usage.prompt_tokens + 8);
});

test('buffered Generate is one message with what a streamed one assembles', async () => {
  const req = chat('same prompt', { max_tokens: 6, seed: 7, temperature: 0 });
  const buffered = await generate(routerClient(plain.target), { ...req, buffered: true });
  assert.equal(buffered.error, null, buffered.error?.details);
  assert.equal(buffered.messages.length, 1);
  const streamed = await generate(routerClient(plain.target), req);
  assert.equal(streamed.messages.map((m) => m.text).join(''), buffered.messages[0].text);
});

test('tools through extensions_json come back as tool-call deltas', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: {
    type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const { messages, error } = await generate(routerClient(plain.target), chat('weather in Paris?', {
    extensions_json: JSON.stringify({ tools, tool_choice: 'required' }) }));
  assert.equal(error, null, error?.details);
  const deltas = messages.flatMap((m) => m.tool_calls);
  assert.ok(deltas.length > 1, `${deltas.length} tool-call deltas`);
  assert.equal(deltas[0].name, 'get_weather');
  assert.ok(deltas[0].id);
  const args = JSON.parse(deltas.map((d) => d.arguments).join(''));
  assert.equal(typeof args.city, 'string');
  assert.ok(messages.some((m) => m.finish_reason === 'tool_calls'));
});

test('cancelling mid-stream aborts the engine request', async () => {
  const before = await simAborts();
  const call = routerClient(plain.target).Generate(chat('a long story', { max_tokens: 4000 }), auth());
  const got = await new Promise((resolve, reject) => {
    let n = 0;
    call.on('data', () => { n += 1; if (n === 3) { call.cancel(); } });
    call.on('error', (e) => resolve({ n, code: e.code }));
    call.on('end', () => reject(new Error('the stream ended before the cancel')));
  });
  assert.equal(got.code, grpc.status.CANCELLED);
  await until(async () => (await simAborts()) === before + 1, 'the simulator to count the abort');
});

test('keys: none or a wrong one is UNAUTHENTICATED', async () => {
  const none = await generate(routerClient(plain.target), chat('x'), auth(''));
  assert.equal(none.error?.code, grpc.status.UNAUTHENTICATED);
  const wrong = await generate(routerClient(plain.target), chat('x'), auth('sk-wrong-key-0123456789abcdef'));
  assert.equal(wrong.error?.code, grpc.status.UNAUTHENTICATED);
});

test('admission over max_queue is RESOURCE_EXHAUSTED with the router\'s message and retry-after', async () => {
  const client = routerClient(plain.target);
  const holder = client.Generate(chat('hold the slot', { max_tokens: 4000 }), auth());
  holder.on('error', () => {});
  await new Promise((resolve) => holder.once('data', resolve));
  const refused = await generate(client, chat('one more'));
  holder.cancel();
  assert.equal(refused.error?.code, grpc.status.RESOURCE_EXHAUSTED, refused.error?.details);
  assert.match(refused.error.details, /in flight for model 'sim-model'/);
  // HTTP's Retry-After as trailing metadata (seconds).
  assert.match(String(refused.error.metadata?.get('retry-after')[0] ?? ''), /^[1-9][0-9]*$/);
});

test('health answers SERVING', async () => {
  const health = new pkg.grpc.health.v1.Health(plain.target, grpc.credentials.createInsecure());
  const res = await new Promise((resolve, reject) =>
    health.Check({ service: '' }, (e, r) => (e ? reject(e) : resolve(r))));
  assert.equal(res.status, 'SERVING');
});

test('mutual TLS: the CA\'s client is served; no certificate or another CA\'s is refused', async () => {
  const ca = readFileSync(join(dir, 'good-ca.pem'));
  const creds = (leaf) => grpc.credentials.createSsl(ca, leaf ? readFileSync(leaf.key) : null,
    leaf ? readFileSync(leaf.cert) : null);
  const ok = await generate(routerClient(mutual.target, creds(certs.client)), chat('hi', { max_tokens: 4 }), auth(''));
  assert.equal(ok.error, null, ok.error?.details);
  assert.ok(ok.messages.map((m) => m.text).join('').length > 0);
  for (const leaf of [null, certs.stranger]) {
    const r = await generate(routerClient(mutual.target, creds(leaf)), chat('hi'), auth(''));
    assert.equal(r.error?.code, grpc.status.UNAVAILABLE, `${leaf ? 'a stranger' : 'no certificate'} was served`);
  }
});
