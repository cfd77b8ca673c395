import { describe, expect, it } from 'vitest';
import { KvrError, type WorkerWithDpRank } from '@kvrouter/protocols';
import { MultiWorkerSequences } from './multi-worker.js';
import { drainQueue, priorityJump, queueKey, RouterQueue, shouldPark } from './queue.js';

const drain = <T>(q: RouterQueue<T>) => {
  const out: T[] = [];
  while (q.size) out.push(q.pop()!);
  return out;
};

describe('priority_jump', () => {
  it('max(priority, 0), falling back to latency_sensitivity', () => {
    expect(priorityJump({ priority: -3 })).toBe(0);
    expect(priorityJump({ priority: 2 })).toBe(2);
    expect(priorityJump({ latency_sensitivity: 1.5 })).toBe(1.5);
    // priority present (even 0) wins over the deprecated field
    expect(priorityJump({ priority: 0, latency_sensitivity: 4 })).toBe(0);
    expect(priorityJump({ priority: null, latency_sensitivity: 4 })).toBe(4);
    expect(priorityJump(null)).toBe(0);
    expect(() => priorityJump({ priority: NaN })).toThrow(KvrError);
  });
});

describe('queue keys', () => {
  it('formulas', () => {
    const k = { priorityJump: 2, arrivalOffsetSec: 5, isl: 1000, cachedTokens: 600 };
    expect(queueKey('fcfs', k)).toBe(-3); // 2 − 5
    expect(queueKey('lcfs', k)).toBe(7); // 2 + 5
    expect(queueKey('wspt', k)).toBe(3 / 400); // (1 + 2)/max(1, 400)
    expect(queueKey('wspt', { ...k, cachedTokens: 5000 })).toBe(3); // max(1, −4000) = 1
  });
});

describe('RouterQueue ordering', () => {
  it('fcfs: earlier first; priority p ≈ arriving p seconds earlier; ties by arrival', () => {
    const q = new RouterQueue<string>('fcfs', 0);
    q.push({ id: 'a', now: 1000 }, 'a'); // 0 − 1 = −1
    q.push({ id: 'b', now: 2000 }, 'b'); // −2
    q.push({ id: 'c', now: 3000, priorityJump: 5 }, 'c'); // 5 − 3 = 2
    q.push({ id: 'd', now: 4000, priorityJump: 0.5 }, 'd'); // −3.5
    q.push({ id: 'e', now: 3000, priorityJump: 1 }, 'e'); // −2: ties b, b arrived first
    q.push({ id: 'f', now: 4000, priorityJump: 1.5 }, 'f'); // −2.5
    expect(drain(q)).toEqual(['c', 'a', 'b', 'e', 'f', 'd']);
  });

  it('lcfs: latest first, priority still adds', () => {
    const q = new RouterQueue<string>('lcfs', 0);
    q.push({ id: 'a', now: 1000 }, 'a'); // 1
    q.push({ id: 'b', now: 2000 }, 'b'); // 2
    q.push({ id: 'c', now: 500, priorityJump: 5 }, 'c'); // 5.5
    expect(drain(q)).toEqual(['c', 'b', 'a']);
  });

  it('wspt: shortest uncached work first, weighted by priority', () => {
    const q = new RouterQueue<string>('wspt', 0);
    q.push({ id: 'a', now: 1, isl: 1000 }, 'a'); // 1/1000
    q.push({ id: 'b', now: 2, isl: 100 }, 'b'); // 1/100
    q.push({ id: 'c', now: 3, isl: 1000, cachedTokens: 900 }, 'c'); // 1/100, after b
    q.push({ id: 'd', now: 4, isl: 1000, priorityJump: 19 }, 'd'); // 20/1000 = 0.02
    q.push({ id: 'e', now: 5, isl: 5, cachedTokens: 10 }, 'e'); // 1/max(1, −5) = 1
    expect(drain(q)).toEqual(['e', 'd', 'b', 'c', 'a']);
  });

  it('strict priority is an outer key only when enabled', () => {
    const on = new RouterQueue<string>('fcfs', 0, { strictPriority: true });
    on.push({ id: 'x', now: 0, priorityJump: 100 }, 'x');
    on.push({ id: 'y', now: 10, strictPriority: 1 }, 'y');
    on.push({ id: 'z', now: 20, strictPriority: 1, priorityJump: 1 }, 'z');
    // tier 1: z (1 − 0.02) before y (−0.01); then tier 0: x
    expect(drain(on)).toEqual(['z', 'y', 'x']);
    const off = new RouterQueue<string>('fcfs', 0);
    off.push({ id: 'x', now: 0, priorityJump: 100 }, 'x');
    off.push({ id: 'y', now: 10, strictPriority: 1 }, 'y');
    expect(drain(off)).toEqual(['x', 'y']);
  });

  it('remove by id keeps heap order; peek, size, duplicates', () => {
    const q = new RouterQueue<number>('fcfs', 0);
    for (let i = 0; i < 20; i++) q.push({ id: `r${i}`, now: i * 100 }, i);
    expect(q.remove('r0')).toBe(0);
    expect(q.remove('r7')).toBe(7);
    expect(q.remove('r19')).toBe(19);
    expect(q.remove('r7')).toBeUndefined();
    expect(q.size).toBe(17);
    expect(q.peek()).toBe(1);
    expect(q.peekId()).toBe('r1');
    expect(q.has('r8')).toBe(true);
    expect(q.toArray()).toEqual([1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]);
    let err: unknown;
    try {
      q.push({ id: 'r8', now: 0 }, 8);
    } catch (e) {
      err = e;
    }
    expect((err as KvrError).code).toBe('duplicate_request');
    expect(drain(q)).toEqual([1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]);
    expect(q.pop()).toBeUndefined();
  });

  it('bad push input names the field and queues nothing', () => {
    const q = new RouterQueue<number>('wspt', 0);
    const fieldOf = (fn: () => void) => {
      try {
        fn();
      } catch (e) {
        return (e as KvrError).detail?.field;
      }
      return undefined;
    };
    expect(fieldOf(() => q.push({ id: 'a', now: NaN }, 1))).toBe('now');
    expect(fieldOf(() => q.push({ id: 'a', now: 0, priorityJump: -1 }, 1))).toBe('priorityJump');
    expect(fieldOf(() => q.push({ id: 'a', now: 0, isl: 2.5 }, 1))).toBe('isl');
    expect(q.size).toBe(0);
    expect(() => new RouterQueue('sjf' as 'fcfs', 0)).toThrow(KvrError);
  });
});

