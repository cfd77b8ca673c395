import { describe, expect, it } from 'vitest';
import {
  encodeEnvelope,
  encodeRouterEvent,
  type LocalIndexerQueryRequest,
  type LocalIndexerQueryResponse,
  type RouterEvent,
  type WorkerWithDpRank,
  VirtualClock,
} from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { KvEventPublisher } from '../publisher/publisher.js';
import { InprocQueryHub, type QueryClient } from '../query.js';
import { InprocEventBus } from '../plane/inproc.js';
import { kvEventsTopic } from '../plane/types.js';
import { planeSink } from '../publisher/publisher.js';
import { KvEventSubscriber, type KvSubscriberOptions, type RecoveryInfo } from './subscriber.js';
import { chain, dumpKey, removed, tick, waitFor } from '../test-helpers.js';

/** Query client whose answers can be held back or replaced, and which logs every request. */
class ScriptedQuery implements QueryClient {
  readonly hub = new InprocQueryHub();
  readonly log: Array<{ worker: bigint; rank: number; start: bigint | null }> = [];
  hold = false;
  override: ((req: LocalIndexerQueryRequest) => LocalIndexerQueryResponse | Error) | null = null;
  private held: Array<() => void> = [];
  inflight = 0;
  maxInflight = 0;

  query(worker: WorkerWithDpRank, req: LocalIndexerQueryRequest): Promise<LocalIndexerQueryResponse> {
    this.log.push({ worker: worker.worker_id, rank: worker.dp_rank, start: req.start_event_id });
    this.inflight++;
    this.maxInflight = Math.max(this.maxInflight, this.inflight);
    const answer = (): Promise<LocalIndexerQueryResponse> => {
      this.inflight--;
      const o = this.override?.(req);
      if (o instanceof Error) return Promise.reject(o);
      return o ? Promise.resolve(o) : this.hub.query(worker, req);
    };
    if (!this.hold) return answer();
    return new Promise((resolve, reject) =>
      this.held.push(() => {
        answer().then(resolve, reject);
      }),
    );
  }

  /** Answers the oldest held query (computed now, from the worker's current state). */
  release(n = 1): void {
    for (let i = 0; i < n; i++) this.held.shift()?.();
  }

  get heldCount(): number {
    return this.held.length;
  }
}

interface Rig {
  index: RadixIndexer;
  sub: KvEventSubscriber;
  q: ScriptedQuery;
  timers: VirtualClock;
  recoveries: RecoveryInfo[];
  errors: unknown[];
  worker(
    id: bigint,
    opts?: { ranks?: number[]; ringSize?: number },
  ): { p: KvEventPublisher; out: RouterEvent[] };
}

function rig(opts: Partial<KvSubscriberOptions> = {}): Rig {
  const index = new RadixIndexer();
  const q = new ScriptedQuery();
  const timers = new VirtualClock();
  const recoveries: RecoveryInfo[] = [];
  const errors: unknown[] = [];
  const sub = new KvEventSubscriber({
    index,
    query: q,
    timers,
    now: () => timers.now(),
    onRecovery: (r) => recoveries.push(r),
    onError: (e) => errors.push(e),
    ...opts,
  });
  sub.markReady();
  return {
    index,
    sub,
    q,
    timers,
    recoveries,
    errors,
    worker(id, o = {}) {
      const out: RouterEvent[] = [];
      const p = new KvEventPublisher({
        workerId: id,
        dpRanks: o.ranks ?? [0],
        ringSize: o.ringSize,
        sink: { publishEvent: (e) => out.push(e) },
      });
      q.hub.register(p);
      return { p, out };
    },
  };
}

/** The router's view of one worker equals the worker's own local indexers (all ranks). */
async function sameAsWorker(index: RadixIndexer, p: KvEventPublisher): Promise<void> {
  const mine = (await index.dump()).filter((e) => e.worker_id === p.workerId);
  const theirs = p.dpRanks.flatMap((r) => p.localIndexer(r)!.dump());
  expect(dumpKey(mine)).toEqual(dumpKey(theirs));
}

