// Time to first token through `specula serve --parallel N` under concurrent clients, against one
// client, in one run on one server. Prints a table and writes JSON.
//
//   node bench/server_ttft.mjs --model DIR [--clients 1,4] [--requests 3] [--prompt-tokens 64]
//        [--max-tokens 32] [--threads 2] [--json out.json] [-- extra serve flags]
//
// Clients arrive as at a server: first one request alone (its duration is "a request's length"),
// then for each client count C, client i sends its first request at i/C of a request's length and
// each next one as soon as its previous one has ended, --requests each. Every prompt is its own
// random token list (no prompt-cache reuse), answers are greedy, --max-tokens long (ignore_eos) and
// streamed; TTFT is from sending a request to its first text chunk. The model directory needs a
// tokenizer (for the streamed text). Node 20, no packages. SPECULA_BINARY (default build/specula).
import { existsSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { sseEvents, startServer } from './serve_client.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: opt, positionals: extra } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: 'string' },
    clients: { type: 'string', default: '1,4' },
    requests: { type: 'string', default: '3' },
    'prompt-tokens': { type: 'string', default: '64' },
    'max-tokens': { type: 'string', default: '32' },
    threads: { type: 'string', default: '2' },
    json: { type: 'string' },
    timeout: { type: 'string', default: '1800' },
  },
});

function positiveInteger(name, text) {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`server_ttft: --${name} must be a positive integer (got '${text}')`);
    process.exit(2);
  }
  return n;
}

if (!opt.model) {
  console.error('server_ttft: --model DIR is required');
  process.exit(2);
}
const binary = resolve(root, process.env.SPECULA_BINARY ?? 'build/specula');
if (!existsSync(binary)) {
  console.error(`server_ttft: no specula binary at ${binary} (build it, or set SPECULA_BINARY)`);
  process.exit(2);
}
const CLIENTS = opt.clients.split(',').map((c) => positiveInteger('clients', c));
const REQUESTS = positiveInteger('requests', opt.requests);
const PROMPT_TOKENS = positiveInteger('prompt-tokens', opt['prompt-tokens']);
const MAX_TOKENS = positiveInteger('max-tokens', opt['max-tokens']);
setTimeout(() => {
  console.error(`server_ttft: gave up after ${opt.timeout} s`);
  process.exit(1);
}, Number(opt.timeout) * 1000).unref();


// A distinct prompt per (client, request): token ids from a small linear congruential generator,
// clear of the low ids where Gemma's control tokens live.
function promptOf(seed) {
  let x = (seed * 2654435761 + 12345) >>> 0;
  const ids = [2];  // <bos>
  while (ids.length < PROMPT_TOKENS) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    ids.push(1000 + (x % 200000));
  }
  return ids;
}

// One streamed completion: milliseconds to the first text chunk and to the end.
async function request(port, seed) {
  const t0 = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: promptOf(seed), max_tokens: MAX_TOKENS, temperature: 0, ignore_eos: true,
      stream: true }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let ttft = null;
  for await (const data of sseEvents(res)) {
    if (data.error) throw new Error(`stream error: ${JSON.stringify(data.error)}`);
    if (ttft === null && data.choices?.[0]?.text) ttft = performance.now() - t0;
  }
  if (ttft === null) throw new Error('the stream ended without text');
  return { ttft_ms: ttft, total_ms: performance.now() - t0 };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

// C clients, staggered over one request's length, REQUESTS each, back to back.
async function clients(port, c, requestMs, seedBase) {
  const ttfts = [];
  await Promise.all(Array.from({ length: c }, async (_, i) => {
    await sleep((requestMs * i) / c);
    for (let r = 0; r < REQUESTS; ++r) ttfts.push((await request(port, seedBase + i * REQUESTS + r)).ttft_ms);
  }));
  return ttfts.sort((a, b) => a - b);
}

const parallel = Math.max(...CLIENTS);
const { child, port } = await startServer(binary, ['--model', opt.model, '--threads', opt.threads,
  '--parallel', String(parallel), '--max-queue', String(Math.max(16, parallel)), ...extra]);
const rows = [];
let requestMs = 0;
try {
  await request(port, 1);  // warm-up: first-touch of the weights and caches
  requestMs = (await request(port, 2)).total_ms;
  for (const [k, c] of CLIENTS.entries()) {
    const t = await clients(port, c, requestMs, 1000 * (k + 1));
    rows.push({ clients: c, requests: t.length, ttft_p50_ms: percentile(t, 0.5), ttft_p99_ms: percentile(t, 0.99),
      ttft_ms: t });
  }
} finally {
  child.kill('SIGTERM');
}
const one = rows.find((r) => r.clients === 1);
for (const r of rows) r.ttft_p50_vs_one_client = one ? r.ttft_p50_ms / one.ttft_p50_ms : null;

console.log(`server_ttft: ${PROMPT_TOKENS}-token prompts, ${MAX_TOKENS}-token answers, ${REQUESTS} requests per ` +
  `client, --parallel ${Math.max(...CLIENTS)}, --threads ${opt.threads}, a request alone ${requestMs.toFixed(0)} ms, ` +
  `model ${opt.model}${extra.length ? `, ${extra.join(' ')}` : ''}`);
console.log('clients | requests | TTFT p50 (ms) | TTFT p99 (ms) | p50 x one client');
console.log('---: | ---: | ---: | ---: | ---:');
for (const r of rows) {
  console.log(`${r.clients} | ${r.requests} | ${r.ttft_p50_ms.toFixed(0)} | ${r.ttft_p99_ms.toFixed(0)} | ` +
    `${r.ttft_p50_vs_one_client === null ? '-' : r.ttft_p50_vs_one_client.toFixed(2)}`);
}
if (opt.json) {
  writeFileSync(opt.json, JSON.stringify({ prompt_tokens: PROMPT_TOKENS, max_tokens: MAX_TOKENS, requests: REQUESTS,
    threads: Number(opt.threads), request_alone_ms: requestMs, model: opt.model, serve_flags: extra, rows }, null, 2));
}
