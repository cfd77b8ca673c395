/**
 * Request lifecycle and load bookkeeping (docs/protocol.md §9), replica sync (§5.4), load publication
 * (§5.5), approximate and side recording (§7.5, §7.6).
 */
import { describe, expect, it } from 'vitest';
import {
  computeLocalBlockHashes,
  computeSequenceHashes,
  pairsToU64s,
  type ActiveLoad,
  type ActiveSequenceEvent,
  type Nvext,
  type RouterId,
} from '@kvrouter/protocols';
import { ApproxIndexer, RadixIndexer, SideIndexer } from '@kvrouter/radix-indexer';
import { Rng } from '@kvrouter/testkit';
import { VirtualClock } from '@kvrouter/protocols';
import { KvRouter } from './router.js';
import { cat, flush, harness, storeEvent, toks, w } from './test-fixtures.js';

const ZERO = { active_prefill_tokens: 0, active_decode_blocks: 0, active_requests: 0 };
const pinTo = (id: bigint, dp?: number): Nvext =>
  ({ backend_instance_id: id, ...(dp !== undefined ? { dp_rank: dp } : {}) }) as Nvext;

describe('lifecycle hooks', () => {
  it('first token drops the prefill, free drops the blocks; free is idempotent', async () => {
    const { router } = harness();
    router.addWorker({ workerId: 1 });
    await router.route({ requestId: 'a', tokens: toks(1, 100) }); // 6 full blocks, 100 prefill tokens
    expect(router.rankLoad(w(1))).toEqual({
      active_prefill_tokens: 100,
      active_decode_blocks: 6,
      active_requests: 1,
    });
    expect(router.markPrefillCompleted('a')).toBe(true);
    expect(router.rankLoad(w(1))).toEqual({
      active_prefill_tokens: 0,
      active_decode_blocks: 6,
      active_requests: 1,
    });
    expect(router.free('a')).toBe(true);
    expect(router.free('a')).toBe(false);
    expect(router.markPrefillCompleted('a')).toBe(false);
    expect(router.rankLoad(w(1))).toEqual(ZERO);
    expect(router.inflight(1n)).toBe(0);
  });

  it('output blocks grow to ceil((isl + out)/bs) and decay by osl progress (§9.3)', async () => {
    const { router } = harness({ trackOutputBlocks: true });
    router.addWorker({ workerId: 1 });
    // isl 32 = 2 blocks; osl 100.
    await router.route({ requestId: 'a', tokens: toks(1, 32), nvext: { agent_hints: { osl: 100 } } });
    router.markPrefillCompleted('a');
    // 50 tokens out: ceil(82/16) = 6 blocks, each held only by 'a', frac = 1 − 50/100 = 0.5 → round(6 − 3) = 3.
    router.onOutputTokens('a', 50);
    expect(router.rankLoad(w(1)).active_decode_blocks).toBe(3);
    // 100 out: ceil(132/16) = 9 blocks, frac 0 → 0.
    router.onOutputTokens('a', 100);
    expect(router.rankLoad(w(1)).active_decode_blocks).toBe(0);
    router.free('a');
    expect(router.rankLoad(w(1))).toEqual(ZERO);
  });

  it('a request older than the expiry is force-freed by the 30 s timer; the later free is a no-op', async () => {
    const { router, clock } = harness({ activeRequestExpirySecs: 60 });
    router.addWorker({ workerId: 1 });
    await router.route({ requestId: 'a', tokens: toks(1, 64) });
    clock.advance(60_000); // age 60 s is not > 60 s
    expect(router.rankLoad(w(1)).active_requests).toBe(1);
    clock.advance(30_000); // tick at 90 s: age 90 > 60
    expect(router.rankLoad(w(1))).toEqual(ZERO);
    expect(router.liveRequestCount).toBe(0);
    expect(router.inflight(1n)).toBe(0);
    expect(router.free('a')).toBe(false);
  });

  it('publishes ActiveLoad (router projection, kv_used_blocks null) after every change of a rank', async () => {
    const loads: ActiveLoad[] = [];
    const { router } = harness({ publishLoad: (l) => loads.push(l) });
    router.addWorker({ workerId: 1, dpSize: 2 });
    await router.route({ requestId: 'a', tokens: toks(1, 48), nvext: pinTo(1n, 1) });
    router.markPrefillCompleted('a');
    router.free('a');
    expect(loads).toEqual([
      { worker_id: 1n, dp_rank: 1, active_decode_blocks: 3, active_prefill_tokens: 48, kv_used_blocks: null },
      { worker_id: 1n, dp_rank: 1, active_decode_blocks: 3, active_prefill_tokens: 0, kv_used_blocks: null },
      { worker_id: 1n, dp_rank: 1, active_decode_blocks: 0, active_prefill_tokens: 0, kv_used_blocks: null },
    ]);
  });
});

