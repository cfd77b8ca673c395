/**
 * Fuzzing vLLM ingestion over real ZMQ sockets (issue 17): a fake engine publishes random multipart
 * messages (wrong frame counts, cut or edited batches, random bytes, valid batches) followed by a
 * valid sentinel batch. The ingest never stops or reports an error: every message is either decoded
 * (counted in `messages`) or dropped as a counted decode failure, and the sentinel always arrives.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Publisher } from 'zeromq';
import { beU64, encodeMsgpack, VllmKvEventDecoder, type RouterEvent } from '@kvrouter/protocols';
import { fuzzParams, fuzzTimeout, mutatedBytes, truncatedBytes } from '@kvrouter/testkit';
import { KvEventPublisher } from '../publisher/publisher.js';
import { VllmZmqIngest } from './ingest.js';
import { waitFor } from '../test-helpers.js';

const BS = 4;
const T = fuzzTimeout(120_000);

const validBatch = fc
  .array(
    fc.oneof(
      fc
        .tuple(
          fc.bigInt({ min: 1n, max: 50n }),
          fc.oneof(fc.constant(null), fc.bigInt({ min: 1n, max: 50n })),
        )
        .map(([h, p]) => ['BlockStored', [h], p, [1, 2, 3, 4], BS, null, 'GPU', null]),
      fc.bigInt({ min: 1n, max: 50n }).map((h) => ['BlockRemoved', [h], 'GPU']),
      fc.constant(['AllBlocksCleared']),
    ),
    { maxLength: 3 },
  )
  .map((events) => encodeMsgpack([1.0, events, null]));
const payload = fc.oneof(
  validBatch,
  validBatch.chain(truncatedBytes),
  validBatch.chain(mutatedBytes),
  fc.uint8Array({ maxLength: 24 }),
);
const seqFrame = fc.oneof(fc.bigInt({ min: 0n, max: 1000n }).map(beU64), fc.uint8Array({ maxLength: 10 }));
const message = fc.oneof(
  { weight: 5, arbitrary: fc.tuple(fc.constant(new Uint8Array(0)), seqFrame, payload).map((f) => [...f]) },
  { weight: 1, arbitrary: fc.array(fc.uint8Array({ maxLength: 12 }), { minLength: 1, maxLength: 5 }) },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.constant(Uint8Array.of(0xff, 0xfe)), seqFrame, validBatch).map((f) => [...f]),
  },
);

describe('vLLM ZMQ ingestion fed random messages', () => {
  const pub = new Publisher({ linger: 0 });
  const out: RouterEvent[] = [];
  const errors: unknown[] = [];
  let ingest: VllmZmqIngest;
  let sentinel = 1_000_000n;

  beforeAll(async () => {
    await pub.bind('tcp://127.0.0.1:0');
    const publisher = new KvEventPublisher({ workerId: 3n, sink: { publishEvent: (e) => out.push(e) } });
    ingest = new VllmZmqIngest({
      endpoint: pub.lastEndpoint!,
      publisher,
      kvBlockSize: BS,
      onError: (e) => errors.push(e),
    });
    // PUB/SUB slow joiner: publish a first sentinel until it arrives.
    const first = sentinel;
    expect(
      await waitFor(
        async () => {
          await sendSentinel(first);
          return holds(first);
        },
        10_000,
        50,
      ),
    ).toBe(true);
    // Sentinels sent before the first one arrived are still on their way: let them land.
    let seen = -1;
    while (ingest.stats.messages !== seen) {
      seen = ingest.stats.messages;
      await new Promise((r) => setTimeout(r, 200));
    }
  });
  afterAll(async () => {
    await ingest.close();
    pub.close();
  });

  const holds = (h: bigint): boolean =>
    out.some(
      (e) =>
        typeof e.event.data === 'object' &&
        'stored' in e.event.data &&
        e.event.data.stored.blocks.some((b) => b.block_hash === h),
    );
  const sendSentinel = (h: bigint): Promise<void> =>
    pub.send([
      Buffer.alloc(0),
      Buffer.from(beU64(0n)),
      Buffer.from(
        encodeMsgpack([1.0, [['BlockStored', [h], null, [9, 9, 9, 9], BS, null, 'GPU', null]], null]),
      ),
    ]);

  it('decodes or counts every message, never errors, never stalls', { timeout: T }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 6 }), async (msgs) => {
        // What an independent decoder accepts is what the ingest must count as messages.
        const ref = new VllmKvEventDecoder({ kvBlockSize: BS });
        let ok = 0;
        for (const m of msgs) {
          try {
            ref.decodeMultipart(m);
            ok++;
          } catch {
            // counted as a decode failure below
          }
        }
        const before = ingest.stats;
        for (const m of msgs) await pub.send(m.map((f) => Buffer.from(f)));
        const h = ++sentinel;
        await sendSentinel(h);
        expect(await waitFor(() => holds(h), 10_000)).toBe(true);
        const after = ingest.stats;
        expect(after.messages - before.messages).toBe(ok + 1);
        expect(after.decodeFailures - before.decodeFailures).toBe(msgs.length - ok);
        expect(errors).toEqual([]);
      }),
      fuzzParams(30, 2_000),
    );
  });
});
