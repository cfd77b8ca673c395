import { VirtualClock } from '@kvrouter/protocols';
import { describe, expect, it } from 'vitest';
import type { RouterEvent } from '@kvrouter/protocols';
import { KvEventPublisher, MAX_BATCH_BLOCKS } from './publisher.js';
import { chain, removed, stored } from '../test-helpers.js';

function make(opts: Partial<ConstructorParameters<typeof KvEventPublisher>[0]> = {}) {
  const out: RouterEvent[] = [];
  const timers = new VirtualClock();
  const dropped: Array<[number, number]> = [];
  const p = new KvEventPublisher({
    workerId: 42n,
    sink: { publishEvent: (e) => out.push(e) },
    timers,
    onEngineDropped: (n, r) => dropped.push([n, r]),
    ...opts,
  });
  return { p, out, timers, dropped };
}

const ids = (evs: RouterEvent[]) => evs.map((e) => [e.event.dp_rank, e.event.event_id]);

describe('KvEventPublisher: ids and batching (§3.3, §3.4)', () => {
  it('without a timeout flushes every event with contiguous ids per rank', () => {
    const { p, out } = make({ dpRanks: [0, 1] });
    p.engineEvent({ data: chain(null, [1n]) });
    p.engineEvent({ data: chain(1001n, [2n]) });
    p.engineEvent({ dp_rank: 1, data: chain(null, [1n]) });
    p.engineEvent({ data: 'cleared' });
    p.engineEvent({ dp_rank: 1, data: removed([1001n]) });
    // rank 0: 1, 2, 3 (cleared gets its own id); rank 1: 1, 2
    expect(ids(out)).toEqual([
      [0, 1n],
      [0, 2n],
      [1, 1n],
      [0, 3n],
      [1, 2n],
    ]);
    expect(out.every((e) => e.worker_id === 42n && e.storage_tier === 'device')).toBe(true);
    expect(p.lastEventId(0)).toBe(3n);
    expect(p.lastEventId(1)).toBe(2n);
  });

  it('merges a Stored only onto its parent, Removed runs, and flushes on kind/rank/tier change', () => {
    const { p, out, timers } = make({ batchingTimeoutMs: 50 });
    p.engineEvent({ data: chain(null, [1n, 2n]) });
    p.engineEvent({ data: chain(1002n, [3n]) }); // parent = last pending block 1002 -> merges
    expect(out).toEqual([]);
    p.engineEvent({ data: chain(1001n, [9n]) }); // parent 1001 is not the last block -> flush
    expect(out.map((e) => e.event.data)).toEqual([chain(null, [1n, 2n, 3n])]);
    p.engineEvent({ data: removed([1009n]) }); // kind change -> flush the [9] batch
    p.engineEvent({ data: removed([1003n]) }); // merges
    p.engineEvent({ dp_rank: 1, data: removed([5n]) }); // rank change -> flush
    p.engineEvent({ dp_rank: 1, storage_tier: 'host_pinned', data: removed([6n]) }); // tier change -> flush
    expect(out.map((e) => e.event.data)).toEqual([
      chain(null, [1n, 2n, 3n]),
      chain(1001n, [9n]),
      removed([1009n, 1003n]),
      removed([5n]),
    ]);
    // The last batch waits for its timer: 50 ms after it started.
    expect(timers.pendingDelays()).toEqual([50]);
    timers.advance(49);
    expect(out.length).toBe(4);
    timers.advance(1);
    expect(out[4].event.data).toEqual(removed([6n]));
    expect(out[4].storage_tier).toBe('host_pinned');
    expect(ids(out)).toEqual([
      [0, 1n],
      [0, 2n],
      [0, 3n],
      [1, 1n],
      [1, 2n],
    ]);
  });

  it(`flushes once more than ${MAX_BATCH_BLOCKS} blocks are pending`, () => {
    const { p, out } = make({ batchingTimeoutMs: 1000 });
    p.engineEvent({ data: chain(null, [0n]) });
    for (let i = 1n; i < 128n; i++) p.engineEvent({ data: chain(1000n + i - 1n, [i]) });
    // 128 blocks pending: not more than 128 yet
    expect(out.length).toBe(0);
    p.engineEvent({ data: chain(1127n, [128n]) });
    // 129 > 128 -> one event with blocks 0..128
    expect(out.length).toBe(1);
    const d = out[0].event.data as { stored: { blocks: unknown[]; parent_hash: bigint | null } };
    expect(d.stored.blocks.length).toBe(129);
    expect(d.stored.parent_hash).toBe(null);
  });

  it('Cleared flushes the pending batch first and needs no timer', () => {
    const { p, out, timers } = make({ batchingTimeoutMs: 100 });
    p.engineEvent({ data: chain(null, [1n]) });
    p.engineEvent({ data: 'cleared' });
    expect(out.map((e) => e.event.data)).toEqual([chain(null, [1n]), 'cleared']);
    expect(timers.pending).toBe(0);
  });
});

