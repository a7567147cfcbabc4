// Start `glim serve` on a free loopback port (--port 0; the port is read from
// its "listening on" line), wait for /health, and kill it when done.
import { spawn } from 'node:child_process';
import path from 'node:path';

export const GLIM_BIN = process.env.GLIM_BIN ?? path.resolve(import.meta.dirname, '../../build/glim');
export const TESTDATA = process.env.GLIM_TESTDATA ?? path.resolve(import.meta.dirname, '../../../shared/testdata');

export async function startServer(args = []) {
  const model = path.join(TESTDATA, 'models/stories260K.gguf');
  const proc = spawn(GLIM_BIN, ['serve', '-m', model, '--port', '0', '--threads', '1', ...args],
                     { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('glim serve did not start:\n' + log)), 20000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => reject(new Error(`glim serve exited (${code}):\n` + log)));
  });
  const res = await fetch(`http://127.0.0.1:${port}/health`);
  if (res.status !== 200) throw new Error('/health: ' + res.status);
  return { port, proc, url: `http://127.0.0.1:${port}/v1`, stop: () => proc.kill('SIGTERM'), log: () => log };
}
