// What the Node benchmarks of `specula serve` share: starting a server on a free port, and reading
// an SSE response as JSON events. Node 20, no packages.
import { spawn } from 'node:child_process';

// Starts `binary serve --port 0 ...args`; resolves to { child, port } once it says where it listens.
export function startServer(binary, args) {
  const child = spawn(binary, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolvePort, reject) => {
    let out = '';
    const onData = (d) => {
      out += d.toString();
      const m = out.match(/ready on http:\/\/[^:]+:(\d+)/);
      if (m) resolvePort({ child, port: Number(m[1]) });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => reject(new Error(`serve exited (${code}) before it was ready:\n${out}`)));
  });
}

// The JSON payloads of a streamed response's `data:` events, in order, up to `[DONE]`.
export async function* sseEvents(res) {
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 2);
      if (!event.startsWith('data: ')) continue;
      if (event === 'data: [DONE]') return;
      yield JSON.parse(event.slice(6));
    }
  }
}
