import { readFileSync } from 'node:fs';
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  ConfigError,
  effectiveBusyThresholds,
  mapLegacyOverlapWeight,
  resolveConfig,
  type ResolveOptions,
} from './resolve.js';
import type { App } from './table.js';

type Env = Record<string, string | undefined>;

function fe(argv: string[], env: Env = {}, opts?: ResolveOptions) {
  return resolveConfig('frontend', argv, env, opts);
}

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

const AIC_OK = ['--aic-backend', 'vllm', '--aic-system', 'h200_sxm', '--aic-model-path', 'm'];

describe('precedence: CLI > env > default, per option', () => {
  it('string', () => {
    expect(fe([]).config.httpHost).toBe('0.0.0.0');
    expect(fe([], { DYN_HTTP_HOST: '127.0.0.1' }).config.httpHost).toBe('127.0.0.1');
    const r = fe(['--http-host', '::1'], { DYN_HTTP_HOST: '127.0.0.1' });
    expect(r.config.httpHost).toBe('::1');
    expect(r.sources.httpHost).toBe('cli');
  });

  it('u16', () => {
    expect(fe([]).config.httpPort).toBe(8000);
    const env = fe([], { DYN_HTTP_PORT: '9000' });
    expect(env.config.httpPort).toBe(9000);
    expect(env.sources.httpPort).toBe('env');
    expect(fe(['--http-port=9001'], { DYN_HTTP_PORT: '9000' }).config.httpPort).toBe(9001);
  });

  it('float', () => {
    expect(fe([]).sources.routerTemperature).toBe('default');
    expect(fe([], { DYN_ROUTER_TEMPERATURE: '0.5' }).config.routerTemperature).toBe(0.5);
    expect(
      fe(['--router-temperature', '0.25'], { DYN_ROUTER_TEMPERATURE: '0.5' }).config.routerTemperature,
    ).toBe(0.25);
  });

  it('bool', () => {
    expect(fe([]).config.routerReplicaSync).toBe(false);
    expect(fe([], { DYN_ROUTER_REPLICA_SYNC: 'true' }).config.routerReplicaSync).toBe(true);
    expect(
      fe(['--no-router-replica-sync'], { DYN_ROUTER_REPLICA_SYNC: 'true' }).config.routerReplicaSync,
    ).toBe(false);
  });

  it('enum and u64 (bigint, exact above 2^53)', () => {
    expect(fe([], { DYN_ROUTER_MODE: 'kv' }).config.routerMode).toBe('kv');
    expect(fe(['--router-mode', 'random'], { DYN_ROUTER_MODE: 'kv' }).config.routerMode).toBe('random');
    expect(fe([]).config.routerSnapshotThreshold).toBe(1000000n);
    const r = fe([], { DYN_ROUTER_SNAPSHOT_THRESHOLD: '18446744073709551615' });
    expect(r.config.routerSnapshotThreshold).toBe(18446744073709551615n);
  });

  it('empty env counts as unset', () => {
    const r = fe([], { DYN_HTTP_PORT: '', DYN_ROUTER_MODE: '' });
    expect(r.config.httpPort).toBe(8000);
    expect(r.sources.httpPort).toBe('default');
  });

  it('a repeated value flag keeps the last value', () => {
    expect(fe(['--http-port', '1', '--http-port', '2']).config.httpPort).toBe(2);
  });

  it('the config is frozen and typed', () => {
    const { config } = fe([]);
    expect(Object.isFrozen(config)).toBe(true);
    expectTypeOf(config.httpPort).toEqualTypeOf<number>();
    expectTypeOf(config.routerQueueThreshold).toEqualTypeOf<number | null>();
    expectTypeOf(config.activePrefillTokensThreshold).toEqualTypeOf<bigint | null>();
    expectTypeOf(config.eventPlane).toEqualTypeOf<'nats' | 'zmq'>();
    expectTypeOf(config.routerMode).toEqualTypeOf<
      'round-robin' | 'random' | 'kv' | 'direct' | 'least-loaded' | 'device-aware-weighted' | 'power-of-two'
    >();
  });

  it('each app sees only its own options', () => {
    expect('blockSize' in fe([]).config).toBe(false);
    expect('httpPort' in resolveConfig('indexer', ['--block-size', '16'], {}).config).toBe(false);
    expect(errorOf(() => fe(['--block-size', '16'])).message).toBe('unrecognized arguments: --block-size');
  });
});

