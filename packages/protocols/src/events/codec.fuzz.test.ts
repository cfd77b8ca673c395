/**
 * Fuzzing the event-plane and request-plane codecs (issue 17): random bytes, every cut of a valid
 * encoding, byte edits of it, valid messages with one field replaced by a random value, and inputs
 * above the size limit. A decoder either returns a message or throws `DecodeError` naming the field;
 * nothing else escapes (no TypeError/RangeError, no hang). A message it accepts re-encodes to one it
 * decodes to the same value. Case counts: `fuzzParams` (npm test: bounded; `pnpm fuzz`: many more).
 */
import fc from 'fast-check';
import { encode as mpEncode } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { fuzzParams, fuzzTimeout, mutatedBytes, mutatedTree, truncatedBytes } from '@kvrouter/testkit';
import { DecodeError } from '../errors.js';
import {
  ActiveLoadCodec,
  ActiveSequenceEventCodec,
  LocalIndexerQueryRequestCodec,
  LocalIndexerQueryResponseCodec,
  RemoteIndexerQueryCodec,
  RemoteIndexerQueryResponseCodec,
  RemoteIndexerRecordRequestCodec,
  RemoteIndexerRecordResponseCodec,
  RouterEventCodec,
  RouterEventListCodec,
  WireOverlapScoresCodec,
} from './codec.js';
import { decodeZmqEventFrames, EventEnvelopeCodec, encodeZmqEventFrames } from './envelope.js';
import { parseJson, stringifyJson } from './json.js';
import type { Codec } from './wire.js';
import { ABOVE_2_53, U64_MAX, cleared, eid, loc, removed, stored, wid } from './test-helpers.js';

const mp = (v: unknown): Uint8Array => mpEncode(v, { useBigInt64: true, ignoreUndefined: true });

/** Runs `f`; a throw must be a DecodeError naming a field. Returns the value or undefined. */
function decodeOrDecodeError<T>(f: () => T): T | undefined {
  try {
    return f();
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
    expect(e.code).toBe('decode_error');
    const field = e.detail?.field;
    expect(typeof field === 'string' && field.length > 0, `no field in "${e.message}"`).toBe(true);
    expect(e.message.length).toBeGreaterThan(0);
    return undefined;
  }
}

const scores = {
  scores: [[{ worker_id: wid(U64_MAX), dp_rank: 1 }, 8]],
  frequencies: [3, 1],
  tree_sizes: [[{ worker_id: wid(2n), dp_rank: 0 }, 0]],
};

// One or more valid messages per codec, reaching 64-bit edges.
const CASES: Array<[string, Codec<unknown>, unknown[]]> = [
  ['RouterEvent', RouterEventCodec, [stored, removed, cleared]],
  ['RouterEvent list', RouterEventListCodec, [[stored, removed, cleared], []]],
  [
    'ActiveSequenceEvent',
    ActiveSequenceEventCodec,
    [
      {
        request_id: 'r-1',
        worker: { worker_id: wid(U64_MAX), dp_rank: 2 },
        data: {
          AddRequest: {
            token_sequence: [U64_MAX, ABOVE_2_53, 5n],
            track_prefill_tokens: false,
            expected_output_tokens: 128,
            prefill_load_hint: {
              initial_effective_prefill_tokens: 4096,
              expected_prefill_duration: { secs: 1, nanos: 500_000_000 },
            },
          },
        },
        router_id: ABOVE_2_53,
        lora_name: 'my-lora',
      },
      { request_id: 'r-2', worker: { worker_id: wid(3n), dp_rank: 0 }, data: 'Free', router_id: 1n },
    ],
  ],
  [
    'ActiveLoad',
    ActiveLoadCodec,
    [
      {
        worker_id: wid(U64_MAX),
        dp_rank: 1,
        active_decode_blocks: 12,
        active_prefill_tokens: null,
        kv_used_blocks: 0,
      },
    ],
  ],
  [
    'LocalIndexerQueryRequest',
    LocalIndexerQueryRequestCodec,
    [{ worker_id: wid(U64_MAX), start_event_id: null, end_event_id: eid(ABOVE_2_53) }],
  ],
  [
    'LocalIndexerQueryResponse',
    LocalIndexerQueryResponseCodec,
    [
      { Events: { events: [stored, removed], last_event_id: eid(U64_MAX) } },
      { TooNew: { requested_start: eid(10n), requested_end: null, newest_available: eid(ABOVE_2_53) } },
      { InvalidRange: { start_id: eid(5n), end_id: eid(4n) } },
      { Error: 'wrong worker_id' },
    ],
  ],
  ['WireOverlapScores', WireOverlapScoresCodec, [scores]],
  [
    'RemoteIndexerQuery',
    RemoteIndexerQueryCodec,
    [{ model_name: 'm', block_hashes: [loc(U64_MAX), loc(1n)] }],
  ],
  [
    'RemoteIndexerQueryResponse',
    RemoteIndexerQueryResponseCodec,
    [{ Scores: scores }, { Error: 'no index' }],
  ],
  [
    'RemoteIndexerRecordRequest',
    RemoteIndexerRecordRequestCodec,
    [
      {
        model_name: 'm',
        worker: { worker_id: wid(4n), dp_rank: 0 },
        local_hashes: [loc(1n), loc(2n)],
        sequence_hashes: [1n, U64_MAX],
      },
    ],
  ],
  ['RemoteIndexerRecordResponse', RemoteIndexerRecordResponseCodec, ['Recorded', { Error: 'x' }]],
];

