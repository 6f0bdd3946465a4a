// The official `openai` npm client's Responses API (client.responses.create) driving cgn-router in
// front of three cgn-engine-sim nodes (vLLM flavour, which serves /v1/responses as vLLM does:
// docs/sim.md "Responses API"): a buffered response, a streamed one (its events in vLLM's order,
// ending in the buffered response), a two-turn conversation with previous_response_id that lands
// on the node holding the first turn and reuses its KV, and the errors for ids nobody holds.
// Run by ./run.sh.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { binDir, startSimCluster, stopAll, stopOne } from './processes.mjs';

const MODEL = 'sim-model';
const dir = mkdtempSync(join(tmpdir(), 'cgn-node-responses-'));
let base;
let client;
const simPorts = [];

before(async () => {
  assert.ok(existsSync(join(binDir, 'cgn-engine-sim')), `cgn-engine-sim not built in ${binDir}`);
  const cluster = await startSimCluster(dir, MODEL);
  base = cluster.base;
  simPorts.push(...cluster.simPorts);
  client = new OpenAI({ apiKey: 'unused', baseURL: `${base}/v1`, maxRetries: 0, timeout: 20000 });
});

after(() => {
  stopAll();
  rmSync(dir, { recursive: true, force: true });
});

// A prompt of distinct text, long enough to fill several KV blocks.
const longInput = (tag) => Array.from({ length: 60 }, (_, i) => `${tag} word${i}`).join(' ');
const textOf = (r) => r.output.filter((o) => o.type === 'message').flatMap((o) => o.content)
  .map((c) => c.text).join('');
// A response without what differs between two answers to the same request: ids, the clock, the
// prefix cache's hits (the second one finds the first's blocks) and the client's own output_text
// (it adds it to buffered responses only).
const comparable = (r) => ({ ...r, id: undefined, created_at: undefined, output_text: undefined,
  output: r.output.map((o) => ({ ...o, id: undefined })),
  usage: { ...r.usage, input_tokens_details: { ...r.usage.input_tokens_details, cached_tokens: undefined } } });

test('responses.create buffered: a response object with output text and usage', async () => {
  const { data: r, response } = await client.responses.create({
    model: MODEL, input: longInput('buffered'), instructions: 'be brief', max_output_tokens: 12, seed: 7,
    temperature: 0,
  }).withResponse();
  assert.match(response.headers.get('x-cgn-node'), /^127\.0\.0\.1:\d+$/);
  assert.match(r.id, /^resp_[0-9a-f]{32}$/);
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'completed');
  assert.equal(r.model, MODEL);
  assert.equal(r.instructions, 'be brief');
  assert.equal(r.output.length, 1);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].role, 'assistant');
  assert.equal(r.output[0].content[0].type, 'output_text');
  assert.ok(r.output_text.length > 0, 'the client derives output_text from the output items');
  assert.equal(r.output_text, textOf(r));
  assert.ok(r.usage.input_tokens > 60);
  assert.ok(r.usage.output_tokens >= 1 && r.usage.output_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(r.usage.input_tokens_details.cached_tokens, 0);
});

test('responses.create streamed: vLLM\'s events in order, ending in the buffered response', async () => {
  const body = { model: MODEL, input: longInput('streamed'), max_output_tokens: 10, seed: 3, temperature: 0 };
  const buffered = await client.responses.create(body);
  const stream = await client.responses.create({ ...body, stream: true });
  const events = [];
  for await (const e of stream) events.push(e);
  const types = events.map((e) => e.type);
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added',
    'response.content_part.added']);
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done',
    'response.output_item.done', 'response.completed']);
  assert.ok(types.slice(4, -4).every((t) => t === 'response.output_text.delta'));
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  assert.equal(events[0].response.status, 'in_progress');
  const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  const final = events.at(-1).response;
  assert.equal(final.status, 'completed');
  assert.equal(events.at(-4).text, deltas);
  assert.equal(textOf(final), deltas);
  assert.equal(final.id, events[0].response.id);
  assert.deepEqual(comparable(final), comparable(buffered));
  // Same prompt, routed to the node that has it: the stream found the buffered request's blocks.
  assert.ok(final.usage.input_tokens_details.cached_tokens > 0);
});

