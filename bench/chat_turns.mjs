// Multi-turn chat benchmark: time to first token of each turn of one conversation through
// `specula serve`, with the prompt cache and without it (every turn prefilled from scratch, which is
// also what the cache gave after an answer longer than the sliding-window rings can roll back,
// before the prompt-end snapshots). Prints a table and writes JSON.
//
//   node bench/chat_turns.mjs --model DIR [--turns 5] [--max-tokens 80] [--prefill-chunk 64]
//        [--threads 2] [--json out.json] [-- extra serve flags]
//
// Each answer is --max-tokens long (ignore_eos) and greedy; the next turn sends the whole history
// (the server's chat template re-renders it). Node 20, no packages. SPECULA_BINARY (default
// build/specula).
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
    turns: { type: 'string', default: '5' },
    'max-tokens': { type: 'string', default: '80' },
    'prefill-chunk': { type: 'string', default: '64' },
    threads: { type: 'string', default: '2' },
    json: { type: 'string' },
    timeout: { type: 'string', default: '900' },
  },
});
if (!opt.model) {
  console.error('chat_turns: --model DIR is required');
  process.exit(2);
}
const binary = resolve(root, process.env.SPECULA_BINARY ?? 'build/specula');
if (!existsSync(binary)) {
  console.error(`chat_turns: no specula binary at ${binary} (build it, or set SPECULA_BINARY)`);
  process.exit(2);
}
const TURNS = Number(opt.turns);
const MAX_TOKENS = Number(opt['max-tokens']);
setTimeout(() => {
  console.error(`chat_turns: gave up after ${opt.timeout} s`);
  process.exit(1);
}, Number(opt.timeout) * 1000).unref();

const questions = [
  'Explain how a sliding-window attention layer differs from a full attention layer.',
  'Now compare both with a recurrent network.',
  'Which of them is cheapest at a context of 32k tokens, and why?',
  'Summarize the conversation so far in three sentences.',
  'What would you measure to check the claims above?',
  'Give one more example.',
  'And a counterexample.',
];

function startChatServer(promptCache) {
  const args = ['--model', opt.model, '--threads', opt.threads, '--prefill-chunk', opt['prefill-chunk'],
    '--parallel', '1', ...extra];
  if (!promptCache) args.push('--no-prompt-cache');
  return startServer(binary, args);
}

// One streamed turn: milliseconds to the first content chunk, the answer text and the usage.
async function turn(port, messages) {
  const t0 = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: MAX_TOKENS, temperature: 0, ignore_eos: true, stream: true,
      stream_options: { include_usage: true } }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let ttft = null;
  let text = '';
  let usage = null;
  for await (const data of sseEvents(res)) {
    const delta = data.choices?.[0]?.delta?.content;
    if (delta) {
      if (ttft === null) ttft = performance.now() - t0;
      text += delta;
    }
    if (data.usage) usage = data.usage;
  }
  return { ttft_ms: ttft, text, prompt_tokens: usage?.prompt_tokens, cached_tokens:
    usage?.prompt_tokens_details?.cached_tokens };
}

async function conversation(promptCache) {
  const { child, port } = await startChatServer(promptCache);
  try {
    const messages = [];
    const rows = [];
    for (let i = 0; i < TURNS; ++i) {
      messages.push({ role: 'user', content: questions[i % questions.length] });
      const r = await turn(port, messages);
      messages.push({ role: 'assistant', content: r.text });
      rows.push({ turn: i + 1, ttft_ms: r.ttft_ms, prompt_tokens: r.prompt_tokens, cached_tokens: r.cached_tokens });
    }
    return rows;
  } finally {
    child.kill('SIGTERM');
  }
}

const cached = await conversation(true);
const cold = await conversation(false);
console.log(`chat_turns: ${TURNS} turns, answers of ${MAX_TOKENS} tokens, --prefill-chunk ${opt['prefill-chunk']}, ` +
  `--threads ${opt.threads}, model ${opt.model}`);
console.log('turn | prompt tokens | cached | TTFT cached (ms) | TTFT cold (ms) | cold / cached');
console.log('---: | ---: | ---: | ---: | ---: | ---:');
for (let i = 0; i < TURNS; ++i) {
  const a = cached[i];
  const b = cold[i];
  console.log(`${a.turn} | ${a.prompt_tokens} | ${a.cached_tokens} | ${a.ttft_ms.toFixed(0)} | ${b.ttft_ms.toFixed(0)} | ` +
    `${(b.ttft_ms / a.ttft_ms).toFixed(2)}`);
}
if (opt.json) {
  writeFileSync(opt.json, JSON.stringify({ turns: TURNS, max_tokens: MAX_TOKENS, prefill_chunk: Number(opt['prefill-chunk']),
    threads: Number(opt.threads), model: opt.model, cached, cold }, null, 2));
}
