import { describe, expect, it } from 'vitest';
import { SimEngine } from '@kvrouter/engine-sim';
import { KvrError, VirtualClock, parseDisaggParams, type WorkerId } from '@kvrouter/protocols';
import {
  DEFAULT_KV_BYTES_PER_TOKEN,
  disaggForWorker,
  disaggGenerateHandler,
  kvBytesPerToken,
  kvDtypeBytes,
  kvTransferMs,
  type SimDisaggOptions,
} from './disagg.js';
import { EngineDriver } from './driver.js';
import { PassScheduler } from './pass-scheduler.js';
import { collect, runClock } from './test-helpers.js';

const prompt = (n: number, base = 1): number[] => Array.from({ length: n }, (_, i) => base + i);

function setup(mode: SimDisaggOptions['mode'], extra: Partial<SimDisaggOptions> = {}) {
  const clock = new VirtualClock();
  const scheduler = new PassScheduler({ clock });
  const engine = new SimEngine({ numGpuBlocks: 1000, blockSize: 16 });
  const driver = new EngineDriver(engine, { scheduler });
  const handler = disaggGenerateHandler(
    driver,
    { mode, kvBytesPerToken: 114_688, bandwidthGBps: 64, ...extra },
    {
      workerId: 0x2an as WorkerId,
      clock,
      speedupRatio: 1,
      topologyDomains: { zone: 'z1' },
      kvTransferDomain: 'zone',
    },
  );
  return { clock, engine, handler };
}

describe('KV transfer model', () => {
  it('bytes per token and transfer time by hand', () => {
    // Qwen3-0.6B: 28 layers · 2 · 8 KV heads · 128 head dim · 2 bytes = 114 688
    expect(DEFAULT_KV_BYTES_PER_TOKEN).toBe(114_688);
    expect(kvBytesPerToken({ layers: 32, kvHeads: 8, headDim: 128, dtypeBytes: 1 })).toBe(65_536);
    expect(() => kvBytesPerToken({ layers: 0, kvHeads: 8, headDim: 128, dtypeBytes: 1 })).toThrow(/layers/);
    // 1000 tokens · 114 688 B = 114.688 MB; / 64 GB/s = 1.792 ms; speedup 10 → 0.1792 ms
    expect(kvTransferMs(1000, 114_688, 64)).toBeCloseTo(1.792, 12);
    expect(kvTransferMs(1000, 114_688, 64, 10)).toBeCloseTo(0.1792, 12);
    expect(kvDtypeBytes('auto', 'bfloat16')).toBe(2);
    expect(kvDtypeBytes('auto', 'float32')).toBe(4);
    expect(kvDtypeBytes('fp8_e4m3')).toBe(1);
    expect(() => kvDtypeBytes('int3')).toThrow(/--kv-cache-dtype/);
  });

  it('bootstrap ports per fleet worker', () => {
    const o: SimDisaggOptions = { mode: 'prefill', kvBytesPerToken: 1, bootstrapPorts: [7000] };
    expect(disaggForWorker(o, 3).bootstrap).toEqual({ host: '127.0.0.1', port: 7003 });
    expect(disaggForWorker({ ...o, bootstrapPorts: [7000, 7100] }, 1).bootstrap?.port).toBe(7100);
    expect(() => disaggForWorker({ ...o, bootstrapPorts: [7000, 7100] }, 2)).toThrow(/worker 2/);
    expect(disaggForWorker({ ...o, mode: 'decode' }, 1).bootstrap).toBeUndefined();
  });
});