const T = fuzzTimeout(60_000);

describe.each(CASES)('%s codec under fuzzing', (_name, codec, samples) => {
  const encoded = samples.map((s) => codec.encodeMsgpack(s));
  const jsonText = samples.map((s) => codec.encodeJson(s));

  /** Accepted messages are stable: encode(decoded) decodes to the same value, in both formats. */
  const stable = (m: unknown): void => {
    expect(codec.decodeMsgpack(codec.encodeMsgpack(m))).toEqual(m);
    expect(codec.decodeJson(codec.encodeJson(m))).toEqual(m);
  };

  it('samples round-trip', () => {
    for (const s of samples) stable(s);
  });

  it('random bytes: a message or a DecodeError', { timeout: T }, () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (b) => {
        const m = decodeOrDecodeError(() => codec.decodeMsgpack(b));
        if (m !== undefined) stable(m);
      }),
      fuzzParams(500, 50_000),
    );
  });

  it('every cut of a valid encoding is a DecodeError', { timeout: T }, () => {
    fc.assert(
      fc.property(fc.constantFrom(...encoded).chain(truncatedBytes), (b) => {
        expect(() => codec.decodeMsgpack(b)).toThrow(DecodeError);
        decodeOrDecodeError(() => codec.decodeMsgpack(b));
      }),
      fuzzParams(300, 30_000),
    );
  });

  it('byte edits of a valid encoding: a message or a DecodeError', { timeout: T }, () => {
    fc.assert(
      fc.property(fc.constantFrom(...encoded).chain(mutatedBytes), (b) => {
        const m = decodeOrDecodeError(() => codec.decodeMsgpack(b));
        if (m !== undefined) stable(m);
      }),
      fuzzParams(500, 50_000),
    );
  });

  it(
    'one field replaced by a random value (msgpack and JSON): a message or a DecodeError',
    { timeout: T },
    () => {
      fc.assert(
        fc.property(fc.constantFrom(...samples.map((s) => codec.toValue(s))).chain(mutatedTree), (tree) => {
          const a = decodeOrDecodeError(() => codec.decodeMsgpack(mp(tree)));
          if (a !== undefined) stable(a);
          let text: string | null = null;
          try {
            text = stringifyJson(tree);
          } catch {
            // bytes and non-finite numbers have no JSON form
          }
          if (text !== null) {
            const b = decodeOrDecodeError(() => codec.decodeJson(text));
            if (b !== undefined) stable(b);
          }
          const c = decodeOrDecodeError(() => codec.fromValue(tree));
          if (c !== undefined) stable(c);
        }),
        fuzzParams(500, 50_000),
      );
    },
  );

  it('JSON text edits: a message or a DecodeError', { timeout: T }, () => {
    const enc = new TextEncoder();
    fc.assert(
      fc.property(
        fc.constantFrom(...jsonText).chain((t) => mutatedBytes(enc.encode(t))),
        (b) => {
          const m = decodeOrDecodeError(() => codec.decodeJson(b));
          if (m !== undefined) stable(m);
        },
      ),
      fuzzParams(300, 30_000),
    );
  });

  it('an input above the size limit is a DecodeError before decoding', () => {
    for (const b of encoded) {
      const e = (() => {
        try {
          codec.decodeMsgpack(b, { maxBytes: b.length - 1 });
        } catch (x) {
          return x;
        }
        return null;
      })();
      expect(e).toBeInstanceOf(DecodeError);
      expect((e as Error).message).toMatch(/input too large/);
    }
  });
});

