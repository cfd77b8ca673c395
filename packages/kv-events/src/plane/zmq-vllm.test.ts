/**
 * `VllmZmqPublisher` over real sockets: what it publishes is read back by `VllmZmqIngest` (the
 * §4 consumer) and by raw sockets (frames, batch layout, replay protocol).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Dealer, Subscriber } from 'zeromq';
import {
  decodeMsgpack,
  encodeVllmReplayRequest,
  parseVllmReplayReply,
  type RouterEvent,
} from '@kvrouter/protocols';
import { KvEventPublisher } from '../publisher/publisher.js';
import { VllmZmqIngest } from '../vllm/ingest.js';
import { waitFor } from '../test-helpers.js';
import { VllmZmqPublisher, readVllmReplay } from './zmq-vllm.js';

// docs/protocol.md §2.4 vectors, bs = 4: local hashes of tokens [0..3] and [4..7].
const H_0_3 = 9143094415614847814n;
const H_4_7 = 12124091508212882195n;
const BIG = (1n << 64n) - 5n; // above 2^53: must travel as an exact uint64

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function publisher(replay = false): Promise<VllmZmqPublisher> {
  const p = await VllmZmqPublisher.bind({
    endpoint: 'tcp://127.0.0.1:0',
    replayEndpoint: replay ? 'tcp://127.0.0.1:0' : null,
    now: () => 1.5,
  });
  cleanups.push(() => p.close());
  return p;
}

describe('VllmZmqPublisher', () => {
  it('is read by VllmZmqIngest: blocks hashed from their token_ids, removals, clears, in order', async () => {
    const p = await publisher();
    const out: RouterEvent[] = [];
    const pub = new KvEventPublisher({ workerId: 9n, sink: { publishEvent: (e) => out.push(e) } });
    const ingest = new VllmZmqIngest({ endpoint: p.endpoint, publisher: pub, kvBlockSize: 4 });
    cleanups.push(() => ingest.close());
    // Slow joiner: probe with clears until the subscription is live, then start from a clean slate.
    while (out.length === 0) {
      p.publish([{ type: 'AllBlocksCleared' }]);
      await waitFor(() => out.length > 0, 100);
    }
    await waitFor(() => false, 50);
    out.length = 0;
    p.publish([
      {
        type: 'BlockStored',
        block_hashes: [11n, BIG],
        parent_block_hash: null,
        token_ids: [0, 1, 2, 3, 4, 5, 6, 7],
        block_size: 4,
      },
    ]);
    p.publish([{ type: 'BlockRemoved', block_hashes: [BIG] }, { type: 'AllBlocksCleared' }]);
    expect(await waitFor(() => out.length === 3)).toBe(true);
    expect(out.map((e) => e.event.data)).toEqual([
      {
        stored: {
          parent_hash: null,
          start_position: null,
          blocks: [
            { block_hash: 11n, tokens_hash: H_0_3, mm_extra_info: null },
            { block_hash: BIG, tokens_hash: H_4_7, mm_extra_info: null },
          ],
        },
      },
      { removed: { block_hashes: [BIG] } },
      'cleared',
    ]);
    expect(ingest.stats.decodeFailures).toBe(0);
  });

  it('frames are [topic, BE seq from 0, array_like batch] with the configured rank', async () => {
    const p = await VllmZmqPublisher.bind({
      endpoint: 'tcp://127.0.0.1:0',
      dataParallelRank: 2,
      topic: 'kv',
      now: () => 1.5,
    });
    cleanups.push(() => p.close());
    const sub = new Subscriber({ linger: 0 });
    cleanups.push(() => sub.close());
    sub.connect(p.endpoint);
    sub.subscribe('');
    let frames: Buffer[] = [];
    const got = (async () => {
      frames = await sub.receive();
    })();
    // Publish until the subscription is live (slow joiner); the first received one is checked.
    while (frames.length === 0) {
      p.publish([{ type: 'BlockRemoved', block_hashes: [7n], medium: 'CPU' }]);
      await Promise.race([got, new Promise((r) => setTimeout(r, 50))]);
    }
    expect(frames).toHaveLength(3);
    expect(frames[0].toString()).toBe('kv');
    const seq = frames[1].readBigUInt64BE(0);
    expect(seq).toBeLessThan(p.sequence);
    expect(decodeMsgpack(frames[2], 'batch')).toEqual([1.5, [['BlockRemoved', [7], 'CPU']], 2]);
  });

  it('answers replay requests from a sequence number, then the -1 end marker', async () => {
    const p = await publisher(true);
    for (let i = 0; i < 4; i++) p.publish([{ type: 'BlockRemoved', block_hashes: [BigInt(100 + i)] }]);
    const dealer = new Dealer({ linger: 0, receiveTimeout: 2000 });
    cleanups.push(() => dealer.close());
    dealer.connect(p.replayEndpoint!);
    await dealer.send([Buffer.alloc(0), Buffer.from(encodeVllmReplayRequest(2n))]);
    const got: Array<{ seq: bigint; hash: unknown }> = [];
    for (;;) {
      const r = parseVllmReplayReply(await dealer.receive());
      if (r === null) break;
      const batch = decodeMsgpack(r.payload, 'batch') as [number, unknown[][], null];
      got.push({ seq: r.seq, hash: (batch[1][0][1] as number[])[0] });
    }
    expect(got).toEqual([
      { seq: 2n, hash: 102 },
      { seq: 3n, hash: 103 },
    ]);
  });

  it('replays only what its buffer still holds (bufferSteps)', async () => {
    const p = await VllmZmqPublisher.bind({
      endpoint: 'tcp://127.0.0.1:0',
      replayEndpoint: 'tcp://127.0.0.1:0',
      bufferSteps: 3,
    });
    cleanups.push(() => p.close());
    for (let i = 0; i < 5; i++) p.publish([{ type: 'BlockRemoved', block_hashes: [BigInt(200 + i)] }]);
    // Seqs 0..4 published, 3 kept: 2, 3, 4 — whatever the requested start below that.
    const got = await readVllmReplay(p.replayEndpoint!, 0n);
    expect(got.map((r) => r.seq)).toEqual([2n, 3n, 4n]);
    const first = decodeMsgpack(got[0].payload, 'batch') as [number, unknown[][], null];
    expect(first[1][0]).toEqual(['BlockRemoved', [202], 'GPU']);
    expect((await readVllmReplay(p.replayEndpoint!, 4n)).map((r) => r.seq)).toEqual([4n]);
    expect(await readVllmReplay(p.replayEndpoint!, 9n)).toEqual([]);
  });

  it('rejects a bad batch whole: no sequence number taken', async () => {
    const p = await publisher();
    expect(() =>
      p.publish([
        { type: 'AllBlocksCleared' },
        {
          type: 'BlockStored',
          block_hashes: [1n, 2n],
          parent_block_hash: null,
          token_ids: [1, 2, 3, 4],
          block_size: 4,
        },
      ]),
    ).toThrow(/events\[1\]\.token_ids must hold block_hashes.length × block_size = 8 tokens, got 4/);
    expect(() => p.publish([{ type: 'BlockRemoved', block_hashes: [-1n] }])).toThrow(
      /events\[0\]\.block_hashes\[0\]/,
    );
    expect(p.sequence).toBe(0n);
    await expect(VllmZmqPublisher.bind({ endpoint: 'localhost:5557' })).rejects.toThrow(
      /endpoint must be a ZMQ endpoint/,
    );
  });
});
