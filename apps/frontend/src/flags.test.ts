/**
 * Issue 15, "every accepted flag does something, or is refused", for the frontend flags that are not
 * tested with their own feature: `--dyn-chat-processor` (refused unless dynamo), `--dyn-debug-perf`
 * (one stage-timing line per request), `nvext.agent_hints.speculative_prefill` (the next turn's
 * prefix is warmed on the worker that served the turn), and the mem-discovery refusals of
 * `--router-durable-kv-events` / `--serve-indexer`. Embedded simulated workers (block size 16).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KvrError, parseJson } from '@kvrouter/protocols';
import { startupExitCode } from '@kvrouter/router-host';
import { afterAll, describe, expect, it } from 'vitest';
import type { Frontend } from './frontend.js';
import { captureLog, eventually, startFrontend } from './test-helpers.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-fe-flags-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

async function refusal(argv: string[]): Promise<KvrError> {
  try {
    const fe = await startFrontend(argv);
    await fe.close(0);
  } catch (e) {
    if (e instanceof KvrError) return e;
    throw e;
  }
  throw new Error(`started with ${argv.join(' ')}`);
}

describe('refused at startup (exit 2, naming the flag and the allowed values)', () => {
  it('--dyn-chat-processor vllm', async () => {
    const e = await refusal(['--dyn-chat-processor', 'vllm']);
    expect(e.code).toBe('not_supported');
    expect(e.message).toMatch(/^--dyn-chat-processor vllm: not available in kvrouter .*; allowed: dynamo /);
    expect(e.detail).toEqual({ field: 'dyn-chat-processor' });
    expect(startupExitCode(e)).toBe(2);
  });

  it('--router-durable-kv-events and --serve-indexer with mem discovery', async () => {
    const d = await refusal(['--router-mode', 'kv', '--event-plane', 'nats', '--router-durable-kv-events']);
    expect(d.message).toMatch(/^--router-durable-kv-events: .* needs a shared discovery backend/);
    expect(startupExitCode(d)).toBe(2);
    const s = await refusal(['--router-mode', 'kv', '--serve-indexer']);
    expect(s.message).toMatch(/^--serve-indexer: .* needs a shared discovery backend/);
  });
});

describe('--dyn-debug-perf', () => {
  it('logs received → tokenized → routed → first token → done for each request', async () => {
    const log = captureLog();
    const fe = await startFrontend(
      ['--dyn-debug-perf', '--router-mode', 'kv', '--router-event-threads', '1'],
      {
        log,
      },
    );
    try {
      const r = await fetch(`${fe.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({
          model: 'mock-model',
          messages: [{ role: 'user', content: 'Time every stage of this request, please.' }],
          max_tokens: 5,
        }),
      });
      expect(r.status).toBe(200);
      const body = (await r.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
      const line = await eventually(
        () => log.lines.some((l) => l.startsWith('debug-perf ')),
        5000,
        'the perf line',
      ).then(() => log.lines.find((l) => l.startsWith('debug-perf '))!);
      const m =
        /^debug-perf request \S+ \(chat_completions, model mock-model\): received 0 ms → tokenized ([\d.]+) ms → routed ([\d.]+) ms → first token ([\d.]+) ms → done ([\d.]+) ms; route [\d.]+ ms, (\d+) prompt tokens, (\d+) output tokens, overlap \d+ blocks, worker [0-9a-f]+, migrations 0, outcome (\w+)$/.exec(
          line,
        );
      expect(m, line).not.toBeNull();
      const [tok, routed, first, done] = [m![1], m![2], m![3], m![4]].map(Number);
      // Stages are offsets from arrival, so they can only grow.
      expect(tok).toBeLessThanOrEqual(routed!);
      expect(routed).toBeLessThanOrEqual(first!);
      expect(first).toBeLessThanOrEqual(done!);
      expect(Number(m![5])).toBe(body.usage.prompt_tokens);
      expect(Number(m![6])).toBe(body.usage.completion_tokens);
      expect(m![7]).toBe('length');
      expect(log.lines.filter((l) => l.startsWith('debug-perf '))).toHaveLength(1);
    } finally {
      await fe.close(0);
    }
  });

  it('is silent without the flag', async () => {
    const log = captureLog();
    const fe = await startFrontend([], { log });
    try {
      const r = await fetch(`${fe.url}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({ model: 'mock-model', prompt: 'quiet', max_tokens: 2 }),
      });
      expect(r.status).toBe(200);
      await r.text();
      expect(log.lines.some((l) => l.startsWith('debug-perf'))).toBe(false);
    } finally {
      await fe.close(0);
    }
  });
});

describe('nvext.agent_hints.speculative_prefill', () => {
  let fe: Frontend;
  const log = captureLog();
  const decisions = path.join(dir, 'decisions.jsonl');
  afterAll(() => fe?.close(0));

  type Decision = {
    request_id: string;
    overlap_blocks: number;
    worker_id: number | bigint;
    query_only: boolean;
  };
  const decisionLog = (): Decision[] =>
    fs
      .readFileSync(decisions, 'utf8')
      .trim()
      .split('\n')
      .map((l) => parseJson(l) as Decision);

  it("warms the next turn's prefix on the worker that served the turn", async () => {
    fe = await startFrontend(
      [
        ...['--router-mode', 'kv', '--router-event-threads', '1'],
        ...['--decision-log', decisions, '--decision-log-sample', '1'],
      ],
      { log },
    );
    const messages = [
      { role: 'system', content: 'You are a terse assistant.' },
      { role: 'user', content: 'Name three rivers of Europe and say one thing about each of them.' },
    ];
    const chat = async (msgs: unknown[], nvext: Record<string, unknown>) => {
      const r = await fetch(`${fe.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ model: 'mock-model', messages: msgs, max_tokens: 48, nvext }),
      });
      expect(r.status).toBe(200);
      return parseJson(await r.text()) as {
        choices: { message: { content: string } }[];
        usage: { prompt_tokens: number };
        nvext?: { worker_id?: { decode_worker_id: number | bigint } };
      };
    };
    const turn1 = await chat(messages, {
      agent_hints: { speculative_prefill: true },
      extra_fields: ['worker_id'],
    });
    const worker = BigInt(turn1.nvext!.worker_id!.decode_worker_id);
    const sent =
      /^speculative prefill of request \S+: (\d+) tokens \(next-turn prefix\) sent to worker (\d+) as (speculative-prefill-\S+)$/;
    await eventually(() => log.lines.some((l) => sent.test(l)), 10_000, 'the warm-up');
    const [, n, to, id] = sent.exec(log.lines.find((l) => sent.test(l))!)!;
    const prefixTokens = Number(n);
    expect(BigInt(to!)).toBe(worker);
    // The warm-up was routed (pinned to the turn's worker) and booked like any request.
    const warm = decisionLog().find((d) => d.request_id === id);
    expect(warm && BigInt(warm.worker_id)).toBe(worker);
    // Prompt + answer + end of turn: longer than the turn's own prompt.
    expect(prefixTokens).toBeGreaterThan(turn1.usage.prompt_tokens);

    // The next turn's prompt starts with that prefix: once the warm-up's KV events reached the index,
    // its overlap is every full block of the prefix on that worker.
    const next = [
      ...messages,
      { role: 'assistant', content: turn1.choices[0]!.message.content },
      { role: 'user', content: 'And one more?' },
    ];
    const full = Math.floor(prefixTokens / 16);
    expect(full).toBeGreaterThan(Math.floor(turn1.usage.prompt_tokens / 16));
    let probe: Decision | undefined;
    for (let i = 0; i < 200 && !probe; i++) {
      await chat(next, { annotations: ['query_instance_id:probe'] });
      probe = decisionLog().filter((d) => d.query_only && d.overlap_blocks >= full)[0];
      if (!probe) await new Promise((r) => setTimeout(r, 50));
    }
    if (!probe) throw new Error('the warmed prefix never reached the index');
    expect(probe.overlap_blocks).toBe(full);
    expect(BigInt(probe.worker_id)).toBe(worker);
    expect(log.lines.filter((l) => l.startsWith('warn') || l.startsWith('error'))).toEqual([]);
  });

  it('does nothing without the hint', async () => {
    const before = log.lines.filter((l) => l.startsWith('speculative prefill')).length;
    const r = await fetch(`${fe.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({
        model: 'mock-model',
        messages: [{ role: 'user', content: 'no hint' }],
        max_tokens: 4,
      }),
    });
    expect(r.status).toBe(200);
    await r.text();
    // The finished turn would have started its warm-up by now (it is started when the last delta is read).
    expect(log.lines.filter((l) => l.startsWith('speculative prefill')).length).toBe(before);
    expect(decisionLog().filter((d) => d.request_id.startsWith('speculative-prefill-'))).toHaveLength(1);
  });
});
