/**
 * Every metric family of PROTOCOL §16: name, type, label names and bucket list, read back from the
 * exposition of a populated registry. The expected table is written out by hand from §16; bucket
 * lists are the ones derived in buckets.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { FrontendMetricSet } from './app.js';
import { FrontendMetrics } from './frontend.js';
import { createRegistry } from './registry.js';
import { GaugeFamily } from './series.js';
import { histogramOf, populated, scrape, TEST_ENDPOINT, valueOf, type Family } from './test-helpers.js';

const RD = [0, 1, 1.9, 3.4, 6.3, 12, 22, 40, 75, 140, 260];
const ISL = [0, 50, 100, 210, 430, 870, 1800, 3600, 7400, 15000, 31000, 63000, 130000];
const OSL = [0, 50, 100, 210, 430, 880, 1800, 3700, 7600, 16000, 32000];
const TTFT = [
  0, 0.001, 0.0022, 0.0047, 0.01, 0.022, 0.047, 0.1, 0.22, 0.47, 1, 2.2, 4.7, 10, 22, 48, 100, 220, 480,
];
const ITL = [0, 0.001, 0.0019, 0.0035, 0.0067, 0.013, 0.024, 0.045, 0.084, 0.16, 0.3, 0.56, 1.1, 2];
const HIT = [
  0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95,
  1,
];
const XFER = [
  0, 0.001, 0.0019, 0.0037, 0.0072, 0.014, 0.027, 0.052, 0.1, 0.19, 0.37, 0.72, 1.4, 2.7, 5.2, 10,
];
const OH_HASH = [
  0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384,
];
const OH_ROUTE = [
  0.01, 0.03, 0.09, 0.27, 0.81, 2.43, 7.29, 21.87, 65.61, 196.83, 590.49, 1771.47, 5314.41, 15943.23,
  47829.69, 143489.07, 430467.21,
];
const TOK = [0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512];
const STAGE = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5];

const RL = ['dynamo_component', 'dynamo_endpoint', 'dynamo_namespace'];
const WL = ['dp_rank', 'worker_id', 'worker_type'];

type Row = [type: 'counter' | 'gauge' | 'histogram', labels: string[], buckets?: number[]];

/** §16 with prefix `dynamo_frontend`. */
const FRONTEND_ROWS: Record<string, Row> = {
  requests_total: ['counter', ['endpoint', 'error_type', 'model', 'request_type', 'status']],
  inflight_requests: ['gauge', ['model']],
  queued_requests: ['gauge', ['model']],
  disconnected_clients: ['counter', []],
  request_duration_seconds: ['histogram', ['model'], RD],
  input_sequence_tokens: ['histogram', ['model'], ISL],
  output_sequence_tokens: ['histogram', ['model'], OSL],
  time_to_first_token_seconds: ['histogram', ['model'], TTFT],
  inter_token_latency_seconds: ['histogram', ['model'], ITL],
  output_tokens_total: ['counter', ['model']],
  cached_tokens: ['histogram', ['model'], ISL],
  kv_hit_rate: ['histogram', ['model'], HIT],
  tokenizer_latency_ms: ['histogram', ['operation'], TOK],
  model_total_kv_blocks: ['gauge', ['model']],
  model_max_num_seqs: ['gauge', ['model']],
  model_max_num_batched_tokens: ['gauge', ['model']],
  model_context_length: ['gauge', ['model']],
  model_kv_cache_block_size: ['gauge', ['model']],
  model_migration_limit: ['gauge', ['model']],
  model_migration_total: ['counter', ['migration_type', 'model']],
  model_migration_max_seq_len_exceeded_total: ['counter', ['model']],
  model_cancellation_total: ['counter', ['model']],
  model_rejection_total: ['counter', ['model']],
  stage_duration_seconds: ['histogram', ['stage'], STAGE],
  internal_errors_total: ['counter', ['route']],
};

