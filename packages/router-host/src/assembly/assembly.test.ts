import { resolveConfig } from '@kvrouter/config';
import { KvrError, VirtualClock, type WorkerId } from '@kvrouter/protocols';
import { ApproxIndexer, RadixIndexer } from '@kvrouter/radix-indexer';
import { describe, expect, it } from 'vitest';
import {
  blockSizeOf,
  buildLocalIndex,
  createRouter,
  planRouter,
  type ApproxSettings,
  type RouterHostKind,
} from './index.js';

const HOSTS: RouterHostKind[] = ['frontend', 'standalone-router', 'simulator'];
const cfg = (...argv: string[]) => resolveConfig('router', ['--router-mode', 'kv', ...argv], {}).config;
const AIC = [
  '--router-prefill-load-model',
  'aic',
  '--aic-backend',
  'vllm',
  '--aic-system',
  'h200_sxm',
  '--aic-model-path',
  'Qwen/Qwen3-0.6B',
];

/** The error a plan throws, or null. */
const refusal = (f: () => unknown): KvrError | null => {
  try {
    f();
    return null;
  } catch (e) {
    return e as KvrError;
  }
};

describe('index choice (§7.4): one place, the same for every host', () => {
  it('credit 0 -> no index; kv events -> event-driven; --no-router-kv-events -> approximate', () => {
    for (const host of HOSTS) {
      expect(planRouter(cfg('--router-kv-overlap-score-credit', '0'), host).params.index.kind).toBe('none');
      expect(planRouter(cfg(), host).params.index.kind).toBe('events');
      expect(planRouter(cfg('--no-router-kv-events'), host).params.index.kind).toBe('approximate');
    }
  });

  it('modes other than kv read no overlaps, so they keep no index', () => {
    const p = planRouter(cfg('--router-mode', 'round-robin'), 'frontend').params;
    expect(p.index.kind).toBe('none');
    expect(buildLocalIndex(p.index, { now: () => 0 })).toBeNull();
  });

  it('without a pool the index is single-threaded whatever --router-event-threads says', () => {
    const plan = planRouter(cfg('--router-event-threads', '4'), 'simulator').params.index;
    expect(buildLocalIndex(plan, { now: () => 0 })).toBeInstanceOf(RadixIndexer);
    const approx = planRouter(cfg('--no-router-kv-events', '--router-event-threads', '4'), 'simulator');
    expect(buildLocalIndex(approx.params.index, { now: () => 0 })).toBeInstanceOf(ApproxIndexer);
  });

  it('with a pool: events always go to the pool; approximate only with more than one thread', () => {
    const calls: { threads: number; approximate?: ApproxSettings }[] = [];
    const pool = (o: { threads: number; approximate?: ApproxSettings }) => {
      calls.push(o);
      return new RadixIndexer();
    };
    const now = () => 0;
    buildLocalIndex(planRouter(cfg('--router-event-threads', '3'), 'frontend').params.index, { now, pool });
    expect(calls).toEqual([{ threads: 3 }]);
    const one = planRouter(cfg('--no-router-kv-events', '--router-event-threads', '1'), 'frontend');
    expect(buildLocalIndex(one.params.index, { now, pool })).toBeInstanceOf(ApproxIndexer);
    expect(calls).toHaveLength(1);
    const two = planRouter(
      cfg('--no-router-kv-events', '--router-event-threads', '2', '--router-ttl-secs', '30'),
      'frontend',
    );
    buildLocalIndex(two.params.index, { now, pool });
    // docs/configuration.md defaults: --router-max-tree-size 2^20, --router-prune-target-ratio 0.8.
    expect(calls[1]).toEqual({
      threads: 2,
      approximate: { ttlSecs: 30, maxTreeSize: 1_048_576, pruneTargetRatio: 0.8, now },
    });
  });

  it('--use-remote-indexer: a frontend builds no local index; the standalone router and the simulator refuse it', () => {
    const fe = planRouter(cfg('--use-remote-indexer'), 'frontend');
    expect(fe.params.index.kind).toBe('remote');
    expect(buildLocalIndex(fe.params.index, { now: () => 0 })).toBeNull();
    for (const host of ['standalone-router', 'simulator'] as const) {
      const e = refusal(() => planRouter(cfg('--use-remote-indexer'), host));
      expect(e).toBeInstanceOf(KvrError);
      expect(e!.code).toBe('not_supported');
      expect(e!.message).toMatch(/^--use-remote-indexer: /);
      expect(e!.detail).toEqual({ field: 'use-remote-indexer' });
    }
  });

  it('--router-approximate-cache-policy lru is refused by every host, naming the flag and the allowed value', () => {
    for (const host of HOSTS) {
      const e = refusal(() =>
        planRouter(cfg('--no-router-kv-events', '--router-approximate-cache-policy', 'lru'), host),
      );
      expect(e?.code).toBe('not_supported');
      expect(e?.message).toBe(
        '--router-approximate-cache-policy: lru is not implemented by the approximate indexer yet (allowed: ttl)',
      );
      // The policy only concerns the approximate index: with KV events it changes nothing.
      expect(refusal(() => planRouter(cfg('--router-approximate-cache-policy', 'lru'), host))).toBeNull();
    }
  });

  it('--router-prefill-load-model aic: every host gets the predictor; its flags are checked at startup', () => {
    for (const host of HOSTS) {
      const p = planRouter(cfg(...AIC), host);
      expect(p.params.aic).toBe(true);
      const worker = { worker_id: 1n as WorkerId, dp_rank: 0 };
      // Prefill time grows with the uncached tokens.
      expect(p.predictor!({ worker, isl: 8192, prefixTokens: 0 })!).toBeGreaterThan(
        p.predictor!({ worker, isl: 8192, prefixTokens: 4096 })!,
      );
      expect(planRouter(cfg(), host).predictor).toBeNull();
    }
    const e = refusal(() =>
      planRouter(cfg(...AIC.slice(0, 6), '--aic-model-path', 'no/such-model'), 'frontend'),
    );
    expect(e?.message).toMatch(/^--aic-model-path: /);
    // Config fields without the --aic-* ones (a bare RouterConfigFields) cannot build the predictor...
    const { aicBackend: _b, aicSystem: _s, aicModelPath: _m, ...bare } = cfg(...AIC);
    expect(refusal(() => planRouter(bare, 'simulator'))?.message).toBe(
      '--router-prefill-load-model: aic needs the --aic-* fields of a resolved config',
    );
    // ...unless one is given.
    const mine = () => 5;
    expect(planRouter(bare, 'simulator', { predictor: mine }).predictor).toBe(mine);
  });
});