describe('load bookkeeping property', () => {
  it('random lifecycles across ranks: once everything has ended every rank is back to zero', async () => {
    for (let seed = 1; seed <= 6; seed++) {
      const rng = new Rng(seed);
      const clock = new VirtualClock();
      const indexer = new RadixIndexer();
      const side = new ApproxIndexer({ ttlSecs: 5, now: () => clock.now() });
      const peerEvents: ActiveSequenceEvent[] = [];
      const router = new KvRouter({
        blockSize: 16,
        policy: { trackOutputBlocks: true, queueThreshold: 2, activeRequestExpirySecs: 120 },
        deps: { clock, random: () => rng.next(), indexer, sideIndexer: side },
        ports: { routerId: 1n, publishActiveSequenceEvent: (e) => peerEvents.push(e) },
      });
      // A second router replica whose bookings arrive as replica-sync events.
      const peer = new KvRouter({
        blockSize: 16,
        deps: { clock, random: () => rng.next() },
        ports: { routerId: 2n, publishActiveSequenceEvent: (e) => router.applyReplicaEvent(e) },
      });
      const add = (id: number, dpSize: number) => {
        const cfg = { workerId: id, dpSize, maxNumBatchedTokens: 256 };
        router.addWorker(cfg);
        peer.addWorker(cfg);
      };
      add(1, 1);
      add(2, 2);
      add(3, 1);
      const prefixes = [toks(100, 96), toks(200, 160), toks(300, 32)];
      const live = new Set<string>();
      const peerLive = new Set<string>();
      const pending: Promise<unknown>[] = [];
      let n = 0;
      let parkedSeen = 0;
      for (let step = 0; step < 300; step++) {
        const op = rng.int(0, 9);
        if (op <= 3) {
          const id = `r${n++}`;
          const tokens = cat(rng.pick(prefixes), toks(1000 + n, rng.int(0, 80)));
          const nvext: Nvext = {};
          if (rng.bool(0.2)) Object.assign(nvext, pinTo(BigInt(rng.int(1, 4))));
          if (rng.bool(0.3)) nvext.agent_hints = { osl: rng.int(1, 50), priority: rng.int(-2, 3) };
          const overrides = rng.bool(0.2) ? { assume_kv_reuse: false } : undefined;
          live.add(id);
          pending.push(
            router.route({ requestId: id, tokens, nvext, overrides }).catch(() => live.delete(id)),
          );
          if (rng.bool(0.3))
            indexer.applyEvent(storeEvent(w(rng.int(1, 3)), tokens, 16, rng.int(0, 4), step + 1));
        } else if (op === 4 && live.size > 0) {
          router.markPrefillCompleted(rng.pick([...live]));
        } else if (op === 5 && live.size > 0) {
          router.onOutputTokens(rng.pick([...live]), rng.int(0, 60));
        } else if (op === 6 && live.size > 0) {
          const id = rng.pick([...live]);
          router.free(id);
          live.delete(id);
        } else if (op === 7) {
          const id = `p${n++}`;
          peerLive.add(id);
          pending.push(
            peer
              .route({ requestId: id, tokens: cat(rng.pick(prefixes), toks(5000 + n, 20)) })
              .catch(() => peerLive.delete(id)),
          );
          if (rng.bool(0.5)) peer.markPrefillCompleted(id);
        } else if (op === 8) {
          if (peerLive.size > 0 && rng.bool()) {
            const id = rng.pick([...peerLive]);
            peer.free(id);
            peerLive.delete(id);
          } else clock.advance(rng.int(0, 20_000));
        } else if (op === 9 && rng.bool(0.1)) {
          // A worker leaves and comes back (possibly with another dp size).
          const id = rng.int(1, 3);
          router.removeWorker(BigInt(id));
          peer.removeWorker(BigInt(id));
          add(id, rng.int(1, 2));
        }
        if (router.queueDepth > 0) parkedSeen++;
        await Promise.resolve();
      }
      for (const id of live) router.free(id);
      for (const id of peerLive) peer.free(id);
      await Promise.all(pending);
      // The run exercised the queue, and nothing is left in it.
      expect(parkedSeen).toBeGreaterThan(0);
      expect(router.queueDepth).toBe(0);
      for (const r of [router, peer]) {
        for (const id of [1, 2, 3]) for (const dp of [0, 1]) expect(r.rankLoad(w(id, dp))).toEqual(ZERO);
        expect(r.activeRequestCount).toBe(0);
        expect(r.liveRequestCount).toBe(0);
        for (const id of [1n, 2n, 3n]) expect(r.inflight(id)).toBe(0);
      }
      // Every own booking was announced to the peers, with Free or a worker removal after it.
      expect(peerEvents.some((e) => e.data === 'Free')).toBe(true);
    }
  });
});

