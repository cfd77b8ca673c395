import { describe, expect, it } from 'vitest';
import { SimEngine, type EngineConfig, type EngineLoad } from '@kvrouter/engine-sim';
import { KvrError } from '@kvrouter/protocols';
import { VirtualClock, type Clock } from '@kvrouter/protocols';
import { EngineDriver, type DriverOptions } from './driver.js';
import { parseGenerateRequest } from '@kvrouter/protocols';
import { PassScheduler } from './pass-scheduler.js';
import { LateClock, collect, runClock, settle } from './test-helpers.js';

const prompt = (n: number, base = 1): number[] => Array.from({ length: n }, (_, i) => base + i);

function setup(engine: Partial<EngineConfig>, opts: DriverOptions = {}, clock?: Clock) {
  const manual = new VirtualClock();
  const scheduler = new PassScheduler({ clock: clock ?? manual });
  const loads: EngineLoad[] = [];
  const driver = new EngineDriver(new SimEngine({ numGpuBlocks: 1000, blockSize: 16, ...engine }), {
    scheduler,
    hooks: { onLoad: (l) => loads.push(l) },
    ...opts,
  });
  return { clock: manual, driver, loads };
}

const req = (
  id: string,
  tokens: number[],
  stop: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
) => parseGenerateRequest({ request_id: id, model: 'm', token_ids: tokens, stop_conditions: stop, ...extra });

// Pass times by hand from docs/protocol.md §17 step 3 (numGpuBlocks 1000, block size 16):
// prefill(x) = 4.209989e-7·x² + 1.518344e-2·x + 16.50142
//   prefill(100) = 0.004209989 + 1.518344 + 16.50142 = 18.023973989
//   prefill(50)  = 0.00105249725 + 0.759172 + 16.50142 = 17.26164449725
// decode(u) = max(1, −25.74·u² + 54.01·u + 5.74), u = active blocks / 1000 after the pass's allocations
//   100-token prompt decoding tokens 101..104 holds ceil(≤104 / 16) = 7 blocks: u = 0.007
//   decode(0.007) = −0.00126126 + 0.37807 + 5.74 = 6.11680874
//   with a 50-token prompt admitted in the same pass: 7 + ceil(50/16) = 11 blocks, u = 0.011
//   decode(0.011) = −0.00311454 + 0.59411 + 5.74 = 6.33099546
const PREFILL_100 = 18.023973989;
const PREFILL_50 = 17.26164449725;
const DECODE_7 = 6.11680874;
const DECODE_11 = 6.33099546;

