import { describe, expect, it } from 'vitest';
import { dumpConfigJson, dumpFieldName } from './dump.js';
import { resolveConfig } from './resolve.js';
import { APPS, flagsFor } from './table.js';

const fe = (argv: string[]) => resolveConfig('frontend', argv, {}).config;

describe('--dump-config-to content (Dynamo field names)', () => {
  it("writes Dynamo's snake_case field names, hand-checked against its FrontendConfig / KvRouterConfigBase / RouterConfigBase", () => {
    const text = dumpConfigJson(
      fe([
        ...['--router-mode', 'kv', '--router-kv-overlap-score-credit', '0.5', '--no-router-kv-events'],
        ...['--router-min-initial-workers', '2', '--dyn-debug-perf', '--tokenizer', 'fastokens'],
        ...['--router-snapshot-threshold', '18446744073709551615', '--router-queue-threshold', 'None'],
        ...['--dump-config-to', '/tmp/x.json'],
      ]),
    );
    const back = JSON.parse(text) as Record<string, unknown>;
    // Flags whose name is the field (dashes → underscores).
    expect(back).toMatchObject({
      http_host: '0.0.0.0',
      http_port: 8000,
      router_mode: 'kv',
      router_temperature: 0,
      router_ttl_secs: 120,
      router_queue_threshold: null,
      router_queue_policy: 'fcfs',
      kv_cache_block_size: null,
      migration_limit: 0,
      discovery_backend: 'mem',
      event_plane: 'zmq',
      dump_config_to: '/tmp/x.json',
      serve_indexer: false,
      use_remote_indexer: false,
      enable_anthropic_api: false,
    });
    // Flags whose Dynamo dest differs from the flag.
    expect(back).toMatchObject({
      overlap_score_credit: 0.5,
      overlap_score_weight: null,
      prefill_load_scale: 1,
      host_cache_hit_weight: 0.75,
      disk_cache_hit_weight: 0.25,
      use_kv_events: false,
      min_initial_workers: 2,
      chat_processor: 'dynamo',
      debug_perf: true,
      preprocess_workers: 0,
      tokenizer_backend: 'fastokens',
      durable_kv_events: false,
    });
    // Environment-only rows: the key in snake_case.
    expect(back).toMatchObject({
      http_body_limit_mb: 192,
      http_graceful_shutdown_timeout_secs: 5,
      router_overlap_refresh_after_secs: 10,
      etcd_endpoints: ['http://localhost:2379'],
      nats_server: 'nats://localhost:4222',
      metrics_ttft_min: 0.001,
    });
    // u64 as exact digits (JSON.parse would round it).
    expect(text).toContain('"router_snapshot_threshold": 18446744073709551615,');
    expect(text).toContain('"etcd_endpoints": [\n    "http://localhost:2379"\n  ],');
    for (const k of Object.keys(back)) expect(k).toMatch(/^[a-z][a-z0-9_]*$/);
    for (const camel of ['routerMode', 'httpPort', 'routerKvOverlapScoreCredit', 'dynDebugPerf'])
      expect(back).not.toHaveProperty(camel);
  });

  it('no two keys of one app share a field name', () => {
    for (const app of APPS) {
      const seen = new Map<string, string>();
      for (const spec of flagsFor(app)) {
        const name = dumpFieldName(spec.key);
        const other = seen.get(name);
        if (other !== undefined && other !== spec.key)
          throw new Error(`${app}: ${other} and ${spec.key} → ${name}`);
        seen.set(name, spec.key);
      }
    }
    expect(dumpFieldName('routerKvEvents')).toBe('use_kv_events');
    expect(dumpFieldName('httpSvcChatPath')).toBe('http_svc_chat_path');
  });
});
