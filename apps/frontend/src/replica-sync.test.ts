/**
 * `--router-replica-sync` (docs/protocol.md §5.4) between two frontends: etcd + nats-server, a mocker
 * process with two workers, two frontends in this process (each its own lease, so its own
 * `router_id`). A booking, first token and free on one appear in the other's load view and steer
 * its decisions.
 */
import type { WorkerId } from '@kvrouter/protocols';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from './frontend.js';
import type { WorkerSet } from './models.js';
import { eventually } from '@kvrouter/testkit';
import { readySet, startReplicaPair, type ReplicaPair } from './test-helpers.js';

const NS = 'fereplica';
let pair: ReplicaPair;
let a: Frontend;
let b: Frontend;

beforeAll(async () => {
  pair = await startReplicaPair(NS);
  ({ a, b } = pair);
}, 60_000);

afterAll(() => pair?.close());

const ready = (fe: Frontend): Promise<WorkerSet> => readySet(fe, 2);

/** 64 tokens = 4 blocks of 16 (the mocker's block size); families share no block. */
const prompt = (f: number): Uint32Array => Uint32Array.from({ length: 64 }, (_, i) => f * 1000 + i + 1);

describe('two frontends with --router-replica-sync', () => {
  it("see each other's bookings, first tokens and frees, and route around them", async () => {
    const [sa, sb] = await Promise.all([ready(a), ready(b)]);
    expect(a.discovery.leaseId).not.toBe(b.discovery.leaseId);

    const d = await sa.router.route({ requestId: 'ra', tokens: prompt(1) });
    expect(d.booked).toBe(true);
    const w = { worker_id: d.workerId, dp_rank: d.dpRank };
    // §5.4: B books the replica with isl = initial_effective_prefill_tokens = 64 - 0 cached = 64,
    // and its 4 blocks.
    const seen = await eventually(
      async () => {
        const l = sb.router.rankLoad(w);
        return l.active_requests === 1 ? l : null;
      },
      10_000,
      "A's booking in B's load view",
    );
    expect(seen).toEqual({ active_requests: 1, active_prefill_tokens: 64, active_decode_blocks: 4 });

    // B, asked for an unrelated prompt with nothing cached anywhere, avoids the worker A loaded:
    // w carries 64 prefill tokens and 4 blocks, the other nothing.
    const other = await sb.router.route({ requestId: 'rb-probe', tokens: prompt(2), queryOnly: true });
    expect(other.workerId).not.toBe(d.workerId);

    sa.router.markPrefillCompleted('ra');
    await eventually(
      async () => sb.router.rankLoad(w).active_prefill_tokens === 0,
      10_000,
      "A's first token in B",
    );
    expect(sb.router.rankLoad(w)).toEqual({
      active_requests: 1,
      active_prefill_tokens: 0,
      active_decode_blocks: 4,
    });

    sa.router.free('ra');
    await eventually(async () => sb.router.rankLoad(w).active_requests === 0, 10_000, "A's free in B");
    expect(sb.router.rankLoad(w)).toEqual({
      active_requests: 0,
      active_prefill_tokens: 0,
      active_decode_blocks: 0,
    });

    // And the other way round, on the other worker.
    const other2 = {
      worker_id: sa.router.workerIds().find((id) => id !== d.workerId) as WorkerId,
      dp_rank: 0,
    };
    const db = await sb.router.route({
      requestId: 'rb',
      tokens: prompt(3),
      nvext: { backend_instance_id: other2.worker_id },
    });
    expect(db.workerId).toBe(other2.worker_id);
    await eventually(
      async () => sa.router.rankLoad(other2).active_requests === 1,
      10_000,
      "B's booking in A",
    );
    expect(sa.router.rankLoad(other2)).toEqual({
      active_requests: 1,
      active_prefill_tokens: 64,
      active_decode_blocks: 4,
    });
    sb.router.free('rb');
    await eventually(async () => sa.router.rankLoad(other2).active_requests === 0, 10_000, "B's free in A");
  }, 90_000);
});