describe('createRouter', () => {
  it('block size: --kv-cache-block-size wins over the card', () => {
    expect(blockSizeOf(planRouter(cfg(), 'frontend').params, 32)).toBe(32);
    expect(blockSizeOf(planRouter(cfg('--kv-cache-block-size', '16'), 'frontend').params, 32)).toBe(16);
  });

  it('an approximate router learns from its own decisions: the same prompt returns to the same worker', async () => {
    const plan = planRouter(cfg('--no-router-kv-events'), 'simulator');
    const clock = new VirtualClock();
    const indexer = buildLocalIndex(plan.params.index, { now: () => clock.now() });
    const r = createRouter(plan, { blockSize: 4, clock, random: () => 0.5, indexer });
    expect(r.blockSize).toBe(4);
    for (const id of [1n, 2n]) r.addWorker({ workerId: id, dpStart: 0, dpSize: 1, totalKvBlocks: 100 });
    const tokens = Uint32Array.from([1, 2, 3, 4, 5, 6, 7, 8]);
    const a = await r.route({ requestId: 'a', tokens });
    // Nothing recorded yet: no overlap anywhere.
    expect(a.overlapBlocks).toBe(0);
    r.free('a');
    // Recorded: 8 tokens / block size 4 = 2 blocks on a's worker, none elsewhere, so its prefill
    // cost is 0 against 2 blocks on the other worker (both idle once a is freed).
    const b = await r.route({ requestId: 'b', tokens });
    expect(b.worker).toEqual(a.worker);
    expect(b.overlapBlocks).toBe(2);
    r.close();
  });
});