describe('argv', () => {
  it('unknown flags and missing values', () => {
    expect(errorOf(() => fe(['--nope'])).message).toBe('unrecognized arguments: --nope');
    expect(errorOf(() => fe(['positional'])).message).toBe('unrecognized arguments: positional');
    expect(errorOf(() => fe(['--http-port'])).message).toBe('argument --http-port: expected one argument');
    expect(errorOf(() => fe(['--http-port', '--router-mode', 'kv'])).message).toBe(
      'argument --http-port: expected one argument',
    );
    expect(errorOf(() => fe(['--router-kv-events=false'])).message).toBe(
      "argument --router-kv-events: ignored explicit argument 'false'",
    );
  });

  it('a value that starts with a dash is a value (negative numbers, "-")', () => {
    expect(fe(['--decision-log', '-']).config.decisionLog).toBe('-');
    expect(errorOf(() => fe(['--router-temperature', '-1'])).message).toBe(
      '--router-temperature must be >= 0, got -1.0',
    );
  });

  it('short -i', () => {
    expect(fe(['-i']).config.interactive).toBe(true);
    expect(fe(['-i', '--no-interactive']).config.interactive).toBe(false);
  });

  it('required flags', () => {
    expect(errorOf(() => resolveConfig('indexer', [], {})).message).toBe(
      'the following arguments are required: --block-size',
    );
    expect(errorOf(() => resolveConfig('mocker', [], {})).message).toBe(
      'the following arguments are required: --model-path',
    );
    const m = resolveConfig('mocker', ['--model-path', 'Qwen/Qwen3-0.6B'], {}).config;
    // PROTOCOL §17 defaults.
    expect([m.blockSize, m.numGpuBlocksOverride, m.maxNumSeqs, m.maxNumBatchedTokens]).toEqual([
      64, 16384, 256, 8192,
    ]);
    expect([m.preemptionMode, m.engineType, m.disaggregationMode, m.enablePrefixCaching]).toEqual([
      'lifo',
      'vllm',
      'agg',
      true,
    ]);
  });

  it('mocker port lists and JSON', () => {
    const m = resolveConfig(
      'mocker',
      ['--model-path', 'x', '--zmq-kv-events-ports', '5557,5558', '--reasoning', '{"start_token":1}'],
      {},
    ).config;
    expect(m.zmqKvEventsPorts).toEqual([5557, 5558]);
    expect(m.reasoning).toEqual({ start_token: 1 });
    expect(
      errorOf(() => resolveConfig('mocker', ['--model-path', 'x', '--bootstrap-ports', '1,70000'], {}))
        .message,
    ).toBe('--bootstrap-ports must be a comma-separated list of integers between 0 and 65535, got 1,70000');
  });

  it('url lists', () => {
    const r = fe([], { ETCD_ENDPOINTS: 'http://a:2379, http://b:2379' });
    expect(r.config.etcdEndpoints).toEqual(['http://a:2379', 'http://b:2379']);
    expect(errorOf(() => fe([], { NATS_SERVER: 'not a url' })).message).toBe(
      "NATS_SERVER: invalid URL 'not a url'",
    );
  });
});

describe('boolean pairs and env booleans', () => {
  it('last one on the command line wins', () => {
    expect(fe(['--router-kv-events', '--no-router-kv-events']).config.routerKvEvents).toBe(false);
    expect(fe(['--no-router-kv-events', '--router-kv-events']).config.routerKvEvents).toBe(true);
    expect(fe(['--load-aware', '--no-load-aware']).config.loadAware).toBe(false);
  });

  it('accepts true|false|1|0|yes|no|on|off in any case', () => {
    // prettier-ignore
    const forms: Array<[string, boolean]> = [
      ['true', true], ['TRUE', true], ['1', true], ['Yes', true], ['oN', true],
      ['false', false], ['False', false], ['0', false], ['NO', false], ['off', false],
    ];
    for (const [raw, want] of forms)
      expect(fe([], { DYN_ROUTER_REPLICA_SYNC: raw }).config.routerReplicaSync, raw).toBe(want);
  });

  it('a bad env boolean is an error naming the variable', () => {
    const e = errorOf(() => fe([], { DYN_ROUTER_USE_KV_EVENTS: 'enabled' }));
    expect(e.message).toBe(
      "DYN_ROUTER_USE_KV_EVENTS: invalid boolean 'enabled' (use true/false, 1/0, yes/no, on/off)",
    );
    expect(e.flag).toBe('--router-kv-events');
    expect(e.code).toBe('config_error');
  });

  it('topology enable is lenient: unknown values warn and disable', () => {
    const r = resolveConfig('worker', [], { DYN_TOPOLOGY_ENABLED: 'maybe' });
    expect(r.config.topologyEnabled).toBe(false);
    expect(r.warnings).toEqual(["DYN_TOPOLOGY_ENABLED: unknown value 'maybe', treated as false"]);
  });
});

