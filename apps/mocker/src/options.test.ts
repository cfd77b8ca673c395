import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { parseEndpoint } from '@kvrouter/protocols';
import { resolveConfig } from '@kvrouter/config';
import { AicModel, builtinModel } from '@kvrouter/aic-model';
import { MockerConfigError, extraArgsToArgv, planFromConfig, timingModelOf } from './options.js';
import { cfg, flagOf } from './test-config.js';
import { readTopologyDomains, topologyRuntimeConfig } from './topology.js';

const dirs: string[] = [];
afterEach(() => {
  while (dirs.length > 0) rmSync(dirs.pop()!, { recursive: true, force: true });
});

describe('parseEndpoint', () => {
  it('splits dyn://namespace.component.endpoint, dotted namespaces kept whole', () => {
    expect(parseEndpoint('dyn://dynamo.backend.generate')).toEqual({
      namespace: 'dynamo',
      component: 'backend',
      endpoint: 'generate',
    });
    expect(parseEndpoint('dyn://team.a.mocker.gen')).toEqual({
      namespace: 'team.a',
      component: 'mocker',
      endpoint: 'gen',
    });
  });

  it('refuses anything else, naming the flag', () => {
    for (const bad of ['dynamo.backend.generate', 'dyn://a.b', 'dyn://a..c', 'dyn://a b.c.d', 'http://a.b.c'])
      expect(() => planFromConfig(cfg('--endpoint', bad)), bad).toThrow(
        expect.objectContaining({ detail: { flag: '--endpoint' } }),
      );
  });
});

