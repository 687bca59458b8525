// The official `openai` npm client against the real `specula serve` on loopback, with a tiny
// synthetic checkpoint that carries the Gemma 4 test tokenizer (random weights: the text is
// meaningless, so the checks are about protocol, equality and determinism, not content).
// Run: SPECULA_BINARY=build/specula SPECULA_TEST_DATA=tests/data node --test tests/e2e/
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

const binary = process.env.SPECULA_BINARY;
const testData = process.env.SPECULA_TEST_DATA;
assert.ok(binary && testData, 'set SPECULA_BINARY and SPECULA_TEST_DATA');

const KEY = 'sekret';
let dir, server, baseURL, client;

function startServer(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['serve', '--host', '127.0.0.1', '--port', '0', ...args], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no port line from specula serve: ${out}`)), 30000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+) /);
      if (m) {
        clearTimeout(timer);
        child.stdout.removeAllListeners('data');
        child.stdout.resume();
        resolve({ child, url: m[1] });
      }
    });
    child.on('exit', (code) => reject(new Error(`specula serve exited early (${code}): ${out}`)));
  });
}

async function waitHealthy(url) {
  for (let i = 0; i < 600; i++) {
    try {
      const r = await fetch(`${url}/health`);
      if (r.status === 200) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('server never became healthy');
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'specula-e2e-'));
  execFileSync(binary, ['synth', '--preset', 'tiny-dense', '--vocab', '262144', '--tokenizer',
    join(testData, 'tokenizer-gemma4'), '--out', join(dir, 'model'), '--drafter', join(dir, 'drafter')],
  { stdio: 'ignore' });
  const s = await startServer(['--model', join(dir, 'model'), '--draft', join(dir, 'drafter'), '--threads', '1',
    '--api-key', KEY, '--parallel', '1', '--max-queue', '0']);
  server = s.child;
  baseURL = `${s.url}/v1`;
  await waitHealthy(s.url);
  client = new OpenAI({ apiKey: KEY, baseURL, maxRetries: 0 });
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.on('exit', (code) => r(code)));
    server.kill('SIGTERM');
    assert.equal(await exited, 0);
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const messages = [{ role: 'user', content: 'Write a haiku about the sea.' }];

test('chat: non-streaming and streaming give the same text, usage included', async () => {
  const full = await client.chat.completions.create({ model: 'm', messages, max_tokens: 12, temperature: 0 });
  const choice = full.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(['stop', 'length'].includes(choice.finish_reason));
  assert.ok(full.usage.prompt_tokens > 0);
  assert.equal(full.usage.total_tokens, full.usage.prompt_tokens + full.usage.completion_tokens);

  const stream = await client.chat.completions.create({ model: 'm', messages, max_tokens: 12, temperature: 0,
    stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, choice.message.content);
  assert.equal(finish, choice.finish_reason);
  assert.equal(usage.completion_tokens, full.usage.completion_tokens);
  assert.ok(usage.prompt_tokens_details.cached_tokens > 0, 'the same prompt again reuses the prompt cache');
});

test('completions: text, streaming, stop strings', async () => {
  const body = { model: 'm', prompt: 'Once upon a time', max_tokens: 16, temperature: 0, ignore_eos: true };
  const full = await client.completions.create(body);
  const text = full.choices[0].text;
  assert.equal(full.choices[0].finish_reason, 'length');
  assert.ok(text.length > 4);

  let streamed = '';
  for await (const chunk of await client.completions.create({ ...body, stream: true })) {
    streamed += chunk.choices[0]?.text ?? '';
  }
  assert.equal(streamed, text);

  // A stop string taken from the middle of the known output cuts it there.
  const cut = Math.floor(text.length / 2);
  const stop = text.slice(cut, cut + 2);
  const stopped = await client.completions.create({ ...body, stop: [stop] });
  assert.equal(stopped.choices[0].text, text.slice(0, text.indexOf(stop)));
  assert.equal(stopped.choices[0].finish_reason, 'stop');
});

test('logprobs: chat top_logprobs and legacy completions logprobs', async () => {
  const r = await client.chat.completions.create({ model: 'm', messages, max_tokens: 6, temperature: 0,
    logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const t of content) {
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.logprob <= 0);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    assert.equal(t.top_logprobs[0].token, t.token, 'greedy picks the most likely token');
    assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')]);
  }
  const c = await client.completions.create({ model: 'm', prompt: 'Hello', max_tokens: 4, temperature: 0, logprobs: 2 });
  const lp = c.choices[0].logprobs;
  assert.equal(lp.tokens.length, 4);
  assert.equal(lp.token_logprobs.length, 4);
  assert.equal(Object.keys(lp.top_logprobs[0]).length, 2);
  assert.equal(lp.tokens.join(''), c.choices[0].text);
});

test('seeded sampling is reproducible', async () => {
  // A fixed gamma: `gamma: "auto"` picks draft lengths from measured timings, and speculative
  // sampling consumes random numbers per round, so only greedy output is timing-independent there.
  const body = { model: 'm', messages, max_tokens: 12, temperature: 1, top_p: 1, seed: 7, ignore_eos: true, gamma: 3 };
  const a = await client.chat.completions.create(body);
  const b = await client.chat.completions.create(body);
  const c = await client.chat.completions.create({ ...body, seed: 8 });
  const plainA = await client.chat.completions.create({ ...body, speculative: false });
  const plainB = await client.chat.completions.create({ ...body, speculative: false });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.equal(plainA.choices[0].message.content, plainB.choices[0].message.content);
  assert.notEqual(a.choices[0].message.content, c.choices[0].message.content);
});

test('speculative extension: plain and speculative agree at temperature 0', async () => {
  const body = { model: 'm', messages, max_tokens: 16, temperature: 0, ignore_eos: true };
  const plain = await client.chat.completions.create({ ...body, speculative: false });
  const spec = await client.chat.completions.create({ ...body, speculative: true, gamma: 3 });
  assert.equal(spec.choices[0].message.content, plain.choices[0].message.content);
  assert.equal(plain.usage.specula.drafted_tokens, 0);
  assert.ok(spec.usage.specula.drafted_tokens > 0);
});

test('tool round trip: tools, assistant tool_calls and role "tool" go through the Gemma template', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const history = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'get_weather', arguments: JSON.stringify({ city: 'Paris' }) } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'sunny, 21 C' },
  ];
  // The prompt the server builds (POST /tokenize renders like the chat endpoint).
  const root = baseURL.replace(/\/v1$/, '');
  const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}` };
  const ids = await (await fetch(`${root}/tokenize`, { method: 'POST', headers,
    body: JSON.stringify({ messages: history, tools }) })).json();
  const rendered = (await (await fetch(`${root}/detokenize`, { method: 'POST', headers,
    body: JSON.stringify({ tokens: ids.tokens }) })).json()).prompt;
  assert.ok(rendered.includes('<|tool>declaration:get_weather{description:<|"|>Weather of a city<|"|>'), rendered);
  assert.ok(rendered.includes('<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'), rendered);
  assert.ok(rendered.includes('<|tool_response>response:get_weather{value:<|"|>sunny, 21 C<|"|>}<tool_response|>'),
    rendered);

  // The SDK sends the same conversation; the answer is a well-formed assistant message (random weights
  // do not call tools by themselves; parsing of emitted calls is covered by server_tool_call_stream_test).
  const r = await client.chat.completions.create({ model: 'm', messages: history, tools, max_tokens: 8,
    temperature: 0 });
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.usage.prompt_tokens === ids.count);
  const streamed = await client.chat.completions.create({ model: 'm', messages: history, tools, max_tokens: 8,
    temperature: 0, stream: true });
  let text = '';
  for await (const chunk of streamed) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, r.choices[0].message.content ?? '');
});