describe('None', () => {
  it('disables the queue and busy thresholds from CLI and env', () => {
    const r = fe(['--router-queue-threshold', 'None'], {
      DYN_ACTIVE_DECODE_BLOCKS_THRESHOLD: 'None',
      DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD: 'None',
    });
    expect(r.config.routerQueueThreshold).toBeNull();
    expect(r.config.activeDecodeBlocksThreshold).toBeNull();
    expect(r.config.activePrefillTokensThreshold).toBeNull();
    expect(r.sources.routerQueueThreshold).toBe('cli');
    expect(r.config.activePrefillTokensThresholdFrac).toBe(64);
  });

  it('unsets an option whose default is unset', () => {
    expect(
      fe(['--router-predicted-ttl-secs', '5', '--router-predicted-ttl-secs', 'None']).config
        .routerPredictedTtlSecs,
    ).toBeNull();
  });

  it('is case-sensitive and not accepted by non-nullable options', () => {
    expect(errorOf(() => fe(['--router-queue-threshold', 'none'])).message).toBe(
      "argument --router-queue-threshold: invalid float value: 'none'",
    );
    expect(errorOf(() => fe(['--router-temperature', 'None'])).message).toBe(
      "argument --router-temperature: invalid float value: 'None'",
    );
  });
});

describe('obsolete aliases and deprecations', () => {
  it('map to the canonical option with a warning', () => {
    const r = fe(['--no-kv-events', '--router-ttl', '30', '--track-output-blocks', '--no-assume-kv-reuse']);
    expect(r.config.routerKvEvents).toBe(false);
    expect(r.config.routerTtlSecs).toBe(30);
    expect(r.config.routerTrackOutputBlocks).toBe(true);
    expect(r.config.routerAssumeKvReuse).toBe(false);
    expect(r.warnings).toEqual([
      '--no-kv-events is obsolete; use --no-router-kv-events',
      '--router-ttl is obsolete; use --router-ttl-secs',
      '--track-output-blocks is obsolete; use --router-track-output-blocks',
      '--no-assume-kv-reuse is obsolete; use --no-router-assume-kv-reuse',
    ]);
  });

  it('a deprecated option in use warns with its replacement', () => {
    const r = fe(['--router-durable-kv-events', '--event-plane', 'nats']);
    expect(r.warnings).toContain(
      '--router-durable-kv-events is deprecated; use the event-plane local-indexer path (drop the flag)',
    );
  });

  it('reset-states / snapshot-threshold without durable mode warn (ignored)', () => {
    const r = fe(['--router-reset-states'], { DYN_ROUTER_SNAPSHOT_THRESHOLD: '10' });
    expect(r.warnings).toEqual([
      '--router-reset-states has no effect without --router-durable-kv-events (ignored)',
      '--router-snapshot-threshold has no effect without --router-durable-kv-events (ignored)',
    ]);
    expect(
      fe(['--router-reset-states', '--router-durable-kv-events', '--event-plane', 'nats']).warnings,
    ).not.toContain('--router-reset-states has no effect without --router-durable-kv-events (ignored)');
  });

  it('--router-durable-kv-events without an event-driven index warns why it has no effect', () => {
    const nats = ['--router-durable-kv-events', '--event-plane', 'nats'];
    const why = (argv: string[], app: 'frontend' | 'router' = 'frontend') =>
      resolveConfig(app, [...nats, ...argv], {}).warnings.filter((w) => w.includes('has no effect:'));
    expect(why([])).toEqual([
      '--router-durable-kv-events has no effect: --router-mode round-robin keeps no index (only kv mode reads KV events)',
    ]);
    expect(why(['--router-mode', 'kv', '--router-kv-overlap-score-credit', '0'], 'router')).toEqual([
      '--router-durable-kv-events has no effect: with --router-kv-overlap-score-credit 0 the router keeps no index',
    ]);
    expect(why(['--router-mode', 'kv', '--use-remote-indexer'])).toEqual([
      '--router-durable-kv-events has no effect: with --use-remote-indexer this router keeps no index (the serving router reads the events)',
    ]);
    expect(why(['--router-mode', 'kv', '--no-router-kv-events'])).toEqual([
      '--router-durable-kv-events has no effect: with --no-router-kv-events the index predicts from its own decisions and reads no KV events',
    ]);
    expect(why(['--router-mode', 'kv'])).toEqual([]);
  });

  it('the gRPC port flags without --kserve-grpc-server warn (ignored)', () => {
    expect(fe(['--kserve-grpc-port', '9001'], { DYN_GRPC_METRICS_PORT: '9002' }).warnings).toEqual([
      '--kserve-grpc-port has no effect without --kserve-grpc-server (ignored)',
      '--grpc-metrics-port has no effect without --kserve-grpc-server (ignored)',
    ]);
    expect(
      fe(['--kserve-grpc-server', '--kserve-grpc-port', '9001', '--grpc-metrics-port', '9002']).warnings,
    ).toEqual([]);
  });

  it('KV block size 1 warns', () => {
    expect(fe(['--kv-cache-block-size', '1']).warnings).toEqual([
      'KV block size 1: every token is a block; index and event volume will be very high',
    ]);
    expect(fe(['--kv-cache-block-size', '16']).warnings).toEqual([]);
  });
});

