/** Sticky sessions and session_control (docs/protocol.md §12, §5.6) on a virtual clock. */
import { describe, expect, it } from 'vitest';
import type { Nvext, SessionAction, WorkerWithDpRank } from '@kvrouter/protocols';
import { flush, harness, toks, w, type TestOptions } from './test-fixtures.js';
import type { SessionRpcPayload } from './sessions.js';

const sc = (session_id: string, action?: SessionAction, timeout = 60): Nvext => ({
  session_control: { session_id, ...(action ? { action } : {}), timeout },
});

function setup(opts: TestOptions = {}) {
  const calls: { worker: WorkerWithDpRank; payload: SessionRpcPayload }[] = [];
  let fail = false;
  const h = harness({
    sessionRpc: (worker, payload) => {
      calls.push({ worker, payload });
      return fail ? Promise.reject(new Error('engine says no')) : Promise.resolve({ status: 'ok' });
    },
    ...opts,
  });
  h.router.addWorker({ workerId: 1 });
  h.router.addWorker({ workerId: 2 });
  return { ...h, calls, failRpc: (v: boolean) => (fail = v) };
}

describe('sticky sessions', () => {
  it('bind: route normally, then later turns are pinned to the bound rank (scoring skipped, still booked)', async () => {
    const { router } = setup();
    const d1 = await router.route({ requestId: 't1', tokens: toks(1, 64), nvext: sc('s', 'bind') });
    expect(d1.explanation.reason).toBe('kv_argmin');
    expect(router.sessionBinding('s')?.worker).toEqual(d1.worker);
    // Make the bound worker the worse choice: the binding still wins.
    await router.route({
      requestId: 'load',
      tokens: toks(2, 800),
      nvext: { backend_instance_id: d1.workerId } as Nvext,
    });
    const d2 = await router.route({ requestId: 't2', tokens: toks(3, 64), nvext: sc('s') });
    expect([d2.workerId, d2.explanation.reason, d2.booked]).toEqual([d1.workerId, 'session', true]);
    // An explicit pin wins over the binding.
    const other = d1.workerId === 1n ? 2n : 1n;
    const d3 = await router.route({
      requestId: 't3',
      tokens: toks(3, 64),
      nvext: { ...sc('s'), backend_instance_id: other } as Nvext,
    });
    expect(d3.workerId).toBe(other);
  });

  it('sliding TTL: each lookup extends expires_at = now + ttl; idle past the TTL the binding is reaped', async () => {
    const { router, clock } = setup();
    const d = await router.route({ requestId: 't1', tokens: toks(1, 64), nvext: sc('s', 'bind', 60) });
    expect(router.sessionBinding('s')!.expiresAt).toBe(60_000);
    clock.advance(50_000);
    await router.route({ requestId: 't2', tokens: toks(2, 64), nvext: sc('s') });
    expect(router.sessionBinding('s')!.expiresAt).toBe(110_000);
    clock.advance(50_000); // t = 100 s: 100 s after binding, 50 s after the lookup — still bound
    const d3 = await router.route({ requestId: 't3', tokens: toks(3, 64), nvext: sc('s') });
    expect([d3.workerId, d3.explanation.reason]).toEqual([d.workerId, 'session']);
    // expires at 160 s; the reaper (every 30 s: 180 s is the first tick after) removes it.
    clock.advance(80_000);
    expect(router.sessionBinding('s')).toBeUndefined();
    const d4 = await router.route({ requestId: 't4', tokens: toks(4, 64), nvext: sc('s') });
    expect(d4.explanation.reason).toBe('kv_argmin');
  });

  it('a lookup after expiry (before the reaper ran) does not use the binding', async () => {
    const { router, clock } = setup();
    await router.route({ requestId: 't1', tokens: toks(1, 64), nvext: sc('s', 'bind', 10) });
    clock.advance(10_000); // expires_at = 10 s; the reaper next runs at 30 s
    expect(router.sessionBinding('s')).toBeDefined();
    const d = await router.route({ requestId: 't2', tokens: toks(2, 64), nvext: sc('s') });
    expect(d.explanation.reason).toBe('kv_argmin');
    expect(router.sessionBinding('s')).toBeUndefined();
  });

  it('open: open_session (timeout + 30, capacity 65536) to the chosen worker before the decision resolves, then bind', async () => {
    const { router, calls } = setup();
    const d = await router.route({ requestId: 't1', tokens: toks(1, 64), nvext: sc('s', 'open', 120) });
    expect(calls).toEqual([
      {
        worker: d.worker,
        payload: { action: 'open_session', session_id: 's', timeout: 150, capacity_of_str_len: 65536 },
      },
    ]);
    expect(router.sessionBinding('s')).toMatchObject({ worker: d.worker, ttlMs: 120_000, opened: true });
  });

  it('open failure fails the request and frees its booking', async () => {
    const { router, failRpc } = setup();
    failRpc(true);
    await expect(
      router.route({ requestId: 't1', tokens: toks(1, 64), nvext: sc('s', 'open') }),
    ).rejects.toMatchObject({
      code: 'session_open_failed',
      status: 503,
    });
    expect(router.sessionBinding('s')).toBeUndefined();
    expect(router.liveRequestCount).toBe(0);
    for (const id of [1, 2])
      expect(router.rankLoad(w(id))).toEqual({
        active_prefill_tokens: 0,
        active_decode_blocks: 0,
        active_requests: 0,
      });
  });

  it('close: unbinds at once (this turn still uses the binding); close_session is sent when the request ends', async () => {
    const { router, calls } = setup();
    const d1 = await router.route({ requestId: 't1', tokens: toks(1, 64), nvext: sc('s', 'open') });
    const d2 = await router.route({ requestId: 't2', tokens: toks(2, 64), nvext: sc('s', 'close') });
    expect([d2.workerId, d2.explanation.reason]).toEqual([d1.workerId, 'session']);
    expect(router.sessionBinding('s')).toBeUndefined();
    expect(calls.map((c) => c.payload.action)).toEqual(['open_session']);
    router.free('t2');
    await flush();
    expect(calls.map((c) => c.payload)).toEqual([
      expect.objectContaining({ action: 'open_session' }),
      { action: 'close_session', session_id: 's' },
    ]);
    expect(calls[1].worker).toEqual(d1.worker);
  });

  it('expiry of an opened session sends close_session; a bind-only session expires silently', async () => {
    const { router, clock, calls } = setup();
    const d = await router.route({ requestId: 't1', tokens: toks(1, 64), nvext: sc('o', 'open', 10) });
    await router.route({ requestId: 't2', tokens: toks(2, 64), nvext: sc('b', 'bind', 10) });
    clock.advance(30_000); // reaper tick
    await flush();
    expect(calls.map((c) => [c.payload.action, c.payload.session_id])).toEqual([
      ['open_session', 'o'],
      ['close_session', 'o'],
    ]);
    expect(calls[1].worker).toEqual(d.worker);
  });

  it('a worker that leaves drops its bindings', async () => {
    const { router } = setup();
    const d = await router.route({ requestId: 't1', tokens: toks(1, 64), nvext: sc('s', 'bind') });
    router.removeWorker(d.workerId);
    expect(router.sessionBinding('s')).toBeUndefined();
  });
});

