/**
 * Fuzzing the request-plane wire (issue 17): message bytes (random, cut, edited), the tcp framing
 * split at random chunk boundaries, truncated and oversized frames, and a live tcp server fed random
 * bytes. A bad message or frame is a `protocol_error` and nothing else; good frames survive any
 * chunking; a peer sending garbage loses its connection while other callers are served.
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { fuzzParams, fuzzTimeout, mutatedBytes, truncatedBytes, wireValue } from '@kvrouter/testkit';
import { TcpRequestClient, TcpRequestServer } from './tcp.js';
import { FrameDecoder, encodeFrame, encodeOwned, parseMsg, type RpcMsg } from './wire.js';

const T = fuzzTimeout(60_000);
const MAX = 1 << 16;

function msgOrProtocolError(f: () => RpcMsg): RpcMsg | undefined {
  try {
    return f();
  } catch (e) {
    if (!(e instanceof KvrError) || e.code !== 'protocol_error') throw e;
    expect(e.message.length).toBeGreaterThan(0);
    return undefined;
  }
}

const id = fc.nat({ max: 0xffffffff });
const payload = wireValue();
const msg: fc.Arbitrary<RpcMsg> = fc.oneof(
  fc.record({ t: fc.constant('req' as const), id, endpoint: fc.string({ maxLength: 12 }), payload }),
  fc.record({ t: fc.constant('data' as const), id, payload }),
  fc.record({ t: fc.constantFrom('cancel' as const, 'end' as const, 'hb' as const), id }),
  fc.record(
    {
      t: fc.constant('err' as const),
      id,
      code: fc.string({ maxLength: 10 }),
      message: fc.string(),
      status: fc.nat(600),
    },
    { requiredKeys: ['t', 'id', 'code', 'message'] },
  ),
);
const encoded = msg.map((m) => encodeOwned(m, MAX, 'msg'));

describe('request-plane messages under fuzzing', () => {
  it('random bytes, cuts and edits of messages: a message or a protocol_error', { timeout: T }, () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 48 }),
          encoded.chain(truncatedBytes),
          encoded.chain(mutatedBytes),
        ),
        (b) => {
          const m = msgOrProtocolError(() => parseMsg(b, MAX));
          // What parses re-encodes to the same message.
          if (m !== undefined) expect(parseMsg(encodeOwned(m, MAX, 'msg'), MAX)).toEqual(m);
        },
      ),
      fuzzParams(1000, 100_000),
    );
  });

  it('a cut message is always a protocol_error', { timeout: T }, () => {
    fc.assert(
      fc.property(encoded.chain(truncatedBytes), (b) => {
        expect(msgOrProtocolError(() => parseMsg(b, MAX))).toBeUndefined();
      }),
      fuzzParams(500, 50_000),
    );
  });

  it('frames split at any chunk boundaries decode to the same messages, in order', { timeout: T }, () => {
    fc.assert(
      fc.property(
        fc.array(msg, { minLength: 1, maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (msgs, cuts) => {
          const stream = Buffer.concat(
            msgs.flatMap((m) => encodeFrame(m, MAX, 'msg')).map((b) => Buffer.from(b)),
          );
          const points = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
          const got: RpcMsg[] = [];
          const dec = new FrameDecoder(MAX, (body) => got.push(parseMsg(body, MAX)));
          let prev = 0;
          for (const p of [...points, stream.length]) {
            if (p > prev) dec.push(stream.subarray(prev, p));
            prev = p;
          }
          expect(got).toEqual(msgs.map((m) => parseMsg(encodeOwned(m, MAX, 'msg'), MAX)));
        },
      ),
      fuzzParams(500, 50_000),
    );
  });

  it(
    'a byte stream of random frames: messages, protocol_errors, or a header above the limit refused',
    { timeout: T },
    () => {
      const frame = fc.oneof(
        fc.uint8Array({ maxLength: 40 }).map((body) => {
          const h = Buffer.alloc(4);
          h.writeUInt32BE(body.length);
          return Buffer.concat([h, body]);
        }),
        fc.uint8Array({ maxLength: 12 }).map((b) => Buffer.from(b)), // garbage, may declare any length
      );
      fc.assert(
        fc.property(fc.array(frame, { maxLength: 6 }), fc.nat({ max: 7 }), (frames, chunk) => {
          const stream = Buffer.concat(frames);
          const dec = new FrameDecoder(MAX, (body) => {
            expect(body.length).toBeLessThanOrEqual(MAX);
            msgOrProtocolError(() => parseMsg(body, MAX));
          });
          try {
            for (let i = 0; i < stream.length; i += chunk + 1) dec.push(stream.subarray(i, i + chunk + 1));
          } catch (e) {
            expect(e).toBeInstanceOf(KvrError);
            expect((e as KvrError).code).toBe('protocol_error');
            expect((e as KvrError).message).toMatch(/exceeds the limit/);
          }
        }),
        fuzzParams(500, 50_000),
      );
    },
  );
});

describe('a tcp request server fed random bytes', () => {
  let s: TcpRequestServer;
  let c: TcpRequestClient;
  beforeAll(async () => {
    s = await TcpRequestServer.listen({ host: '127.0.0.1', port: 0 });
    s.serve('ping', async () => 'pong');
    c = new TcpRequestClient({});
  });
  afterAll(async () => {
    await c.close();
    await s.close();
  });

  it('keeps serving other callers whatever a peer sends', { timeout: T }, async () => {
    const port = Number(s.transport.tcp.split(':')[1]);
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ minLength: 1, maxLength: 64 }),
          encoded.chain(mutatedBytes).map((b) => {
            const h = Buffer.alloc(4);
            h.writeUInt32BE(b.length);
            return Buffer.concat([h, b]);
          }),
        ),
        async (bytes) => {
          const raw = connect(port, '127.0.0.1');
          raw.on('error', () => undefined);
          raw.on('data', () => undefined);
          await new Promise<void>((r) => raw.once('connect', () => r()));
          raw.write(bytes);
          expect(await c.unary(s.transport, 'ping', null)).toBe('pong');
          raw.destroy();
        },
      ),
      fuzzParams(40, 2_000),
    );
  });
});