const OTHER_ROWS: Record<string, Row> = {
  dynamo_component_router_requests_total: ['counter', RL],
  dynamo_component_router_time_to_first_token_seconds: ['histogram', RL, TTFT],
  dynamo_component_router_inter_token_latency_seconds: ['histogram', RL, ITL],
  dynamo_component_router_input_sequence_tokens: ['histogram', RL, ISL],
  dynamo_component_router_output_sequence_tokens: ['histogram', RL, OSL],
  dynamo_component_router_kv_hit_rate: ['histogram', RL, HIT],
  dynamo_component_router_kv_transfer_estimated_latency_seconds: ['histogram', RL, XFER],
  dynamo_component_router_remote_indexer_query_failures_total: ['counter', RL],
  dynamo_component_router_remote_indexer_write_failures_total: ['counter', RL],
  dynamo_router_overhead_block_hashing_ms: ['histogram', ['router_id'], OH_HASH],
  dynamo_router_overhead_seq_hashing_ms: ['histogram', ['router_id'], OH_HASH],
  dynamo_router_overhead_indexer_find_matches_ms: ['histogram', ['router_id'], OH_ROUTE],
  dynamo_router_overhead_scheduling_ms: ['histogram', ['router_id'], OH_ROUTE],
  dynamo_router_overhead_total_ms: ['histogram', ['router_id'], OH_ROUTE],
  dynamo_frontend_worker_active_decode_blocks: ['gauge', WL],
  dynamo_frontend_worker_active_prefill_tokens: ['gauge', WL],
  dynamo_frontend_worker_last_time_to_first_token_seconds: ['gauge', WL],
  dynamo_frontend_worker_last_input_sequence_tokens: ['gauge', WL],
  dynamo_frontend_worker_last_inter_token_latency_seconds: ['gauge', WL],
  dynamo_frontend_router_queue_pending_requests: ['gauge', ['worker_type']],
  dynamo_component_kv_cache_events_applied: ['counter', ['event_type', 'status']],
  dynamo_component_kv_publisher_engines_dropped_events_total: ['counter', ['worker_id']],
  // kvrouter's own (issue 19 truth check, issue 17 bounded tables).
  dynamo_frontend_router_truth_mode: ['gauge', ['mode', 'model']],
  dynamo_frontend_router_truth_drift: ['gauge', ['model', 'worker_id']],
  dynamo_frontend_router_truth_load_only: ['gauge', ['model', 'worker_id']],
  dynamo_frontend_router_truth_checks_total: ['counter', ['model']],
  dynamo_frontend_table_entries: ['gauge', ['table']],
  dynamo_frontend_table_limit: ['gauge', ['table']],
  dynamo_frontend_table_evicted_total: ['counter', ['table']],
};

const ENDPOINT = TEST_ENDPOINT;

function checkFamily(fams: Map<string, Family>, name: string, [type, labels, buckets]: Row): void {
  const f = fams.get(name);
  expect(f, name).toBeDefined();
  expect(f!.type, name).toBe(type);
  expect(f!.help.length, name).toBeGreaterThan(0);
  expect(f!.samples.length, `${name} has samples`).toBeGreaterThan(0);
  for (const s of f!.samples) {
    const keys = Object.keys(s.labels)
      .filter((k) => !(k === 'le' && s.name.endsWith('_bucket')))
      .sort();
    expect(keys, `${s.name} labels`).toEqual(labels);
  }
  if (buckets) {
    const first = f!.samples[0]!;
    const { le: _le, ...series } = first.labels;
    expect(histogramOf(fams, name, series)!.le, `${name} buckets`).toEqual(buckets);
  }
}

describe('every family of §16 in a kv-mode frontend registry', () => {
  it('has exactly the expected names, types, labels and buckets', async () => {
    const fams = await scrape(populated().registry);
    const expected = new Map<string, Row>([
      ...Object.entries(FRONTEND_ROWS).map(([k, v]) => [`dynamo_frontend_${k}`, v] as [string, Row]),
      ...Object.entries(OTHER_ROWS),
    ]);
    expect([...fams.keys()].sort()).toEqual([...expected.keys()].sort());
    for (const [name, row] of expected) checkFamily(fams, name, row);
  });

  it('--metrics-prefix renames the frontend request group only', async () => {
    const fams = await scrape(populated('nv_llm_http_service').registry);
    for (const [k, row] of Object.entries(FRONTEND_ROWS)) {
      checkFamily(fams, `nv_llm_http_service_${k}`, row);
      expect(fams.has(`dynamo_frontend_${k}`)).toBe(false);
    }
    for (const [name, row] of Object.entries(OTHER_ROWS)) checkFamily(fams, name, row);
  });

  it('rejects a prefix outside [a-zA-Z_:][a-zA-Z0-9_:]*', () => {
    for (const p of ['9lives', 'has-dash', '']) {
      try {
        new FrontendMetrics(createRegistry(), { prefix: p });
        throw new Error(`accepted ${p}`);
      } catch (e) {
        expect(e).toBeInstanceOf(KvrError);
        expect((e as KvrError).detail?.field).toBe('--metrics-prefix');
      }
    }
  });

  it('labels carry the §16 values: error types, worker ids in decimal, router_id', async () => {
    const fams = await scrape(populated().registry);
    const req = (request_type: string, status: string, error_type: string) =>
      valueOf(fams, 'dynamo_frontend_requests_total', {
        model: 'qwen3',
        endpoint: 'chat_completions',
        request_type,
        status,
        error_type,
      });
    expect(req('stream', 'success', '')).toBe(1);
    expect(req('unary', 'error', 'cancelled')).toBe(1);
    expect(valueOf(fams, 'dynamo_frontend_model_cancellation_total', { model: 'qwen3' })).toBe(1);
    expect(valueOf(fams, 'dynamo_frontend_disconnected_clients')).toBe(1);
    expect(
      valueOf(fams, 'dynamo_component_kv_publisher_engines_dropped_events_total', { worker_id: '7' }),
    ).toBe(3);
    expect(histogramOf(fams, 'dynamo_router_overhead_total_ms', { router_id: '12345' })!.count).toBe(1);
    expect(
      valueOf(fams, 'dynamo_frontend_worker_active_prefill_tokens', {
        worker_id: '7',
        dp_rank: '0',
        worker_type: 'decode',
      }),
    ).toBe(300);
    expect(valueOf(fams, 'dynamo_frontend_model_context_length', { model: 'qwen3' })).toBe(32768);
    expect(
      valueOf(fams, 'dynamo_frontend_model_migration_total', {
        model: 'qwen3',
        migration_type: 'new_request',
      }),
    ).toBe(1);
  });
});