describe('legacy overlap-score weight (PROTOCOL §8.4)', () => {
  it('weight 2 -> scale 2, credit unchanged', () => {
    const r = fe(['--router-kv-overlap-score-weight', '2']);
    expect(r.config.routerPrefillLoadScale).toBe(2);
    expect(r.config.routerKvOverlapScoreCredit).toBe(1);
    expect(r.sources.routerPrefillLoadScale).toBe('legacy');
    expect(r.sources.routerKvOverlapScoreCredit).toBe('default');
    expect(r.warnings).toContain(
      '--router-kv-overlap-score-weight is deprecated; use --router-prefill-load-scale (weight 0: --router-kv-overlap-score-credit 0)',
    );
  });

  it('weight 0 -> scale 0 and credit 0', () => {
    const r = fe(['--kv-overlap-score-weight', '0']);
    expect(r.config.routerPrefillLoadScale).toBe(0);
    expect(r.config.routerKvOverlapScoreCredit).toBe(0);
    expect(r.sources.routerKvOverlapScoreCredit).toBe('legacy');
  });

  it('legacy wins over the new fields', () => {
    const a = fe(['--router-prefill-load-scale', '3', '--router-kv-overlap-score-weight', '2']);
    expect(a.config.routerPrefillLoadScale).toBe(2);
    expect(a.warnings).toContain(
      '--router-kv-overlap-score-weight 2.0 overrides --router-prefill-load-scale=3.0',
    );
    const b = fe(['--router-kv-overlap-score-credit', '0.5'], { DYN_OVERLAP_SCORE_WEIGHT: '0' });
    expect(b.config.routerKvOverlapScoreCredit).toBe(0);
    expect(b.config.routerPrefillLoadScale).toBe(0);
  });

  it('both env vars: DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT wins; each alone works; CLI beats both', () => {
    const both = { DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT: '3', DYN_OVERLAP_SCORE_WEIGHT: '5' };
    expect(fe([], both).config.routerPrefillLoadScale).toBe(3);
    expect(fe([], { DYN_OVERLAP_SCORE_WEIGHT: '5' }).config.routerPrefillLoadScale).toBe(5);
    expect(
      fe([], { DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT: '', DYN_OVERLAP_SCORE_WEIGHT: '5' }).config
        .routerPrefillLoadScale,
    ).toBe(5);
    expect(fe(['--router-kv-overlap-score-weight', '7'], both).config.routerPrefillLoadScale).toBe(7);
  });

  it('the exported mapping gives the same table for the per-request JSON field', () => {
    expect(mapLegacyOverlapWeight(2)).toEqual({ prefillLoadScale: 2 });
    expect(mapLegacyOverlapWeight(0.5)).toEqual({ prefillLoadScale: 0.5 });
    expect(mapLegacyOverlapWeight(0)).toEqual({ prefillLoadScale: 0, overlapScoreCredit: 0 });
  });

  it('unset weight changes nothing; a negative weight is rejected', () => {
    expect(fe([]).config.routerKvOverlapScoreWeight).toBeNull();
    expect(fe([]).sources.routerPrefillLoadScale).toBe('default');
    expect(errorOf(() => fe(['--router-kv-overlap-score-weight', '-1'])).message).toBe(
      '--router-kv-overlap-score-weight must be a finite number >= 0, got -1.0',
    );
  });
});