describe('event-plane envelope and ZMQ frames under fuzzing', () => {
  const env = {
    publisher_id: U64_MAX,
    sequence: ABOVE_2_53,
    published_at: 1_700_000_000_000,
    topic: 'kv.events.ns.worker',
    payload: RouterEventCodec.encodeMsgpack(stored),
  };
  const frames = encodeZmqEventFrames(env);

  it('envelope bytes: cuts are DecodeErrors, edits decode or fail with DecodeError', { timeout: T }, () => {
    const b = EventEnvelopeCodec.encodeMsgpack(env);
    fc.assert(
      fc.property(fc.oneof(truncatedBytes(b), mutatedBytes(b), fc.uint8Array({ maxLength: 48 })), (x) => {
        const e = decodeOrDecodeError(() => EventEnvelopeCodec.decodeMsgpack(x));
        if (e !== undefined)
          expect(EventEnvelopeCodec.decodeMsgpack(EventEnvelopeCodec.encodeMsgpack(e))).toEqual(e);
      }),
      fuzzParams(500, 50_000),
    );
  });

  it(
    'ZMQ multipart: any frame edited, cut, dropped or added is a DecodeError or a consistent envelope',
    { timeout: T },
    () => {
      fc.assert(
        fc.property(
          fc.nat({ max: 3 }),
          fc.oneof(fc.constant('edit' as const), fc.constant('cut' as const), fc.constant('count' as const)),
          fc.infiniteStream(fc.uint8Array({ maxLength: 8 })),
          fc.nat(),
          (i, how, extra, seed) => {
            let fs: Uint8Array[] = frames.map((f) => f.slice());
            if (how === 'count') fs = seed % 2 === 0 ? fs.slice(0, i) : [...fs, ...extra.take(i + 1)];
            else {
              const arb = how === 'edit' ? mutatedBytes(fs[i]!) : truncatedBytes(fs[i]!);
              fs[i] = fc.sample(arb, { seed, numRuns: 1 })[0]!;
            }
            const r = decodeOrDecodeError(() => decodeZmqEventFrames(fs));
            if (r === undefined) return;
            // Only the envelope frame's content may change unnoticed (no checksum): the publisher and
            // sequence frames must agree with it, so an edit of either is always caught.
            const changed = how !== 'count' && Buffer.compare(fs[i]!, frames[i]!) !== 0;
            expect(changed && (i === 1 || i === 2), 'an edited id frame was accepted').toBe(false);
            expect(r.envelope.publisher_id).toBe(env.publisher_id);
            expect(r.envelope.sequence).toBe(env.sequence);
            if (i !== 3 || !changed) expect(r.envelope).toEqual(env);
          },
        ),
        fuzzParams(500, 50_000),
      );
    },
  );
});

describe('lossless JSON reader against JSON.parse', () => {
  const numeric = fc.oneof(
    fc.bigInt({ min: -(1n << 70n), max: 1n << 70n }).map(String),
    fc.stringMatching(/^-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,5})?([eE][-+]?[0-9]{1,3})?$/),
    fc.stringMatching(/^[-+0-9.eE]{1,24}$/),
  );
  const jsonish = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.json(),
    numeric,
    fc.array(fc.oneof(numeric, fc.json()), { maxLength: 4 }).map((xs) => `[${xs.join(',')}]`),
    fc.tuple(fc.string({ maxLength: 4 }), numeric).map(([k, n]) => `{${JSON.stringify(k)}:${n}}`),
  );

  it(
    'accepts exactly what JSON.parse accepts, with the same value (bigint where a number would round)',
    { timeout: T },
    () => {
      fc.assert(
        fc.property(jsonish, (text) => {
          let want: { ok: true; v: unknown } | { ok: false };
          try {
            want = { ok: true, v: JSON.parse(text) as unknown };
          } catch {
            want = { ok: false };
          }
          const got = decodeOrDecodeError(() => ({ v: parseJson(text) }));
          if (!want.ok) {
            expect(got, `parseJson accepted invalid JSON ${JSON.stringify(text)}`).toBeUndefined();
            return;
          }
          expect(got, `parseJson rejected valid JSON ${JSON.stringify(text)}`).toBeDefined();
          // Same value once bigints are compared as the numbers JSON.parse made of them.
          const norm = (v: unknown): unknown =>
            JSON.parse(JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? Number(x) : x)));
          expect(norm(got!.v)).toEqual(norm(want.v));
        }),
        fuzzParams(1000, 100_000),
      );
    },
  );

  it('integers of any width survive stringify -> parse exactly', { timeout: T }, () => {
    fc.assert(
      fc.property(fc.array(fc.bigInt({ min: -(1n << 80n), max: 1n << 80n }), { maxLength: 6 }), (xs) => {
        const back = parseJson(stringifyJson(xs)) as unknown[];
        expect(back.map((x) => BigInt(x as bigint | number))).toEqual(xs);
      }),
      fuzzParams(300, 30_000),
    );
  });
});