describe('park rule', () => {
  it('parks only when every eligible rank is over threshold × max_num_batched_tokens', () => {
    // threshold 16, mbt 100 / 200 → limits 1600 / 3200
    expect(shouldPark([1601, 3201], [100, 200], 16)).toBe(true);
    expect(shouldPark([1601, 3200], [100, 200], 16)).toBe(false); // 3200 is not > 3200
    expect(shouldPark([1601], 100, 16)).toBe(true);
    expect(shouldPark([], 100, 16)).toBe(false); // no eligible rank → not parked
    expect(shouldPark([1e12], 100, null)).toBe(false); // queue disabled
    expect(() => shouldPark([1], 100, 0)).toThrow(KvrError);
    expect(() => shouldPark([1, 2], [100], 1)).toThrow(KvrError);
  });

  it('park and release as load drains (head-of-line blocking accepted)', () => {
    // two ranks, threshold 1, mbt 100 → a rank is saturated above 100 prefill tokens
    const ranks = [0, 1].map((dp) => ({ worker_id: 1n, dp_rank: dp }) as WorkerWithDpRank);
    const seqs = new MultiWorkerSequences({ blockSize: 16, trackActiveBlocks: false });
    const loads = () => ranks.map((r) => seqs.load(r, 0).active_prefill_tokens);
    const parked = () => shouldPark(loads(), 100, 1);
    seqs.addRequest(ranks[0], { requestId: 'r1', isl: 150 }, 0); // rank 0: 150 > 100
    seqs.addRequest(ranks[1], { requestId: 'r2', isl: 120 }, 0); // rank 1: 120 > 100
    expect(parked()).toBe(true);

    const q = new RouterQueue<{ id: string; isl: number }>('fcfs', 0);
    q.push({ id: 'q1', now: 10 }, { id: 'q1', isl: 200 });
    q.push({ id: 'q2', now: 20 }, { id: 'q2', isl: 50 });
    const admitted: string[] = [];
    const admit = (v: { id: string; isl: number }) => {
      // book on the least-loaded rank, as a router would
      const l = loads();
      const r = l[0] <= l[1] ? 0 : 1;
      seqs.addRequest(ranks[r], { requestId: v.id, isl: v.isl }, 0);
      admitted.push(`${v.id}@${r}`);
    };
    expect(drainQueue(q, parked, admit)).toBe(0);

    // first token of r2: rank 1 drops to 0 → q1 admitted there (rank 1: 200), which saturates
    // both ranks again, so q2 stays parked behind it
    seqs.markPrefillCompleted('r2', 0);
    expect(drainQueue(q, parked, admit)).toBe(1);
    expect(admitted).toEqual(['q1@1']);
    expect(q.size).toBe(1);

    // r1 done: rank 0 drops to 0 → q2 admitted on rank 0
    seqs.free('r1', 0);
    expect(drainQueue(q, parked, admit)).toBe(1);
    expect(admitted).toEqual(['q1@1', 'q2@0']);
    expect(q.size).toBe(0);
  });
});