describe('--load-aware preset (PROTOCOL §8.5)', () => {
  it('forces kv mode, credit 0, events off, reuse off, tracking on, side/remote/shared indexes off', () => {
    const r = fe([], { DYN_ROUTER_LOAD_AWARE: '1' });
    const c = r.config;
    expect(c.routerMode).toBe('kv');
    expect(c.routerKvOverlapScoreCredit).toBe(0);
    expect(c.routerKvEvents).toBe(false);
    expect(c.routerDurableKvEvents).toBe(false);
    expect(c.routerAssumeKvReuse).toBe(false);
    expect(c.routerTrackActiveBlocks).toBe(true);
    expect(c.routerTrackPrefillTokens).toBe(true);
    expect(c.useRemoteIndexer).toBe(false);
    expect(c.sharedCacheType).toBe('none');
    expect(c.routerPredictedTtlSecs).toBeNull();
    expect(r.sources.routerMode).toBe('preset');
    expect(r.warnings).toEqual([]);
  });

  it('keeps the prefill load scale and tier weights', () => {
    const c = fe([
      '--load-aware',
      '--router-prefill-load-scale',
      '3',
      '--router-host-cache-hit-weight',
      '0.5',
    ]).config;
    expect(c.routerPrefillLoadScale).toBe(3);
    expect(c.routerHostCacheHitWeight).toBe(0.5);
    expect(c.routerDiskCacheHitWeight).toBe(0.25);
  });

  it('warns when it overrides an explicit mode and clears the side index', () => {
    const r = fe(['--load-aware', '--router-mode', 'random', '--router-predicted-ttl-secs', '5']);
    expect(r.config.routerMode).toBe('kv');
    expect(r.config.routerPredictedTtlSecs).toBeNull();
    expect(r.warnings).toEqual([
      '--load-aware: --router-mode=random overridden to kv',
      '--load-aware: --router-predicted-ttl-secs cleared (side index off)',
    ]);
  });

  it('runs before the legacy mapping: weight 2 still sets scale, credit stays 0', () => {
    const c = fe(['--load-aware', '--router-kv-overlap-score-weight', '2']).config;
    expect([c.routerPrefillLoadScale, c.routerKvOverlapScoreCredit]).toEqual([2, 0]);
  });
});

describe('admission-control promotion (PROTOCOL §11)', () => {
  it('stays none with default thresholds', () => {
    const r = fe([]);
    expect(r.config.admissionControl).toBe('none');
    expect(effectiveBusyThresholds(r.config)).toEqual({
      activeDecodeBlocksThreshold: null,
      activePrefillTokensThreshold: null,
      activePrefillTokensThresholdFrac: null,
    });
  });

  it('promotes when a threshold is given explicitly (CLI or env), with a warning', () => {
    const a = fe(['--active-decode-blocks-threshold', '0.9']);
    expect(a.config.admissionControl).toBe('token-capacity');
    expect(a.sources.admissionControl).toBe('derived');
    expect(a.warnings).toEqual([
      '--admission-control promoted from none to token-capacity (--active-decode-blocks-threshold set explicitly)',
    ]);
    expect(effectiveBusyThresholds(a.config)).toEqual({
      activeDecodeBlocksThreshold: 0.9,
      activePrefillTokensThreshold: 10000000n,
      activePrefillTokensThresholdFrac: 64,
    });
    const b = fe(['--admission-control', 'none'], { DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD: '5000' });
    expect(b.config.admissionControl).toBe('token-capacity');
    expect(b.config.activePrefillTokensThreshold).toBe(5000n);
  });

  it('does not promote for an explicit None', () => {
    const r = fe(['--active-prefill-tokens-threshold-frac', 'None']);
    expect(r.config.admissionControl).toBe('none');
    expect(r.warnings).toEqual([]);
  });

  it('explicit token-capacity keeps defaults and needs no promotion', () => {
    const r = fe([], { DYN_ADMISSION_CONTROL: 'token-capacity' });
    expect(r.config.admissionControl).toBe('token-capacity');
    expect(r.sources.admissionControl).toBe('env');
    expect(effectiveBusyThresholds(r.config).activeDecodeBlocksThreshold).toBe(1);
  });
});

describe('computed defaults', () => {
  it('event plane: zmq for mem/file, nats for etcd/kubernetes; explicit wins', () => {
    expect(fe([]).config.eventPlane).toBe('zmq');
    expect(fe(['--discovery-backend', 'file']).config.eventPlane).toBe('zmq');
    expect(fe(['--discovery-backend', 'etcd']).config.eventPlane).toBe('nats');
    expect(fe([], { DYN_DISCOVERY_BACKEND: 'kubernetes' }).config.eventPlane).toBe('nats');
    expect(fe(['--discovery-backend', 'etcd', '--event-plane', 'zmq']).config.eventPlane).toBe('zmq');
  });

  it('file KV root under $TMPDIR; shared-cache multiplier 0 without a shared cache', () => {
    expect(fe([], { TMPDIR: '/scratch/' }).config.fileKv).toBe('/scratch/dynamo_store_kv');
    expect(fe([]).config.fileKv).toBe('/tmp/dynamo_store_kv');
    expect(fe([]).config.sharedCacheMultiplier).toBe(0);
    expect(fe(['--shared-cache-multiplier', '0.3']).config.sharedCacheMultiplier).toBe(0.3);
  });
});

