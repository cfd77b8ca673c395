/**
 * Issue 18, replica bookings across a NATS restart: etcd + nats-server, a mocker process with two
 * workers, two frontends (in this process) with `--router-replica-sync`. nats-server is stopped
 * while A holds live bookings; during the outage A frees two of them (their `Free` events never
 * reach B) and B holds a phantom of A that A never had. nats-server comes back on the same port:
 * within 5 s B's view of A is exactly A's live booking (reconciled by A's live lists), and
 * the live one was never dropped.
 */
import type { RouterId, WorkerId } from '@kvrouter/protocols';
import { eventually, startNats } from '@kvrouter/testkit';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Frontend } from './frontend.js';
import type { WorkerSet } from './models.js';
import { readySet, startReplicaPair, type ReplicaPair } from './test-helpers.js';

const NS = 'fehealreplica';
let pair: ReplicaPair;
let a: Frontend;
let b: Frontend;

beforeAll(async () => {
  pair = await startReplicaPair(NS);
  ({ a, b } = pair);
}, 60_000);

afterAll(() => pair?.close());

const ready = (fe: Frontend): Promise<WorkerSet> => readySet(fe, 2);

/** 64 tokens = 4 blocks of 16; families share no block. */
const prompt = (f: number): Uint32Array => Uint32Array.from({ length: 64 }, (_, i) => f * 1000 + i + 1);

it('every frontend registers router-discovery under the worker component (§6.5), with its router id', async () => {
  await Promise.all([ready(a), ready(b)]);
  const keys = await eventually(
    async () => {
      const ks = (await a.discovery.list(`v1/instances/${NS}/backend/router-discovery/`)).map((e) => e.key);
      return ks.length === 2 ? ks : null;
    },
    10_000,
    'two router-discovery instances',
  );
  expect(keys.sort()).toEqual(
    [a, b]
      .map((fe) => `v1/instances/${NS}/backend/router-discovery/${fe.discovery.leaseId.toString(16)}`)
      .sort(),
  );
});

it('bookings whose frees were lost in a NATS restart are gone from the peer within 5 s of reconnection', async () => {
  const [sa, sb] = await Promise.all([ready(a), ready(b)]);
  const w = { worker_id: sa.router.workerIds()[0]! as WorkerId, dp_rank: 0 };
  for (const id of ['live-1', 'live-2', 'live-3']) {
    const d = await sa.router.route({
      requestId: id,
      tokens: prompt(id.length + Number(id.at(-1))),
      nvext: { backend_instance_id: w.worker_id },
    });
    expect(d.booked).toBe(true);
  }
  // Each: isl 64, nothing cached -> 64 prefill tokens and 4 blocks in B's view.
  await eventually(async () => sb.router.rankLoad(w).active_requests === 3, 10_000, "A's bookings in B");
  expect(sb.router.rankLoad(w)).toEqual({
    active_requests: 3,
    active_prefill_tokens: 192,
    active_decode_blocks: 12,
  });

  const port = pair.nats.port;
  await pair.nats.stop();
  // During the outage: two frees B cannot hear, and a booking of A's that B holds but A never had.
  expect(sa.router.free('live-1')).toBe(true);
  expect(sa.router.free('live-2')).toBe(true);
  sb.router.applyReplicaEvent({
    request_id: 'phantom',
    worker: w,
    router_id: a.discovery.leaseId as RouterId,
    data: {
      AddRequest: {
        token_sequence: null,
        track_prefill_tokens: true,
        expected_output_tokens: null,
        prefill_load_hint: { initial_effective_prefill_tokens: 910, expected_prefill_duration: null },
      },
    },
  });
  expect(sb.router.rankLoad(w).active_requests).toBe(4);
  await new Promise((r) => setTimeout(r, 1500));

  pair.nats = await startNats({ jetstream: false, port });
  const back = Date.now();
  await eventually(async () => sb.router.rankLoad(w).active_requests === 1, 8_000, 'B reconciled with A');
  expect(Date.now() - back).toBeLessThanOrEqual(5_000);
  // What is left is A's live booking, whole.
  expect(sb.router.rankLoad(w)).toEqual({
    active_requests: 1,
    active_prefill_tokens: 64,
    active_decode_blocks: 4,
  });
  expect(sb.router.replicaPeerBookings).toBe(1);

  // The channel works after the restart: A's free reaches B.
  expect(sa.router.free('live-3')).toBe(true);
  await eventually(async () => sb.router.rankLoad(w).active_requests === 0, 10_000, "A's free in B");
}, 60_000);
