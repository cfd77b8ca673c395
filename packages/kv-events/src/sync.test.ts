import { VirtualClock } from '@kvrouter/protocols';
import { describe, expect, it } from 'vitest';
import type { ActiveLoad, ActiveSequenceEvent } from '@kvrouter/protocols';
import { InprocEventBus } from './plane/inproc.js';
import { CoalescingLoadPublisher, LoadChannel, ReplicaSync } from './sync.js';
import { waitFor } from './test-helpers.js';

const ev = (router: bigint, request_id: string): ActiveSequenceEvent =>
  ({
    request_id,
    worker: { worker_id: 5n, dp_rank: 1 },
    data: {
      AddRequest: {
        token_sequence: [1n, 2n ** 63n],
        track_prefill_tokens: true,
        expected_output_tokens: 16,
        prefill_load_hint: null,
      },
    },
    router_id: router,
  }) as ActiveSequenceEvent;

describe('ReplicaSync (§5.4)', () => {
  it("delivers other routers' events and drops its own", async () => {
    const bus = new InprocEventBus();
    const a = new ReplicaSync(bus.plane({ publisherId: 1n }), 'ns', 'backend', 1n);
    const b = new ReplicaSync(bus.plane({ publisherId: 2n }), 'ns', 'backend', 2n);
    const seenByA: ActiveSequenceEvent[] = [];
    const sa = a.subscribe((e) => seenByA.push(e));
    a.publish(ev(1n, 'own'));
    b.publish(ev(2n, 'other'));
    b.publish({ ...ev(2n, 'free'), data: 'Free' });
    expect(await waitFor(() => seenByA.length === 2)).toBe(true);
    expect(seenByA.map((e) => e.request_id)).toEqual(['other', 'free']);
    expect(seenByA[0]).toEqual(ev(2n, 'other'));
    expect(sa.stats).toEqual({ delivered: 2, ignored: 1, decodeFailures: 0 });
    expect(a.topic.subject).toBe('namespace.ns.component.backend.active_sequences_events');
    sa.close();
  });
});

describe('LoadChannel / CoalescingLoadPublisher (§5.5)', () => {
  it("round-trips ActiveLoad on kv_metrics and coalesces a rank's updates within the window", async () => {
    const bus = new InprocEventBus();
    const ch = new LoadChannel(bus.plane({ publisherId: 9n }), 'ns');
    expect(ch.topic.subject).toBe('namespace.ns.kv_metrics');
    const got: ActiveLoad[] = [];
    const s = new LoadChannel(bus.plane({ publisherId: 8n }), 'ns').subscribe((l) => got.push(l));
    const timers = new VirtualClock();
    const co = new CoalescingLoadPublisher(ch, 1, timers);
    const load = (rank: number, used: number): ActiveLoad =>
      ({
        worker_id: 9n,
        dp_rank: rank,
        active_decode_blocks: used,
        active_prefill_tokens: null,
        kv_used_blocks: used,
      }) as ActiveLoad;
    co.update(load(0, 1));
    co.update(load(0, 2));
    co.update(load(1, 7));
    co.update(load(0, 3));
    expect(timers.pendingDelays()).toEqual([1]);
    timers.advance(1);
    expect(await waitFor(() => got.length === 2)).toBe(true);
    // latest value per rank, one message each
    expect(got.map((l) => [l.dp_rank, l.kv_used_blocks])).toEqual([
      [0, 3],
      [1, 7],
    ]);
    s.close();
  });
});