describe('non-kv modes', () => {
  it('register the router request metrics with zero values and omit overhead and index', async () => {
    const set = new FrontendMetricSet({ routerMode: 'round-robin' });
    expect(set.overhead).toBeNull();
    expect(set.index).toBeNull();
    const life = set.lifecycle(ENDPOINT);
    const r = life.start({ model: 'm', endpoint: 'completions', requestType: 'unary' }, 0);
    r.routed({ workerId: 1n, dpRank: 0, kvHitRate: 0, cachedTokens: 0 }, { isl: 10 });
    r.tokens(5, 50);
    r.end('', 60);
    const fams = await scrape(set.registry);
    const labels = { dynamo_namespace: 'dynamo', dynamo_component: 'backend', dynamo_endpoint: 'generate' };
    for (const [name, [type]] of Object.entries(OTHER_ROWS)) {
      if (name.startsWith('dynamo_router_overhead_') || name === 'dynamo_component_kv_cache_events_applied') {
        expect(fams.has(name), name).toBe(false);
      } else if (name.startsWith('dynamo_component_router_')) {
        if (type === 'counter') expect(valueOf(fams, name, labels), name).toBe(0);
        else expect(histogramOf(fams, name, labels)!.count, name).toBe(0);
      }
    }
    // the frontend side still counts the request, but no KV-derived observations
    expect(histogramOf(fams, 'dynamo_frontend_time_to_first_token_seconds', { model: 'm' })!.count).toBe(1);
    expect(histogramOf(fams, 'dynamo_frontend_kv_hit_rate', { model: 'm' })).toBeUndefined();
    expect(histogramOf(fams, 'dynamo_frontend_cached_tokens', { model: 'm' })).toBeUndefined();
  });

  it('a group is registered whole or not at all', async () => {
    const registry = createRegistry();
    // Take one name from the middle of the frontend group.
    new GaugeFamily(registry, 'dynamo_frontend_model_context_length', 'taken', []);
    try {
      new FrontendMetrics(registry);
      throw new Error('registered over a taken name');
    } catch (e) {
      expect((e as KvrError).code).toBe('metric_exists');
      expect((e as KvrError).detail?.field).toBe('dynamo_frontend_model_context_length');
    }
    expect([...(await scrape(registry)).keys()]).toEqual(['dynamo_frontend_model_context_length']);
  });

  it('kv mode needs a router id', () => {
    expect(() => new FrontendMetricSet({ routerMode: 'kv' })).toThrow(/routerId/);
  });

  it('registries are independent (no global registry)', async () => {
    const a = new FrontendMetricSet({ routerMode: 'kv', routerId: 1n });
    const b = new FrontendMetricSet({ routerMode: 'kv', routerId: 2n });
    a.frontend.migration('m', 'ongoing_request');
    expect(
      valueOf(await scrape(a.registry), 'dynamo_frontend_model_migration_total', {
        model: 'm',
        migration_type: 'ongoing_request',
      }),
    ).toBe(1);
    expect(
      valueOf(await scrape(b.registry), 'dynamo_frontend_model_migration_total', {
        model: 'm',
        migration_type: 'ongoing_request',
      }),
    ).toBeUndefined();
  });
});
