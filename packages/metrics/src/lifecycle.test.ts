import { describe, expect, it } from 'vitest';
import { FrontendMetricSet } from './app.js';
import { fieldOf, histogramOf, scrape, TEST_ENDPOINT, valueOf } from './test-helpers.js';

const RL = { dynamo_namespace: 'dynamo', dynamo_component: 'backend', dynamo_endpoint: 'generate' };
const M = { model: 'llama' };

function kvSet() {
  const set = new FrontendMetricSet({ routerMode: 'kv', routerId: 9n, now: () => 0 });
  return { set, life: set.lifecycle(TEST_ENDPOINT) };
}

describe('a streamed kv-mode request, end to end', () => {
  it('lands every observation in the bucket computed by hand', async () => {
    const { set, life } = kvSet();
    // t = 1000 ms: handler entry. Model label is lowercased (upstream).
    const r = life.start({ model: 'Llama', endpoint: 'chat_completions', requestType: 'stream' }, 1000);
    let f = await scrape(set.registry);
    expect(valueOf(f, 'dynamo_frontend_inflight_requests', M)).toBe(1);
    expect(valueOf(f, 'dynamo_frontend_queued_requests', M)).toBe(1);

    // Routed to worker 7 rank 1: 3 of 4 blocks cached -> hit rate 0.75, 48 cached tokens, isl 64.
    r.routed({ workerId: 7n, dpRank: 1, kvHitRate: 0.75, cachedTokens: 48 }, { isl: 64 });
    r.tokens(1, 1250); // TTFT = (1250 - 1000) / 1000 = 0.25 s
    f = await scrape(set.registry);
    expect(valueOf(f, 'dynamo_frontend_queued_requests', M)).toBe(0); // left the queue at first token
    expect(valueOf(f, 'dynamo_frontend_inflight_requests', M)).toBe(1);
    r.tokens(2, 1350); // ITL = (1350 - 1250) / 2 / 1000 = 0.05 s, twice
    r.tokens(1, 1450); // ITL = (1450 - 1350) / 1000 = 0.1 s
    r.end('', 2000); // duration = (2000 - 1000) / 1000 = 1.0 s; osl = 1 + 2 + 1 = 4
    f = await scrape(set.registry);

    expect(valueOf(f, 'dynamo_frontend_inflight_requests', M)).toBe(0);
    expect(
      valueOf(f, 'dynamo_frontend_requests_total', {
        model: 'llama',
        endpoint: 'chat_completions',
        request_type: 'stream',
        status: 'success',
        error_type: '',
      }),
    ).toBe(1);
    expect(valueOf(f, 'dynamo_frontend_output_tokens_total', M)).toBe(4);

    const ttft = histogramOf(f, 'dynamo_frontend_time_to_first_token_seconds', M)!;
    // TTFT buckets ... 0.22, 0.47 ...: 0.22 < 0.25 <= 0.47
    expect([ttft.count, ttft.sum]).toEqual([1, 0.25]);
    expect(ttft.cumulative[ttft.le.indexOf(0.22)]).toBe(0);
    expect(ttft.cumulative[ttft.le.indexOf(0.47)]).toBe(1);

    const itl = histogramOf(f, 'dynamo_frontend_inter_token_latency_seconds', M)!;
    // samples 0.05, 0.05, 0.1; ITL buckets ... 0.045, 0.084, 0.16 ...
    expect(itl.count).toBe(3);
    expect(itl.sum).toBeCloseTo(0.2, 12);
    expect(itl.cumulative[itl.le.indexOf(0.045)]).toBe(0);
    expect(itl.cumulative[itl.le.indexOf(0.084)]).toBe(2);
    expect(itl.cumulative[itl.le.indexOf(0.16)]).toBe(3);

    const dur = histogramOf(f, 'dynamo_frontend_request_duration_seconds', M)!;
    // 1.0 s: le=1 is inclusive
    expect(dur.cumulative[dur.le.indexOf(0)]).toBe(0);
    expect(dur.cumulative[dur.le.indexOf(1)]).toBe(1);

    // isl 64 in (50, 100]; osl 4 in (0, 50]; cached 48 (the router's prediction) in (0, 50]
    const isl = histogramOf(f, 'dynamo_frontend_input_sequence_tokens', M)!;
    expect([isl.sum, isl.cumulative[isl.le.indexOf(50)], isl.cumulative[isl.le.indexOf(100)]]).toEqual([
      64, 0, 1,
    ]);
    const osl = histogramOf(f, 'dynamo_frontend_output_sequence_tokens', M)!;
    expect([osl.sum, osl.cumulative[osl.le.indexOf(0)], osl.cumulative[osl.le.indexOf(50)]]).toEqual([
      4, 0, 1,
    ]);
    const cached = histogramOf(f, 'dynamo_frontend_cached_tokens', M)!;
    expect([cached.sum, cached.count, cached.cumulative[cached.le.indexOf(50)]]).toEqual([48, 1, 1]);
    // hit rate 0.75 in (0.7, 0.75]
    const hr = histogramOf(f, 'dynamo_frontend_kv_hit_rate', M)!;
    expect([hr.cumulative[hr.le.indexOf(0.7)], hr.cumulative[hr.le.indexOf(0.75)]]).toEqual([0, 1]);

    // Router series: one completed request, TTFT 0.25, average ITL (0.05 + 0.05 + 0.1) / 3 = 0.0667
    // in (0.045, 0.084], isl 64, osl 4, hit rate 0.75.
    expect(valueOf(f, 'dynamo_component_router_requests_total', RL)).toBe(1);
    expect(histogramOf(f, 'dynamo_component_router_time_to_first_token_seconds', RL)!.sum).toBe(0.25);
    const ritl = histogramOf(f, 'dynamo_component_router_inter_token_latency_seconds', RL)!;
    expect(ritl.count).toBe(1);
    expect(ritl.sum).toBeCloseTo(0.2 / 3, 12);
    expect([ritl.cumulative[ritl.le.indexOf(0.045)], ritl.cumulative[ritl.le.indexOf(0.084)]]).toEqual([
      0, 1,
    ]);
    expect(histogramOf(f, 'dynamo_component_router_input_sequence_tokens', RL)!.sum).toBe(64);
    expect(histogramOf(f, 'dynamo_component_router_output_sequence_tokens', RL)!.sum).toBe(4);
    expect(histogramOf(f, 'dynamo_component_router_kv_hit_rate', RL)!.sum).toBe(0.75);

    // Per-worker gauges: TTFT and ISL of this request, last ITL 0.1; aggregated workers are `decode`.
    const W = { worker_id: '7', dp_rank: '1', worker_type: 'decode' };
    expect(valueOf(f, 'dynamo_frontend_worker_last_time_to_first_token_seconds', W)).toBe(0.25);
    expect(valueOf(f, 'dynamo_frontend_worker_last_input_sequence_tokens', W)).toBe(64);
    expect(valueOf(f, 'dynamo_frontend_worker_last_inter_token_latency_seconds', W)).toBe(0.1);
  });
});