describe('EngineDriver token timing follows the engine model (virtual clock)', () => {
  it('first token after the prefill pass, then one token per decode pass', async () => {
    const { clock, driver } = setup({});
    const c = collect(clock, driver.submit(req('a', prompt(100), { max_tokens: 4 })));
    await runClock(clock, c.isDone);
    const t1 = PREFILL_100;
    const expected = [t1, t1 + DECODE_7, t1 + 2 * DECODE_7, t1 + 3 * DECODE_7];
    expect(c.got.map((g) => g.item.token_ids.length)).toEqual([1, 1, 1, 1]);
    c.got.forEach((g, i) => expect(g.t).toBeCloseTo(expected[i], 9));
    expect(c.got[0].item.cached_tokens).toBe(0);
    expect(c.got.map((g) => g.item.finish_reason)).toEqual([undefined, undefined, undefined, 'length']);
  });

  it('speedup ratios divide the pass times', async () => {
    const a = setup({ speedupRatio: 2 });
    const ca = collect(a.clock, a.driver.submit(req('a', prompt(100), { max_tokens: 3 })));
    await runClock(a.clock, ca.isDone);
    // Everything halved: 9.0119869945, + 3.05840437 per decode pass.
    [9.0119869945, 12.0703913645, 15.1287957345].forEach((t, i) => expect(ca.got[i].t).toBeCloseTo(t, 9));

    const b = setup({ decodeSpeedupRatio: 2 });
    const cb = collect(b.clock, b.driver.submit(req('a', prompt(100), { max_tokens: 3 })));
    await runClock(b.clock, cb.isDone);
    // Prefill untouched, decode halved: 18.023973989, + 3.05840437.
    [18.023973989, 21.082378359, 24.140782729].forEach((t, i) => expect(cb.got[i].t).toBeCloseTo(t, 9));
  });

  it('a request arriving during a pass joins the next one, batched with the running request', async () => {
    const { clock, driver } = setup({});
    const a = collect(clock, driver.submit(req('a', prompt(100), { max_tokens: 2 })));
    await settle();
    clock.advanceTo(5);
    const b = collect(clock, driver.submit(req('b', prompt(50, 5000), { max_tokens: 1 })));
    await runClock(clock, () => a.isDone() && b.isDone());
    // Pass 2 starts at the end of pass 1 and carries b's prefill plus a's first decode.
    const end2 = PREFILL_100 + PREFILL_50 + DECODE_11;
    expect(end2).toBeCloseTo(41.61661394625, 9);
    expect(a.got.map((g) => g.t)).toEqual([expect.closeTo(PREFILL_100, 9), expect.closeTo(end2, 9)]);
    expect(b.got.map((g) => g.t)).toEqual([expect.closeTo(end2, 9)]);
  });

  it('requests submitted in the same tick share the first pass', async () => {
    const { clock, driver } = setup({});
    const a = collect(clock, driver.submit(req('a', prompt(100), { max_tokens: 1 })));
    const b = collect(clock, driver.submit(req('b', prompt(50, 5000), { max_tokens: 1 })));
    await runClock(clock, () => a.isDone() && b.isDone());
    // One pass with x = 150 prompt tokens: 4.209989e-7·22500 + 1.518344e-2·150 + 16.50142
    //   = 0.00947247525 + 2.277516 + 16.50142 = 18.78840847525 (no decode part).
    expect(a.got[0].t).toBeCloseTo(18.78840847525, 9);
    expect(b.got[0].t).toBeCloseTo(18.78840847525, 9);
  });

  it('timer lateness does not accumulate: every token is late by the jitter, not by k × jitter', async () => {
    const manual = new VirtualClock();
    const late = new LateClock(manual, 0.7);
    const { driver } = setup({}, {}, late);
    const c = collect(manual, driver.submit(req('a', prompt(100), { max_tokens: 4 })));
    await runClock(manual, c.isDone);
    const t1 = PREFILL_100;
    const model = [t1, t1 + DECODE_7, t1 + 2 * DECODE_7, t1 + 3 * DECODE_7];
    c.got.forEach((g, i) => expect(g.t).toBeCloseTo(model[i] + 0.7, 9));
  });

  it('beyond maxLagMs a lane restarts its timeline instead of bursting through the backlog', async () => {
    const manual = new VirtualClock();
    const late = new LateClock(manual, 50);
    const { driver } = setup({}, { maxLagMs: 20 }, late);
    const c = collect(manual, driver.submit(req('a', prompt(100), { max_tokens: 3 })));
    await runClock(manual, c.isDone);
    // Pass 1 ends (model) at 18.02, observed at 68.02: 50 ms behind > 20, so pass 2 starts at 68.02.
    expect(c.got.map((g) => g.t)).toEqual([
      expect.closeTo(PREFILL_100 + 50, 9),
      expect.closeTo(PREFILL_100 + 50 + DECODE_7 + 50, 9),
      expect.closeTo(PREFILL_100 + 50 + 2 * (DECODE_7 + 50), 9),
    ]);
    expect(driver.stats.lagResets).toBe(2);
  });
});

