// glim serve driven by the official OpenAI Node SDK.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

let srv, client;
before(async () => {
  srv = await startServer(['--model-id', 'tiny', '--test-mode', '--max-sessions', '4']);
  client = new OpenAI({ baseURL: srv.url, apiKey: 'x', maxRetries: 0 });
});
after(() => srv?.stop());

const tools = [{ type: 'function', function: { name: 'get_weather', parameters: {
  type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
const callScript = ' to=get_weather<|message|><atem:function_calls>\n<atem:invoke name="get_weather">\n' +
  '<atem:parameter name="city">Paris</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eom|>';

test('models', async () => {
  const list = await client.models.list();
  assert.equal(list.data[0].id, 'tiny');
});

test('chat, non-stream', async () => {
  const r = await client.chat.completions.create({ model: 'tiny', max_tokens: 8,
    messages: [{ role: 'user', content: 'Once upon a time' }] });
  assert.equal(r.object, 'chat.completion');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.usage.completion_tokens, 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 8);
  assert.equal(r.choices[0].finish_reason, 'length');
});

test('chat, stream with usage', async () => {
  const stream = await client.chat.completions.create({ model: 'tiny', max_tokens: 8, stream: true,
    stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Once upon a time' }] });
  let text = '', usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) { text += c.delta?.content ?? ''; finish = c.finish_reason ?? finish; }
  }
  assert.ok(text.length > 0);
  assert.equal(usage.completion_tokens, 8);
  assert.equal(finish, 'length');
});

test('multibyte text arrives intact', async () => {
  const s = '你好世界 🌍 café';
  const r = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }],
    glim_test_output: ' to=user<|message|>' + s });
  assert.equal(r.choices[0].message.content, s);
});

test('tool call, non-stream and stream', async () => {
  const req = { model: 'tiny', tools, messages: [{ role: 'user', content: 'Weather in Paris?' }], glim_test_output: callScript };
  const r = await client.chat.completions.create(req);
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  const stream = client.beta.chat.completions.stream({ ...req, stream: true });
  const final = await stream.finalChatCompletion();
  const sc = final.choices[0].message.tool_calls[0];
  assert.equal(sc.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(sc.function.arguments), { city: 'Paris' });
  assert.ok(!(final.choices[0].message.content ?? '').includes('atem'));
});

test('errors are OpenAI errors', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'tiny', temperature: 7,
    messages: [{ role: 'user', content: 'x' }] }), (e) => e.status === 400 && /temperature/.test(e.message));
  await assert.rejects(client.chat.completions.create({ model: 'other', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e.status === 404);
});