describe('KvEventSubscriber: cursor and live events (§3.6)', () => {
  it('restores from a dump on the first live event, then applies in order and drops stale ids', async () => {
    const r = rig();
    const { p, out } = r.worker(7n);
    p.engineEvent({ data: chain(null, [1n, 2n]) }); // id 1
    p.engineEvent({ data: chain(1002n, [3n]) }); // id 2
    p.engineEvent({ data: removed([1003n]) }); // id 3: the router never sees 1..3 live
    p.engineEvent({ data: chain(1002n, [4n]) }); // id 4
    r.sub.handleEvent(out[3]);
    await tick();
    // Full restore (start null); the dump reports last_event_id = 4, the event seen is covered.
    expect(r.q.log).toEqual([{ worker: 7n, rank: 0, start: null }]);
    expect(r.sub.cursor(7n)).toEqual({ state: 'live', last: 4n, phase: 'none' });
    p.engineEvent({ data: chain(1004n, [5n]) }); // id 5
    r.sub.handleEvent(out[4]);
    r.sub.handleEvent(out[4]); // duplicate
    r.sub.handleEvent(out[2]); // old
    expect(r.sub.cursor(7n)!.last).toBe(5n);
    expect(r.sub.stats.stale).toBe(2);
    expect(r.q.log.length).toBe(1);
    await sameAsWorker(r.index, p);
    // held: 1, 2, 4 under 2, 5 under 4 -> query [1, 2, 4, 5] matches 4 blocks
    expect(r.index.findMatches([1n, 2n, 4n, 5n]).scores.get('7:0')).toBe(4);
    expect(r.recoveries.map((x) => [x.outcome, x.cursor])).toEqual([['dump', 4n]]);
  });

  it('recovers a gap from the ring buffer (Events), applying only ids above the cursor', async () => {
    const r = rig();
    const { p, out } = r.worker(7n);
    r.sub.addWorker(7n);
    await tick();
    expect(r.sub.cursor(7n)).toEqual({ state: 'live', last: 0n, phase: 'none' });
    for (let i = 1n; i <= 5n; i++) p.engineEvent({ data: chain(i === 1n ? null : 999n + i, [i]) });
    r.sub.handleEvent(out[0]);
    r.sub.handleEvent(out[1]);
    // 3 and 4 are lost; 5 reveals the gap
    r.sub.handleEvent(out[4]);
    expect(r.sub.stats.gaps).toBe(1);
    await tick();
    expect(r.q.log.at(-1)).toEqual({ worker: 7n, rank: 0, start: 3n });
    expect(r.sub.cursor(7n)!.last).toBe(5n);
    expect(r.sub.stats.recoveredByEvents).toBe(1);
    // the late 3 is stale now
    r.sub.handleEvent(out[2]);
    expect(r.sub.stats.stale).toBe(1);
    await sameAsWorker(r.index, p);
    expect(r.index.findMatches([1n, 2n, 3n, 4n, 5n]).scores.get('7:0')).toBe(5);
  });

  it('falls back to a tree dump when the gap left the ring', async () => {
    const r = rig();
    const { p, out } = r.worker(7n, { ringSize: 4 });
    r.sub.addWorker(7n);
    await tick();
    p.engineEvent({ data: chain(null, [1n]) });
    r.sub.handleEvent(out[0]);
    for (let i = 2n; i <= 9n; i++) p.engineEvent({ data: chain(999n + i, [i]) });
    p.engineEvent({ data: removed([1005n]) }); // id 10
    r.sub.handleEvent(out[9]);
    await tick();
    // asked from 2, ring holds 7..10 -> TreeDump with last_event_id 10
    expect(r.q.log.at(-1)!.start).toBe(2n);
    expect(r.sub.stats.recoveredByDump).toBe(2);
    expect(r.sub.cursor(7n)!.last).toBe(10n);
    await sameAsWorker(r.index, p);
    // block 5 removed: the chain matches 1..4 only
    expect(r.index.findMatches([1n, 2n, 3n, 4n, 5n, 6n]).scores.get('7:0')).toBe(4);
  });

  it('holds live events back during a recovery and recovers again past its end', async () => {
    const r = rig();
    const { p, out } = r.worker(7n);
    r.sub.addWorker(7n);
    await tick();
    for (let i = 1n; i <= 3n; i++) p.engineEvent({ data: chain(i === 1n ? null : 999n + i, [i]) });
    r.sub.handleEvent(out[0]);
    r.q.hold = true;
    r.sub.handleEvent(out[2]); // gap: 2 missing, query from 2 held
    expect(r.sub.cursor(7n)!.phase).toBe('inflight');
    r.q.release(); // answers Events 2..3 computed now
    await tick();
    expect(r.sub.cursor(7n)!.last).toBe(3n);
    // Now a recovery whose answer is computed before newer events exist:
    for (let i = 4n; i <= 6n; i++) p.engineEvent({ data: chain(999n + i, [i]) });
    r.sub.handleEvent(out[4]); // id 5 with 4 missing -> query from 4, held
    r.q.release(); // the answer is computed now: Events 4..6
    await tick();
    p.engineEvent({ data: chain(1006n, [7n]) }); // id 7, not delivered yet
    r.sub.handleEvent(out[5]); // id 6 arrives late: stale
    expect(r.sub.cursor(7n)!.last).toBe(6n);
    // A held query whose answer ends below events seen meanwhile:
    p.engineEvent({ data: chain(1007n, [8n]) }); // id 8
    r.sub.handleEvent(out[7]); // 7 missing -> query from 7 held
    r.q.override = () => ({ Events: { events: [out[6]], last_event_id: 7n as never } }); // a reply that stops at 7
    p.engineEvent({ data: chain(1008n, [9n]) }); // id 9
    r.sub.handleEvent(out[8]); // held back, highest = 9
    expect(r.sub.stats.heldBack).toBe(1);
    r.q.release();
    await tick();
    r.q.override = null;
    // cursor 7 < highest 9 -> a second query from 8
    expect(r.q.log.at(-1)!.start).toBe(8n);
    r.q.release();
    await tick();
    expect(r.sub.cursor(7n)).toEqual({ state: 'live', last: 9n, phase: 'none' });
    await sameAsWorker(r.index, p);
  });
});