describe('outcomes', () => {
  it('an overload before routing: error counted, a rejection, no router or OSL observation', async () => {
    const { set, life } = kvSet();
    const r = life.start({ model: 'llama', endpoint: 'completions', requestType: 'unary' }, 0);
    r.end('overload', 30);
    const f = await scrape(set.registry);
    expect(
      valueOf(f, 'dynamo_frontend_requests_total', {
        model: 'llama',
        endpoint: 'completions',
        request_type: 'unary',
        status: 'error',
        error_type: 'overload',
      }),
    ).toBe(1);
    expect(valueOf(f, 'dynamo_frontend_model_rejection_total', M)).toBe(1);
    expect(valueOf(f, 'dynamo_frontend_queued_requests', M)).toBe(0);
    expect(histogramOf(f, 'dynamo_frontend_output_sequence_tokens', M)).toBeUndefined();
    expect(histogramOf(f, 'dynamo_frontend_request_duration_seconds', M)!.sum).toBe(0.03);
    expect(valueOf(f, 'dynamo_component_router_requests_total', RL)).toBe(0);
  });

  it('a disconnect counts the client and ends the request as cancelled, once', async () => {
    const { set, life } = kvSet();
    const r = life.start({ model: 'llama', endpoint: 'chat_completions', requestType: 'stream' }, 0);
    r.routed({ workerId: 1n, dpRank: 0, kvHitRate: 0, cachedTokens: 0 }, { isl: 16 });
    r.tokens(3, 40);
    r.disconnected(50);
    r.disconnected(60);
    r.end('', 70);
    r.tokens(1, 80);
    expect(r.ended).toBe(true);
    const f = await scrape(set.registry);
    expect(valueOf(f, 'dynamo_frontend_disconnected_clients')).toBe(1);
    expect(valueOf(f, 'dynamo_frontend_model_cancellation_total', M)).toBe(1);
    const base = { model: 'llama', endpoint: 'chat_completions', request_type: 'stream' };
    expect(
      valueOf(f, 'dynamo_frontend_requests_total', { ...base, status: 'error', error_type: 'cancelled' }),
    ).toBe(1);
    expect(
      valueOf(f, 'dynamo_frontend_requests_total', { ...base, status: 'success', error_type: '' }),
    ).toBeUndefined();
    expect(valueOf(f, 'dynamo_frontend_output_tokens_total', M)).toBe(3);
    expect(valueOf(f, 'dynamo_frontend_inflight_requests', M)).toBe(0);
    // dispatched, so the router counts it; osl 3
    expect(valueOf(f, 'dynamo_component_router_requests_total', RL)).toBe(1);
    expect(histogramOf(f, 'dynamo_component_router_output_sequence_tokens', RL)!.sum).toBe(3);
  });

  it('disaggregated: TTFT goes to the prefill worker, ITL to the decode worker, hit rate once', async () => {
    const { set, life } = kvSet();
    const r = life.start({ model: 'llama', endpoint: 'chat_completions', requestType: 'stream' }, 0);
    r.routed({ workerId: 10n, dpRank: 0, kvHitRate: 0.5, cachedTokens: 32 }, { isl: 64, phase: 'prefill' });
    r.routed({ workerId: 20n, dpRank: 2, kvHitRate: 0, cachedTokens: 0 }, { isl: 64, phase: 'decode' });
    r.tokens(1, 300); // TTFT 0.3
    r.tokens(1, 320); // ITL 0.02
    r.end('', 400);
    const f = await scrape(set.registry);
    expect(
      valueOf(f, 'dynamo_frontend_worker_last_time_to_first_token_seconds', {
        worker_id: '10',
        dp_rank: '0',
        worker_type: 'prefill',
      }),
    ).toBe(0.3);
    expect(
      valueOf(f, 'dynamo_frontend_worker_last_inter_token_latency_seconds', {
        worker_id: '20',
        dp_rank: '2',
        worker_type: 'decode',
      }),
    ).toBe(0.02);
    expect(
      valueOf(f, 'dynamo_frontend_worker_last_time_to_first_token_seconds', {
        worker_id: '20',
        dp_rank: '2',
        worker_type: 'decode',
      }),
    ).toBeUndefined();
    const hr = histogramOf(f, 'dynamo_frontend_kv_hit_rate', M)!;
    expect([hr.count, hr.sum]).toEqual([1, 0.5]);
    expect(histogramOf(f, 'dynamo_component_router_kv_hit_rate', RL)!.count).toBe(1);
  });

  it('engine-reported cached tokens win over the router prediction', async () => {
    const { set, life } = kvSet();
    const r = life.start({ model: 'llama', endpoint: 'completions', requestType: 'unary' }, 0);
    r.routed({ workerId: 1n, dpRank: 0, kvHitRate: 0.5, cachedTokens: 32 }, { isl: 64 });
    r.observeCachedTokens(16);
    r.observeCachedTokens(999); // once per request
    r.tokens(10, 100);
    r.end('', 100);
    const c = histogramOf(await scrape(set.registry), 'dynamo_frontend_cached_tokens', M)!;
    expect([c.count, c.sum]).toEqual([1, 16]);
  });

  it('reportedCache sums the reporting requests: engine-reported and predicted cached tokens, prompt tokens', () => {
    const { life } = kvSet();
    expect(life.reportedCache('llama')).toBeNull();
    const a = life.start({ model: 'llama', endpoint: 'completions', requestType: 'unary' }, 0);
    a.routed({ workerId: 1n, dpRank: 0, kvHitRate: 0.5, cachedTokens: 32 }, { isl: 64 });
    a.observeCachedTokens(16);
    a.observeCachedTokens(48); // once per request
    a.end('', 10);
    // No engine report: not counted (its prediction goes to the histogram only).
    const b = life.start({ model: 'llama', endpoint: 'completions', requestType: 'unary' }, 0);
    b.routed({ workerId: 2n, dpRank: 0, kvHitRate: 1, cachedTokens: 100 }, { isl: 100 });
    b.end('', 10);
    const c = life.start({ model: 'LLAMA', endpoint: 'completions', requestType: 'unary' }, 0);
    c.routed({ workerId: 1n, dpRank: 0, kvHitRate: 0.25, cachedTokens: 10 }, { isl: 40 });
    c.observeCachedTokens(20);
    c.end('', 10);
    expect(life.reportedCache('llama')).toEqual({
      requests: 2,
      promptTokens: 104,
      reportedCachedTokens: 36,
      predictedCachedTokens: 42,
    });
  });

  it('a unary response gives TTFT and no ITL; kv transfer estimates reach the router', async () => {
    const { set, life } = kvSet();
    const r = life.start({ model: 'llama', endpoint: 'completions', requestType: 'unary' }, 0);
    r.routed({ workerId: 1n, dpRank: 0, kvHitRate: 0, cachedTokens: 0 }, { isl: 8 });
    r.observeKvTransferEstimate(0.02);
    r.tokens(100, 500);
    r.end('', 500);
    const f = await scrape(set.registry);
    expect(histogramOf(f, 'dynamo_frontend_inter_token_latency_seconds', M)).toBeUndefined();
    expect(histogramOf(f, 'dynamo_component_router_inter_token_latency_seconds', RL)!.count).toBe(0);
    // 0.02 in (0.014, 0.027]
    const x = histogramOf(f, 'dynamo_component_router_kv_transfer_estimated_latency_seconds', RL)!;
    expect([x.cumulative[x.le.indexOf(0.014)], x.cumulative[x.le.indexOf(0.027)]]).toEqual([0, 1]);
  });
});

