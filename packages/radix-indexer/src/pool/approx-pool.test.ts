import { describe, expect, it } from 'vitest';
import { VirtualClock, u64sToPairs, type WorkerId } from '@kvrouter/protocols';
import { PoolIndexer } from './pool.js';
import { SideIndexer } from '../side.js';
import { refSequence, stored } from '../testing/index.js';

const W1 = { worker_id: 11n as WorkerId, dp_rank: 0 };
const W2 = { worker_id: 22n as WorkerId, dp_rank: 1 };
const prompt = (base: bigint, n: number) => Array.from({ length: n }, (_, i) => base + BigInt(i));

describe('approximate mode and the side index with writer threads', () => {
  it('records decisions in the owner threads and expires them there', async () => {
    const clock = new VirtualClock(0);
    const pool = PoolIndexer.create({
      threads: 2,
      approximate: { ttlSecs: 120, maxTreeSize: 1 << 20, pruneTargetRatio: 0.8, now: clock.now },
    });
    try {
      const a = prompt(100n, 5);
      const b = prompt(200n, 3);
      pool.recordRouting(W1, u64sToPairs(a), u64sToPairs(refSequence(a)));
      pool.recordRouting(W2, u64sToPairs(b), u64sToPairs(refSequence(b)));
      await pool.flush();
      expect(pool.findMatches(a).scores.get('11:0')).toBe(5);
      expect(pool.findMatches(b).scores.get('22:1')).toBe(3);
      clock.advanceTo(60_000);
      pool.recordRouting(W1, u64sToPairs(a.slice(0, 2)), u64sToPairs(refSequence(a.slice(0, 2))));
      await pool.flush();
      clock.advanceTo(120_000); // first records expire (expiry <= now); W1's first two were refreshed to 180 s
      await pool.expireNow();
      expect(pool.findMatches(a).scores.get('11:0')).toBe(2);
      expect(pool.findMatches(b).scores.size).toBe(0);
      clock.advanceTo(180_000);
      await pool.expireNow();
      expect(pool.findMatches(a).scores.size).toBe(0);
    } finally {
      await pool.close();
    }
  });

  it('a side index over a pool primary answers the per-rank max', async () => {
    const clock = new VirtualClock(0);
    const pool = PoolIndexer.create({ threads: 2 });
    const ix = new SideIndexer(pool, { ttlSecs: 5, now: clock.now });
    try {
      const p = prompt(300n, 4);
      ix.applyEvent(
        stored(W1.worker_id, [
          { ext: 9001n, local: p[0]! },
          { ext: 9002n, local: p[1]! },
        ]),
      );
      await ix.flush();
      ix.recordRouting(W2, u64sToPairs(p.slice(0, 3)), u64sToPairs(refSequence(p.slice(0, 3))));
      const s = ix.findMatches(p).scores;
      expect(s.get('11:0')).toBe(2);
      expect(s.get('22:1')).toBe(3);
      clock.advanceTo(5000);
      expect(ix.findMatches(p).scores.has('22:1')).toBe(false);
    } finally {
      await ix.close();
    }
  });
});
