/**
 * vLLM-compatible mode in-process: OpenAI HTTP API (token and text prompts, SSE and unary, usage with
 * cached tokens, errors naming the field, cancellation) and vLLM-format ZMQ KV events read back by
 * the kv-events ingest (the consumer a worker adapter runs), plus the replay socket.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import { localBlockHashes, type RouterEvent } from '@kvrouter/protocols';
import { KvEventPublisher, VllmZmqIngest, readVllmReplay } from '@kvrouter/kv-events';
import { MockerConfigError } from './options.js';
import { startVllmCompat, vllmCompatPlan, type RunningVllmMocker } from './vllm-compat.js';

const cfg = (...argv: string[]) => resolveConfig('mocker', ['--model-path', 'mock-vllm', ...argv], {}).config;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await sleep(5);
  }
}

interface Chunk {
  choices: Array<{
    text?: string;
    token_ids?: number[];
    prompt_token_ids?: number[];
    finish_reason: string | null;
  }>;
  usage: {
    prompt_tokens: number;
    completion_tokens: number;
    prompt_tokens_details: { cached_tokens: number };
  } | null;
  error?: { type: string; param: string | null };
}

function sse(text: string): { chunks: Chunk[]; done: boolean } {
  const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
  const done = events.at(-1) === 'data: [DONE]';
  return {
    chunks: events.filter((e) => e !== 'data: [DONE]').map((e) => JSON.parse(e.slice(6)) as Chunk),
    done,
  };
}

describe('vllmCompatPlan', () => {
  it('is off without --http-ports and checks one port per worker', () => {
    expect(vllmCompatPlan(cfg())).toBeNull();
    expect(
      vllmCompatPlan(
        cfg('--http-ports', '8100,8101', '--num-workers', '2', '--zmq-kv-events-ports', '5557,5567'),
      ),
    ).toEqual({
      host: '0.0.0.0',
      httpPorts: [8100, 8101],
      kvEventsPorts: [5557, 5567],
      replayPorts: null,
      loraNames: [],
    });
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e;
      }
      return null;
    };
    const e1 = err(() => vllmCompatPlan(cfg('--http-ports', '0', '--num-workers', '2')));
    expect(e1).toBeInstanceOf(MockerConfigError);
    expect((e1 as Error).message).toBe('--http-ports needs one port per worker (--num-workers 2), got 1');
    const e2 = err(() => vllmCompatPlan(cfg('--http-ports', '0', '--zmq-replay-ports', '0')));
    expect((e2 as Error).message).toBe('--zmq-replay-ports needs --zmq-kv-events-ports');
  });
});

describe('vLLM-compatible mocker with data-parallel ranks', () => {
  it('X-Data-Parallel-Rank picks the rank; each rank has its own cache and its own ZMQ socket', async () => {
    const c = cfg(
      ...[
        '--http-host',
        '127.0.0.1',
        '--http-ports',
        '0',
        '--zmq-kv-events-ports',
        '0',
        '--data-parallel-size',
        '2',
      ],
      ...['--block-size', '4', '--num-gpu-blocks-override', '64', '--speedup-ratio', '50'],
    );
    const m = await startVllmCompat(c, vllmCompatPlan(c)!, { log: () => undefined });
    try {
      const d = m.describe()[0];
      expect(d.kv_events).toHaveLength(2);
      expect(new Set(d.kv_events).size).toBe(2);
      const ask = (rank: number | null) =>
        fetch(`${d.http}/v1/completions`, {
          method: 'POST',
          headers: rank === null ? {} : { 'x-data-parallel-rank': String(rank) },
          body: JSON.stringify({ prompt: Array.from({ length: 12 }, (_, i) => i + 1), max_tokens: 1 }),
        });
      expect((await ask(1)).status).toBe(200);
      const blocks = async () =>
        (
          (await (await fetch(`${d.http}/debug/kv_blocks`)).json()) as { ranks: Array<{ blocks: string[] }> }
        ).ranks.map((r) => r.blocks.length);
      // 12 prompt tokens = 3 full blocks of 4, all on rank 1.
      expect(await blocks()).toEqual([0, 3]);
      const bad = await ask(2);
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { param: string } }).error.param).toBe('X-Data-Parallel-Rank');
    } finally {
      await m.stop();
    }
  });
});

describe('vLLM-compatible mocker', () => {
  let m: RunningVllmMocker;
  let url: string;
  const events: RouterEvent[] = [];
  let ingest: VllmZmqIngest;

  beforeAll(async () => {
    const c = cfg(
      ...[
        '--http-host',
        '127.0.0.1',
        '--http-ports',
        '0',
        '--zmq-kv-events-ports',
        '0',
        '--zmq-replay-ports',
        '0',
      ],
      ...[
        '--block-size',
        '4',
        '--num-gpu-blocks-override',
        '256',
        '--speedup-ratio',
        '50',
        '--model-name',
        'mock-vllm',
      ],
    );
    m = await startVllmCompat(c, vllmCompatPlan(c)!, { log: () => undefined });
    url = m.describe()[0].http;
    const pub = new KvEventPublisher({ workerId: 1n, sink: { publishEvent: (e) => events.push(e) } });
    ingest = new VllmZmqIngest({ endpoint: m.describe()[0].kv_events[0], publisher: pub, kvBlockSize: 4 });
    await sleep(300); // PUB/SUB slow joiner: the subscription must be live before the first request
  });
  afterAll(async () => {
    await ingest?.close();
    await m?.stop();
  });

  it('serves /health, /version and /v1/models', async () => {
    expect((await fetch(`${url}/health`)).status).toBe(200);
    const models = (await (await fetch(`${url}/v1/models`)).json()) as {
      data: Array<{ id: string; max_model_len: number }>;
    };
    // max_model_len = 256 blocks × 4 tokens
    expect(models.data).toMatchObject([{ id: 'mock-vllm', max_model_len: 1024 }]);
  });

  it('streams a token-id completion; its KV blocks arrive as vLLM events hashed from their tokens', async () => {
    const r = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({
        model: 'mock-vllm',
        prompt: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        max_tokens: 3,
        stream: true,
        stream_options: { include_usage: true },
        return_token_ids: true,
        ignore_eos: true,
      }),
    });
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    const { chunks, done } = sse(await r.text());
    expect(done).toBe(true);
    const gen = chunks.flatMap((c) => c.choices.flatMap((x) => x.token_ids ?? []));
    expect(gen).toHaveLength(3);
    expect(chunks[0].choices[0].prompt_token_ids).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // Output text: one letter per token, 'a' + id mod 26.
    expect(chunks.flatMap((c) => c.choices.map((x) => x.text)).join('')).toBe(
      gen.map((t) => String.fromCharCode(97 + (t % 26))).join(''),
    );
    expect(chunks.flatMap((c) => c.choices.map((x) => x.finish_reason)).filter((f) => f !== null)).toEqual([
      'length',
    ]);
    expect(chunks.at(-1)!.usage).toMatchObject({
      prompt_tokens: 10,
      completion_tokens: 3,
      prompt_tokens_details: { cached_tokens: 0 },
    });

    // 10 prompt tokens + 2 generated ones have KV (the last token's is never computed): 3 full blocks of 4.
    // §2.4: local hashes of [0..3], [4..7] = 9143094415614847814, 12124091508212882195; sequence hash of
    // block 1 = 9510318385840434533. Block 2 is [8, 9, g0, g1].
    await until(() => events.flatMap((e) => ('stored' in (e.event.data as object) ? [e] : [])).length > 0);
    await until(() => storedBlocks(events).length === 3);
    const blocks = storedBlocks(events);
    expect(blocks.slice(0, 2).map((b) => b.tokens_hash)).toEqual([
      9143094415614847814n,
      12124091508212882195n,
    ]);
    expect(blocks.slice(0, 2).map((b) => b.block_hash)).toEqual([9143094415614847814n, 9510318385840434533n]);
    expect(blocks[2].tokens_hash).toBe(localBlockHashes(Uint32Array.from([8, 9, gen[0], gen[1]]), 4)[0]);
    const dbg = (await (await fetch(`${url}/debug/kv_blocks`)).json()) as {
      ranks: Array<{ blocks: string[] }>;
    };
    expect(new Set(dbg.ranks[0].blocks)).toEqual(new Set(blocks.map((b) => String(b.block_hash))));
  });

  it('text chat prompts: bytes as tokens; a repeated prompt reports its prefix-cache hit', async () => {
    const ask = async () =>
      (await (
        await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
        })
      ).json()) as {
        object: string;
        choices: Array<{ message: { content: string } }>;
        usage: Chunk['usage'];
      };
    const a = await ask();
    // "<|user|>hi\n<|assistant|>" = 8 + 2 + 1 + 13 = 24 bytes.
    expect(a.object).toBe('chat.completion');
    expect(a.usage).toMatchObject({
      prompt_tokens: 24,
      completion_tokens: 2,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    expect(a.choices[0].message.content).toHaveLength(2);
    const b = await ask();
    // A cached prefix covers at most floor((24 − 1) / 4) = 5 blocks = 20 tokens (the last token is recomputed).
    expect(b.usage!.prompt_tokens_details.cached_tokens).toBe(20);
  });

  it('bad requests get 400/404 naming the field; nothing is enqueued', async () => {
    const post = async (path: string, body: unknown) => {
      const r = await fetch(`${url}${path}`, { method: 'POST', body: JSON.stringify(body) });
      return {
        status: r.status,
        body: (await r.json()) as { error: { type: string; param: string | null } },
      };
    };
    expect(await post('/v1/completions', { prompt: [1, -2] })).toMatchObject({
      status: 400,
      body: { error: { param: 'prompt[1]' } },
    });
    expect(await post('/v1/completions', { prompt: 'x', max_tokens: 0 })).toMatchObject({
      status: 400,
      body: { error: { param: 'max_tokens' } },
    });
    expect(await post('/v1/completions', { model: 'other', prompt: 'x' })).toMatchObject({
      status: 404,
      body: { error: { param: 'model' } },
    });
    expect(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 3 }] })).toMatchObject({
      status: 400,
      body: { error: { param: 'messages[0].content' } },
    });
    // 256 blocks × 4 = 1024 tokens: a 2000-token prompt cannot fit.
    expect(
      await post('/v1/completions', { prompt: Array.from({ length: 2000 }, (_, i) => i) }),
    ).toMatchObject({
      status: 400,
      body: { error: { type: 'request_too_large' } },
    });
    expect(m.workers[0].engine.driver.activeRequests).toBe(0);
  });

  it('a client that disconnects mid-stream cancels its request in the engine', async () => {
    // Real-time engine (speedup 1): 1000 tokens take >= 5.7 s of model time, so the request is still
    // running when the client goes away even on a loaded machine.
    const c = cfg(
      '--http-host',
      '127.0.0.1',
      '--http-ports',
      '0',
      '--block-size',
      '4',
      '--num-gpu-blocks-override',
      '256',
    );
    const slow = await startVllmCompat(c, vllmCompatPlan(c)!, { log: () => undefined });
    try {
      const driver = slow.workers[0].engine.driver;
      const ac = new AbortController();
      const r = await fetch(`${slow.describe()[0].http}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: 'tell me a long story', max_tokens: 1000, stream: true }),
        signal: ac.signal,
      });
      const reader = r.body!.getReader();
      await reader.read();
      expect(driver.activeRequests).toBe(1);
      // vLLM's gauges while it runs: 1 running request holding at least its 20 prompt tokens = 5 of 256 blocks.
      const metrics = await (await fetch(`${slow.describe()[0].http}/metrics`)).text();
      expect(metrics).toMatch(/^vllm:num_requests_running\{engine="0",model_name="mock-vllm"\} 1$/m);
      const usage = Number(
        /^vllm:kv_cache_usage_perc\{engine="0",model_name="mock-vllm"\} (\S+)$/m.exec(metrics)![1],
      );
      expect(usage).toBeGreaterThanOrEqual(5 / 256);
      expect(usage).toBeLessThan(1);
      ac.abort();
      await until(() => driver.activeRequests === 0);
      expect(driver.stats.cancelled).toBe(1);
      expect(driver.stats.finished).toBe(0);
    } finally {
      await slow.stop();
    }
  });

  it('the replay socket returns every batch from a sequence number', async () => {
    const seqs = (await readVllmReplay(m.describe()[0].replay[0], 0n)).map((r) => r.seq);
    const published = m.workers[0].engine.publishers[0].sequence;
    expect(seqs.length).toBeGreaterThan(0);
    expect(seqs).toEqual(Array.from({ length: Number(published) }, (_, i) => BigInt(i)));
  });
});

function storedBlocks(evs: RouterEvent[]): Array<{ block_hash: bigint; tokens_hash: bigint }> {
  return evs.flatMap((e) => {
    const d = e.event.data;
    return typeof d === 'object' && 'stored' in d ? d.stored.blocks : [];
  });
}
