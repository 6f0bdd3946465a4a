// The official `openai` npm client, and raw HTTP, driving cgn-router in front of three
// cgn-engine-sim nodes (vLLM flavour): tool calls buffered and streamed, every tool_choice form,
// parallel calls, a tool-result round trip, an agent loop, json_schema output checked with ajv, the
// client's structured-output helper, logprobs and images. The simulator's tool rule (docs/sim.md): `required` calls
// every tool named in the last user message (else the first), `auto` does the same unless the last
// message is a tool result, then it answers in text. Run by ./run.sh.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { binDir, startSimCluster, stopAll } from './processes.mjs';

const MODEL = 'sim-model';
const dir = mkdtempSync(join(tmpdir(), 'cgn-node-tools-'));
let base;
let client;

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', minLength: 1 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};
const clock = {
  type: 'function',
  function: {
    name: 'get_time',
    parameters: {
      type: 'object',
      properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } },
      required: ['zone'],
      additionalProperties: false,
    },
  },
};
const tools = [weather, clock];
const ajv = new Ajv({ strict: false });
const validators = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

// Every tool call names a tool it was given, and its arguments validate against that tool's schema.
function checkCalls(calls) {
  for (const c of calls) {
    assert.equal(c.type, 'function');
    assert.match(c.id, /^chatcmpl-tool-/);
    const validate = validators[c.function.name];
    assert.ok(validate, `unknown tool ${c.function.name}`);
    assert.ok(validate(JSON.parse(c.function.arguments)), JSON.stringify(validate.errors));
  }
}

before(async () => {
  assert.ok(existsSync(join(binDir, 'cgn-engine-sim')), `cgn-engine-sim not built in ${binDir}`);
  ({ base } = await startSimCluster(dir, MODEL));
  client = new OpenAI({ apiKey: 'unused', baseURL: `${base}/v1`, maxRetries: 0, timeout: 20000 });
});

after(() => {
  stopAll();
  rmSync(dir, { recursive: true, force: true });
});

const ask = (content) => [{ role: 'user', content }];

test('tools buffered: tool_choice required calls the named tool with valid arguments', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, tools, tool_choice: 'required', messages: ask('what is the get_weather in Paris?'),
  });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(m.tool_calls.length, 1);
  assert.equal(m.tool_calls[0].function.name, 'get_weather');
  checkCalls(m.tool_calls);
});

test('tools streamed: the client stream helper assembles what the buffered answer holds', async () => {
  const body = { model: MODEL, tools, tool_choice: 'required', messages: ask('get_weather and get_time') };
  const buffered = await client.chat.completions.create(body);
  const stream = client.chat.completions.stream(body);
  let fragments = 0;
  stream.on('chunk', (c) => { if (c.choices[0]?.delta?.tool_calls) fragments += 1; });
  const assembled = await stream.finalChatCompletion();
  assert.ok(fragments > 2, `only ${fragments} tool-call fragments`);
  const got = assembled.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]);
  const want = buffered.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]);
  assert.deepEqual(got, want);
  assert.equal(assembled.choices[0].finish_reason, 'tool_calls');
  checkCalls(assembled.choices[0].message.tool_calls);
});

test('every tool_choice form', async () => {
  const call = async (tool_choice, content = 'get_time please') => (await client.chat.completions.create({
    model: MODEL, tools, tool_choice, messages: ask(content), max_tokens: 16,
  })).choices[0];
  const none = await call('none');
  assert.equal(none.finish_reason === 'tool_calls', false);
  assert.ok(!none.message.tool_calls || none.message.tool_calls.length === 0);
  const auto = await call('auto');
  assert.deepEqual(auto.message.tool_calls.map((c) => c.function.name), ['get_time']);
  const required = await call('required', 'anything at all');
  assert.deepEqual(required.message.tool_calls.map((c) => c.function.name), ['get_weather']);  // the first tool
  const named = await call({ type: 'function', function: { name: 'get_weather' } });
  assert.deepEqual(named.message.tool_calls.map((c) => c.function.name), ['get_weather']);
  checkCalls([...auto.message.tool_calls, ...required.message.tool_calls, ...named.message.tool_calls]);
  // A named tool that was not passed is the engine's 400, relayed.
  await assert.rejects(call({ type: 'function', function: { name: 'nope' } }),
    (e) => e instanceof OpenAI.BadRequestError && /nope/.test(e.message));
});

test('parallel tool calls, and parallel_tool_calls false', async () => {
  const both = await client.chat.completions.create({
    model: MODEL, tools, messages: ask('get_weather in Rome and get_time in CET'),
  });
  assert.deepEqual(both.choices[0].message.tool_calls.map((c) => c.function.name), ['get_weather', 'get_time']);
  assert.notEqual(both.choices[0].message.tool_calls[0].id, both.choices[0].message.tool_calls[1].id);
  checkCalls(both.choices[0].message.tool_calls);
  const one = await client.chat.completions.create({
    model: MODEL, tools, parallel_tool_calls: false, messages: ask('get_weather in Rome and get_time in CET'),
  });
  assert.equal(one.choices[0].message.tool_calls.length, 1);
});

test('a tool-result round trip ends in a text answer', async () => {
  const first = await client.chat.completions.create({ model: MODEL, tools, messages: ask('get_weather in Oslo') });
  const call = first.choices[0].message.tool_calls[0];
  const second = await client.chat.completions.create({
    model: MODEL, tools,
    messages: [...ask('get_weather in Oslo'), first.choices[0].message,
      { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temp_c: 4 }) }],
  });
  assert.equal(second.choices[0].finish_reason, 'stop');
  assert.ok(second.choices[0].message.content.length > 0);
  assert.ok(!second.choices[0].message.tool_calls || second.choices[0].message.tool_calls.length === 0);
});