describe('replica sync (§5.4)', () => {
  it('publishes own AddRequest / MarkPrefillCompleted / Free; a peer applies them and ignores its own', async () => {
    const events: ActiveSequenceEvent[] = [];
    const a = harness({
      routerId: 11n,
      publishActiveSequenceEvent: (e) => events.push(e),
      indexer: new RadixIndexer(),
    });
    const b = harness({ routerId: 22n });
    for (const r of [a.router, b.router]) r.addWorker({ workerId: 1 });
    const t = toks(1, 40); // 2 full blocks
    await a.router.route({ requestId: 'x', tokens: t, nvext: { agent_hints: { osl: 7 } } });
    const seq = pairsToU64s(computeSequenceHashes(computeLocalBlockHashes(t, 16)));
    expect(events[0]).toEqual({
      request_id: 'x',
      worker: w(1),
      router_id: 11n,
      data: {
        AddRequest: {
          token_sequence: seq,
          track_prefill_tokens: true,
          expected_output_tokens: 7,
          prefill_load_hint: { initial_effective_prefill_tokens: 40, expected_prefill_duration: null },
        },
      },
    });
    expect(b.router.applyReplicaEvent(events[0])).toBe(true);
    expect(b.router.rankLoad(w(1))).toEqual({
      active_prefill_tokens: 40,
      active_decode_blocks: 2,
      active_requests: 1,
    });
    // The same prompt on B now sees the synced blocks as its active prefix (depth 2 → additional 0).
    const d = await b.router.route({ requestId: 'y', tokens: t, queryOnly: true, explain: true });
    expect(d.explanation.candidates![0].active_prefix_depth).toBe(2);

    a.router.markPrefillCompleted('x');
    a.router.free('x');
    expect(events.map((e) => e.data)).toEqual([expect.anything(), 'MarkPrefillCompleted', 'Free']);
    expect(b.router.applyReplicaEvent(events[1])).toBe(true);
    expect(b.router.rankLoad(w(1)).active_prefill_tokens).toBe(0);
    expect(b.router.applyReplicaEvent(events[2])).toBe(true);
    expect(b.router.rankLoad(w(1))).toEqual(ZERO);
    // Own events (router_id 11 on A) are ignored.
    expect(a.router.applyReplicaEvent({ ...events[0], request_id: 'z' })).toBe(false);
    expect(a.router.rankLoad(w(1))).toEqual(ZERO);
    // Malformed: typed error, nothing applied.
    expect(() => b.router.applyReplicaEvent({ ...events[0], router_id: 5 as unknown as RouterId })).toThrow(
      expect.objectContaining({ detail: { field: 'router_id' } }) as Error,
    );
  });

  it('a replica-synced Free wakes the queue', async () => {
    const b = harness({ routerId: 22n, queueThreshold: 1 });
    b.router.addWorker({ workerId: 1, maxNumBatchedTokens: 100 });
    b.router.applyReplicaEvent({
      request_id: 'peer',
      worker: w(1),
      router_id: 11n as RouterId,
      data: {
        AddRequest: {
          token_sequence: null,
          track_prefill_tokens: true,
          expected_output_tokens: null,
          prefill_load_hint: { initial_effective_prefill_tokens: 500, expected_prefill_duration: null },
        },
      },
    });
    expect(b.router.rankLoad(w(1))).toEqual({
      active_prefill_tokens: 500,
      active_decode_blocks: 0,
      active_requests: 1,
    });
    const p = b.router.route({ requestId: 'q', tokens: toks(1, 16) });
    await flush();
    expect(b.router.queueDepth).toBe(1);
    b.router.applyReplicaEvent({
      request_id: 'peer',
      worker: w(1),
      router_id: 11n as RouterId,
      data: 'Free',
    });
    expect((await p).booked).toBe(true);
  });
});

