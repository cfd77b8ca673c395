/**
 * Load and disconnects on loopback: 200 concurrent streams all complete and leave every worker's
 * load in the router at zero; a client that disconnects mid-stream frees its router state and
 * stops the worker's generation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { bodyReader, eventually, routerIdle, startFrontend } from '../test-helpers.js';

let fe: Frontend;
const MODEL = 'mock-model';

beforeAll(async () => {
  fe = await startFrontend(['--router-mode', 'kv', '--router-event-threads', '1']);
});
afterAll(async () => {
  await fe.close(0);
});

/** Reads an SSE body to the end; returns the data payloads. */
async function readSse(r: Response): Promise<string[]> {
  const text = await r.text();
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
}

describe('concurrency', () => {
  it('200 concurrent streaming chat requests all complete; afterwards every worker is idle in the router', async () => {
    const N = 200;
    const results = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const r = await fetch(`${fe.url}/v1/chat/completions`, {
          method: 'POST',
          body: JSON.stringify({
            model: MODEL,
            // Ten conversations with a shared prefix each, so the cache and the load terms both matter.
            messages: [
              { role: 'system', content: `conversation ${i % 10}: ${'context '.repeat(100)}` },
              { role: 'user', content: `question ${i}` },
            ],
            max_tokens: 8,
            stream: true,
            stream_options: { include_usage: true },
          }),
        });
        expect(r.status).toBe(200);
        return readSse(r);
      }),
    );
    for (const events of results) {
      expect(events[events.length - 1]).toBe('[DONE]');
      const usage = JSON.parse(events[events.length - 2]!) as { usage: { completion_tokens: number } };
      expect(usage.usage.completion_tokens).toBe(8);
    }
    await eventually(() => routerIdle(fe), 5000, 'every booking freed');
    // Spread over all four workers (the cost steers new conversations away from loaded ones).
    const workers = fe.fleet!.workers;
    expect(workers.every((w) => w.stats.finished > 0)).toBe(true);
    expect(workers.reduce((n, w) => n + w.stats.finished, 0)).toBeGreaterThanOrEqual(N);
  });
});

describe('disconnect', () => {
  it('a client that goes away mid-stream frees its booking and stops the worker generating', async () => {
    const cancelledBefore = fe.fleet!.workers.reduce((n, w) => n + w.stats.cancelled, 0);
    const ac = new AbortController();
    const r = await fetch(`${fe.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: 'tell me everything' }],
        max_tokens: 20_000,
        stream: true,
      }),
      signal: ac.signal,
    });
    const reader = bodyReader(r);
    // The role chunk and at least one content chunk: generation is under way.
    let seen = '';
    while ((seen.match(/data: /g) ?? []).length < 3) seen += (await reader.read()) ?? '';
    const live = fe.registry.allSets()[0]!.router.liveRequestCount;
    expect(live).toBe(1);
    ac.abort();
    await eventually(() => routerIdle(fe), 5000, 'booking freed after disconnect');
    await eventually(
      () => fe.fleet!.workers.reduce((n, w) => n + w.stats.cancelled, 0) === cancelledBefore + 1,
      5000,
      'the worker cancelled the request',
    );
    const text = await (await fetch(`${fe.url}/metrics`)).text();
    expect(text).toMatch(/dynamo_frontend_disconnected_clients(_total)? 1/);
    expect(text).toMatch(/dynamo_frontend_inflight_requests\{model="mock-model"\} 0/);
  });

  it('a non-streaming client that goes away is cancelled too', async () => {
    const ac = new AbortController();
    const p = fetch(`${fe.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, prompt: 'a long story', max_tokens: 20_000 }),
      signal: ac.signal,
    }).catch((e: unknown) => e);
    await eventually(() => fe.registry.allSets()[0]!.router.liveRequestCount === 1, 5000, 'request routed');
    ac.abort();
    await p;
    await eventually(() => routerIdle(fe), 5000, 'booking freed');
  });
});

describe('early end', () => {
  it('a stop string ends the response and cancels the worker that was still generating', async () => {
    const cancelledBefore = fe.fleet!.workers.reduce((n, w) => n + w.stats.cancelled, 0);
    // The engines emit random cl100k ids: within 20 000 tokens an "e" turns up long before the end.
    const r = await fetch(`${fe.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: 'go' }],
        max_tokens: 20_000,
        stop: ['e'],
        stream: true,
      }),
    });
    const events = await readSse(r);
    expect(events[events.length - 1]).toBe('[DONE]');
    const last = JSON.parse(events[events.length - 2]!) as { choices: { finish_reason: string | null }[] };
    expect(last.choices[0]!.finish_reason).toBe('stop');
    // The text before the stop string never contains it.
    const text = events
      .slice(0, -1)
      .map(
        (e) =>
          (JSON.parse(e) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '',
      )
      .join('');
    expect(text).not.toContain('e');
    await eventually(() => routerIdle(fe), 5000, 'booking freed after the stop string');
    await eventually(
      () => fe.fleet!.workers.reduce((n, w) => n + w.stats.cancelled, 0) === cancelledBefore + 1,
      5000,
      'the worker cancelled the request',
    );
  });
});
