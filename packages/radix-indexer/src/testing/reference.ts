/**
 * The naive reference model of PROTOCOL §7.2-7.3, written only for tests: plain Maps and Sets,
 * sequence hashes from the independent `@node-rs/xxhash` oracle (not our XXH3). Deliberately
 * simple so it can be trusted by reading.
 */
import { xxh3 } from '@node-rs/xxhash';
import type { RouterEvent } from '@kvrouter/protocols';

const SEED = 1337n;

export function refChain(prev: bigint, local: bigint): bigint {
  const b = Buffer.alloc(16);
  b.writeBigUInt64LE(prev, 0);
  b.writeBigUInt64LE(local, 8);
  return xxh3.xxh64(b, SEED);
}

export function refSequence(local: readonly bigint[]): bigint[] {
  const out: bigint[] = [];
  for (let i = 0; i < local.length; i++) out.push(i === 0 ? local[0] : refChain(out[i - 1], local[i]));
  return out;
}

type Status = 'ok' | 'parent_block_not_found' | 'block_not_found' | 'invalid_block';

export class ReferenceIndex {
  /** rank key -> Held set of block identities */
  readonly held = new Map<string, Set<bigint>>();
  /** rank key -> external hash -> identity */
  readonly ext = new Map<string, Map<bigint, bigint>>();

  private rank(worker: bigint, dp: number): { h: Set<bigint>; e: Map<bigint, bigint> } {
    const k = `${worker}:${dp}`;
    let h = this.held.get(k);
    let e = this.ext.get(k);
    if (!h) this.held.set(k, (h = new Set<bigint>()));
    if (!e) this.ext.set(k, (e = new Map<bigint, bigint>()));
    return { h, e };
  }

  apply(ev: RouterEvent): Status {
    const worker = ev.worker_id as bigint;
    const dp = ev.event.dp_rank ?? 0;
    const data = ev.event.data;
    if (data === 'cleared') {
      for (const k of [...this.held.keys()]) {
        if (k.startsWith(`${worker}:`)) {
          this.held.get(k)!.clear();
          this.ext.get(k)!.clear();
        }
      }
      return 'ok';
    }
    if ('stored' in data) {
      const k = `${worker}:${dp}`;
      let prev: bigint | null = null;
      const parent = data.stored.parent_hash as bigint | null;
      if (parent !== null) {
        const p = this.ext.get(k)?.get(parent);
        if (p === undefined) return 'parent_block_not_found';
        prev = p;
      }
      const { h, e } = this.rank(worker, dp);
      for (const b of data.stored.blocks) {
        const id: bigint = prev === null ? b.tokens_hash : refChain(prev, b.tokens_hash);
        h.add(id);
        e.set(b.block_hash, id);
        prev = id;
      }
      return 'ok';
    }
    const k = `${worker}:${dp}`;
    const e = this.ext.get(k);
    const h = this.held.get(k);
    let missing = false;
    for (const x of data.removed.block_hashes) {
      const id = e?.get(x);
      if (id === undefined) {
        missing = true;
        continue;
      }
      h!.delete(id);
      e!.delete(x);
    }
    return missing ? 'block_not_found' : 'ok';
  }

  removeWorker(worker: bigint): void {
    for (const k of [...this.held.keys()]) {
      if (k.startsWith(`${worker}:`)) {
        this.held.delete(k);
        this.ext.delete(k);
      }
    }
  }

  removeWorkerDpRank(worker: bigint, dp: number): void {
    this.held.delete(`${worker}:${dp}`);
    this.ext.delete(`${worker}:${dp}`);
  }

  /** Scores by rank key for a query of local hashes (workers with 0 absent). */
  scores(local: readonly bigint[]): Map<string, number> {
    const seq = refSequence(local);
    const out = new Map<string, number>();
    for (const [k, h] of this.held) {
      let n = 0;
      while (n < seq.length && h.has(seq[n])) n++;
      if (n > 0) out.set(k, n);
    }
    return out;
  }

  treeSizes(): Map<string, number> {
    const m = new Map<string, number>();
    for (const [k, h] of this.held) m.set(k, h.size);
    return m;
  }
}
