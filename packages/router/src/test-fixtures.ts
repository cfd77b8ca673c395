/**
 * Shared test fixtures: a router on a virtual clock with seeded randomness, deterministic prompts,
 * and KV events that store a prompt's leading blocks on a worker rank.
 */
import {
  computeLocalBlockHashes,
  pairsToU64s,
  type ExternalSequenceBlockHash,
  type LocalBlockHash,
  type RouterEvent,
  type WorkerId,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import { Rng } from '@kvrouter/testkit';
import { VirtualClock } from '@kvrouter/protocols';
import { KvRouter } from './router.js';
import type { KvRouterOptions, RouterDeps, RouterHooks, RouterPolicy, RouterPorts } from './types.js';

export const w = (id: number | bigint, dp = 0): WorkerWithDpRank => ({
  worker_id: BigInt(id) as WorkerId,
  dp_rank: dp,
});

/** `n` tokens of prompt family `f`: distinct families share no block, equal families are equal. */
export function toks(f: number, n: number, offset = 0): Uint32Array {
  const t = new Uint32Array(n);
  for (let i = 0; i < n; i++) t[i] = (f * 100_003 + (offset + i) * 7 + 1) >>> 0;
  return t;
}

export const cat = (...parts: Uint32Array[]): Uint32Array => {
  const out = new Uint32Array(parts.reduce((s, p) => s + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
};

let extCounter = 1n;

/** A Stored event putting the first `nBlocks` blocks of `tokens` (as one root chain) on a rank. */
export function storeEvent(
  worker: WorkerWithDpRank,
  tokens: Uint32Array,
  bs: number,
  nBlocks: number,
  eventId = 1,
): RouterEvent {
  const local = pairsToU64s(computeLocalBlockHashes(tokens, bs)).slice(0, nBlocks) as LocalBlockHash[];
  return {
    worker_id: worker.worker_id,
    storage_tier: 'device',
    event: {
      event_id: BigInt(eventId),
      dp_rank: worker.dp_rank,
      data: {
        stored: {
          parent_hash: null,
          start_position: null,
          blocks: local.map((h) => ({
            block_hash: extCounter++ as ExternalSequenceBlockHash,
            tokens_hash: h,
            mm_extra_info: null,
          })),
        },
      },
    },
  } as RouterEvent;
}

export interface Harness {
  router: KvRouter;
  clock: VirtualClock;
  rng: Rng;
}

/** Every option of every group in one bag, for short test set-ups; `grouped` sorts it. */
export type TestOptions = Partial<
  Pick<KvRouterOptions, 'blockSize' | 'isEagle'> & RouterPolicy & RouterDeps & RouterPorts & RouterHooks
>;

const DEPS = new Set(['clock', 'random', 'hrtime', 'indexer', 'sideIndexer', 'prefillDurationPredictor']);
const PORTS = new Set(['routerId', 'publishActiveSequenceEvent', 'sessionRpc', 'decisionLog']);
const HOOKS = new Set(['publishLoad', 'onOverhead', 'onQueueChange', 'onError']);

/** A flat option bag → `KvRouterOptions` (policy / deps / ports / hooks). */
function grouped(
  flat: TestOptions & Pick<RouterDeps, 'clock' | 'random'> & { blockSize: number },
): KvRouterOptions {
  const g = { policy: {}, deps: {}, ports: {}, hooks: {} } as Record<string, Record<string, unknown>>;
  const top: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(flat)) {
    if (k === 'blockSize' || k === 'isEagle') top[k] = v;
    else g[DEPS.has(k) ? 'deps' : PORTS.has(k) ? 'ports' : HOOKS.has(k) ? 'hooks' : 'policy'][k] = v;
  }
  return { ...top, ...g } as unknown as KvRouterOptions;
}

export function harness(opts: TestOptions = {}, seed = 7): Harness {
  const clock = new VirtualClock(0);
  const rng = new Rng(seed);
  const router = new KvRouter(grouped({ blockSize: 16, clock, random: () => rng.next(), ...opts }));
  return { router, clock, rng };
}

/** Lets settled promises run their callbacks. */
export const flush = (): Promise<void> => new Promise((r) => setTimeout(r, 0));
