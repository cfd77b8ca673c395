import { describe, expect, it } from 'vitest';
import type { WorkerWithDpRank } from '@kvrouter/protocols';
import { Rng } from '@kvrouter/testkit';
import { CandidateBatch } from './cost.js';
import { HolderTree } from './holders.js';
import { PrefixTree } from './prefix-tree.js';
import { chain, familyChain } from './test-chains.js';
import { MultiWorkerSequences } from './multi-worker.js';

const w = (id: number, dp = 0) => ({ worker_id: BigInt(id), dp_rank: dp }) as WorkerWithDpRank;

/** Books / frees a chain on a slot the way ActiveSequences does: its own tree says what is new. */
class Rank {
  readonly tree = new PrefixTree();
  constructor(
    readonly h: HolderTree,
    readonly slot: number,
  ) {}
  book(c: Uint32Array): void {
    const fresh = this.tree.insert(c, c.length);
    if (fresh < c.length) this.h.mark(c, fresh, c.length, this.slot);
  }
  free(c: Uint32Array): void {
    const gone = this.tree.remove(c, c.length);
    if (gone < c.length) this.h.unmark(c, gone, c.length, this.slot);
  }
}

describe('HolderTree', () => {
  it('every rank’s prefix depth from one walk (worked by hand)', () => {
    const h = new HolderTree();
    const [r0, r1, r2, r3] = [0, 1, 2, 3].map(() => new Rank(h, h.acquireSlot()));
    r0.book(chain(1, 2, 3)); // holds 1 2 3
    r1.book(chain(1, 2, 4)); // holds 1 2 4
    r2.book(chain(1)); // holds 1
    r3.book(chain(9, 2)); // another prefix
    const depth = new Int32Array(4);
    // query 1 2 3 5: r0 matches 3 blocks, r1 2 (diverges at 4 vs 3), r2 1, r3 0
    h.prefixDepths(chain(1, 2, 3, 5), depth);
    expect([...depth]).toEqual([3, 2, 1, 0]);
    // r0 takes a longer prompt sharing 1 2 3: depth 4 for it, the others unchanged
    const longer = chain(1, 2, 3, 5, 6);
    r0.book(longer);
    h.prefixDepths(chain(1, 2, 3, 5), depth);
    expect([...depth]).toEqual([4, 2, 1, 0]);
    expect(h.holds(longer, 8, r0.slot)).toBe(true);
    expect(h.holds(longer, 8, r1.slot)).toBe(false);
    // r0 frees its first prompt: still holds 1 2 3 through the longer one
    r0.free(chain(1, 2, 3));
    h.prefixDepths(chain(1, 2, 3, 5), depth);
    expect([...depth]).toEqual([4, 2, 1, 0]);
    r0.free(longer);
    h.prefixDepths(chain(1, 2, 3, 5), depth);
    expect([...depth]).toEqual([0, 2, 1, 0]);
    // releasing r1's slot clears it; the slot is handed out again
    h.releaseSlot(r1.slot);
    h.prefixDepths(chain(1, 2, 4), depth);
    expect([...depth]).toEqual([0, 0, 1, 0]);
    expect(h.acquireSlot()).toBe(1);
  });

  it('nodes merge back once the bookings that cut a shared prefix are gone', () => {
    const h = new HolderTree();
    const a = new Rank(h, h.acquireSlot());
    const b = new Rank(h, h.acquireSlot());
    const long = chain(...Array.from({ length: 50 }, (_, i) => i + 1));
    a.book(long);
    expect(h.nodes).toBe(1);
    // b holds prefixes of 10 and 30 blocks: the path is cut at 10 and 30
    const p10 = long.slice(0, 20);
    const p30 = long.slice(0, 60);
    b.book(p10);
    b.book(p30);
    expect(h.nodes).toBe(2);
    const depth = new Int32Array(2);
    h.prefixDepths(long, depth);
    expect([...depth]).toEqual([50, 30]);
    b.free(p30);
    b.free(p10);
    expect(h.nodes).toBe(1);
    h.prefixDepths(long, depth);
    expect([...depth]).toEqual([50, 0]);
    // a rank holding a prompt that ends inside a merged node releases only its own part
    b.book(p30);
    b.free(p30);
    a.free(long);
    expect(h.nodes).toBe(0);
  });

  it('matches a brute-force model across 40 slots (wider than one word) under random bookings (seeded)', () => {
    for (const seed of [1, 2, 3]) {
      const rng = new Rng(seed);
      const h = new HolderTree();
      const ranks = Array.from({ length: 40 }, () => new Rank(h, h.acquireSlot()));
      const held = ranks.map(() => new Map<string, number>());
      const live: { r: number; c: Uint32Array }[] = [];
      let uid = 0;
      const make = (): Uint32Array => familyChain(rng, ++uid, 1, 24);
      const key = (c: Uint32Array, k: number) => `${c[2 * k]}:${c[2 * k + 1]}`;
      const depth = new Int32Array(40);
      for (let step = 0; step < 1200; step++) {
        if (live.length === 0 || rng.bool(0.55)) {
          const r = rng.int(0, ranks.length - 1);
          const c = make();
          ranks[r].book(c);
          for (let k = 0; k < c.length / 2; k++) held[r].set(key(c, k), (held[r].get(key(c, k)) ?? 0) + 1);
          live.push({ r, c });
        } else {
          const { r, c } = live.splice(rng.int(0, live.length - 1), 1)[0];
          ranks[r].free(c);
          for (let k = 0; k < c.length / 2; k++) {
            const n = held[r].get(key(c, k))! - 1;
            if (n === 0) held[r].delete(key(c, k));
            else held[r].set(key(c, k), n);
          }
        }
        if (step % 20 === 0) {
          const q = make();
          h.prefixDepths(q, depth);
          for (let r = 0; r < ranks.length; r++) {
            let want = 0;
            while (want < q.length / 2 && held[r].has(key(q, want))) want++;
            expect(depth[r]).toBe(want);
          }
        }
      }
      for (const { r, c } of live) ranks[r].free(c);
      expect(h.nodes).toBe(0);
    }
  });
});

