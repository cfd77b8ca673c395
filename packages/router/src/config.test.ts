import { describe, expect, it } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import { VirtualClock } from '@kvrouter/protocols';
import { routerParamsFromConfig } from './config.js';
import { KvRouter } from './router.js';

const params = (argv: string[], env: Record<string, string> = {}) =>
  routerParamsFromConfig(resolveConfig('frontend', argv, env).config);

describe('routerParamsFromConfig', () => {
  it('maps the defaults of docs/configuration.md', () => {
    const p = params([]);
    expect(p.policy.mode).toBe('round-robin');
    expect(p.policy.cost).toEqual({
      credit: 1,
      creditDecay: 0,
      prefillLoadScale: 1,
      hostWeight: 0.75,
      diskWeight: 0.25,
      sharedMultiplier: 0,
      decodeActiveRequestWeight: 0,
      temperature: 0,
      trackPrefillTokens: true,
      trackActiveBlocks: true,
      assumeKvReuse: true,
    });
    expect([
      p.policy.queueThreshold,
      p.policy.queuePolicy,
      p.policy.overlapRefreshAfterSecs,
      p.policy.activeRequestExpirySecs,
    ]).toEqual([16, 'fcfs', 10, 300]);
    // Admission control `none` clears the thresholds inside the router; the values travel as configured.
    expect(p.policy.admissionControl).toBe('none');
    expect(p.policy.busyThresholds).toEqual({
      activeDecodeBlocks: 1,
      activePrefillTokens: 10_000_000,
      activePrefillTokensFrac: 64,
    });
    expect(p.index).toMatchObject({ kind: 'events', eventThreads: 4, ttlSecs: 120, maxTreeSize: 1_048_576 });
    expect([
      p.policy.predictedTtlSecs,
      p.blockSizeOverride,
      p.replicaSync,
      p.aic,
      p.policy.cudaToCpuRatio,
    ]).toEqual([null, null, false, false, 8]);
  });

  it('follows the preset, legacy weight, approximate mode and env-only values', () => {
    const la = params(['--load-aware']);
    expect([la.policy.mode, la.policy.cost!.credit, la.policy.cost!.assumeKvReuse, la.index.kind]).toEqual([
      'kv',
      0,
      false,
      'none',
    ]);
    const legacy = params(['--router-mode', 'kv', '--router-kv-overlap-score-weight', '2']);
    expect(legacy.policy.cost!.prefillLoadScale).toBe(2);
    const approx = params(['--router-mode', 'kv', '--no-router-kv-events', '--router-ttl-secs', '30']);
    expect(approx.index).toMatchObject({ kind: 'approximate', ttlSecs: 30 });
    const env = params(
      [
        '--router-mode',
        'kv',
        '--router-predicted-ttl-secs',
        '5',
        '--active-prefill-tokens-threshold',
        '5000',
      ],
      {
        DYN_ROUTER_OVERLAP_REFRESH_AFTER_SECS: '0',
        DYN_ENCODER_CUDA_TO_CPU_RATIO: '4',
      },
    );
    expect([
      env.policy.predictedTtlSecs,
      env.policy.overlapRefreshAfterSecs,
      env.policy.cudaToCpuRatio,
      env.policy.admissionControl,
    ]).toEqual([5, 0, 4, 'token-capacity']);
    expect(env.policy.busyThresholds!.activePrefillTokens).toBe(5000);
  });

  it('the result builds a router (with the app’s block size, clock and randomness)', async () => {
    const p = params([
      '--router-mode',
      'kv',
      '--router-queue-threshold',
      'None',
      '--admission-control',
      'token-capacity',
    ]);
    const router = new KvRouter({
      blockSize: p.blockSizeOverride ?? 16,
      policy: p.policy,
      deps: { clock: new VirtualClock(), random: () => 0 },
    });
    expect(router.mode).toBe('kv');
    expect(router.busyThresholds).toEqual({
      activeDecodeBlocks: 1,
      activePrefillTokens: 10_000_000,
      activePrefillTokensFrac: 64,
    });
    router.addWorker({ workerId: 1 });
    expect((await router.route({ requestId: 'a', tokens: new Uint32Array(32) })).booked).toBe(true);
  });
});