describe('planFromConfig', () => {
  it('maps the §17 defaults onto the engine and the process', () => {
    const p = planFromConfig(cfg());
    expect(p.path).toEqual({ namespace: 'dynamo', component: 'backend', endpoint: 'generate' });
    expect(p.modelName).toBe('Qwen/Qwen3-0.6B');
    expect(p.engine).toEqual({
      numGpuBlocks: 16384,
      blockSize: 64,
      maxNumSeqs: 256,
      maxNumBatchedTokens: 8192,
      enablePrefixCaching: true,
      enableChunkedPrefill: true,
      preemptionMode: 'lifo',
      speedupRatio: 1,
      decodeSpeedupRatio: 1,
      dataParallelSize: 1,
      engineType: 'vllm',
      sglangMaxPrefillTokens: 16384,
      reasoning: null,
    });
    expect(p.timing).toEqual({ kind: 'polynomial' });
    expect(p.numWorkers).toBe(1);
    expect(p.startupDelayMs).toBe(0);
    expect(p.staggerMs).toBe(0);
    // kvrouter's default discovery is mem, whose automatic event plane is zmq (docs/configuration.md).
    expect(p.discoveryBackend).toBe('mem');
    expect(p.eventPlane).toBe('zmq');
    expect(p.requestPlane).toBe('tcp');
  });

  it('passes every engine flag through and converts seconds to ms', () => {
    const p = planFromConfig(
      cfg(
        '--num-gpu-blocks-override',
        '900',
        '--block-size',
        '16',
        '--max-num-seqs',
        '8',
        '--max-num-batched-tokens',
        '512',
        '--no-enable-prefix-caching',
        '--no-enable-chunked-prefill',
        '--preemption-mode',
        'fifo',
        '--speedup-ratio',
        '10',
        '--decode-speedup-ratio',
        '2',
        '--data-parallel-size',
        '2',
        '--num-workers',
        '3',
        '--startup-time',
        '1.5',
        '--stagger-delay',
        '0.25',
        '--model-name',
        'mock',
        '--endpoint',
        'dyn://ns.comp.ep',
        '--discovery-backend',
        'etcd',
      ),
    );
    expect(p.engine).toEqual({
      numGpuBlocks: 900,
      blockSize: 16,
      maxNumSeqs: 8,
      maxNumBatchedTokens: 512,
      enablePrefixCaching: false,
      enableChunkedPrefill: false,
      preemptionMode: 'fifo',
      speedupRatio: 10,
      decodeSpeedupRatio: 2,
      dataParallelSize: 2,
      engineType: 'vllm',
      sglangMaxPrefillTokens: 16384,
      reasoning: null,
    });
    expect(p.numWorkers).toBe(3);
    expect(p.startupDelayMs).toBe(1500);
    expect(p.staggerMs).toBe(250);
    expect(p.modelName).toBe('mock');
    expect(p.path).toEqual({ namespace: 'ns', component: 'comp', endpoint: 'ep' });
    expect(p.eventPlane).toBe('nats');
  });

  it('auto stagger grows with the fleet', () => {
    expect(planFromConfig(cfg('--num-workers', '32')).staggerMs).toBe(0);
    expect(planFromConfig(cfg('--num-workers', '64')).staggerMs).toBe(100);
    expect(planFromConfig(cfg('--num-workers', '256')).staggerMs).toBe(200);
  });

  it('refuses what it cannot run, naming the flag', () => {
    expect(flagOf(cfg('--disaggregation-mode', 'prefill'))).toBeUndefined();
    // One port per worker; replays only with events.
    expect(flagOf(cfg('--zmq-kv-events-ports', '5557'))).toBeUndefined();
    expect(flagOf(cfg('--zmq-kv-events-ports', '5557,5567'))).toBe('--zmq-kv-events-ports');
    expect(flagOf(cfg('--zmq-replay-ports', '5560'))).toBe('--zmq-replay-ports');
    expect(flagOf(cfg('--durable-kv-events', '--event-plane', 'zmq'))).toBe('--durable-kv-events');
    expect(flagOf(cfg('--durable-kv-events', '--event-plane', 'nats'))).toBeUndefined();
    const two = cfg('--num-workers', '2', '--zmq-kv-events-ports', '5557,5567', '--zmq-replay-ports', '0,0');
    expect(planFromConfig(two).vllmZmq).toEqual({ kvEventsPorts: [5557, 5567], replayPorts: [0, 0] });
  });

  it('maps the engine-model flags: sglang flavour, reasoning, pass timing', () => {
    const p = planFromConfig(
      cfg(
        '--engine-type',
        'sglang',
        '--sglang-max-prefill-tokens',
        '4096',
        '--reasoning',
        '{"start_thinking_token_id":151667,"end_thinking_token_id":151668,"thinking_ratio":0.25}',
        '--aic-perf-model',
        '--aic-system',
        'b200_sxm',
      ),
    );
    expect(p.engine).toMatchObject({
      engineType: 'sglang',
      sglangMaxPrefillTokens: 4096,
      reasoning: { startThinkingTokenId: 151667, endThinkingTokenId: 151668, thinkingRatio: 0.25 },
    });
    expect(p.timing).toEqual({
      kind: 'aic',
      backend: 'sglang',
      system: 'b200_sxm',
      model: 'Qwen/Qwen3-0.6B',
    });
    expect(p.warnings.join('\n')).not.toMatch(/not modelled/);
    expect(planFromConfig(cfg('--planner-profile-data', '/data/p.json')).timing).toEqual({
      kind: 'profile',
      path: '/data/p.json',
    });
    // Upstream's default system; a stray --aic-system is pointed out.
    const d = planFromConfig(cfg('--aic-perf-model'));
    expect(d.timing).toMatchObject({ kind: 'aic', backend: 'vllm', system: 'h200_sxm' });
    expect(d.warnings.join('\n')).toContain('--aic-perf-model without --aic-system');
    expect(planFromConfig(cfg('--aic-system', 'h100_sxm')).warnings.join('\n')).toContain(
      '--aic-system has no effect',
    );
    // Still accepted but not modelled in aggregated mode.
    expect(planFromConfig(cfg('--bootstrap-ports', '1,2')).warnings.join('\n')).toContain(
      '--bootstrap-ports',
    );
  });

  it('refuses bad --reasoning JSON and two timing sources, naming the flag', () => {
    const err = (c: () => unknown): MockerConfigError => {
      try {
        c();
      } catch (e) {
        expect(e).toBeInstanceOf(MockerConfigError);
        return e as MockerConfigError;
      }
      throw new Error('no error');
    };
    for (const [json, want] of [
      ['[1]', 'expected a JSON object'],
      ['{"start_thinking_token_id":1,"end_thinking_token_id":2,"thinking_ratio":2}', 'thinking_ratio'],
      [
        '{"start_thinking_token_id":-1,"end_thinking_token_id":2,"thinking_ratio":0.5}',
        'start_thinking_token_id',
      ],
      ['{"start_thinking_token_id":3,"end_thinking_token_id":3,"thinking_ratio":0.5}', 'must differ'],
      [
        '{"start_thinking_token_id":1,"end_thinking_token_id":2,"thinking_ratio":0.5,"ratio":1}',
        'unknown field ratio',
      ],
    ]) {
      const e = err(() => planFromConfig(cfg('--reasoning', json)));
      expect(e.detail).toEqual({ flag: '--reasoning' });
      expect(e.message).toContain(want);
    }
    expect(err(() => planFromConfig(cfg('--aic-perf-model', '--planner-profile-data', '/p'))).detail).toEqual(
      { flag: '--aic-perf-model' },
    );
  });
});

