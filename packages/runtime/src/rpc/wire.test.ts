/**
 * A request's large typed arrays (a prompt's token ids) leave from the caller's memory: the frame's
 * parts are the message cut around them, and together they are exactly the bytes of the frame
 * encoded in one piece (u32 BE length ‖ msgpack of the message, as any msgpack encoder writes it).
 */
import { Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { FrameDecoder, encodeFrame, parseMsg, type RpcMsg } from './wire.js';

/** The frame written the plain way, by an encoder of our own (same options as wire.ts). */
function reference(m: RpcMsg): Buffer {
  const body = new Encoder({ useBigInt64: true, ignoreUndefined: true }).encode(m);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length, 0);
  return Buffer.concat([head, body]);
}

const ids = (n: number): Uint32Array => Uint32Array.from({ length: n }, (_, i) => (i * 7919) % 151_936);

describe('encodeFrame: large typed arrays of a request spliced in', () => {
  it('8k token ids: same bytes as the plain frame, the ids part is the caller array itself', () => {
    const tokens = ids(8192);
    const m: RpcMsg = {
      t: 'req',
      id: 42,
      endpoint: 'generate',
      payload: {
        request_id: 'r-1',
        model: 'qwen3',
        token_ids: tokens,
        dp_rank: 0,
        stop_conditions: { max_tokens: 8, stop_token_ids: [151_643, 151_645], min_tokens: undefined },
        sampling_options: {},
      },
    };
    const parts = encodeFrame(m, 1 << 25, 'payload');
    // head ‖ ids ‖ tail: the ids are not copied.
    expect(parts).toHaveLength(3);
    expect(parts[1]!.buffer).toBe(tokens.buffer);
    expect(parts[1]!.byteLength).toBe(8192 * 4);
    const whole = Buffer.concat(parts);
    expect(whole.equals(reference(m))).toBe(true);
    // 32 768 bytes of ids: bin 16 would need < 65 536 → c5 80 00 right before them.
    expect([...parts[0]!.subarray(parts[0]!.length - 3)]).toEqual([0xc5, 0x80, 0x00]);
    // Length prefix = everything after it.
    expect(whole.readUInt32BE(0)).toBe(whole.length - 4);
    const got = parseMsg(whole.subarray(4), 1 << 25) as { payload: { token_ids: Uint8Array } };
    const back = new Uint32Array(got.payload.token_ids.slice().buffer);
    expect(back).toEqual(tokens);
  });

  it('bin 16 / bin 32 boundaries, two arrays, a view at an odd offset, arrays last in the map', () => {
    const big = new Uint8Array(65_536 + 3).map((_, i) => i & 0xff);
    const odd = big.subarray(3); // 65 536 bytes (bin 32), starting at offset 3
    for (const payload of [
      { a: ids(1024) }, // exactly 4096 bytes: the smallest spliced array, bin 16
      { a: ids(16_383), b: 'x', c: odd }, // 65 532 bytes (bin 16) and 65 536 (bin 32)
      { s: 'é€😀', ids: ids(5000) }, // the array ends the map: no tail part
      { n: 1, small: ids(100), ids: ids(2000), t: true }, // a small array stays inline
    ]) {
      const m: RpcMsg = { t: 'req', id: 1, endpoint: 'e', payload };
      const parts = encodeFrame(m, 1 << 25, 'payload');
      expect(Buffer.concat(parts).equals(reference(m))).toBe(true);
      const spliced = Object.values(payload).filter((v) => ArrayBuffer.isView(v) && v.byteLength >= 4096);
      for (const v of spliced) expect(parts.some((p) => p.buffer === (v as Uint8Array).buffer)).toBe(true);
      // The small array was copied into the frame, not spliced.
      if ('small' in payload) expect(parts.some((p) => p.buffer === payload.small!.buffer)).toBe(false);
    }
  });

  it('frames decode after any chunking, among other frames', () => {
    const m: RpcMsg = { t: 'req', id: 9, endpoint: 'generate', payload: { token_ids: ids(3000), x: [1, 2] } };
    const stream = Buffer.concat([
      ...encodeFrame({ t: 'end', id: 1 }, 1 << 20, 'x'),
      ...encodeFrame(m, 1 << 20, 'x'),
      ...encodeFrame({ t: 'cancel', id: 2 }, 1 << 20, 'x'),
    ]);
    for (const step of [1, 7, 4096, stream.length]) {
      const got: RpcMsg[] = [];
      const d = new FrameDecoder(1 << 20, (b) => got.push(parseMsg(b, 1 << 20)));
      for (let i = 0; i < stream.length; i += step) d.push(stream.subarray(i, i + step));
      expect(got.map((g) => g.t)).toEqual(['end', 'req', 'cancel']);
      const p = (got[1] as { payload: { token_ids: Uint8Array; x: number[] } }).payload;
      expect(new Uint32Array(p.token_ids.slice().buffer)).toEqual(ids(3000));
      expect(p.x).toEqual([1, 2]);
    }
  });

  it('the limit counts the spliced bytes: 40 000 bytes of ids + the map > 40 000 → payload_too_large', () => {
    const m: RpcMsg = { t: 'req', id: 1, endpoint: 'e', payload: { token_ids: ids(10_000) } };
    let err: unknown = null;
    try {
      encodeFrame(m, 40_000, 'payload');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KvrError);
    expect((err as KvrError).code).toBe('payload_too_large');
    expect((err as KvrError).message).toMatch(/^payload: encoded message is \d+ bytes, limit 40000$/);
    // Just under: accepted.
    expect(Buffer.concat(encodeFrame(m, reference(m).length - 4, 'payload')).equals(reference(m))).toBe(true);
  });
});
