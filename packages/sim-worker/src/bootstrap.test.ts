import { afterEach, describe, expect, it } from 'vitest';
import { SimEngine } from '@kvrouter/engine-sim';
import type { KvrError } from '@kvrouter/protocols';
import type { WorkerId } from '@kvrouter/protocols';
import { BootstrapServer, waitForPrefillPeer } from './bootstrap.js';
import { engineClock as realClock } from './pass-scheduler.js';
import { disaggGenerateHandler } from './disagg.js';
import { parseDisaggParams } from '@kvrouter/protocols';
import { EngineDriver } from './driver.js';
import type { GenerateItem } from '@kvrouter/protocols';
import { PassScheduler } from './pass-scheduler.js';

const servers: BootstrapServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function server(): Promise<BootstrapServer> {
  const s = await BootstrapServer.listen({ host: '127.0.0.1' });
  servers.push(s);
  return s;
}

const code = (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => 'resolved',
    (e: KvrError) => e.code,
  );

describe('bootstrap rendezvous', () => {
  it('a waiter that arrives first is answered when the room completes; a late one at once', async () => {
    const s = await server();
    const early = waitForPrefillPeer({ host: '127.0.0.1', port: s.port, room: 'r1' });
    let settled = false;
    void early.then(() => (settled = true));
    await new Promise((r) => setTimeout(r, 30));
    expect(settled).toBe(false);
    s.complete('r1', { ok: true, transfer_ms: 1.5 });
    expect(await early).toEqual({ ok: true, transfer_ms: 1.5 });
    expect(await waitForPrefillPeer({ host: '127.0.0.1', port: s.port, room: 'r1' })).toEqual({
      ok: true,
      transfer_ms: 1.5,
    });
  });

  it('failure, timeout, abort and a closed port each reject with their code', async () => {
    const s = await server();
    const failed = waitForPrefillPeer({ host: '127.0.0.1', port: s.port, room: 'f' });
    s.complete('f', { ok: false, error: 'engine shut down' });
    expect(await code(failed)).toBe('prefill_failed');
    expect(
      await code(waitForPrefillPeer({ host: '127.0.0.1', port: s.port, room: 'never', timeoutMs: 50 })),
    ).toBe('bootstrap_timeout');
    const ac = new AbortController();
    const aborted = waitForPrefillPeer({
      host: '127.0.0.1',
      port: s.port,
      room: 'never2',
      signal: ac.signal,
    });
    ac.abort();
    expect(await code(aborted)).toBe('cancelled');
    const gone = await server();
    const port = gone.port;
    await gone.close();
    servers.pop();
    expect(await code(waitForPrefillPeer({ host: '127.0.0.1', port, room: 'x' }))).toBe('cannot_connect');
  });
});

function collect(stream: AsyncIterable<GenerateItem>) {
  const got: { t: number; item: GenerateItem }[] = [];
  const done = (async () => {
    for await (const item of stream) got.push({ t: performance.now(), item });
  })();
  return { got, done };
}

describe('bootstrap variant through the generate handlers', () => {
  it('decode dispatched before prefill waits for the room, then decodes without prefill', async () => {
    const b = await server();
    const scheduler = new PassScheduler({ clock: realClock });
    const mk = () =>
      new EngineDriver(new SimEngine({ numGpuBlocks: 1000, blockSize: 16, speedupRatio: 100 }), {
        scheduler,
      });
    const pDriver = mk();
    const dDriver = mk();
    const prefill = disaggGenerateHandler(
      pDriver,
      { mode: 'prefill', kvBytesPerToken: 114_688 },
      { workerId: 7n as WorkerId, clock: realClock, speedupRatio: 100, bootstrap: b },
    );
    const decode = disaggGenerateHandler(
      dDriver,
      { mode: 'decode', kvBytesPerToken: 114_688 },
      { workerId: 8n as WorkerId, clock: realClock, speedupRatio: 100 },
    );
    const tokens = Array.from({ length: 200 }, (_, i) => i + 1);
    const params = {
      prefill_worker_id: '7',
      prefill_dp_rank: 0,
      bootstrap_host: b.host,
      bootstrap_port: b.port,
      bootstrap_room: 'req-1',
    };
    expect(parseDisaggParams(params)).toEqual(params);
    const sig = () => new AbortController().signal;
    const d = collect(
      decode(
        { request_id: 'req-1', token_ids: tokens, stop_conditions: { max_tokens: 3 }, disagg: params },
        { signal: sig() },
      ),
    );
    await new Promise((r) => setTimeout(r, 50));
    expect(d.got).toHaveLength(0);
    expect(dDriver.stats.submitted).toBe(0);
    const p = collect(prefill({ request_id: 'req-1', token_ids: tokens }, { signal: sig() }));
    await p.done;
    await d.done;
    const pItem = p.got[0]!;
    expect(pItem.item.disaggregated_params).toMatchObject({ bootstrap_port: b.port, prompt_tokens: 200 });
    // the room is in the request the frontend builds, not in the finished prefill's parameters
    expect(pItem.item.disaggregated_params!.bootstrap_room).toBeUndefined();
    expect(d.got.flatMap((g) => g.item.token_ids)).toHaveLength(3);
    expect(d.got[0]!.t).toBeGreaterThanOrEqual(pItem.t);
    expect(dDriver.engine.stats().prefillTokensComputed).toBe(0);
  });

  it('a prefill cancelled before its token fails the room, and the waiting decode fails', async () => {
    const b = await server();
    const scheduler = new PassScheduler({ clock: realClock });
    const driver = new EngineDriver(new SimEngine({ numGpuBlocks: 1000, blockSize: 16, speedupRatio: 1 }), {
      scheduler,
    });
    const prefill = disaggGenerateHandler(
      driver,
      { mode: 'prefill', kvBytesPerToken: 1 },
      { workerId: 7n as WorkerId, clock: realClock, speedupRatio: 1, bootstrap: b },
    );
    const wait = waitForPrefillPeer({ host: '127.0.0.1', port: b.port, room: 'r9' });
    const ac = new AbortController();
    const p = collect(
      prefill(
        { request_id: 'r9', token_ids: Array.from({ length: 4000 }, (_, i) => i + 1) },
        { signal: ac.signal },
      ),
    );
    setTimeout(() => ac.abort(), 5);
    await p.done;
    expect(p.got).toHaveLength(0);
    expect(await code(wait)).toBe('prefill_failed');
  });
});