describe('KvEventPublisher: dedup (§3.4 step 3)', () => {
  it('passes a Removed hash only when its Stored count drops to zero', () => {
    const { p, out } = make();
    p.engineEvent({ data: stored(null, [[5n, 50n]]) });
    p.engineEvent({ data: stored(null, [[5n, 50n]]) }); // count(5) = 2
    p.engineEvent({ data: removed([5n, 77n]) }); // 5: 2 -> 1 suppressed; 77 never seen: passes
    p.engineEvent({ data: removed([5n]) }); // 1 -> 0: passes
    p.engineEvent({ data: removed([5n]) }); // unknown again: passes
    expect(out.map((e) => e.event.data)).toEqual([
      stored(null, [[5n, 50n]]),
      stored(null, [[5n, 50n]]),
      removed([77n]),
      removed([5n]),
      removed([5n]),
    ]);
    expect(p.stats.dedupSuppressed).toBe(1);
  });

  it('a fully suppressed Removed takes no id; Cleared resets the counts of its rank only', () => {
    const { p, out } = make({ dpRanks: [0, 1] });
    p.engineEvent({ data: stored(null, [[5n, 50n]]) });
    p.engineEvent({ data: stored(null, [[5n, 50n]]) });
    p.engineEvent({ dp_rank: 1, data: stored(null, [[5n, 50n]]) });
    p.engineEvent({ dp_rank: 1, data: stored(null, [[5n, 50n]]) });
    p.engineEvent({ data: removed([5n]) }); // rank 0: 2 -> 1, nothing left: no event
    expect(out.length).toBe(4);
    p.engineEvent({ data: 'cleared' }); // rank 0 counts reset
    p.engineEvent({ data: removed([5n]) }); // rank 0: never seen since the reset -> passes
    p.engineEvent({ dp_rank: 1, data: removed([5n]) }); // rank 1: 2 -> 1 -> suppressed
    expect(out.slice(4).map((e) => [e.event.dp_rank, e.event.event_id, e.event.data])).toEqual([
      [0, 3n, 'cleared'],
      [0, 4n, removed([5n])],
    ]);
  });
});

describe('KvEventPublisher: input', () => {
  it('counts engine sequence gaps per rank', () => {
    const { p, dropped } = make({ dpRanks: [0, 1] });
    p.engineEvent({ data: chain(null, [1n]) }, 1);
    p.engineEvent({ data: chain(1001n, [2n]) }, 2);
    p.engineEvent({ data: chain(1002n, [3n]) }, 6); // 3, 4, 5 lost
    p.engineEvent({ dp_rank: 1, data: chain(null, [1n]) }, 1);
    p.noteEngineSequence(1, 3); // 2 lost
    p.noteEngineSequence(1, 1); // restart: no loss
    p.noteEngineSequence(1, 2);
    expect(dropped).toEqual([
      [3, 0],
      [1, 1],
    ]);
    expect(p.stats.engineDropped).toBe(4);
  });

  it('rejects bad input naming the field, with no state change', () => {
    const { p, out } = make({ batchingTimeoutMs: 10 });
    p.engineEvent({ data: chain(null, [1n]) });
    const bad = [
      [
        {
          data: {
            stored: {
              parent_hash: null,
              start_position: null,
              blocks: [{ block_hash: 1, tokens_hash: 2n, mm_extra_info: null }],
            },
          },
        },
        'data.stored.blocks[0].block_hash',
      ],
      [{ data: { removed: { block_hashes: [1n, -1n] } } }, 'data.removed.block_hashes[1]'],
      [{ dp_rank: -1, data: 'cleared' }, 'dp_rank'],
      [{ storage_tier: 'gpu', data: 'cleared' }, 'storage_tier'],
      [{ data: 'clear' }, 'data'],
      [
        { data: { stored: { parent_hash: 2 ** 70, start_position: null, blocks: [] } } },
        'data.stored.parent_hash',
      ],
    ] as const;
    for (const [input, field] of bad) {
      let err: unknown;
      try {
        p.engineEvent(input as never);
      } catch (e) {
        err = e;
      }
      expect((err as { code?: string }).code, field).toBe('invalid_argument');
      expect((err as { detail?: { field?: string } }).detail?.field).toBe(field);
    }
    expect(() => p.noteEngineSequence(0, -3)).toThrow(/seq/);
    expect(() => new KvEventPublisher({ workerId: 1n, batchingTimeoutMs: 15_001 })).toThrow(
      /batching_timeout_ms/,
    );
    // The first event is still the only pending one and still merges with its child.
    p.engineEvent({ data: chain(1001n, [2n]) });
    p.flush();
    expect(out.map((e) => [e.event.event_id, e.event.data])).toEqual([[1n, chain(null, [1n, 2n])]]);
  });

  it('feeds the local indexer and answers queries per rank; no local indexer -> Error', () => {
    const { p } = make();
    p.engineEvent({ data: chain(null, [1n, 2n]) });
    p.engineEvent({ data: removed([1002n]) });
    const res = p.handleQuery(0, {
      worker_id: 42n as never,
      start_event_id: 2n as never,
      end_event_id: null,
    });
    expect(res).toEqual({
      Events: {
        events: [
          {
            worker_id: 42n,
            storage_tier: 'device',
            event: { event_id: 2n, dp_rank: 0, data: removed([1002n]) },
          },
        ],
        last_event_id: 2n,
      },
    });
    expect(p.localIndexer(0)!.index.findMatches([1n, 2n]).scores.get('42:0')).toBe(1);
    expect(p.handleQuery(3, { worker_id: 42n as never, start_event_id: null, end_event_id: null })).toEqual({
      Error: 'dp_rank 3 is not served by worker 42',
    });
    const off = new KvEventPublisher({ workerId: 1n, localIndexer: false });
    expect(
      'Error' in off.handleQuery(0, { worker_id: 1n as never, start_event_id: null, end_event_id: null }),
    ).toBe(true);
  });
});