describe('bounded session table (issue 17)', () => {
  it('holds at most maxBindings: a new id evicts the binding refreshed longest ago', async () => {
    const { StickySessions, MAX_SESSION_BINDINGS } = await import('./sessions.js');
    expect(MAX_SESSION_BINDINGS).toBe(100_000);
    const s = new StickySessions(3);
    const wk = w(1);
    s.bind('a', wk, 1000, false, 0);
    s.bind('b', wk, 1000, false, 1);
    s.bind('c', wk, 1000, false, 2);
    // Refreshing `a` makes `b` the oldest.
    expect(s.lookup('a', 3).binding?.sessionId).toBe('a');
    s.bind('d', wk, 1000, false, 4);
    expect([s.size, s.evicted, s.peek('b'), !!s.peek('a'), !!s.peek('c'), !!s.peek('d')]).toEqual([
      3,
      1,
      undefined,
      true,
      true,
      true,
    ]);
    // Re-binding a held id evicts nothing.
    s.bind('c', wk, 1000, false, 5);
    expect([s.size, s.evicted]).toEqual([3, 1]);
    // 10,000 made-up ids later the table still holds 3.
    for (let i = 0; i < 10_000; i++) s.bind(`made-up-${i}`, wk, 1000, false, 6 + i);
    expect([s.size, s.evicted]).toEqual([3, 10_001]);
    expect(() => new StickySessions(0)).toThrow(/maxBindings/);
  });

  it('a router binding more sessions than the limit keeps MAX_SESSION_BINDINGS of them', async () => {
    const { MAX_SESSION_BINDINGS } = await import('./sessions.js');
    const { router } = setup();
    const n = MAX_SESSION_BINDINGS + 50;
    for (let i = 0; i < n; i++) {
      await router.route({ requestId: `r${i}`, tokens: toks(1, 16), nvext: sc(`s${i}`, 'bind') });
      router.free(`r${i}`);
    }
    expect(router.sessionCount).toBe(MAX_SESSION_BINDINGS);
    expect(router.sessionsEvicted).toBe(50);
    expect(router.sessionBinding('s0')).toBeUndefined();
    expect(router.sessionBinding(`s${n - 1}`)).toBeDefined();
  });
});