test('an agent loop: the model calls tools, gets their results, answers (streamed turns)', async () => {
  const impl = { get_weather: ({ city }) => ({ city, temp_c: 21 }), get_time: ({ zone }) => ({ zone, time: '12:00' }) };
  const messages = ask('get_weather in Lima, then get_time');
  const executed = [];
  for (let turn = 0; turn < 5; turn += 1) {
    const final = await client.chat.completions.stream({ model: MODEL, tools, messages }).finalChatCompletion();
    const msg = final.choices[0].message;
    messages.push(msg);
    if (!msg.tool_calls || msg.tool_calls.length === 0) {
      assert.ok(msg.content.length > 0);
      assert.deepEqual(executed, ['get_weather', 'get_time']);
      return;
    }
    for (const c of msg.tool_calls) {
      executed.push(c.function.name);
      const out = impl[c.function.name](JSON.parse(c.function.arguments));
      messages.push({ role: 'tool', tool_call_id: c.id, content: JSON.stringify(out) });
    }
  }
  assert.fail('the agent loop never ended');
});

const personSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    email: { type: 'string', format: 'email' },
    tags: { type: 'array', items: { type: 'string', enum: ['a', 'b'] }, minItems: 1, maxItems: 3 },
  },
  required: ['name', 'age', 'tags'],
  additionalProperties: false,
};

test('json_schema output validates with ajv (buffered and streamed)', async () => {
  const validate = ajv.compile(personSchema);
  const body = {
    model: MODEL, messages: ask('a person'),
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: personSchema, strict: true } },
  };
  const r = await client.chat.completions.create(body);
  const parsed = JSON.parse(r.choices[0].message.content);
  assert.ok(validate(parsed), JSON.stringify(validate.errors));
  let text = '';
  for await (const c of await client.chat.completions.create({ ...body, stream: true })) {
    text += c.choices[0]?.delta?.content ?? '';
  }
  assert.deepEqual(JSON.parse(text), parsed);
  const obj = await client.chat.completions.create({ model: MODEL, messages: ask('json'), response_format: { type: 'json_object' } });
  assert.equal(typeof JSON.parse(obj.choices[0].message.content), 'object');
});

test('the client\'s structured-output helper parses the answer', async () => {
  const r = await client.chat.completions.parse({
    model: MODEL, messages: ask('a person'),
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: personSchema, strict: true } },
  });
  const p = r.choices[0].message.parsed;
  assert.ok(ajv.compile(personSchema)(p));
  assert.equal(typeof p.age, 'number');
});

test('an unsupported schema keyword is the engine\'s 400, relayed', async () => {
  await assert.rejects(client.chat.completions.create({
    model: MODEL, messages: ask('x'),
    response_format: { type: 'json_schema', json_schema: { name: 'u', schema: { type: 'array', uniqueItems: true } } },
  }), (e) => e instanceof OpenAI.BadRequestError && /uniqueItems/.test(e.message));
});

test('raw HTTP: streamed tool-call fragments arrive id and name first, arguments in pieces', async () => {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: MODEL, tools, tool_choice: 'required', stream: true, messages: ask('get_time') }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  assert.ok(res.headers.get('x-cgn-node'));
  const events = (await res.text()).split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
  assert.equal(events.at(-1), '[DONE]');
  const frags = events.slice(0, -1).map((e) => JSON.parse(e)).flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  assert.equal(frags[0].index, 0);
  assert.match(frags[0].id, /^chatcmpl-tool-/);
  assert.equal(frags[0].function.name, 'get_time');
  const args = frags.slice(1).map((f) => f.function.arguments).join('');
  assert.ok(frags.length > 2);
  assert.ok(validators.get_time(JSON.parse(args)));
});

test('logprobs: chat buffered and streamed agree; completions logprobs', async () => {
  const body = { model: MODEL, messages: ask('count to three'), max_tokens: 8, logprobs: true, top_logprobs: 3 };
  const r = await client.chat.completions.create(body);
  const lp = r.choices[0].logprobs.content;
  assert.ok(lp.length > 0);
  for (const t of lp) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
  }
  const stream = client.chat.completions.stream(body);
  const final = await stream.finalChatCompletion();
  assert.deepEqual(final.choices[0].logprobs.content.map((t) => t.token), lp.map((t) => t.token));
  const c = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 6, logprobs: 2 });
  assert.equal(c.choices[0].logprobs.tokens.join(''), c.choices[0].text);
  assert.equal(c.choices[0].logprobs.token_logprobs.length, c.choices[0].logprobs.tokens.length);
  await assert.rejects(client.chat.completions.create({ ...body, logprobs: false }),
    (e) => e instanceof OpenAI.BadRequestError && /logprobs/.test(e.message));
});

test('images: an image part is counted as prompt tokens, once per image', async () => {
  const png = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
  const text = { type: 'text', text: 'what is in this picture?' };
  const usage = async (content) => (await client.chat.completions.create({
    model: MODEL, max_tokens: 4, messages: [{ role: 'user', content }],
  })).usage.prompt_tokens;
  const none = await usage([text]);
  const one = await usage([text, { type: 'image_url', image_url: { url: png } }]);
  const two = await usage([text, { type: 'image_url', image_url: { url: png } }, { type: 'image_url', image_url: { url: `${png}#2` } }]);
  // 576 tokens per image (docs/sim.md: LLaVA-1.5), plus what the chat template puts around it.
  assert.ok(one - none >= 576, `one image added ${one - none} tokens`);
  assert.ok(two - one >= 576, `a second image added ${two - one} tokens`);
});