describe('bad input', () => {
  it('is a KvrError naming the field and changes nothing', async () => {
    const { set, life } = kvSet();
    expect(fieldOf(() => life.start({ model: 'm', endpoint: 'x', requestType: 'batch' as 'unary' }, 0))).toBe(
      'request_type',
    );
    expect(
      fieldOf(() => life.start({ model: 3 as unknown as string, endpoint: 'x', requestType: 'unary' }, 0)),
    ).toBe('model');
    const r = life.start({ model: 'm', endpoint: 'x', requestType: 'stream' }, 100);
    expect(
      fieldOf(() => r.routed({ workerId: 1n, dpRank: 0, kvHitRate: 1.5, cachedTokens: 0 }, { isl: 4 })),
    ).toBe('kvHitRate');
    expect(
      fieldOf(() =>
        r.routed({ workerId: 1 as unknown as bigint, dpRank: 0, kvHitRate: 0, cachedTokens: 0 }, { isl: 4 }),
      ),
    ).toBe('workerId');
    expect(
      fieldOf(() => r.routed({ workerId: 1n, dpRank: 0, kvHitRate: 0, cachedTokens: 0 }, { isl: -4 })),
    ).toBe('isl');
    expect(fieldOf(() => r.tokens(-1, 200))).toBe('tokens');
    expect(fieldOf(() => r.tokens(1.5, 200))).toBe('tokens');
    expect(fieldOf(() => r.tokens(1, NaN))).toBe('at');
    expect(fieldOf(() => r.tokens(1, 50))).toBe('at'); // before the start
    expect(fieldOf(() => r.end('bogus' as '', 200))).toBe('error_type');
    expect(fieldOf(() => r.observeCachedTokens(-2))).toBe('cached_tokens');
    expect(r.ended).toBe(false);
    const f = await scrape(set.registry);
    expect(valueOf(f, 'dynamo_frontend_inflight_requests', { model: 'm' })).toBe(1);
    expect(valueOf(f, 'dynamo_frontend_queued_requests', { model: 'm' })).toBe(1);
    expect(histogramOf(f, 'dynamo_frontend_kv_hit_rate', { model: 'm' })).toBeUndefined();
    expect(histogramOf(f, 'dynamo_component_router_kv_hit_rate', RL)!.count).toBe(0);
    expect(valueOf(f, 'dynamo_frontend_output_tokens_total', { model: 'm' })).toBeUndefined();
    expect(f.get('dynamo_frontend_requests_total')!.samples).toEqual([]);
  });
});

describe('model labels are bounded (issue 17)', () => {
  it('without knownModel: MAX_MODEL_LABELS names keep their label, every later one counts under __unknown__', async () => {
    const { MAX_MODEL_LABELS, UNKNOWN_MODEL_LABEL } = await import('./lifecycle.js');
    expect(MAX_MODEL_LABELS).toBe(256);
    const { set, life } = kvSet();
    for (let i = 0; i < 300; i++)
      life.start({ model: `m${i}`, endpoint: 'chat_completions', requestType: 'unary' }, 0).end('', 1);
    const fams = await scrape(set.registry);
    const labels = new Set(fams.get('dynamo_frontend_inflight_requests')!.samples.map((s) => s.labels.model));
    expect(labels.size).toBe(MAX_MODEL_LABELS + 1);
    expect(labels.has('m255')).toBe(true);
    expect(labels.has('m256')).toBe(false);
    const unknown = valueOf(fams, 'dynamo_frontend_requests_total', {
      model: UNKNOWN_MODEL_LABEL,
      endpoint: 'chat_completions',
      request_type: 'unary',
      status: 'success',
      error_type: '',
    });
    expect(unknown).toBe(300 - MAX_MODEL_LABELS);
  });
});
