import { describe, expect, it } from 'vitest';
import { VirtualClock, u64sToPairs, type WorkerId } from '@kvrouter/protocols';
import { ApproxIndexer } from './approximate.js';
import { SideIndexer } from './side.js';
import { RadixIndexer } from './indexer.js';
import { refSequence } from './testing/reference.js';
import { stored } from './testing/gen.js';

const W1 = { worker_id: 11n as WorkerId, dp_rank: 0 };
const W2 = { worker_id: 22n as WorkerId, dp_rank: 1 };
const k = (w: { worker_id: bigint; dp_rank: number }) => `${w.worker_id}:${w.dp_rank}`;
const prompt = (base: bigint, n: number) => Array.from({ length: n }, (_, i) => base + BigInt(i));

function record(ix: ApproxIndexer | SideIndexer, w: typeof W1, local: bigint[]) {
  ix.recordRouting(w, u64sToPairs(local), u64sToPairs(refSequence(local)));
}

describe('ApproxIndexer (PROTOCOL §7.5)', () => {
  it('records a decision as a root chain that expires after the TTL', () => {
    const clock = new VirtualClock(1_000_000);
    const ix = new ApproxIndexer({ ttlSecs: 120, now: clock.now });
    const p = prompt(100n, 5);
    record(ix, W1, p);
    expect(ix.findMatches(p).scores.get(k(W1))).toBe(5);
    expect(ix.findMatches([...p.slice(0, 3), 7n]).scores.get(k(W1))).toBe(3);
    clock.advance(119_999); // expiry = t0 + 120 000 ms; still alive 1 ms before
    expect(ix.findMatches(p).scores.get(k(W1))).toBe(5);
    clock.advance(1); // expiry <= now -> removed
    expect(ix.findMatches(p).scores.size).toBe(0);
    expect(ix.treeSizes().get(k(W1))).toBe(0);
  });

  it('re-recording refreshes the expiry of the blocks recorded again', () => {
    const clock = new VirtualClock(0);
    const ix = new ApproxIndexer({ ttlSecs: 120, now: clock.now });
    const p = prompt(100n, 4);
    record(ix, W1, p);
    clock.advanceTo(60_000);
    record(ix, W1, p.slice(0, 2)); // first two blocks now expire at 180 s, the others at 120 s
    clock.advanceTo(150_000);
    expect(ix.findMatches(p).scores.get(k(W1))).toBe(2);
    clock.advanceTo(180_000);
    expect(ix.findMatches(p).scores.size).toBe(0);
  });

  it('prunes to max x ratio in expiry order, deeper positions first', () => {
    const clock = new VirtualClock(0);
    // max 10, ratio 0.8 -> prune down to 8 pairs once the total exceeds 10.
    const ix = new ApproxIndexer({ ttlSecs: 120, maxTreeSize: 10, pruneTargetRatio: 0.8, now: clock.now });
    const a = prompt(100n, 6);
    const b = prompt(200n, 6);
    record(ix, W1, a); // 6 pairs, expiry 120 s
    clock.advanceTo(1000);
    record(ix, W2, b); // 12 pairs > 10: remove W1's (older expiry) deepest first: positions 5,4,3,2 -> 8 left
    expect(ix.inner.totalPairs()).toBe(8);
    expect(ix.findMatches(a).scores.get(k(W1))).toBe(2);
    expect(ix.findMatches(b).scores.get(k(W2))).toBe(6);
  });

  it('keeps the timer heap within 50x the live timers', () => {
    const clock = new VirtualClock(0);
    const ix = new ApproxIndexer({ ttlSecs: 1000, now: clock.now });
    const p = prompt(5n, 4);
    for (let i = 0; i < 500; i++) {
      clock.advance(1);
      record(ix, W1, p);
    }
    const s = ix.timerStats();
    expect(s.live).toBe(4);
    expect(s.heap).toBeLessThanOrEqual(50 * 4 + 4);
    expect(ix.findMatches(p).scores.get(k(W1))).toBe(4);
  });
});

describe('SideIndexer (PROTOCOL §7.6)', () => {
  it('answers the per-rank max of primary and side, and the side entries expire', async () => {
    const clock = new VirtualClock(0);
    const primary = new RadixIndexer();
    const ix = new SideIndexer(primary, { ttlSecs: 5, now: clock.now });
    const p = prompt(300n, 4);
    // Primary: W1 holds 2 blocks through engine events (external hashes of its own).
    ix.applyEvent(
      stored(W1.worker_id, [
        { ext: 9001n, local: p[0] },
        { ext: 9002n, local: p[1] },
      ]),
    );
    await ix.flush();
    record(ix, W2, p.slice(0, 3)); // side: W2 predicted to hold 3
    let s = ix.findMatches(p).scores;
    expect(s.get(k(W1))).toBe(2);
    expect(s.get(k(W2))).toBe(3);
    record(ix, W1, p); // side: W1 predicted 4 > primary 2 -> 4
    expect(ix.findMatches(p).scores.get(k(W1))).toBe(4);
    // The side index never leaks into the primary.
    expect(primary.findMatches(p).scores.get(k(W1))).toBe(2);
    clock.advanceTo(5000);
    s = ix.findMatches(p).scores;
    expect(s.get(k(W1))).toBe(2);
    expect(s.has(k(W2))).toBe(false);
  });
});
