// Load and soak test of `specula serve` on loopback (issue 8, item 5). Run it with scripts/soak.
//
// It makes (or reuses) a tiny synthetic checkpoint with the Gemma 4 test tokenizer and a drafter,
// starts `specula serve --host 127.0.0.1 --port 0`, warms it up, then sends N requests from C
// concurrent clients: streaming and non-streaming, chat and completions, greedy and seeded sampling,
// speculative or plain, small max_tokens, and every fifth request is a stream that the client
// aborts right after its first chunk. Afterwards it checks:
//   - no request is lost: each got a response, a clean OpenAI-shaped error, or was the client's abort
//     (and errors are at most --max-errors, default 0: none is expected at this load);
//   - every completed greedy response equals the same request run alone (each distinct greedy
//     request is re-run once, sequentially, non-streaming, after the load);
//   - the server's RSS after the load is within --rss-bound-mb of its value after the warm-up;
//   - /metrics adds up: the request counters grew by exactly the requests sent, 1 <= cancelled <= aborts,
//     generated and prompt tokens are at least the usage sums of the completed requests (and
//     generated tokens at most that plus the aborted requests' max_tokens), the queue is empty;
//   - SIGTERM stops the server with exit status 0.
// It prints a table and exits 1 on any failed check, 2 on a usage or setup error. Everything is
// bounded: the request count, a per-request timeout and a global timeout (--timeout, default 300 s).
//
// Node 20, no packages (global fetch). Environment: SPECULA_BINARY (default build/specula),
// SPECULA_TEST_DATA (default tests/data), both relative to the repository root.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const { values: opt } = parseArgs({
  options: {
    requests: { type: 'string', short: 'n', default: '300' },
    concurrency: { type: 'string', short: 'c', default: '8' },
    'abort-every': { type: 'string', default: '5' },
    timeout: { type: 'string', default: '300' },
    'request-timeout': { type: 'string', default: '120' },
    'rss-bound-mb': { type: 'string', default: '64' },
    'max-errors': { type: 'string', default: '0' },
    threads: { type: 'string', default: '1' },
    seed: { type: 'string', default: '1' },
    dir: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (opt.help) {
  console.log(`usage: scripts/soak [-n REQUESTS=300] [-c CONCURRENCY=8] [--abort-every 5] [--timeout 300]
       [--request-timeout 120] [--rss-bound-mb 64] [--max-errors 0] [--threads 1] [--seed 1] [--dir DIR]
--dir keeps the synthetic checkpoint in DIR (made once, reused later); default: a temp dir, removed.`);
  process.exit(0);
}
const num = (name) => {
  const v = Number(opt[name]);
  if (!Number.isFinite(v) || v < 0) {
    console.error(`soak: --${name} must be a non-negative number, got '${opt[name]}'`);
    process.exit(2);
  }
  return v;
};
const N = num('requests');
const C = Math.max(1, num('concurrency'));
const ABORT_EVERY = num('abort-every');
const TIMEOUT_S = num('timeout');
const REQUEST_TIMEOUT_MS = num('request-timeout') * 1000;
const RSS_BOUND_KB = num('rss-bound-mb') * 1024;
const MAX_ERRORS = num('max-errors');
const ABORT_MAX_TOKENS = 128;  // long enough that the server is still generating when the client hangs up

const binary = resolve(root, process.env.SPECULA_BINARY ?? 'build/specula');
const testData = resolve(root, process.env.SPECULA_TEST_DATA ?? 'tests/data');
if (!existsSync(binary)) {
  console.error(`soak: no specula binary at ${binary} (build it, or set SPECULA_BINARY)`);
  process.exit(2);
}

let server = null;
let tempDir = null;
const cleanup = () => {
  if (server && server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
  if (tempDir) rmSync(tempDir, { recursive: true, force: true });
};
const globalTimer = setTimeout(() => {
  console.error(`soak: FAILED: global timeout of ${TIMEOUT_S} s reached`);
  cleanup();
  process.exit(1);
}, TIMEOUT_S * 1000);
globalTimer.unref();

// ---------------------------------------------------------------- checkpoint and server

function checkpoint() {
  const dir = opt.dir ? resolve(opt.dir) : (tempDir = mkdtempSync(join(tmpdir(), 'specula-soak-')));
  if (!existsSync(join(dir, 'model', 'config.json')) || !existsSync(join(dir, 'drafter', 'config.json'))) {
    mkdirSync(dir, { recursive: true });
    execFileSync(binary, ['synth', '--preset', 'tiny-dense', '--vocab', '262144', '--tokenizer',
      join(testData, 'tokenizer-gemma4'), '--out', join(dir, 'model'), '--drafter', join(dir, 'drafter')],
    { stdio: 'ignore' });
  }
  return dir;
}

function startServer(dir) {
  return new Promise((res, rej) => {
    const child = spawn(binary, ['serve', '--host', '127.0.0.1', '--port', '0', '--model', join(dir, 'model'),
      '--draft', join(dir, 'drafter'), '--threads', opt.threads], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stderr.on('data', (d) => { err = (err + d).slice(-4000); });
    const timer = setTimeout(() => rej(new Error(`no port line from specula serve: ${out}${err}`)), 30000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+) /);
      if (m) {
        clearTimeout(timer);
        child.stdout.removeAllListeners('data');
        child.stdout.resume();
        res({ child, url: m[1], stderr: () => err });
      }
    });
    child.on('exit', (code) => rej(new Error(`specula serve exited early (${code}): ${out}${err}`)));
  });
}