test('the client\'s responses.stream() accumulator cannot follow vLLM\'s content_index, as with vLLM', async () => {
  // vLLM advances content_index after every event (docs/sim.md); the helper indexes parts by it.
  await assert.rejects(client.responses.stream({ model: MODEL, input: 'hi', max_output_tokens: 4 }).finalResponse(),
    /missing content at index 1/);
});

test('two turns with previous_response_id: the second lands on the first\'s node and reuses its KV', async () => {
  const first = await client.responses.create({
    model: MODEL, input: longInput('conversation'), max_output_tokens: 8,
  }).withResponse();
  const node = first.response.headers.get('x-cgn-node');
  // A prompt the router has placed on another node: ranked on its own, a request starting with it
  // goes there (the router's digests of a follow-up are those of its `input` alone, so before the
  // first follow-up only that node holds them).
  let elsewhere;
  for (let i = 0; i < 30 && !elsewhere; i += 1) {
    const tag = `elsewhere-${i}`;
    const r = await client.responses.create({ model: MODEL, input: longInput(tag), max_output_tokens: 1 })
      .withResponse();
    if (r.response.headers.get('x-cgn-node') !== node) elsewhere = tag;
  }
  assert.ok(elsewhere, 'no prompt was ever routed away from the conversation\'s node');
  // Several follow-ups, each chained to the last and carrying that prompt: every one goes to the node
  // that holds the chain, not where the ranking would send it, and its prompt starts with everything
  // before it.
  let previous = first.data;
  for (let turn = 0; turn < 3; turn += 1) {
    const next = await client.responses.create({
      model: MODEL, input: `${longInput(elsewhere)} and then ${turn}?`, previous_response_id: previous.id,
      max_output_tokens: 8,
    }).withResponse();
    assert.equal(next.response.headers.get('x-cgn-node'), node, `turn ${turn + 2} left the node`);
    assert.equal(next.data.previous_response_id, previous.id);
    assert.ok(next.data.usage.input_tokens > previous.usage.input_tokens);
    assert.ok(next.data.usage.input_tokens_details.cached_tokens >= 48,
      `turn ${turn + 2} reused ${next.data.usage.input_tokens_details.cached_tokens} tokens`);
    previous = next.data;
  }
});

test('an id no engine holds is the engine\'s 404, relayed', async () => {
  await assert.rejects(client.responses.create({ model: MODEL, input: 'x', previous_response_id: 'resp_unknown' }),
    (e) => e instanceof OpenAI.NotFoundError && e.message.includes("Response with id 'resp_unknown' not found."));
  // A response made with store:false is not kept either.
  const unstored = await client.responses.create({ model: MODEL, input: 'keep nothing', store: false,
    max_output_tokens: 2 });
  await assert.rejects(client.responses.create({ model: MODEL, input: 'x', previous_response_id: unstored.id }),
    (e) => e instanceof OpenAI.NotFoundError);
});

test('tools are refused as vLLM refuses them without Harmony', async () => {
  await assert.rejects(client.responses.create({
    model: MODEL, input: 'weather?', tools: [{ type: 'function', name: 'get_weather', parameters: {} }],
  }), (e) => e instanceof OpenAI.BadRequestError && /Tool use is not supported in Responses API/.test(e.message));
});

// Last: it stops a node.
test('a follow-up whose node is gone gets the router\'s 400', async () => {
  const first = await client.responses.create({ model: MODEL, input: longInput('orphan'), max_output_tokens: 4 })
    .withResponse();
  const node = first.response.headers.get('x-cgn-node');
  await stopOne(Number(node.split(':')[1]));
  const res = await fetch(`${base}/v1/responses`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: MODEL, input: 'still there?', previous_response_id: first.data.id }),
  });
  assert.equal(res.status, 400);
  const err = (await res.json()).error;
  assert.equal(err.code, 'previous_response_not_found');
  assert.equal(err.param, 'previous_response_id');
  assert.ok(err.message.includes(first.data.id));
  await assert.rejects(client.responses.create({ model: MODEL, input: 'x', previous_response_id: first.data.id }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'previous_response_not_found');
});