test('errors arrive as the SDK error classes: 400, 401, 429', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'm', messages, n: 2 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'n');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: 'm', messages: [] }), OpenAI.BadRequestError);
  // A gamma beyond the drafter cache's rollback reserve is refused before any work.
  await assert.rejects(client.chat.completions.create({ model: 'm', messages, gamma: 60 }), OpenAI.BadRequestError);
  const wrongKey = new OpenAI({ apiKey: 'wrong', baseURL, maxRetries: 0 });
  await assert.rejects(wrongKey.models.list(), OpenAI.AuthenticationError);

  // --parallel 1 --max-queue 0: while a long stream runs, the next request is refused with 429.
  const controller = new AbortController();
  const long = await client.chat.completions.create({ model: 'm', messages, max_tokens: 100000, ignore_eos: true,
    stream: true }, { signal: controller.signal });
  const iterator = long[Symbol.asyncIterator]();
  await iterator.next();
  await assert.rejects(client.chat.completions.create({ model: 'm', messages, max_tokens: 2 }), (e) => {
    assert.ok(e instanceof OpenAI.RateLimitError);
    assert.equal(e.status, 429);
    return true;
  });
  controller.abort();  // hang up: the server cancels the generation
  try {
    while (!(await iterator.next()).done);
  } catch {}
  // The worker is free again soon after the hang-up.
  let ok = null;
  for (let i = 0; i < 100 && !ok; i++) {
    try {
      ok = await client.chat.completions.create({ model: 'm', messages, max_tokens: 2 });
    } catch (e) {
      assert.ok(e instanceof OpenAI.RateLimitError);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  assert.ok(ok, 'a request is served after the streaming client hung up');
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
});