async function waitHealthy(url) {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${url}/health`)).status === 200) return;
    } catch {}
    await sleep(50);
  }
  throw new Error('server never became healthy');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function rssKb(pid) {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return m ? Number(m[1]) : NaN;
}

async function metrics(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = { requests: {}, values: {} };
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const r = line.match(/^([a-z_]+)(\{[^}]*\})? (\S+)$/);
    if (!r) continue;
    const value = Number(r[3]);
    if (r[1] === 'specula_requests_total') m.requests[r[2]] = value;
    else if (!r[2]) m.values[r[1]] = value;
  }
  return m;
}

const GEN_ENDPOINTS = ['/v1/chat/completions', '/v1/completions'];
function generationRequests(m, status) {
  let sum = 0;
  for (const [labels, v] of Object.entries(m.requests)) {
    const ep = labels.match(/endpoint="([^"]*)"/)?.[1];
    const st = labels.match(/status="([^"]*)"/)?.[1];
    if (GEN_ENDPOINTS.includes(ep) && (status === undefined || st === status)) sum += v;
  }
  return sum;
}

// ---------------------------------------------------------------- the requests

// A small deterministic generator, so that a run is reproducible from --seed.
function rng(seed) {
  let s = (Number(seed) >>> 0) || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

const PROMPTS = [
  'Write a haiku about the sea.',
  'Explain speculative decoding in one sentence.',
  'List three prime numbers.',
  'What is the capital of France?',
  'Once upon a time',
  'def fibonacci(n):',
];

function makeRequest(i, rand, abortEvery) {
  const pick = (a) => a[Math.floor(rand() * a.length)];
  const abort = abortEvery > 0 && i % abortEvery === 0;
  const chat = rand() < 0.5;
  const stream = abort || rand() < 0.5;
  const greedy = !abort && rand() < 0.5;
  const body = {
    model: 'm',
    // 8..24; greedy requests use fewer distinct values, so that equal requests meet under load.
    max_tokens: abort ? ABORT_MAX_TOKENS : greedy ? pick([8, 16, 24]) : 8 + Math.floor(rand() * 17),
    temperature: greedy ? 0 : 0.9,
    ignore_eos: abort || rand() < 0.5,
    speculative: rand() < 0.75,
  };
  if (!greedy) {
    body.top_p = 0.95;
    body.seed = Math.floor(rand() * 1000);
  }
  const prompt = pick(PROMPTS);
  if (chat) body.messages = [{ role: 'user', content: prompt }];
  else body.prompt = prompt;
  if (stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return { i, chat, stream, greedy, abort, body };
}

// The request as it would be sent alone, without the transport choice: the key of the greedy replay.
function greedyKey(req) {
  const { stream, stream_options, ...rest } = req.body;
  return JSON.stringify({ chat: req.chat, ...rest });
}

function isCleanError(json) {
  return json && typeof json.error === 'object' && json.error !== null && typeof json.error.message === 'string' &&
    typeof json.error.type === 'string';
}

// Sends one request. Outcome: 'ok' (text, finish, usage), 'error' (a clean OpenAI error: status,
// message), 'aborted' (the client hung up after the first chunk), or 'lost' (anything else: a
// transport failure, a malformed answer, a stream that ended without [DONE], a timeout).
async function send(url, req) {
  const path = req.chat ? '/v1/chat/completions' : '/v1/completions';
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; controller.abort(); }, REQUEST_TIMEOUT_MS);
  const start = performance.now();
  const result = { req, latencyMs: 0, outcome: 'lost', detail: '' };
  let aborted = false;
  try {
    const res = await fetch(url + path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(req.body), signal: controller.signal });
    if (res.status !== 200) {
      const text = await res.text();
      let json = null;
      try { json = JSON.parse(text); } catch {}
      if (isCleanError(json)) Object.assign(result, { outcome: 'error', status: res.status, detail: json.error.message });
      else result.detail = `status ${res.status} with a body that is not an OpenAI error: ${text.slice(0, 200)}`;
      return result;
    }
    if (!req.stream) {
      const json = await res.json();
      const choice = json.choices?.[0];
      const text = req.chat ? choice?.message?.content : choice?.text;
      if (typeof text !== 'string' && !(req.chat && text === null)) {
        result.detail = `no text in ${JSON.stringify(json).slice(0, 200)}`;
        return result;
      }
      Object.assign(result, { outcome: 'ok', text: text ?? '', finish: choice.finish_reason, usage: json.usage });
      return result;
    }
    // Server-sent events.
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let text = '';
    let finish = null;
    let usage = null;
    let error = null;
    let done = false;
    let chunks = 0;
    while (!done) {
      const { value, done: eof } = await reader.read();
      if (eof) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of event.split('\n')) {
          if (!line.startsWith('data: ')) continue;  // ": keep-alive" comments
          const data = line.slice(6);
          if (data === '[DONE]') { done = true; continue; }
          const json = JSON.parse(data);
          if (json.error) { error = json; continue; }
          if (json.usage) usage = json.usage;
          for (const c of json.choices ?? []) {
            text += (req.chat ? c.delta?.content : c.text) ?? '';
            if (c.finish_reason) finish = c.finish_reason;
          }
          chunks++;
        }
        if (req.abort && chunks > 0 && !done) {
          aborted = true;
          controller.abort();  // hang up mid-stream
          await reader.read().catch(() => {});
          Object.assign(result, { outcome: 'aborted' });
          return result;
        }
      }
    }
    if (error) {
      if (done && isCleanError(error)) Object.assign(result, { outcome: 'error', status: 200, detail: error.error.message });
      else result.detail = `stream error without [DONE] or malformed: ${JSON.stringify(error).slice(0, 200)}`;
      return result;
    }
    if (!done) {
      result.detail = 'the stream ended without [DONE]';
      return result;
    }
    if (req.abort) {
      result.detail = 'the stream ended before its first chunk could be aborted';
      Object.assign(result, { outcome: 'aborted' });  // still the client's own doing: counted, not lost
      return result;
    }
    Object.assign(result, { outcome: 'ok', text, finish, usage });
    return result;
  } catch (e) {
    if (aborted) {
      result.outcome = 'aborted';
    } else {
      result.detail = timedOut ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : `${e.name}: ${e.message}`;
    }
    return result;
  } finally {
    clearTimeout(timer);
    result.latencyMs = performance.now() - start;
  }
}

async function runConcurrently(url, requests, concurrency) {
  const results = new Array(requests.length);
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const k = next++;
      results[k] = await send(url, requests[k]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, requests.length) }, worker));
  return results;
}

const percentile = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] : NaN);

// ---------------------------------------------------------------- main

const failures = [];
const check = (ok, message) => { if (!ok) failures.push(message); return ok; };

async function main() {
  const dir = checkpoint();
  const s = await startServer(dir);
  server = s.child;
  const exited = new Promise((r) => server.on('exit', (code, signal) => r({ code, signal })));
  const url = s.url;
  await waitHealthy(url);
  const pid = server.pid;

  // Warm-up: every kind of request (including hang-ups), so that the allocator, the prompt cache
  // and the HTTP thread pool reach their steady state before the baseline.
  const warmRand = rng(Number(opt.seed) + 1000);
  const warm = Array.from({ length: 2 * C }, (_, i) => makeRequest(i, warmRand, 4));
  const warmResults = await runConcurrently(url, warm, C);
  for (const r of warmResults) {
    check(r.outcome === 'ok' || r.outcome === 'aborted', `warm-up request ${r.req.i} ${r.outcome}: ${r.detail}`);
  }
  await sleep(500);
  const rssBefore = rssKb(pid);
  const before = await metrics(url);

  const rand = rng(opt.seed);
  const requests = Array.from({ length: N }, (_, i) => makeRequest(i, rand, ABORT_EVERY));
  const t0 = performance.now();
  const results = await runConcurrently(url, requests, C);
  const wallS = (performance.now() - t0) / 1000;

  // The handlers of aborted streams finish (and are counted) a little after the client hung up.
  let after = await metrics(url);
  for (let i = 0; i < 100 && generationRequests(after) - generationRequests(before) < N; i++) {
    await sleep(100);
    after = await metrics(url);
  }

  // Greedy replay: each distinct greedy request once, alone, non-streaming.
  const ok = results.filter((r) => r.outcome === 'ok');
  const greedyByKey = new Map();
  for (const r of ok.filter((r) => r.req.greedy)) {
    if (!greedyByKey.has(greedyKey(r.req))) greedyByKey.set(greedyKey(r.req), []);
    greedyByKey.get(greedyKey(r.req)).push(r);
  }
  let mismatches = 0;
  for (const [key, group] of greedyByKey) {
    const first = group[0].req;
    const { stream, stream_options, ...body } = first.body;
    const alone = await send(url, { ...first, stream: false, abort: false, body });
    if (!check(alone.outcome === 'ok', `greedy replay of request ${first.i} ${alone.outcome}: ${alone.detail}`)) continue;
    for (const r of group) {
      if (r.text !== alone.text) {
        mismatches++;
        if (mismatches <= 5) {
          failures.push(`request ${r.req.i} (${r.req.stream ? 'stream' : 'non-stream'}, ${key}) under load gave ` +
            `${JSON.stringify(r.text)}, alone ${JSON.stringify(alone.text)}`);
        }
      }
    }
  }
  if (mismatches > 5) failures.push(`... ${mismatches} greedy mismatches in all`);

  await sleep(500);
  const rssAfter = rssKb(pid);
  const final = await metrics(url);

  // ---- checks
  const count = (o) => results.filter((r) => r.outcome === o).length;
  const lost = results.filter((r) => r.outcome === 'lost');
  const errors = results.filter((r) => r.outcome === 'error');
  const aborts = count('aborted');
  check(results.length === N && results.every(Boolean), 'a request has no result');
  for (const r of lost.slice(0, 5)) failures.push(`request ${r.req.i} lost: ${r.detail}`);
  check(lost.length === 0, `${lost.length} requests lost`);
  check(errors.length <= MAX_ERRORS, `${errors.length} clean errors (at most ${MAX_ERRORS} allowed): ` +
    errors.slice(0, 3).map((r) => `${r.status} ${r.detail}`).join('; '));
  const abortsBefore = results.filter((r) => r.req.abort && r.outcome === 'aborted' && r.detail).length;
  for (const r of ok) {
    check(r.usage && r.usage.completion_tokens <= r.req.body.max_tokens &&
      r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens,
    `request ${r.req.i}: usage ${JSON.stringify(r.usage)} does not add up`);
  }

  const d = (name) => (final.values[name] ?? 0) - (before.values[name] ?? 0);
  const dAfter = (name) => (after.values[name] ?? 0) - (before.values[name] ?? 0);
  const sentRequests = generationRequests(after) - generationRequests(before);
  check(sentRequests === N, `specula_requests_total grew by ${sentRequests} on the generation routes, ${N} sent`);
  const served200 = generationRequests(after, '200') - generationRequests(before, '200');
  const expected200 = ok.length + aborts + errors.filter((r) => r.status === 200).length;
  check(served200 === expected200, `status 200 count grew by ${served200}, expected ${expected200}`);
  const cancelled = dAfter('specula_requests_cancelled_total');
  const abortsSeen = aborts - abortsBefore;
  check(cancelled >= (abortsSeen > 0 ? 1 : 0) && cancelled <= aborts,
    `specula_requests_cancelled_total grew by ${cancelled}, expected 1..${aborts} (aborts)`);
  const usageCompletion = ok.reduce((a, r) => a + (r.usage?.completion_tokens ?? 0), 0);
  const usagePrompt = ok.reduce((a, r) => a + (r.usage?.prompt_tokens ?? 0), 0);
  const genTokens = dAfter('specula_generation_tokens_total');
  check(genTokens >= usageCompletion && genTokens <= usageCompletion + aborts * ABORT_MAX_TOKENS,
    `specula_generation_tokens_total grew by ${genTokens}; completed requests' usage sums to ${usageCompletion}, ` +
    `aborted ones may add up to ${aborts * ABORT_MAX_TOKENS}`);
  const promptTokens = dAfter('specula_prompt_tokens_total');
  check(promptTokens >= usagePrompt, `specula_prompt_tokens_total grew by ${promptTokens}, usage sums to ${usagePrompt}`);
  check(d('specula_accepted_tokens_total') <= d('specula_draft_tokens_total'), 'more accepted than drafted tokens');
  check((final.values.specula_queue_depth ?? 0) === 0, `queue depth ${final.values.specula_queue_depth} at the end`);
  check(rssAfter - rssBefore <= RSS_BOUND_KB,
    `RSS grew from ${rssBefore} kB to ${rssAfter} kB (bound +${RSS_BOUND_KB / 1024} MB)`);

  // ---- stop
  server.kill('SIGTERM');
  const stop = await Promise.race([exited, sleep(20000).then(() => ({ code: 'timeout' }))]);
  check(stop.code === 0, `specula serve did not exit 0 on SIGTERM: ${JSON.stringify(stop)}; stderr: ${s.stderr()}`);

  // ---- report
  const lat = results.filter((r) => r.outcome === 'ok').map((r) => r.latencyMs).sort((a, b) => a - b);
  const mb = (kb) => `${(kb / 1024).toFixed(1)} MB`;
  const rows = [
    ['requests', `${N} (+${warm.length} warm-up, +${greedyByKey.size} greedy replays)`],
    ['concurrency', `${C}`],
    ['kinds', `${results.filter((r) => r.req.stream).length} streaming, ${results.filter((r) => r.req.chat).length} chat, ` +
      `${results.filter((r) => r.req.greedy).length} greedy, ${results.filter((r) => r.req.body.speculative).length} speculative`],
    ['completed', `${ok.length}`],
    ['disconnects', `${aborts} (server cancelled ${cancelled})`],
    ['errors', `${errors.length}`],
    ['lost', `${lost.length}`],
    ['greedy checked', `${ok.filter((r) => r.req.greedy).length} responses, ${greedyByKey.size} distinct, ${mismatches} mismatches`],
    ['latency p50 / p99', `${(percentile(lat, 0.5) / 1000).toFixed(3)} s / ${(percentile(lat, 0.99) / 1000).toFixed(3)} s (completed)`],
    ['wall time', `${wallS.toFixed(1)} s`],
    ['tokens/s', `${(usageCompletion / wallS).toFixed(1)} completed, ${(genTokens / wallS).toFixed(1)} generated (metrics)`],
    ['RSS before / after', `${mb(rssBefore)} / ${mb(rssAfter)} (${rssAfter >= rssBefore ? '+' : ''}${mb(rssAfter - rssBefore)})`],
    ['metrics', `requests +${sentRequests}, cancelled +${cancelled}, generation tokens +${genTokens}, prompt tokens +${promptTokens}`],
    ['SIGTERM exit', `${stop.code}`],
  ];
  const w = Math.max(...rows.map((r) => r[0].length));
  console.log('specula soak test');
  for (const [k, v] of rows) console.log(`  ${k.padEnd(w)}  ${v}`);
  if (failures.length) {
    console.log(`FAILED (${failures.length}):`);
    for (const f of failures) console.log(`  - ${f}`);
    return 1;
  }
  console.log('PASSED');
  return 0;
}

main().then((code) => {
  cleanup();
  process.exit(code);
}, (e) => {
  console.error(`soak: ${e.stack ?? e}`);
  cleanup();
  process.exit(2);
});