describe('timingModelOf', () => {
  const engine = { numGpuBlocks: 100, blockSize: 10 };
  it('polynomial: none (the engine default)', () => {
    expect(timingModelOf({ kind: 'polynomial' }, engine, () => null)).toBeUndefined();
  });

  it('profile: reads the file and interpolates', () => {
    const files: Record<string, string> = {
      '/p.json': JSON.stringify({
        prefill_isl: [0, 1000],
        prefill_ttft_ms: [10, 110],
        decode_active_kv_tokens: [0, 1000],
        decode_context_length: [0, 1000],
        decode_itl: [
          [2, 2],
          [12, 12],
        ],
      }),
    };
    const t = timingModelOf({ kind: 'profile', path: '/p.json' }, engine, (p) => files[p] ?? null)!;
    // 10 + 0.25 · (110 − 10) = 35.
    expect(t.prefillMs(250)).toBeCloseTo(35, 12);
    // u 0.5 of 100 · 10 = 1000 KV tokens, one request: x = 500: 2 + 0.5 · 10 = 7.
    expect(t.decodeMs(0.5)).toBeCloseTo(7, 12);
    const missing = (() => {
      try {
        timingModelOf({ kind: 'profile', path: '/nope.json' }, engine, () => null);
      } catch (e) {
        return e as MockerConfigError;
      }
    })();
    expect(missing).toBeInstanceOf(MockerConfigError);
    expect(missing!.message).toBe('--planner-profile-data /nope.json: cannot read the file');
    expect(() =>
      timingModelOf({ kind: 'profile', path: '/bad' }, engine, () => '{"prefill_isl": [2, 1]}'),
    ).toThrow(/--planner-profile-data \/bad: prefill_isl\[1\]/);
  });

  it('profile: an upstream .npz (deflated members) through the binary reader', () => {
    const fixture = new URL(
      '../../../packages/engine-sim/src/testdata/profile-compressed.npz',
      import.meta.url,
    );
    const bin = {
      readBytes: (p: string) => (p === '/p.npz' ? readFileSync(fixture) : null),
      inflateRaw: (b: Uint8Array) => inflateRawSync(b),
    };
    const t = timingModelOf({ kind: 'profile', path: '/p.npz' }, engine, () => null, bin)!;
    // prefill_isl [100, 1100], prefill_ttft_ms [20, 70]: 600 → 20 + 0.5 · 50 = 45.
    expect(t.prefillMs(600)).toBeCloseTo(45, 12);
    expect(() => timingModelOf({ kind: 'profile', path: '/q.npz' }, engine, () => null, bin)).toThrow(
      '--planner-profile-data /q.npz: cannot read the file',
    );
  });

  it('aic: the AIC engine timing of the model, system and backend', () => {
    const t = timingModelOf(
      { kind: 'aic', backend: 'vllm', system: 'h200_sxm', model: 'Qwen/Qwen3-0.6B' },
      engine,
      () => null,
    )!;
    // Wiring check against aic-model itself (its own tests check the roofline by hand).
    const want = new AicModel({
      backend: 'vllm',
      system: 'h200_sxm',
      model: builtinModel('Qwen/Qwen3-0.6B')!,
    }).engineTiming(1000);
    expect(t.prefillMs(2048)).toBe(want.prefillMs(2048));
    expect(t.decodeMs(0.3)).toBe(want.decodeMs(0.3));
    // A local config.json is read before the built-in ids (an incomplete one is refused, not skipped).
    const local = JSON.stringify({ architectures: ['LlamaForCausalLM'], hidden_size: 4096 });
    expect(() =>
      timingModelOf({ kind: 'aic', backend: 'vllm', system: 'h200_sxm', model: '/m' }, engine, (p) =>
        p === '/m/config.json' ? local : null,
      ),
    ).toThrow(MockerConfigError);
    expect(() =>
      timingModelOf(
        { kind: 'aic', backend: 'sglang', system: 'tpu', model: 'Qwen/Qwen3-0.6B' },
        engine,
        () => null,
      ),
    ).toThrow(/--aic-perf-model: .*--aic-system/);
    expect(() =>
      timingModelOf(
        { kind: 'aic', backend: 'vllm', system: 'h200_sxm', model: 'no/such-model' },
        engine,
        () => null,
      ),
    ).toThrow(/--aic-perf-model: --model-path "no\/such-model": /);
  });
});

