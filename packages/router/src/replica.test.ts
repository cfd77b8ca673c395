/**
 * Replica reconciliation (issue 18): a router's live list frees the peer bookings it no longer
 * holds (their `Free` was lost), keeps the ones it does and the ones too young to be on the list,
 * frees everything of a router whose lists stopped, and ignores bookings on unknown workers.
 */
import { describe, expect, it } from 'vitest';
import type { ActiveSequenceEvent, RouterId } from '@kvrouter/protocols';
import { harness, toks, w } from './test-fixtures.js';

const ZERO = { active_prefill_tokens: 0, active_decode_blocks: 0, active_requests: 0 };

describe('replica reconciliation', () => {
  it('frees what the peer no longer lists, keeps what it lists or booked within the grace', async () => {
    const events: ActiveSequenceEvent[] = [];
    const a = harness({ routerId: 11n, publishActiveSequenceEvent: (e) => events.push(e) });
    const b = harness({ routerId: 22n });
    for (const r of [a.router, b.router]) r.addWorker({ workerId: 1 });
    // 40 tokens = 2 full blocks and 40 prefill tokens each, nothing cached.
    for (const id of ['x', 'y'])
      await a.router.route({ requestId: id, tokens: toks(id === 'x' ? 1 : 500, 40) });
    for (const e of events) b.router.applyReplicaEvent(e);
    expect(b.router.rankLoad(w(1))).toEqual({
      active_prefill_tokens: 80,
      active_decode_blocks: 4,
      active_requests: 2,
    });
    expect(b.router.replicaPeerBookings).toBe(2);

    // A frees x; the Free is lost. A's list now holds y only.
    expect(a.router.free('x')).toBe(true);
    const list = a.router.replicaLiveList()!;
    expect(list).toEqual({ router_id: 11n, request_ids: ['y'] });
    // Too young (booked < 1 s before the list): kept, it may have been booked after the list was made.
    expect(b.router.applyReplicaLiveList(list)).toBe(0);
    b.clock.advance(1000);
    expect(b.router.applyReplicaLiveList(list)).toBe(1);
    expect(b.router.rankLoad(w(1))).toEqual({
      active_prefill_tokens: 40,
      active_decode_blocks: 2,
      active_requests: 1,
    });
    expect(b.router.replicaPeerBookings).toBe(1);
    // Its own list never touches its own bookings; a list from B itself is ignored by B.
    expect(b.router.applyReplicaLiveList({ router_id: 22n, request_ids: [] })).toBe(0);

    // A goes silent: after the silence limit its last booking goes too.
    expect(b.router.expireSilentReplicas(10_000)).toBe(0);
    b.clock.advance(10_001);
    expect(b.router.expireSilentReplicas(10_000)).toBe(1);
    expect(b.router.rankLoad(w(1))).toEqual(ZERO);
    expect(b.router.replicaPeerBookings).toBe(0);
  });

  it('a router that never sent a list (e.g. Dynamo) keeps its bookings until Free or expiry', () => {
    const b = harness({ routerId: 22n });
    b.router.addWorker({ workerId: 1 });
    const add: ActiveSequenceEvent = {
      request_id: 'dyn-1',
      worker: w(1),
      router_id: 33n as RouterId,
      data: {
        AddRequest: {
          token_sequence: null,
          track_prefill_tokens: true,
          expected_output_tokens: null,
          prefill_load_hint: { initial_effective_prefill_tokens: 910, expected_prefill_duration: null },
        },
      },
    };
    expect(b.router.applyReplicaEvent(add)).toBe(true);
    b.clock.advance(60_000);
    expect(b.router.expireSilentReplicas(10_000)).toBe(0);
    expect(b.router.rankLoad(w(1)).active_prefill_tokens).toBe(910);
    // A booking on a worker B does not route to is not load here.
    expect(b.router.applyReplicaEvent({ ...add, request_id: 'dyn-2', worker: w(9) })).toBe(false);
    expect(b.router.rankLoad(w(9))).toEqual(ZERO);
  });
});
