/**
 * vLLM ingestion over real ZMQ sockets: a fake engine publishes 3-frame KVEventBatch messages (and
 * serves replays); the ingest converts them and republishes through the publisher with fresh ids.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Publisher, Router } from 'zeromq';
import { beU64, encodeMsgpack, type RouterEvent } from '@kvrouter/protocols';
import { KvEventPublisher } from '../publisher/publisher.js';
import { VllmZmqIngest } from './ingest.js';
import { waitFor } from '../test-helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// docs/protocol.md §2.4 test vectors (bs = 4): tokens 0..7 -> local hashes of [0..3] and [4..7]; [1,2,3,4].
const H_0_3 = 9143094415614847814n;
const H_4_7 = 12124091508212882195n;
const H_1_4 = 14643705804678351452n;

class FakeEngine {
  readonly pub = new Publisher({ linger: 0 });
  readonly replay = new Router({ linger: 0 });
  readonly sent = new Map<bigint, Uint8Array>();
  pubEndpoint = '';
  replayEndpoint = '';

  async start(): Promise<void> {
    await this.pub.bind('tcp://127.0.0.1:0');
    await this.replay.bind('tcp://127.0.0.1:0');
    this.pubEndpoint = this.pub.lastEndpoint!;
    this.replayEndpoint = this.replay.lastEndpoint!;
    void this.serveReplay();
  }

  /** Sends a batch live; `lose` keeps it only in the replay buffer. */
  async batch(seq: bigint, events: unknown[], lose = false): Promise<void> {
    const payload = encodeMsgpack([1.0, events, null]);
    this.sent.set(seq, payload);
    if (!lose) await this.pub.send([Buffer.alloc(0), Buffer.from(beU64(seq)), Buffer.from(payload)]);
  }

  private async serveReplay(): Promise<void> {
    try {
      for await (const [id, , start] of this.replay) {
        const from = new DataView(start.buffer, start.byteOffset, 8).getBigUint64(0);
        for (const [seq, p] of [...this.sent].sort((a, b) => (a[0] < b[0] ? -1 : 1)))
          if (seq >= from)
            await this.replay.send([id, Buffer.alloc(0), Buffer.from(beU64(seq)), Buffer.from(p)]);
        await this.replay.send([id, Buffer.alloc(0), Buffer.alloc(8, 0xff), Buffer.alloc(0)]);
      }
    } catch {
      // socket closed
    }
  }

  close(): void {
    this.pub.close();
    this.replay.close();
  }
}

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function setup(withReplay: boolean) {
  const eng = new FakeEngine();
  await eng.start();
  const out: RouterEvent[] = [];
  const dropped: number[] = [];
  const pub = new KvEventPublisher({
    workerId: 3n,
    sink: { publishEvent: (e) => out.push(e) },
    onEngineDropped: (n) => dropped.push(n),
  });
  const warnings: string[] = [];
  const ingest = new VllmZmqIngest({
    endpoint: eng.pubEndpoint,
    publisher: pub,
    kvBlockSize: 4,
    replayEndpoint: withReplay ? eng.replayEndpoint : null,
    onWarning: (m) => warnings.push(m),
  });
  cleanups.push(
    () => ingest.close(),
    () => eng.close(),
  );
  await sleep(200); // PUB/SUB slow joiner
  return { eng, out, dropped, pub, ingest, warnings };
}

const data = (e: RouterEvent) => e.event.data;

describe('VllmZmqIngest', () => {
  it('converts batches, numbers them, and fills an engine gap from the replay socket', async () => {
    const { eng, out, dropped, ingest } = await setup(true);
    await eng.batch(0n, [['BlockStored', [11, 12], null, [0, 1, 2, 3, 4, 5, 6, 7], 4, null, 'GPU', null]]);
    await eng.batch(1n, [['BlockRemoved', [12], 'GPU']]);
    await eng.batch(2n, [['BlockStored', [13], 11, [1, 2, 3, 4], 4, null, null, null]], true); // lost live
    await eng.batch(3n, [{ type: 'BlockRemoved', block_hashes: [13] }]);
    expect(await waitFor(() => out.length === 4)).toBe(true);
    expect(out.map((e) => e.event.event_id)).toEqual([1n, 2n, 3n, 4n]);
    expect(data(out[0])).toEqual({
      stored: {
        parent_hash: null,
        start_position: null,
        blocks: [
          { block_hash: 11n, tokens_hash: H_0_3, mm_extra_info: null },
          { block_hash: 12n, tokens_hash: H_4_7, mm_extra_info: null },
        ],
      },
    });
    expect(data(out[1])).toEqual({ removed: { block_hashes: [12n] } });
    expect(data(out[2])).toEqual({
      stored: {
        parent_hash: 11n,
        start_position: null,
        blocks: [{ block_hash: 13n, tokens_hash: H_1_4, mm_extra_info: null }],
      },
    });
    expect(data(out[3])).toEqual({ removed: { block_hashes: [13n] } });
    expect(ingest.stats.replayed).toBe(1);
    expect(dropped).toEqual([]);
  });

  it('counts a gap it cannot fill, and drops malformed messages without stopping', async () => {
    const { eng, out, dropped, ingest, warnings } = await setup(false);
    await eng.batch(0n, [['AllBlocksCleared']]);
    await eng.batch(1n, [], true);
    await eng.batch(2n, [], true);
    await eng.pub.send([Buffer.alloc(0), Buffer.from(beU64(3n))]); // 2 frames
    await eng.pub.send([Buffer.alloc(0), Buffer.from(beU64(4n)), Buffer.from([0xc1])]); // not msgpack
    await eng.batch(5n, [['BlockStored', [21], null, [1, 2, 3, 4], 4, null, null, null]]);
    expect(await waitFor(() => out.length === 2)).toBe(true);
    expect(out.map(data)).toEqual([
      'cleared',
      {
        stored: {
          parent_hash: null,
          start_position: null,
          blocks: [{ block_hash: 21n, tokens_hash: H_1_4, mm_extra_info: null }],
        },
      },
    ]);
    // seq 0 then 5: 1..4 never arrived as decodable batches -> 4 dropped
    expect(dropped).toEqual([4]);
    expect(ingest.stats.decodeFailures).toBe(2);
    expect(warnings.filter((w) => w.startsWith('vLLM message dropped')).length).toBe(2);
  });

  it('applies a removal whose trailing fields it does not recognise (issue 17), skips a sliding-window one', async () => {
    const { eng, out, ingest } = await setup(false);
    // Group 1 is a sliding-window group: its store is not indexed.
    await eng.batch(0n, [
      ['BlockStored', [40], null, [1, 2, 3, 4], 4, null, null, null, null, 1, 'sliding_window', 64],
    ]);
    await eng.batch(1n, [
      ['BlockRemoved', [41], 'GPU', 'garbage'],
      ['BlockRemoved', [42], 'GPU', 1], // learned: sliding window
      ['BlockRemoved', [43], 'GPU', -7],
      ['BlockRemoved', [44], 'GPU', 1, 'unheard_of_kind'],
    ]);
    expect(await waitFor(() => out.length === 3)).toBe(true);
    expect(out.map(data)).toEqual([
      { removed: { block_hashes: [41n] } },
      { removed: { block_hashes: [43n] } },
      { removed: { block_hashes: [44n] } },
    ]);
    expect(ingest.stats.decodeFailures).toBe(0);
  });
});
