// Two `specula serve` replicas behind Debian's nginx on loopback (least-connections upstream,
// passive health checks), driven by concurrent clients; one replica is killed mid-run. Run it with
// scripts/replicas. It checks that
//   - nothing hangs: every request ends within --request-timeout (a status or a network error);
//   - before the kill both replicas serve requests;
//   - after the kill every new request is answered 200 by the survivor;
//   - the requests in flight on the killed replica end with a clean error (nginx's 502), and
//     no other status appears.
// It prints what happened per phase and exits 1 on a failed check, 2 on a usage or setup error.
//
// Node 20, no packages (global fetch). Environment: SPECULA_BINARY (default build/specula),
// SPECULA_TEST_DATA (default tests/data), NGINX (default nginx on PATH, else /usr/sbin/nginx).
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const { values: opt } = parseArgs({
  options: {
    clients: { type: 'string', short: 'c', default: '6' },
    'before-kill': { type: 'string', default: '12' },
    'after-kill': { type: 'string', default: '12' },
    'request-timeout': { type: 'string', default: '60' },
    parallel: { type: 'string', default: '2' },
    model: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (opt.help) {
  console.log(`usage: scripts/replicas [-c CLIENTS=6] [--before-kill 12] [--after-kill 12] [--request-timeout 60]
       [--parallel 2] [--model DIR]
Without --model a tiny synthetic checkpoint with the Gemma 4 test tokenizer is made in a temp dir.`);
  process.exit(0);
}
const num = (name) => {
  const v = Number(opt[name]);
  if (!Number.isInteger(v) || v < 1) {
    console.error(`replicas: --${name} must be a positive integer, got '${opt[name]}'`);
    process.exit(2);
  }
  return v;
};
const CLIENTS = num('clients');
const BEFORE = num('before-kill');
const AFTER = num('after-kill');
const REQUEST_TIMEOUT_MS = num('request-timeout') * 1000;
const PARALLEL = num('parallel');

const binary = resolve(root, process.env.SPECULA_BINARY ?? 'build/specula');
const testData = resolve(root, process.env.SPECULA_TEST_DATA ?? 'tests/data');
const nginx = process.env.NGINX ?? (existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : 'nginx');
if (!existsSync(binary)) {
  console.error(`replicas: no specula binary at ${binary} (build it, or set SPECULA_BINARY)`);
  process.exit(2);
}

const work = mkdtempSync(join(tmpdir(), 'specula-replicas-'));
const children = [];
const cleanup = () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
};
process.on('exit', cleanup);
const fail = (code, msg) => {
  console.error(`replicas: ${msg}`);
  process.exit(code);
};

const freePort = () =>
  new Promise((ok) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
async function waitHealthy(url, ms = 60000) {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    try {
      const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
      if (r.status === 200) return true;
    } catch {}
    await sleep(100);
  }
  return false;
}

// ---- the model, the replicas, nginx ----
let model = opt.model;
if (!model) {
  model = join(work, 'model');
  execFileSync(binary, ['synth', '--preset', 'tiny-dense', '--vocab', '262144', '--tokenizer',
                        join(testData, 'tokenizer-gemma4'), '--out', model], { stdio: 'ignore' });
}
const replicaPorts = [await freePort(), await freePort()];
const replicas = replicaPorts.map((port) => {
  const child = spawn(binary, ['serve', '--model', model, '--host', '127.0.0.1', '--port', String(port),
                               '--threads', '1', '--parallel', String(PARALLEL)], { stdio: 'ignore' });
  children.push(child);
  return { port, child, url: `http://127.0.0.1:${port}` };
});
for (const r of replicas) if (!(await waitHealthy(r.url))) fail(2, `replica on port ${r.port} did not become healthy`);

const front = await freePort();
// One process (no master/worker pair): killing it leaves no orphaned worker holding our stdio.
const conf = `master_process off;
pid ${work}/nginx.pid;
error_log ${work}/nginx-error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${work}/body;
  proxy_temp_path ${work}/proxy;
  fastcgi_temp_path ${work}/fastcgi;
  uwsgi_temp_path ${work}/uwsgi;
  scgi_temp_path ${work}/scgi;
  upstream specula {
    least_conn;
    server 127.0.0.1:${replicaPorts[0]} max_fails=1 fail_timeout=30s;
    server 127.0.0.1:${replicaPorts[1]} max_fails=1 fail_timeout=30s;
  }
  server {
    listen 127.0.0.1:${front};
    location / {
      proxy_pass http://specula;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_connect_timeout 2s;
      proxy_read_timeout 120s;
      proxy_next_upstream error timeout http_503;
      add_header X-Upstream $upstream_addr always;
    }
  }
}
`;
writeFileSync(join(work, 'nginx.conf'), conf);
const ngx = spawn(nginx, ['-p', work, '-c', join(work, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'ignore' });
children.push(ngx);
ngx.on('error', (e) => fail(2, `cannot start nginx (${nginx}): ${e.message} (scripts/setup installs it)`));
const frontUrl = `http://127.0.0.1:${front}`;
if (!(await waitHealthy(frontUrl))) fail(2, 'nginx did not answer /health');

// ---- the load ----
const results = [];  // {phase, status, upstream, ms}
let phase = 'before';
let sent = 0;
async function one(i) {
  const t0 = Date.now();
  const p = phase;
  try {
    const r = await fetch(`${frontUrl}/v1/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: `Request ${i}`, max_tokens: 24 + (i % 5) * 8, ignore_eos: true, temperature: 0 }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    await r.text();
    results.push({ phase: p, status: r.status, upstream: r.headers.get('x-upstream') ?? '', ms: Date.now() - t0 });
  } catch (e) {
    results.push({ phase: p, status: e.name === 'TimeoutError' ? 'timeout' : 'network', upstream: '', ms: Date.now() - t0 });
  }
}
async function client() {
  while (sent < BEFORE + AFTER + CLIENTS) {
    const i = sent++;
    if (phase === 'before' && i >= BEFORE) {
      // The kill: the requests in flight now are the ones the victim may have been serving.
      phase = 'during';
      replicas[0].child.kill('SIGKILL');
      setTimeout(() => { phase = 'after'; }, 300);
    }
    await one(i);
  }
}
await Promise.all(Array.from({ length: CLIENTS }, client));

// ---- the checks ----
const victim = `127.0.0.1:${replicaPorts[0]}`;
const survivor = `127.0.0.1:${replicaPorts[1]}`;
const count = (f) => results.filter(f).length;
const table = ['phase', 'before', 'during', 'after'].map((p) =>
  p === 'phase' ? 'phase    | 200 victim | 200 survivor | 502 | other'
    : `${p.padEnd(8)} | ${String(count((r) => r.phase === p && r.status === 200 && r.upstream.startsWith(victim))).padStart(10)} | ` +
      `${String(count((r) => r.phase === p && r.status === 200 && r.upstream.endsWith(survivor))).padStart(12)} | ` +
      `${String(count((r) => r.phase === p && r.status === 502)).padStart(3)} | ` +
      `${results.filter((r) => r.phase === p && r.status !== 200 && r.status !== 502).map((r) => r.status).join(',')}`);
console.log(table.join('\n'));
const problems = [];
if (count((r) => r.status === 'timeout') > 0) problems.push('a request hung until its timeout');
if (count((r) => r.phase === 'before' && r.status === 200 && r.upstream.startsWith(victim)) === 0 ||
    count((r) => r.phase === 'before' && r.status === 200 && r.upstream.endsWith(survivor)) === 0)
  problems.push('before the kill, both replicas should have served requests');
const after = results.filter((r) => r.phase === 'after');
if (after.length === 0) problems.push('no request was sent after the kill');
for (const r of after)
  if (r.status !== 200 || !r.upstream.endsWith(survivor)) problems.push(`after the kill: status ${r.status} from '${r.upstream}'`);
for (const r of results)
  if (r.status !== 200 && r.status !== 502) problems.push(`unexpected outcome '${r.status}' (${r.phase})`);
ngx.kill('SIGTERM');
replicas[1].child.kill('SIGTERM');
if (problems.length > 0) fail(1, problems.join('; '));
console.log(`replicas: ok (${results.length} requests; ${count((r) => r.status === 502)} ended with 502 when their replica died)`);
process.exit(0);