describe('KvEventSubscriber: retries and limits', () => {
  it('retries TooNew with 200 ms doubling backoff, 8 times, then drops the rank to Initial', async () => {
    const r = rig();
    const { p, out } = r.worker(7n);
    r.sub.addWorker(7n);
    await tick();
    p.engineEvent({ data: chain(null, [1n]) });
    p.engineEvent({ data: chain(1001n, [2n]) });
    p.engineEvent({ data: chain(1002n, [3n]) });
    r.sub.handleEvent(out[0]);
    r.q.override = (req) => ({
      TooNew: { requested_start: req.start_event_id, requested_end: null, newest_available: 1n as never },
    });
    r.sub.handleEvent(out[2]);
    const delays: number[] = [];
    for (let i = 0; i < 8; i++) {
      await tick();
      delays.push(...r.timers.pendingDelays());
      r.timers.advance(r.timers.pendingDelays()[0]);
    }
    await tick();
    // 200 · 2^k for k = 0..7
    expect(delays).toEqual([200, 400, 800, 1600, 3200, 6400, 12800, 25600]);
    // 1 attempt + 8 retries, every one asking from 2
    expect(r.q.log.slice(1).map((x) => x.start)).toEqual(Array(9).fill(2n));
    expect(r.sub.stats.recoveryFailures).toBe(1);
    expect(r.sub.cursor(7n)).toEqual({ state: 'initial', last: 0n, phase: 'none' });
    expect(r.index.treeSizes().get('7:0') ?? 0).toBe(0);
    expect(r.recoveries.at(-1)).toMatchObject({ outcome: 'failed', attempts: 9 });
    // The next live event starts over with a full restore, which now succeeds.
    r.q.override = null;
    p.engineEvent({ data: chain(1003n, [4n]) });
    r.sub.handleEvent(out[3]);
    await tick();
    expect(r.q.log.at(-1)!.start).toBe(null);
    expect(r.sub.cursor(7n)!.last).toBe(4n);
    await sameAsWorker(r.index, p);
  });

  it('transport errors, InvalidRange and Error replies are retried the same way', async () => {
    const r = rig({ maxRetries: 2 });
    r.worker(7n);
    let n = 0;
    const replies: Array<LocalIndexerQueryResponse | Error> = [
      new Error('connection refused'),
      { Error: 'boom' },
    ];
    r.q.override = () => replies[n++] ?? null!;
    r.sub.addWorker(7n);
    await tick();
    r.timers.advance(200);
    await tick();
    r.timers.advance(400);
    await tick();
    expect(r.sub.stats.retries).toBe(2);
    expect(r.sub.cursor(7n)).toEqual({ state: 'live', last: 0n, phase: 'none' });
  });

  it('runs at most 16 recoveries at once', async () => {
    const r = rig();
    r.q.hold = true;
    for (let w = 1n; w <= 20n; w++) {
      r.worker(w);
      r.sub.addWorker(w);
    }
    await tick();
    expect(r.q.maxInflight).toBe(16);
    expect(r.q.heldCount).toBe(16);
    r.q.release(3);
    await tick();
    expect(r.q.heldCount).toBe(16); // 3 done, 3 more started
    r.q.release(16);
    await tick();
    r.q.release(16);
    await tick();
    expect(r.q.log.length).toBe(20);
    expect(r.q.maxInflight).toBe(16);
    expect(r.sub.pendingRecoveries).toBe(0);
  });

  it('waits for the startup delay before the first recovery', async () => {
    const index = new RadixIndexer();
    const timers = new VirtualClock();
    const q = new ScriptedQuery();
    const sub = new KvEventSubscriber({ index, query: q, timers });
    const bus = new InprocEventBus();
    sub.start(() => bus.plane({ publisherId: 1n }).subscribe(kvEventsTopic('ns', 'backend')));
    sub.addWorker(5n);
    await tick();
    expect(q.log.length).toBe(0);
    expect(timers.pendingDelays()).toEqual([100]);
    timers.advance(100);
    await tick();
    expect(q.log.length).toBe(1);
    await sub.close();
  });
});

