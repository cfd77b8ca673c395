import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import { MockerConfigError, extraArgsToArgv, parseEndpoint, planFromConfig, type MockerConfig } from './options.js';
import { readTopologyDomains, topologyRuntimeConfig } from './topology.js';

const cfg = (...argv: string[]): MockerConfig =>
  resolveConfig('mocker', ['--model-path', 'Qwen/Qwen3-0.6B', ...argv], {}).config;

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
    expect(parseEndpoint('dyn://team.a.mocker.gen')).toEqual({ namespace: 'team.a', component: 'mocker', endpoint: 'gen' });
  });

  it('refuses anything else, naming the flag', () => {
    for (const bad of ['dynamo.backend.generate', 'dyn://a.b', 'dyn://a..c', 'dyn://a b.c.d', 'http://a.b.c'])
      expect(() => parseEndpoint(bad), bad).toThrow(expect.objectContaining({ detail: { flag: '--endpoint' } }));
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
    });
    expect(p.numWorkers).toBe(1);
    expect(p.startupDelayMs).toBe(0);
    expect(p.staggerMs).toBe(0);
    // kvrouter's default discovery is mem, whose automatic event plane is zmq (FLAGS.md).
    expect(p.discoveryBackend).toBe('mem');
    expect(p.eventPlane).toBe('zmq');
    expect(p.requestPlane).toBe('tcp');
  });

  it('passes every engine flag through and converts seconds to ms', () => {
    const p = planFromConfig(
      cfg(
        '--num-gpu-blocks-override', '900', '--block-size', '16', '--max-num-seqs', '8', '--max-num-batched-tokens', '512',
        '--no-enable-prefix-caching', '--no-enable-chunked-prefill', '--preemption-mode', 'fifo', '--speedup-ratio', '10',
        '--decode-speedup-ratio', '2', '--data-parallel-size', '2', '--num-workers', '3', '--startup-time', '1.5',
        '--stagger-delay', '0.25', '--model-name', 'mock', '--endpoint', 'dyn://ns.comp.ep', '--discovery-backend', 'etcd',
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
    const flagOf = (c: MockerConfig): unknown => {
      try {
        planFromConfig(c);
      } catch (e) {
        expect(e).toBeInstanceOf(MockerConfigError);
        return (e as MockerConfigError).detail?.flag;
      }
      return undefined;
    };
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

  it('warns about flags accepted but not modelled', () => {
    const w = planFromConfig(
      cfg('--engine-type', 'sglang', '--planner-profile-data', '/tmp/x', '--aic-perf-model', '--reasoning', '{"a":1}', '--bootstrap-ports', '1,2'),
    ).warnings.join('\n');
    for (const flag of ['--engine-type sglang', '--planner-profile-data', '--aic-perf-model', '--reasoning', '--bootstrap-ports'])
      expect(w).toContain(flag);
  });
});

describe('extraArgsToArgv (--extra-engine-args)', () => {
  it('turns a JSON object into flags that override the command line', () => {
    const extra = extraArgsToArgv(
      JSON.stringify({ block_size: 16, 'num-gpu-blocks-override': 100, enable_prefix_caching: false, aic_perf_model: true, bootstrap_ports: [1, 2], startup_time: null, reasoning: { x: 1 } }),
      'f.json',
    );
    expect(extra).toEqual([
      '--block-size', '16', '--num-gpu-blocks-override', '100', '--no-enable-prefix-caching', '--aic-perf-model',
      '--bootstrap-ports', '1,2', '--startup-time', 'None', '--reasoning', '{"x":1}',
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