describe('approximate and side recording (§7.5, §7.6)', () => {
  it('approximate primary: the router records each booking, the next same-prefix request sees it', async () => {
    const clock = new VirtualClock();
    const indexer = new ApproxIndexer({ ttlSecs: 120, now: () => clock.now() });
    const router = new KvRouter({ blockSize: 16, deps: { clock, random: () => 0, indexer } });
    router.addWorker({ workerId: 1 });
    router.addWorker({ workerId: 2 });
    const P = toks(1, 96); // 6 blocks
    const d1 = await router.route({ requestId: 'a', tokens: P });
    expect(d1.overlapBlocks).toBe(0);
    router.free('a');
    const d2 = await router.route({ requestId: 'b', tokens: P });
    expect([d2.workerId, d2.overlapBlocks, d2.kvHitRate]).toEqual([d1.workerId, 6, 1]);
    router.free('b');
    // Query-only decisions are not recorded: after the TTL the prediction is gone.
    clock.advance(120_001);
    const d3 = await router.route({ requestId: 'c', tokens: P, queryOnly: true });
    expect(d3.overlapBlocks).toBe(0);
  });

  it('side index: per-rank max with the primary; siblings land together before any Stored event', async () => {
    const clock = new VirtualClock();
    const primary = new RadixIndexer();
    const side = new SideIndexer(primary, { ttlSecs: 5, now: () => clock.now() });
    const router = new KvRouter({ blockSize: 16, deps: { clock, random: () => 0.99, indexer: side } });
    for (const id of [1, 2, 3]) router.addWorker({ workerId: id });
    const P = toks(1, 160);
    const first = await router.route({ requestId: 'a', tokens: P });
    router.markPrefillCompleted('a');
    const sibling = await router.route({ requestId: 'b', tokens: P });
    expect([sibling.workerId, sibling.overlapBlocks]).toEqual([first.workerId, 10]);
    // The primary alone knows more on another worker: max(primary, side) per rank.
    const other = first.workerId === 1n ? 2n : 1n;
    primary.applyEvent(storeEvent(w(other), P, 16, 10));
    router.free('a');
    router.free('b');
    clock.advance(5_001); // side prediction expired
    const later = await router.route({ requestId: 'c', tokens: P, explain: true });
    expect(later.explanation.candidates!.find((c) => c.worker_id === first.workerId)!.device_blocks).toBe(0);
    expect([later.workerId, later.overlapBlocks]).toEqual([other, 10]);
  });

  it('predictedTtlSecs builds a local side index', async () => {
    const clock = new VirtualClock();
    const router = new KvRouter({
      blockSize: 16,
      policy: { predictedTtlSecs: 5 },
      deps: { clock, random: () => 0, indexer: new RadixIndexer() },
    });
    router.addWorker({ workerId: 1 });
    await router.route({ requestId: 'a', tokens: toks(1, 64) });
    expect((await router.route({ requestId: 'b', tokens: toks(1, 64) })).overlapBlocks).toBe(4);
  });
});
