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
import { VirtualClock } from './clock.js';
import { KvRouter } from './router.js';
import type { KvRouterOptions } from './types.js';

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

export function harness(opts: Partial<KvRouterOptions> = {}, seed = 7): Harness {
  const clock = new VirtualClock(0);
  const rng = new Rng(seed);
  const router = new KvRouter({ blockSize: 16, clock, random: () => rng.next(), ...opts });
  return { router, clock, rng };
}

/** Lets settled promises run their callbacks. */
export const flush = (): Promise<void> => new Promise((r) => setTimeout(r, 0));
