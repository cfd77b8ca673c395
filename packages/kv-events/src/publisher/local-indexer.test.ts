import { describe, expect, it } from 'vitest';
import type { EventId, RouterEvent, WorkerId } from '@kvrouter/protocols';
import { LocalIndexer } from './local-indexer.js';
import { EventRing } from './ring.js';
import { chain, removed } from '../test-helpers.js';

const W = 7n as WorkerId;

function ev(id: bigint, data: RouterEvent['event']['data']): RouterEvent {
  return { worker_id: W, storage_tier: 'device', event: { event_id: id as EventId, data, dp_rank: 0 } };
}

const q = (start: bigint | null, end: bigint | null = null, worker: bigint = W) => ({
  worker_id: worker as WorkerId,
  start_event_id: start as EventId | null,
  end_event_id: end as EventId | null,
});

/** Six events: a chain 1-2-3, then 4, 5, 6 extending it, so the tree is one path of 6 blocks. */
function filled(ringSize: number): LocalIndexer {
  const li = new LocalIndexer(W, 0, ringSize);
  li.record(ev(1n, chain(null, [1n])));
  li.record(ev(2n, chain(1001n, [2n])));
  li.record(ev(3n, chain(1002n, [3n])));
  return li;
}

describe('EventRing', () => {
  it('holds the last N ids and rejects a non-contiguous push', () => {
    const r = new EventRing(4);
    expect([r.newest, r.oldest]).toEqual([0n, 1n]);
    for (let i = 1n; i <= 6n; i++) r.push(ev(i, 'cleared'));
    // newest 6, capacity 4 -> oldest = 6 - 4 + 1 = 3
    expect([r.newest, r.oldest]).toEqual([6n, 3n]);
    expect(r.range(3n, 6n).map((e) => e.event.event_id)).toEqual([3n, 4n, 5n, 6n]);
    expect(() => r.push(ev(8n, 'cleared'))).toThrow(/expects 7, got 8/);
    expect(r.newest).toBe(6n);
  });
});

describe('LocalIndexer.query (§3.5 table)', () => {
  it('answers each row of the table', () => {
    const li = filled(1024);
    // start null -> full dump of 3 blocks, last_event_id = newest = 3
    const dump = li.query(q(null));
    expect('TreeDump' in dump && dump.TreeDump.last_event_id).toBe(3n);
    expect('TreeDump' in dump && dump.TreeDump.events.map((e) => e.event.data)).toEqual([
      chain(null, [1n]),
      chain(1001n, [2n]),
      chain(1002n, [3n]),
    ]);
    expect(li.query(q(2n, 1n))).toEqual({ InvalidRange: { start_id: 2n, end_id: 1n } });
    // 5 > newest + 1 = 4
    expect(li.query(q(5n))).toEqual({
      TooNew: { requested_start: 5n, requested_end: null, newest_available: 3n },
    });
    expect(li.query(q(5n, 9n))).toEqual({
      TooNew: { requested_start: 5n, requested_end: 9n, newest_available: 3n },
    });
    // start = newest + 1 -> empty Events (implementation choice in §3.5)
    expect(li.query(q(4n))).toEqual({ Events: { events: [], last_event_id: 3n } });
    const ev2 = li.query(q(2n));
    expect('Events' in ev2 && ev2.Events.events.map((e) => e.event.event_id)).toEqual([2n, 3n]);
    expect('Events' in ev2 && ev2.Events.last_event_id).toBe(3n);
    const one = li.query(q(2n, 2n));
    expect('Events' in one && one.Events.events.map((e) => e.event.event_id)).toEqual([2n]);
    // end past the newest reads as newest
    const past = li.query(q(3n, 10n));
    expect('Events' in past && past.Events.events.map((e) => e.event.event_id)).toEqual([3n]);
    const wrong = li.query(q(1n, null, 8n));
    expect('Error' in wrong && wrong.Error).toMatch(/worker_id 8 is not served here/);
  });

  it('falls back to a tree dump once the start left the ring', () => {
    const li = filled(4);
    li.record(ev(4n, chain(1003n, [4n])));
    li.record(ev(5n, removed([1004n])));
    li.record(ev(6n, chain(1003n, [5n])));
    // ring 4, newest 6 -> oldest 3: start 2 is gone, start 3 is still there
    const d = li.query(q(2n));
    expect('TreeDump' in d && d.TreeDump.last_event_id).toBe(6n);
    // held: 1,2,3 (chain) and 5 (child of 3); 4 was removed -> 4 blocks
    expect(
      'TreeDump' in d &&
        d.TreeDump.events.map(
          (e) =>
            (e.event.data as { stored: { blocks: { tokens_hash: bigint }[] } }).stored.blocks[0].tokens_hash,
        ),
    ).toEqual([1n, 2n, 3n, 5n]);
    const e = li.query(q(3n));
    expect('Events' in e && e.Events.events.map((x) => x.event.event_id)).toEqual([3n, 4n, 5n, 6n]);
  });

  it('answers an empty worker: dump with last 0, start 1 is empty Events', () => {
    const li = new LocalIndexer(W, 0);
    expect(li.query(q(null))).toEqual({ TreeDump: { events: [], last_event_id: 0n } });
    expect(li.query(q(1n))).toEqual({ Events: { events: [], last_event_id: 0n } });
    expect(li.query(q(2n))).toEqual({
      TooNew: { requested_start: 2n, requested_end: null, newest_available: 0n },
    });
  });
});