describe('extraArgsToArgv (--extra-engine-args)', () => {
  it('turns a JSON object into flags that override the command line', () => {
    const extra = extraArgsToArgv(
      JSON.stringify({
        block_size: 16,
        'num-gpu-blocks-override': 100,
        enable_prefix_caching: false,
        aic_perf_model: true,
        bootstrap_ports: [1, 2],
        startup_time: null,
        reasoning: { x: 1 },
      }),
      'f.json',
    );
    expect(extra).toEqual([
      '--block-size',
      '16',
      '--num-gpu-blocks-override',
      '100',
      '--no-enable-prefix-caching',
      '--aic-perf-model',
      '--bootstrap-ports',
      '1,2',
      '--startup-time',
      'None',
      '--reasoning',
      '{"x":1}',
    ]);
    const c = resolveConfig('mocker', ['--model-path', 'm', '--block-size', '32', ...extra], {}).config;
    expect(c.blockSize).toBe(16);
    expect(c.enablePrefixCaching).toBe(false);
    expect(c.bootstrapPorts).toEqual([1, 2]);
  });

  it('refuses bad files', () => {
    expect(() => extraArgsToArgv('{', 'f.json')).toThrow(/f\.json: not valid JSON/);
    expect(() => extraArgsToArgv('[1]', 'f.json')).toThrow(/expected a JSON object/);
    expect(() => extraArgsToArgv('{"extra_engine_args": "g.json"}', 'f.json')).toThrow(/another file/);
  });
});

describe('topology', () => {
  it('reads one domain per file, trimmed, skipping hidden and empty files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvr-topo-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'rack'), ' r12\n');
    writeFileSync(join(dir, 'zone'), 'z1');
    writeFileSync(join(dir, '.hidden'), 'x');
    writeFileSync(join(dir, 'empty'), '  \n');
    expect(readTopologyDomains(dir)).toEqual({ rack: 'r12', zone: 'z1' });
  });

  it('publishes the domains and the transfer policy; waits for the domain file, then gives up', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvr-topo-'));
    dirs.push(dir);
    const base = {
      topologyEnabled: true,
      topologyMountPath: dir,
      kvTransferDomain: 'rack',
      kvTransferEnforcement: 'preferred' as const,
      kvTransferPreferredWeight: 0.5,
    };
    await expect(topologyRuntimeConfig(base, { waitMs: 100, pollMs: 20 })).rejects.toThrow(
      `topology domain "rack" in ${dir} was not populated within 0s`,
    );
    setTimeout(() => writeFileSync(join(dir, 'rack'), 'r7'), 50);
    expect(await topologyRuntimeConfig(base, { waitMs: 5000, pollMs: 20 })).toEqual({
      topology_domains: { rack: 'r7' },
      kv_transfer_domain: 'rack',
      kv_transfer_enforcement: 'preferred',
      kv_transfer_preferred_weight: 0.5,
    });
    expect(await topologyRuntimeConfig({ ...base, topologyEnabled: false })).toEqual({});
  });
});