/**
 * One case per docs/configuration.md validation message. Expected strings are docs/configuration.md's templates filled by
 * hand; floats print Python-style (2 -> "2.0"). The meta-test below fails if a template in
 * docs/configuration.md has no case here.
 */
// prettier-ignore
const CASES: Array<{ app?: App; argv?: string[]; env?: Env; opts?: ResolveOptions; msg: string; flag: string }> = [
  { argv: ['--router-prefill-load-model', 'aic', ...AIC_OK], msg: '--router-prefill-load-model=aic requires --router-mode=kv', flag: '--router-prefill-load-model' },
  { argv: ['--router-mode', 'kv', '--router-prefill-load-model', 'aic'], msg: '--router-prefill-load-model=aic requires --aic-backend, --aic-system, --aic-model-path', flag: '--aic-backend' },
  { argv: ['--router-mode', 'kv', '--router-prefill-load-model', 'aic', '--aic-system', 'h200_sxm'], msg: '--router-prefill-load-model=aic requires --aic-backend, --aic-model-path', flag: '--aic-backend' },
  { argv: ['--router-mode', 'kv', '--router-prefill-load-model', 'aic', ...AIC_OK, '--no-router-track-prefill-tokens'], msg: '--router-prefill-load-model=aic requires --router-track-prefill-tokens', flag: '--router-prefill-load-model' },
  { argv: ['--router-mode', 'kv', '--router-prefill-load-model', 'aic', ...AIC_OK, '--dyn-chat-processor', 'vllm'], msg: '--router-prefill-load-model=aic currently requires --dyn-chat-processor=dynamo', flag: '--router-prefill-load-model' },
  // tp 2, adp unset -> 1, moe_tp unset -> 1, moe_ep 4: 2*1 = 2 != 1*4 = 4.
  { argv: ['--aic-tp-size', '2', '--aic-moe-ep-size', '4'], msg: 'AIC MoE parallelism requires aic_tp_size * aic_attention_dp_size == aic_moe_tp_size * aic_moe_ep_size (got 2 * 1 != 1 * 4)', flag: '--aic-moe-tp-size' },
  { argv: ['--aic-moe-tp-size', '0'], msg: '--aic-moe-tp-size must be >= 1, got 0', flag: '--aic-moe-tp-size' },
  { argv: ['--router-predicted-ttl-secs', '5', '--no-router-kv-events'], msg: '--router-predicted-ttl-secs requires KV events; it cannot be combined with --no-router-kv-events', flag: '--router-predicted-ttl-secs' },
  { argv: ['--router-predicted-ttl-secs', '0'], msg: '--router-predicted-ttl-secs must be > 0, got 0.0', flag: '--router-predicted-ttl-secs' },
  { argv: ['--router-mode', 'kv', '--use-remote-indexer', '--serve-indexer'], msg: '--serve-indexer and --use-remote-indexer are mutually exclusive', flag: '--serve-indexer' },
  { argv: ['--serve-indexer'], msg: '--serve-indexer requires --router-mode=kv', flag: '--serve-indexer' },
  { argv: ['--router-mode', 'kv', '--serve-indexer', '--router-kv-overlap-score-credit', '0'], msg: '--serve-indexer requires overlap scoring (--router-kv-overlap-score-credit > 0)', flag: '--serve-indexer' },
  { argv: ['--router-kv-overlap-score-credit', '1.5'], msg: '--router-kv-overlap-score-credit must be between 0.0 and 1.0, got 1.5', flag: '--router-kv-overlap-score-credit' },
  { env: { DYN_ROUTER_QUEUE_THRESHOLD: '0' }, msg: '--router-queue-threshold must be greater than 0 (use None to disable queueing), got 0.0', flag: '--router-queue-threshold' },
  { argv: ['--active-decode-blocks-threshold', '1.2'], msg: '--active-decode-blocks-threshold must be between 0.0 and 1.0, got 1.2', flag: '--active-decode-blocks-threshold' },
  { argv: ['--active-prefill-tokens-threshold', '-5'], msg: '--active-prefill-tokens-threshold must be >= 0, got -5', flag: '--active-prefill-tokens-threshold' },
  { argv: ['--active-prefill-tokens-threshold-frac', '-0.5'], msg: '--active-prefill-tokens-threshold-frac must be >= 0, got -0.5', flag: '--active-prefill-tokens-threshold-frac' },
  { argv: ['--admission-control', 'always'], msg: "--admission-control must be one of ('token-capacity', 'none'), got 'always'", flag: '--admission-control' },
  { argv: ['--router-mode', 'fastest'], msg: "argument --router-mode: invalid choice: 'fastest' (choose from 'round-robin', 'random', 'kv', 'direct', 'least-loaded', 'device-aware-weighted', 'power-of-two')", flag: '--router-mode' },
  { argv: ['--tokenizer', 'slow'], msg: "--tokenizer: invalid value 'slow' (choose from ['default', 'fastokens'])", flag: '--tokenizer' },
  { argv: ['--tls-cert-path', '/c.pem'], msg: '--tls-cert-path and --tls-key-path must be provided together', flag: '--tls-key-path' },
  { argv: ['--migration-limit', '4294967296'], msg: '--migration-limit must be between 0 and 4294967295 (0=disabled)', flag: '--migration-limit' },
  { argv: ['--migration-max-seq-len', '0'], msg: '--migration-max-seq-len must be between 1 and 4294967295', flag: '--migration-max-seq-len' },
  { argv: ['--router-min-initial-workers', '-1'], msg: '--router-min-initial-workers must be >= 0', flag: '--router-min-initial-workers' },
  { argv: ['--router-temperature', '-0.1'], msg: '--router-temperature must be >= 0, got -0.1', flag: '--router-temperature' },
  { argv: ['--router-prefill-load-scale', '-1'], msg: '--router-prefill-load-scale must be a finite number >= 0, got -1.0', flag: '--router-prefill-load-scale' },
  { argv: ['--router-kv-overlap-score-credit-decay', 'inf'], msg: '--router-kv-overlap-score-credit-decay must be a finite number >= 0, got inf', flag: '--router-kv-overlap-score-credit-decay' },
  { env: { DYN_ROUTER_DECODE_ACTIVE_REQUEST_WEIGHT: '-2' }, msg: '--router-decode-active-request-weight must be a finite number >= 0, got -2.0', flag: '--router-decode-active-request-weight' },
  { argv: ['--router-host-cache-hit-weight', '1.5'], msg: '--router-host-cache-hit-weight must be between 0.0 and 1.0, got 1.5', flag: '--router-host-cache-hit-weight' },
  { argv: ['--shared-cache-multiplier', '2'], msg: '--shared-cache-multiplier must be between 0.0 and 1.0, got 2.0', flag: '--shared-cache-multiplier' },
  { argv: ['--router-event-threads', '0'], msg: '--router-event-threads must be >= 1, got 0', flag: '--router-event-threads' },
  { argv: ['--router-ttl-secs', '0'], msg: '--router-ttl-secs must be > 0, got 0.0', flag: '--router-ttl-secs' },
  { argv: ['--router-max-tree-size', '0'], msg: '--router-max-tree-size must be > 0, got 0', flag: '--router-max-tree-size' },
  { argv: ['--router-prune-target-ratio', '0'], msg: '--router-prune-target-ratio must be in (0, 1], got 0.0', flag: '--router-prune-target-ratio' },
  { argv: ['--router-prune-target-ratio', '1.01'], msg: '--router-prune-target-ratio must be in (0, 1], got 1.01', flag: '--router-prune-target-ratio' },
  { argv: ['--router-track-output-blocks', '--no-router-track-active-blocks'], msg: '--router-track-output-blocks requires --router-track-active-blocks', flag: '--router-track-output-blocks' },
  { argv: ['--router-durable-kv-events'], msg: '--router-durable-kv-events requires --event-plane=nats', flag: '--router-durable-kv-events' },
  { argv: ['--shared-cache-type', 'hicache'], msg: '--shared-cache-type hicache is not supported by kvrouter', flag: '--shared-cache-type' },
  { argv: ['--model-name', ' '], msg: 'model-name must be a non-empty string, got:  ', flag: '--model-name' },
  { argv: ['--model-path', '/nope'], opts: { isDirectory: () => false }, msg: 'model-path must be a valid directory on disk, got: /nope', flag: '--model-path' },
  { argv: ['--http-port', '70000'], msg: '--http-port must be an integer between 0 and 65535, got 70000', flag: '--http-port' },
  { env: { DYN_ROUTER_REPLICA_SYNC: 'maybe' }, msg: "DYN_ROUTER_REPLICA_SYNC: invalid boolean 'maybe' (use true/false, 1/0, yes/no, on/off)", flag: '--router-replica-sync' },
  { env: { DYN_ENCODER_CUDA_TO_CPU_RATIO: '0' }, msg: 'DYN_ENCODER_CUDA_TO_CPU_RATIO must be an integer >= 1, got 0', flag: 'DYN_ENCODER_CUDA_TO_CPU_RATIO' },
  { env: { DYN_ENCODER_CUDA_TO_CPU_RATIO: '2.5' }, msg: 'DYN_ENCODER_CUDA_TO_CPU_RATIO must be an integer >= 1, got 2.5', flag: 'DYN_ENCODER_CUDA_TO_CPU_RATIO' },
  { env: { DYN_ROUTER_OVERLAP_REFRESH_AFTER_SECS: '-1' }, msg: 'DYN_ROUTER_OVERLAP_REFRESH_AFTER_SECS must be >= 0, got -1.0', flag: 'DYN_ROUTER_OVERLAP_REFRESH_AFTER_SECS' },
  // Worker-side topology (worker and mocker apps).
  { app: 'worker', env: { DYN_TOPOLOGY_ENABLED: 'true' }, msg: 'DYN_TOPOLOGY_ENABLED is set but DYN_KV_TRANSFER_DOMAIN is not', flag: 'DYN_KV_TRANSFER_DOMAIN' },
  { app: 'worker', env: { DYN_KV_TRANSFER_ENFORCEMENT: 'soft' }, msg: 'DYN_KV_TRANSFER_ENFORCEMENT must be required or preferred, got "soft"', flag: 'DYN_KV_TRANSFER_ENFORCEMENT' },
  { app: 'worker', env: { DYN_KV_TRANSFER_PREFERRED_WEIGHT: 'heavy' }, msg: 'invalid DYN_KV_TRANSFER_PREFERRED_WEIGHT: invalid float literal', flag: 'DYN_KV_TRANSFER_PREFERRED_WEIGHT' },
  { app: 'worker', env: { DYN_KV_TRANSFER_PREFERRED_WEIGHT: '1.5' }, msg: 'DYN_KV_TRANSFER_PREFERRED_WEIGHT must be between 0 and 1, got 1.5', flag: 'DYN_KV_TRANSFER_PREFERRED_WEIGHT' },
];