describe('prefill worker', () => {
  it('one token with max_tokens forced to 1, after prefill + transfer, carrying the transfer parameters', async () => {
    const { clock, handler } = setup('prefill');
    const c = collect(
      clock,
      handler(
        { request_id: 'p', token_ids: prompt(1000), stop_conditions: { max_tokens: 50 } },
        { signal: new AbortController().signal },
      ),
    );
    await runClock(clock, c.isDone);
    expect(c.error()).toBeNull();
    expect(c.got).toHaveLength(1);
    // prefill(1000) = 0.4209989 + 15.18344 + 16.50142 = 32.1058589 ms; + 1000 · 114 688 / 64e9 s = 1.792 ms
    expect(c.got[0].t).toBeCloseTo(33.8978589, 6);
    const item = c.got[0].item;
    expect(item.token_ids).toHaveLength(1);
    expect(item.finish_reason).toBe('length');
    expect(item.cached_tokens).toBe(0);
    expect(item.disaggregated_params).toEqual({
      prefill_worker_id: '2a',
      prefill_dp_rank: 0,
      prompt_tokens: 1000,
      kv_bytes: 114_688_000,
      transfer_ms: expect.closeTo(1.792, 9) as number,
      topology_domains: { zone: 'z1' },
      kv_transfer_domain: 'zone',
    });
    // the parameters round-trip through the decode side's validation
    expect(parseDisaggParams(item.disaggregated_params)).toEqual(item.disaggregated_params);
  });

  it('an abort during the transfer wait ends the stream without the token', async () => {
    const { clock, handler } = setup('prefill');
    const ac = new AbortController();
    const c = collect(clock, handler({ request_id: 'p', token_ids: prompt(1000) }, { signal: ac.signal }));
    clock.setTimeout(() => ac.abort(), 33);
    await runClock(clock, c.isDone);
    expect(c.error()).toBeNull();
    expect(c.isDone()).toBe(true);
    expect(c.got).toHaveLength(0);
  });

  it('refuses transfer parameters', () => {
    const { handler } = setup('prefill');
    expect(() =>
      handler({ request_id: 'p', token_ids: [1], disagg: {} }, { signal: new AbortController().signal }),
    ).toThrow(KvrError);
  });
});

describe('decode worker', () => {
  const params = {
    prefill_worker_id: '2a',
    prefill_dp_rank: 0,
    prompt_tokens: 1000,
    kv_bytes: 1,
    transfer_ms: 1,
  };

  it('with transfer parameters: no prefill pass, first token after one decode step', async () => {
    const { clock, engine, handler } = setup('decode');
    const c = collect(
      clock,
      handler(
        { request_id: 'd', token_ids: prompt(1000), stop_conditions: { max_tokens: 2 }, disagg: params },
        { signal: new AbortController().signal },
      ),
    );
    await runClock(clock, c.isDone);
    expect(c.error()).toBeNull();
    // 1000 tokens / 16 = 63 blocks as received: u = 0.063
    // decode(0.063) = −25.74·0.003969 + 54.01·0.063 + 5.74 = −0.10216206 + 3.40263 + 5.74 = 9.04046794
    expect(c.got[0].t).toBeCloseTo(9.04046794, 6);
    expect(engine.stats().prefillTokensComputed).toBe(0);
    expect(c.got.flatMap((g) => g.item.token_ids)).toHaveLength(2);
  });

  it('without them: served aggregated (decode fallback), prefill paid', async () => {
    const { clock, engine, handler } = setup('decode');
    const c = collect(
      clock,
      handler(
        { request_id: 'd', token_ids: prompt(1000), stop_conditions: { max_tokens: 1 } },
        { signal: new AbortController().signal },
      ),
    );
    await runClock(clock, c.isDone);
    expect(c.error()).toBeNull();
    expect(c.got[0].t).toBeCloseTo(32.1058589, 6);
    expect(engine.stats().prefillTokensComputed).toBe(1000);
  });

  it('bad transfer parameters name the field; nothing is enqueued', () => {
    const { engine, handler } = setup('decode');
    expect(() =>
      handler(
        { request_id: 'd', token_ids: [1, 2], disagg: { ...params, kv_bytes: -1 } },
        { signal: new AbortController().signal },
      ),
    ).toThrow(/disagg\.kv_bytes/);
    expect(engine.stats().admitted + engine.ranks[0].numWaiting).toBe(0);
  });
});

describe('aggregated worker', () => {
  it('refuses transfer parameters as before', () => {
    const { handler } = setup('agg');
    expect(() =>
      handler({ request_id: 'a', token_ids: [1], disagg: {} }, { signal: new AbortController().signal }),
    ).toThrow(/aggregated/);
  });
});
