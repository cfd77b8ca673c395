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
      policy: 'dynamo',
      ttftDecodePressure: 0.25,
      ttftWorkWeight: 1,
      ttftDecodeStep: 1,
      ttftDuplicateWeight: 3,
      siblingShare: false,
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

describe('issue-19 knobs: presets, --router-policy, --router-policy-config', () => {
  const files: Record<string, string> = {};
  const read = (p: string) => files[p] ?? null;
  const withFile = (argv: string[], env: Record<string, string> = {}) =>
    routerParamsFromConfig(resolveConfig('frontend', argv, env).config, read);

  it("--agentic is Dynamo's preset: kv, credit 2, scale 4, 64 blocks per active request; explicit flags win", () => {
    const a = params(['--agentic']);
    expect([a.policy.mode, a.policy.cost!.credit, a.policy.cost!.prefillLoadScale]).toEqual(['kv', 2, 4]);
    expect(a.policy.cost!.decodeActiveRequestWeight).toBe(64);
    const own = params(['--agentic', '--router-prefill-load-scale', '8']);
    expect(own.policy.cost!.prefillLoadScale).toBe(8);
    expect(own.policy.cost!.credit).toBe(2);
    // --load-aware forces credit 0 and wins over the filling preset.
    expect(params(['--agentic', '--load-aware']).policy.cost!.credit).toBe(0);
  });

  it('--ttft-aware and --router-policy ttft select the TTFT cost; power-of-two is a mode', () => {
    const t = params(['--ttft-aware']);
    expect([t.policy.mode, t.policy.cost!.policy]).toEqual(['kv', 'ttft']);
    const f = params(['--router-mode', 'kv', '--router-policy', 'ttft', '--router-ttft-work-weight', '0']);
    expect([f.policy.cost!.policy, f.policy.cost!.ttftWorkWeight]).toEqual(['ttft', 0]);
    expect(params(['--router-mode', 'power-of-two']).policy.mode).toBe('power-of-two');
    expect(() => params(['--router-policy', 'fast'])).toThrow(
      "argument --router-policy: invalid choice: 'fast' (choose from 'dynamo', 'ttft')",
    );
  });

  it('a YAML policy file sets the same knobs as the flags and wins over them', () => {
    files['/p.yaml'] = [
      'router-mode: kv',
      'router-prefill-load-scale: 32',
      'router_temperature: 0.5',
      'router-policy: ttft',
      'router-queue-threshold: None',
      '',
    ].join('\n');
    const p = withFile(['--router-prefill-load-scale', '2', '--router-policy-config', '/p.yaml']);
    expect([p.policy.mode, p.policy.cost!.prefillLoadScale, p.policy.cost!.temperature]).toEqual([
      'kv',
      32,
      0.5,
    ]);
    expect([p.policy.cost!.policy, p.policy.queueThreshold]).toEqual(['ttft', null]);
    files['/p.json'] = '{"router-kv-overlap-score-credit": 0}';
    const j = withFile(['--router-mode', 'kv'], { DYN_ROUTER_POLICY_CONFIG: '/p.json' });
    expect([j.policy.cost!.credit, j.index.kind]).toEqual([0, 'none']);
  });

  it('a bad policy file stops startup naming the flag, the key and the allowed values', () => {
    const err = (text: string | null) => {
      if (text !== null) files['/bad.yaml'] = text;
      else delete files['/bad.yaml'];
      try {
        withFile(['--router-policy-config', '/bad.yaml']);
      } catch (e) {
        return [(e as { flag?: string }).flag, (e as Error).message];
      }
      return null;
    };
    expect(err('router-prefill-load-scale: -1')).toEqual([
      '--router-policy-config',
      "--router-policy-config /bad.yaml: key 'router-prefill-load-scale': --router-prefill-load-scale must be a finite number >= 0, got -1.0",
    ]);
    expect(err('router-mode: fastest')![1]).toContain(
      "key 'router-mode': argument --router-mode: invalid choice",
    );
    expect(err('http-port: 9')![1]).toMatch(/unknown key 'http-port' \(allowed: .*router-prefill-load-scale/);
    expect(err('- 1\n- 2')![1]).toBe(
      '--router-policy-config /bad.yaml: must be a mapping of knob names to values',
    );
    expect(err(null)![1]).toBe('--router-policy-config /bad.yaml: cannot read: no such file');
    expect(err('a: [')![1]).toMatch(/^--router-policy-config \/bad.yaml: not valid YAML\/JSON: /);
  });
});