describe('validation messages (docs/configuration.md "Validation", exact text)', () => {
  for (const c of CASES) {
    it(c.msg, () => {
      const e = errorOf(() => resolveConfig(c.app ?? 'frontend', c.argv ?? [], c.env ?? {}, c.opts));
      expect(e.message).toBe(c.msg);
      expect(e.flag).toBe(c.flag);
      expect(e.detail?.flag).toBe(c.flag);
    });
  }

  it('every message template in docs/configuration.md "Validation" is exercised by a case above', () => {
    const md = readFileSync(new URL('../../../docs/configuration.md', import.meta.url), 'utf8');
    const section = md.slice(md.indexOf('## Validation'), md.indexOf('## Options'));
    const templates: string[] = [];
    for (const line of section.split('\n')) {
      if (!line.startsWith('|') || line.startsWith('|---') || line.startsWith('| Condition')) continue;
      const msgCell = line.split(/(?<!\\)\|/)[2] ?? '';
      const m = /`([^`]+)`/.exec(msgCell);
      if (m) templates.push(m[1]);
    }
    const config = templates;
    expect(config.length).toBeGreaterThan(35);
    const asRegex = (t: string) =>
      new RegExp(
        '^' +
          t
            .split(/\{[A-Za-z_]+\}/)
            .map((p) => p.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&'))
            .join('[\\s\\S]*') +
          '$',
      );
    const uncovered = config.filter((t) => !CASES.some((c) => asRegex(t).test(c.msg)));
    expect(uncovered).toEqual([]);
  });

  it('without an isDirectory check the model path is taken as given', () => {
    expect(fe(['--model-path', '/models/x']).config.modelPath).toBe('/models/x');
    expect(
      fe(['--model-path', '/models/x'], {}, { isDirectory: (p) => p === '/models/x' }).config.modelPath,
    ).toBe('/models/x');
  });

  it('valid combinations pass: aic in kv mode, matching MoE sizes, served index', () => {
    // tp 4 * adp 2 = 8 = moe_tp 2 * moe_ep 4.
    const c = fe([
      '--router-mode',
      'kv',
      '--router-prefill-load-model',
      'aic',
      ...AIC_OK,
      '--aic-tp-size',
      '4',
      '--aic-attention-dp-size',
      '2',
      '--aic-moe-tp-size',
      '2',
      '--aic-moe-ep-size',
      '4',
      '--serve-indexer',
    ]).config;
    expect([c.routerPrefillLoadModel, c.aicMoeEpSize, c.serveIndexer]).toEqual(['aic', 4, true]);
    expect(fe(['--tls-cert-path', '/c', '--tls-key-path', '/k']).config.tlsKeyPath).toBe('/k');
  });
});
