/**
 * Benchmark server process: the frontend with fast embedded simulated workers, and beside it a
 * plain express reverse proxy to the very same workers (JSON body → ChatML → tokens, round robin,
 * SSE back; no KV routing, no caches, no metrics) as the baseline. Prints one JSON line
 * `{"frontend": url, "proxy": url}` when both listen. Flags after the script name go to the frontend.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import '../http/cjs-interop.js';
import express from 'express';
import { resolveConfig } from '@kvrouter/config';
import { InprocRequestClient, defaultInprocHub } from '@kvrouter/runtime';
import type { GenerateItem } from '@kvrouter/sim-worker';
import { Frontend } from '../frontend.js';
import { ChatMlTemplate } from '../tokenizer/template.js';
import { TiktokenTokenizer } from '../tokenizer/tiktoken.js';

const speedup = Number(process.env.BENCH_ENGINE_SPEEDUP ?? '1000');
const { config } = resolveConfig('frontend', ['--http-host', '127.0.0.1', '--http-port', '0', ...process.argv.slice(2)], {});
const fe = await Frontend.start(config, {
  log: { info: () => undefined, warn: (m) => console.error(m), error: (m) => console.error(m) },
  embedded: { engine: { speedupRatio: speedup, decodeSpeedupRatio: 1 }, defaultMaxTokens: 16 },
});

const workers = fe.fleet!.workers;
const client = new InprocRequestClient(defaultInprocHub());
const tok = new TiktokenTokenizer();
const template = new ChatMlTemplate();
let rr = 0;
let seq = 0;
const app = express();
app.disable('x-powered-by');
app.post('/v1/chat/completions', express.json({ limit: '192mb' }), (req, res, next) => {
  void (async () => {
    const t0 = performance.now();
    const b = req.body as { model: string; messages: { role: 'user'; content: string }[]; max_tokens?: number };
    const ids = Uint32Array.from(tok.encode(template.render(b.messages, { addGenerationPrompt: true })));
    const w = workers[rr++ % workers.length]!;
    const id = `p-${++seq}`;
    const dispatched = performance.now();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let n = 0;
    for await (const item of client.stream<GenerateItem>(w.instance.transport, 'generate', {
      request_id: id,
      model: b.model,
      token_ids: ids,
      stop_conditions: { max_tokens: b.max_tokens ?? 16 },
    })) {
      n += item.token_ids.length;
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: cl100k.decode(item.token_ids) }, finish_reason: item.finish_reason ?? null }] })}\n\n`);
    }
    const end = performance.now();
    res.write(`data: ${JSON.stringify({ id, choices: [], usage: { prompt_tokens: ids.length, completion_tokens: n }, nvext: { timing: { dispatch_ms: dispatched - t0, engine_ms: end - dispatched } } })}\n\n`);
    res.end('data: [DONE]\n\n');
  })().catch(next);
});
const proxy = http.createServer(app);
proxy.keepAliveTimeout = 65_000;
await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
const port = (proxy.address() as AddressInfo).port;
console.log(JSON.stringify({ frontend: fe.url, proxy: `http://127.0.0.1:${port}`, model: fe.registry.list()[0]!.id }));

const stop = () => {
  // A benchmark server must never outlive its run, even with requests still open.
  setTimeout(() => process.exit(0), 5000).unref();
  proxy.close();
  void fe.close(0).then(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