describe('KvEventSubscriber: Cleared, discovery, resync, malformed input', () => {
  it('applies a newer Cleared at once and discards the recovery it overtook', async () => {
    const r = rig();
    const { p, out } = r.worker(7n);
    r.sub.addWorker(7n);
    await tick();
    p.engineEvent({ data: chain(null, [1n, 2n]) }); // 1
    p.engineEvent({ data: chain(1002n, [3n]) }); // 2
    r.sub.handleEvent(out[0]);
    r.q.hold = true;
    p.engineEvent({ data: chain(1003n, [4n]) }); // 3
    r.sub.handleEvent(out[2]); // gap at 2, query held
    p.engineEvent({ data: 'cleared' }); // 4
    p.engineEvent({ data: chain(null, [8n]) }); // 5
    r.sub.handleEvent(out[3]);
    expect(r.sub.cursor(7n)).toEqual({ state: 'live', last: 4n, phase: 'none' });
    r.sub.handleEvent(out[4]);
    r.q.release(); // would answer Events 2..5; must be thrown away
    await tick();
    expect(r.sub.stats.discarded).toBe(1);
    expect(r.sub.cursor(7n)!.last).toBe(5n);
    // only block 8 is held: nothing from before the Cleared came back
    expect(dumpKey(await r.index.dump())).toEqual(['7:0:-->1008/8']);
    await sameAsWorker(r.index, p);
  });

  it('a Cleared of one rank wipes the worker in the index; the other ranks are re-dumped', async () => {
    const r = rig();
    const { p, out } = r.worker(7n, { ranks: [0, 1] });
    r.sub.addWorker(7n, { dpRanks: [0, 1] });
    await tick();
    p.engineEvent({ data: chain(null, [1n]) });
    p.engineEvent({ dp_rank: 1, data: chain(null, [2n]) });
    p.engineEvent({ data: 'cleared' });
    for (const e of out) r.sub.handleEvent(e);
    await tick();
    expect(r.sub.stats.cleared).toBe(1);
    // rank 1 was restored from a dump (last 1); rank 0 is empty after its Cleared (id 2)
    expect(r.sub.cursor(7n, 1)).toEqual({ state: 'live', last: 1n, phase: 'none' });
    expect(r.sub.cursor(7n, 0)).toEqual({ state: 'live', last: 2n, phase: 'none' });
    expect(dumpKey(await r.index.dump())).toEqual(['7:1:-->1002/2']);
  });

  it('removeWorker drops the blocks and ignores later events; resync re-dumps', async () => {
    const r = rig();
    const a = r.worker(7n);
    const b = r.worker(8n);
    r.sub.addWorker(7n);
    r.sub.addWorker(8n);
    await tick();
    a.p.engineEvent({ data: chain(null, [1n]) });
    b.p.engineEvent({ data: chain(null, [1n]) });
    r.sub.handleEvent(a.out[0]);
    r.sub.handleEvent(b.out[0]);
    r.sub.removeWorker(7n);
    a.p.engineEvent({ data: chain(1001n, [2n]) });
    r.sub.handleEvent(a.out[1]);
    expect(r.sub.cursor(7n)).toBe(null);
    expect([...r.index.findMatches([1n]).scores.keys()]).toEqual(['8:0']);
    // The pool lost worker 8's blocks (writer crash) and asks for a resync.
    r.index.removeWorker(8n);
    r.sub.resync([8n]);
    await tick();
    expect(r.q.log.at(-1)).toEqual({ worker: 8n, rank: 0, start: null });
    await sameAsWorker(r.index, b.p);
  });

  it('counts and drops malformed envelopes and payloads; the loop keeps running', async () => {
    const index = new RadixIndexer();
    const bus = new InprocEventBus();
    const topic = kvEventsTopic('ns', 'backend');
    const failures: string[] = [];
    const sub = new KvEventSubscriber({
      index,
      query: null,
      onDecodeFailure: (e) => failures.push(e.message),
    });
    const routerPlane = bus.plane({ publisherId: 1n });
    sub.start(() => routerPlane.subscribe(topic, { onDecodeFailure: (e) => sub.decodeFailure(e) }));
    const pub = new KvEventPublisher({
      workerId: 9n,
      sink: planeSink(bus.plane({ publisherId: 9n }), topic),
    });
    bus.deliver(topic.subject, new Uint8Array([0xc1])); // not msgpack
    bus.deliver(
      topic.subject,
      encodeEnvelope({
        publisher_id: 9n,
        sequence: 1n,
        published_at: 0,
        topic: 't',
        payload: new Uint8Array([0x90]),
      }),
    );
    bus.deliver(
      topic.subject,
      encodeEnvelope({
        publisher_id: 9n,
        sequence: 2n,
        published_at: 0,
        topic: 't',
        payload: encodeRouterEvent({
          worker_id: 9n,
          storage_tier: 'device',
          event: { event_id: 1n, dp_rank: 0, data: 'cleared' },
        } as never).subarray(0, 10),
      }),
    );
    pub.engineEvent({ data: chain(null, [1n, 2n]) });
    expect(await waitFor(() => index.findMatches([1n, 2n]).scores.get('9:0') === 2)).toBe(true);
    expect(sub.stats.decodeFailures).toBe(3);
    expect(failures.length).toBe(3);
    expect(failures[0]).toMatch(/envelope/);
    await sub.close();
  });

  it('workers without a local indexer: events apply as they come, gaps are only counted', () => {
    const r = rig();
    const { p, out } = r.worker(7n);
    r.sub.addWorker(7n, { localIndexer: false });
    for (let i = 1n; i <= 4n; i++) p.engineEvent({ data: chain(i === 1n ? null : 999n + i, [i]) });
    r.sub.handleEvent(out[0]);
    r.sub.handleEvent(out[2]); // parent 1002 unknown to the router: rejected by the index, cursor still moves
    r.sub.handleEvent(out[3]);
    expect(r.sub.stats.gaps).toBe(1);
    expect(r.q.log.length).toBe(0);
    expect(r.sub.cursor(7n)).toEqual({ state: 'live', last: 4n, phase: 'none' });
    expect(r.index.findMatches([1n, 2n]).scores.get('7:0')).toBe(1);
  });
});
