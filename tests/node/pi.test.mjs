// The pi coding agent, configured per docs/pi.md, completes a one-shot prompt
// against glim serve. The tiny model cannot act as an agent, so the server
// runs in test-output mode and replies with a scripted answer.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer } from './server.mjs';

let srv, home;
before(async () => {
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'glim-pi-'));
  const script = path.join(home, 'script.txt');
  fs.writeFileSync(script, ' to=self<|message|>The user greets me.<|eom|><|start|>assistant to=user<|message|>Hello from glim serve!');
  srv = await startServer(['--model-id', 'muse-glimmer-30B', '--test-output', script, '--max-sessions', '4',
                           '--max-context', '65536', '-v']);
  fs.mkdirSync(path.join(home, '.pi/agent'), { recursive: true });
  fs.writeFileSync(path.join(home, '.pi/agent/models.json'), JSON.stringify({ providers: { 'muse-glimmer-local': {
    baseUrl: srv.url, api: 'openai-completions', apiKey: 'x',
    models: [{ id: 'muse-glimmer-30B', reasoning: true, contextWindow: 65536, maxTokens: 256,
      compat: { supportsDeveloperRole: false, supportsReasoningEffort: false, thinkingFormat: 'chat-template',
                chatTemplateKwargs: { return_reasoning: true }, sendSessionAffinityHeaders: true } }] } } }));
});
after(() => { srv?.stop(); fs.rmSync(home, { recursive: true, force: true }); });

test('pi one-shot prompt', async () => {
  const pi = path.resolve(import.meta.dirname, 'node_modules/.bin/pi');
  const out = await new Promise((resolve, reject) => {
    // stdin closed: with a pipe there, pi -p would wait to read more prompt from it
    const p = spawn(pi, ['--provider', 'muse-glimmer-local', '--model', 'muse-glimmer-30B', '--no-session',
                         '--offline', '-p', 'Say hello'],
                    { env: { ...process.env, HOME: home, PI_OFFLINE: '1' }, cwd: home, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), 60000);
    p.on('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else reject(new Error(`pi exited ${code}\n${stdout}\n${stderr}\n${srv.log()}`));
    });
  });
  assert.match(out, /Hello from glim serve!/);
  assert.match(srv.log(), /llm_turn_stats/);
});