describe('MultiWorkerSequences.fillLoads prefix depths', () => {
  it('prefix depths and loads equal each rank’s own, with or without cached (slot, generation), through bookings, frees, first tokens and removed workers', () => {
    const rng = new Rng(9);
    const m = new MultiWorkerSequences({ blockSize: 16 });
    const ranks = [w(1, 0), w(1, 1), w(2), w(3), w(4)];
    for (const r of ranks) m.addWorker(r.worker_id, r.dp_rank, 1);
    const fam = Array.from({ length: 3 }, (_, f) =>
      Uint32Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? i / 2 : 100 + f)),
    );
    const live: string[] = [];
    let id = 0;
    const batch = new CandidateBatch(8);
    const cached = ranks.map((r) => m.slotOf(r));
    const cachedGen = cached.map((x) => m.slotGen(x));
    for (let step = 0; step < 400; step++) {
      const op = rng.next();
      if (op < 0.5 || live.length === 0) {
        const f = fam[rng.int(0, 2)];
        const n = rng.int(0, 30);
        const rid = `r${id++}`;
        const r = ranks[rng.int(0, ranks.length - 1)];
        // Half with a predicted prefill duration, so the anchor decays between steps.
        const expectedPrefillDurationMs = rng.bool(0.5) ? rng.int(0, 8) : null;
        m.addRequest(
          r,
          {
            requestId: rid,
            isl: 16 * n + rng.int(0, 15),
            seqHashes: f.subarray(0, 2 * n),
            expectedPrefillDurationMs,
          },
          step,
        );
        live.push(rid);
      } else if (op < 0.8) {
        m.free(live.splice(rng.int(0, live.length - 1), 1)[0], step);
      } else if (op < 0.95) {
        m.markPrefillCompleted(live[rng.int(0, live.length - 1)], step);
      } else {
        // a worker leaves and comes back empty (its slot is cleared and reused)
        const r = ranks[rng.int(0, ranks.length - 1)];
        const dropped = new Set(m.removeWorker(r.worker_id));
        for (let i = live.length - 1; i >= 0; i--) if (dropped.has(live[i])) live.splice(i, 1);
        // Another worker takes the freed slot first (with load of its own), so a stale cached slot
        // would read someone else's row.
        const other = 100 + step;
        m.addWorker(BigInt(other));
        m.addRequest(w(other), { requestId: `o${step}`, isl: 64, seqHashes: fam[0].subarray(0, 8) }, step);
        for (const x of ranks) if (x.worker_id === r.worker_id) m.addWorker(x.worker_id, x.dp_rank, 1);
      }
      const q = fam[rng.int(0, 2)].subarray(0, 2 * rng.int(0, 30));
      const now = step + rng.next() * 3;
      // Three ways in: no cached slots (lookup), slots fresh from slotOf, and the slots cached at
      // the start (stale once a worker left and came back: its generation moved on).
      for (const slots of [null, ranks.map((r) => m.slotOf(r)), cached]) {
        batch.reset(ranks.length);
        ranks.forEach((r, i) => {
          batch.workers[i] = r;
          if (slots) {
            batch.loadSlot[i] = slots[i];
            batch.loadGen[i] = slots === cached ? cachedGen[i] : m.slotGen(slots[i]);
          }
        });
        m.fillLoads(batch, q, now);
        ranks.forEach((r, i) => {
          const want = m.load(r, now);
          expect(batch.activePrefixDepth[i]).toBe(m.rank(r)!.activePrefixDepth(q));
          expect(batch.activePrefillTokens[i]).toBe(want.active_prefill_tokens);
          expect(batch.activeDecodeBlocks[i]).toBe(want.active_decode_blocks);
          expect(batch.activeRequests[i]).toBe(want.active_requests);
        });
      }
    }
  });
});