describe('EngineDriver requests', () => {
  it('max_tokens bounds the stream; without it the default applies, clamped to the KV capacity', async () => {
    const { clock, driver } = setup({ numGpuBlocks: 10, blockSize: 4 }, { defaultMaxTokens: 8192 });
    // Capacity 10 blocks × 4 = 40 tokens; a 30-token prompt may produce 40 − 30 + 1 = 11 tokens
    // (the last generated token's KV is never computed).
    const c = collect(clock, driver.submit(req('a', prompt(30), {})));
    await runClock(clock, c.isDone);
    const tokens = c.got.flatMap((g) => g.item.token_ids);
    expect(tokens).toHaveLength(11);
    expect(c.got.at(-1)!.item.finish_reason).toBe('length');
  });

  it('a stop token ends the stream with stop (unless ignore_eos); the request leaves the engine', async () => {
    const first = setup({});
    const all = collect(first.clock, first.driver.submit(req('a', prompt(20), { max_tokens: 6 })));
    await runClock(first.clock, all.isDone);
    const seq = all.got.flatMap((g) => g.item.token_ids);
    expect(seq).toHaveLength(6);
    const stopAt = seq.findIndex((t, i) => seq.indexOf(t) === i && i >= 2);
    const stopToken = seq[stopAt];

    // Same seed, same prompt: the same token stream, now cut at the first occurrence of stopToken.
    const second = setup({});
    const cut = collect(
      second.clock,
      second.driver.submit(req('a', prompt(20), { max_tokens: 6, stop_token_ids: [stopToken] })),
    );
    await runClock(second.clock, cut.isDone);
    expect(cut.got.flatMap((g) => g.item.token_ids)).toEqual(seq.slice(0, stopAt + 1));
    expect(cut.got.at(-1)!.item.finish_reason).toBe('stop');
    expect(second.driver.engine.hasWork(0)).toBe(false);
    expect(second.loads.at(-1)!.kv_used_blocks).toBe(0);

    const third = setup({});
    const ignored = collect(
      third.clock,
      third.driver.submit(
        req('a', prompt(20), { max_tokens: 6, stop_token_ids: [stopToken], ignore_eos: true }),
      ),
    );
    await runClock(third.clock, ignored.isDone);
    expect(ignored.got.flatMap((g) => g.item.token_ids)).toEqual(seq);
    expect(ignored.got.at(-1)!.item.finish_reason).toBe('length');
  });

  it('the consumer leaving cancels the engine request, frees its blocks and stops generation', async () => {
    const { clock, driver, loads } = setup({});
    const stream = driver.submit(req('a', prompt(100), { max_tokens: 1000 }));
    const seen: number[] = [];
    let finished = false;
    void (async () => {
      for await (const item of stream) {
        seen.push(...item.token_ids);
        if (seen.length >= 2) break;
      }
      finished = true;
    })();
    await runClock(clock, () => finished);
    expect(seen).toHaveLength(2);
    expect(driver.engine.stats(0).cancelled).toBe(1);
    expect(driver.engine.hasWork(0)).toBe(false);
    expect(driver.stats.cancelled).toBe(1);
    expect(driver.activeRequests).toBe(0);
    const passes = driver.engine.stats(0).passes;
    await runClock(clock);
    // The pass in flight at the cancel still ends, but no further pass starts.
    expect(driver.engine.stats(0).passes).toBe(passes);
    // The cancel released the 7 active blocks, reported when that pass ended.
    expect(loads.map((l) => l.kv_used_blocks)).toEqual([7, 0]);
  });

  it('an aborted signal cancels the request', async () => {
    const { clock, driver } = setup({});
    const ac = new AbortController();
    const c = collect(clock, driver.submit(req('a', prompt(100), { max_tokens: 1000 }), ac.signal));
    await runClock(clock, () => c.got.length >= 1);
    ac.abort();
    await runClock(clock, c.isDone);
    expect(c.isDone()).toBe(true);
    expect(driver.engine.stats(0).cancelled).toBe(1);
  });

  it('rejects bad requests naming the wire field, without touching the engine', () => {
    const { driver } = setup({ numGpuBlocks: 4, blockSize: 4, dataParallelSize: 2 });
    const err = (f: () => unknown): KvrError => {
      try {
        f();
      } catch (e) {
        return e as KvrError;
      }
      throw new Error('no error');
    };
    const tooLong = err(() => driver.submit(req('a', prompt(17), { max_tokens: 1 })));
    expect(tooLong.code).toBe('request_too_large');
    expect(tooLong.detail?.field).toBe('token_ids');
    const tooMany = err(() => driver.submit(req('a', prompt(8), { max_tokens: 10 })));
    expect(tooMany.detail?.field).toBe('stop_conditions.max_tokens');
    expect(
      err(() => driver.submit(req('a', prompt(4), { max_tokens: 1 }, { dp_rank: 2 }))).detail?.field,
    ).toBe('dp_rank');
    driver.submit(req('a', prompt(4), { max_tokens: 1 }));
    const dup = err(() => driver.submit(req('a', prompt(4), { max_tokens: 1 }, { dp_rank: 1 })));
    expect(dup.detail?.field).toBe('request_id');
    expect(driver.engine.hasWork(1)).toBe(false);
    expect(driver.stats.submitted).toBe(1);
  });

  it('stop fails open streams after the tokens already sent and refuses new requests', async () => {
    const { clock, driver } = setup({});
    const c = collect(clock, driver.submit(req('a', prompt(100), { max_tokens: 1000 })));
    await runClock(clock, () => c.got.length >= 2);
    driver.stop(new KvrError('engine_shutdown', 'bye', 503));
    await settle();
    expect(c.isDone()).toBe(true);
    expect(c.got).toHaveLength(2);
    expect((c.error() as KvrError).code).toBe('engine_shutdown');
    expect(driver.engine.hasWork(0)).toBe(false);
    expect(() => driver.submit(req('b', prompt(10), { max_tokens: 1 }))).toThrow(/bye/);
    const passes = driver.engine.stats(0).passes;
    await runClock(clock);
    expect(driver.engine.stats(0).passes).toBe(passes);
  });

  it('each data-parallel rank runs its own timeline', async () => {
    const { clock, driver } = setup({ dataParallelSize: 2 });
    const a = collect(clock, driver.submit(req('a', prompt(100), { max_tokens: 1 }, { dp_rank: 0 })));
    await settle();
    clock.advanceTo(5);
    const b = collect(clock, driver.submit(req('b', prompt(100), { max_tokens: 1 }, { dp_rank: 1 })));
    await runClock(clock, () => a.isDone() && b.isDone());
    // Rank 1 was idle: its pass starts at 5, not after rank 0's pass.
    expect(a.got[0].t).toBeCloseTo(PREFILL_100, 9);
    expect(b.got[0].t).toBeCloseTo(5 + PREFILL_100, 9);
  });
});
