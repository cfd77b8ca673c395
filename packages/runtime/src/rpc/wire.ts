/**
 * Request-plane messages (§5.7) and the tcp framing. Every transport carries the same msgpack maps:
 * caller `{t:"req", id, endpoint, payload}` / `{t:"cancel", id}`; server `{t:"data", id, payload}`…
 * then `{t:"end", id}` or `{t:"err", id, code, message, status?}`. nats adds `{t:"hb", id}`, the
 * server's keep-alive on a quiet stream (a NATS peer has no connection whose loss could be seen).
 */
import { randomBytes } from 'node:crypto';
import { Encoder } from '@msgpack/msgpack';
import { decodeMsgpack } from '@kvrouter/protocols';
import { RpcCode, rpcError } from '../errors.js';

export type RpcMsg =
  | { t: 'req'; id: number; endpoint: string; payload: unknown }
  | { t: 'cancel'; id: number }
  | { t: 'data'; id: number; payload: unknown }
  | { t: 'end'; id: number }
  | { t: 'err'; id: number; code: string; message: string; status?: number }
  | { t: 'hb'; id: number };

export const TCP_MAX_FRAME = 32 * 1024 * 1024;
export const NATS_MAX_MESSAGE = 16 * 1024 * 1024;

const newEncoder = (): Encoder => new Encoder({ useBigInt64: true, ignoreUndefined: true });
let encoder = newEncoder();
/** The encoder keeps its largest buffer (twice the largest message) for good; past this, start afresh. */
const KEEP_ENCODER_BYTES = 1024 * 1024;

/**
 * msgpack of one message as a view that the next call overwrites: copy it before encoding again.
 * `what` names the part that made it too large.
 */
function encodeMsg(m: RpcMsg, max: number, what: string): Uint8Array {
  let bytes: Uint8Array;
  try {
    bytes = encoder.encodeSharedRef(m);
    // The view stays valid (it pins the old buffer) until the caller has copied it.
    if (bytes.length > KEEP_ENCODER_BYTES) encoder = newEncoder();
  } catch (e) {
    encoder = newEncoder();
    throw rpcError(
      'invalid_argument',
      `${what}: not encodable as msgpack (${e instanceof Error ? e.message : String(e)})`,
      {
        field: what,
      },
    );
  }
  if (bytes.length > max)
    throw rpcError(
      RpcCode.PayloadTooLarge,
      `${what}: encoded message is ${bytes.length} bytes, limit ${max}`,
      {
        field: what,
        limit: max,
      },
    );
  return bytes;
}

/**
 * msgpack of one message in bytes the caller owns. A large message already owns the buffer the
 * encoder was dropped with, so only small ones are copied (a 32 MiB copy costs ~0.3 s here).
 */
export function encodeOwned(m: RpcMsg, max: number, what: string): Uint8Array {
  const body = encodeMsg(m, max, what);
  return body.length > KEEP_ENCODER_BYTES ? body : body.slice();
}

/**
 * A binary value (typed array) of at least this many bytes at the top level of a `req` payload (a
 * prompt's token ids: 32 kB for 8k tokens) is written to the socket from the caller's memory.
 */
const SPLICE_MIN_BYTES = 4096;
/**
 * Stand-ins for those values while the rest of the message is encoded: 0xc1 (a byte msgpack never
 * uses) and 0xff (never in UTF-8, so in no string), a per-process random nonce, the value's index.
 */
const MARK_LEN = 16;
const nonce = randomBytes(MARK_LEN - 3);
const marks: Uint8Array[] = [];
function mark(i: number): Uint8Array {
  while (marks.length <= i) {
    const b = new Uint8Array(MARK_LEN);
    b[0] = 0xc1;
    b[1] = 0xff;
    b.set(nonce, 2);
    b[MARK_LEN - 1] = marks.length;
    marks.push(b);
  }
  return marks[i]!;
}
const MAX_SPLICED = 8;

/** msgpack's bin header for `n` bytes (bin 8 / 16 / 32, as the encoder writes it) into `out` at `at`; its length. */
function binHeader(out: Uint8Array, at: number, n: number): number {
  if (n < 0x100) {
    out[at] = 0xc4;
    out[at + 1] = n;
    return 2;
  }
  if (n < 0x10000) {
    out[at] = 0xc5;
    out[at + 1] = n >>> 8;
    out[at + 2] = n & 0xff;
    return 3;
  }
  out[at] = 0xc6;
  new DataView(out.buffer, out.byteOffset + at + 1, 4).setUint32(0, n);
  return 5;
}

/**
 * The frame of a `req` whose payload holds large typed arrays, with those arrays' bytes not copied:
 * the message is encoded with a mark in place of each, then cut at the marks, and each array's own
 * memory goes between the cuts as one more part (the socket writes the parts in order). The bytes
 * are exactly those of `encodeMsg` of the original message (same bin headers). Null when there is
 * nothing to splice, or a mark is not where it must be (then the caller encodes as usual).
 */
function splicedFrame(m: RpcMsg, max: number, what: string): Uint8Array[] | null {
  if (m.t !== 'req') return null;
  const p = m.payload;
  if (typeof p !== 'object' || p === null || Array.isArray(p) || ArrayBuffer.isView(p)) return null;
  let copy: Record<string, unknown> | null = null;
  let views: Uint8Array[] | null = null;
  for (const k of Object.keys(p)) {
    const v = (p as Record<string, unknown>)[k];
    if (ArrayBuffer.isView(v) && v.byteLength >= SPLICE_MIN_BYTES) {
      views ??= [];
      if (views.length === MAX_SPLICED) break;
      copy ??= { ...(p as Record<string, unknown>) };
      copy[k] = mark(views.length);
      views.push(v instanceof Uint8Array ? v : new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
    }
  }
  if (copy === null || views === null) return null;
  const body = encodeMsg({ ...m, payload: copy }, max, what);
  const hay = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  let total = body.length;
  const at: number[] = [];
  for (let i = 0, from = 0; i < views.length; i++) {
    const x = hay.indexOf(mark(i), from);
    // The mark was encoded as bin 8 of MARK_LEN bytes: c4 10 ‖ mark.
    if (x < 2 || body[x - 2] !== 0xc4 || body[x - 1] !== MARK_LEN) return null;
    at.push(x);
    from = x + MARK_LEN;
    const n = views[i]!.byteLength;
    total += (n < 0x100 ? 2 : n < 0x10000 ? 3 : 5) + n - (2 + MARK_LEN);
  }
  if (total > max)
    throw rpcError(RpcCode.PayloadTooLarge, `${what}: encoded message is ${total} bytes, limit ${max}`, {
      field: what,
      limit: max,
    });
  // The parts between the arrays are copied (the encoder's buffer is reused by the next message).
  const small = Buffer.allocUnsafe(4 + body.length + 5 * views.length);
  small.writeUInt32BE(total, 0);
  const out: Uint8Array[] = [];
  let o = 4;
  let start = 0;
  let prev = 0;
  for (let i = 0; i < views.length; i++) {
    small.set(body.subarray(prev, at[i]! - 2), o);
    o += at[i]! - 2 - prev;
    o += binHeader(small, o, views[i]!.byteLength);
    out.push(small.subarray(start, o), views[i]!);
    start = o;
    prev = at[i]! + MARK_LEN;
  }
  small.set(body.subarray(prev), o);
  o += body.length - prev;
  if (o > start) out.push(small.subarray(start, o));
  return out;
}

/**
 * A tcp frame: u32 BE length ‖ msgpack map, as one buffer, or header + body for a large one, or (a
 * request with large typed arrays in its payload) parts that include those arrays' own memory: the
 * caller must not modify them until the stream ends.
 */
export function encodeFrame(m: RpcMsg, max: number, what: string): Uint8Array[] {
  const parts = splicedFrame(m, max, what);
  if (parts !== null) return parts;
  const body = encodeMsg(m, max, what);
  if (body.length > KEEP_ENCODER_BYTES) {
    const head = Buffer.allocUnsafe(4);
    head.writeUInt32BE(body.length, 0);
    return [head, body];
  }
  const out = Buffer.allocUnsafe(4 + body.length);
  out.writeUInt32BE(body.length, 0);
  out.set(body, 4);
  return [out];
}

const protocolError = (msg: string): Error => rpcError(RpcCode.ProtocolError, msg);

/** Validates a decoded message; anything malformed is a `protocol_error`. */
export function parseMsg(bytes: Uint8Array, max: number): RpcMsg {
  let v: unknown;
  // Decoded `bin` values are views of the input: from a Buffer they would be Buffers, and callers
  // should get plain Uint8Arrays whichever transport delivered them.
  if (Buffer.isBuffer(bytes)) bytes = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  try {
    v = decodeMsgpack(bytes, 'rpc message', max);
  } catch (e) {
    throw protocolError(e instanceof Error ? e.message : String(e));
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v) || v instanceof Uint8Array)
    throw protocolError('rpc message: expected a map');
  const o = v as Record<string, unknown>;
  let id = o.id;
  if (typeof id === 'bigint' && id >= 0n && id <= 0xffffffffn) id = Number(id);
  if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > 0xffffffff)
    throw protocolError('rpc message: id must be a u32');
  switch (o.t) {
    case 'req':
      if (typeof o.endpoint !== 'string') throw protocolError('rpc message: req.endpoint must be a string');
      return { t: 'req', id, endpoint: o.endpoint, payload: o.payload };
    case 'data':
      return { t: 'data', id, payload: o.payload };
    case 'cancel':
    case 'end':
    case 'hb':
      return { t: o.t, id };
    case 'err': {
      const m: RpcMsg = {
        t: 'err',
        id,
        code: typeof o.code === 'string' ? o.code : RpcCode.Internal,
        message: typeof o.message === 'string' ? o.message : '',
      };
      if (typeof o.status === 'number') m.status = o.status;
      return m;
    }
    default:
      throw protocolError(`rpc message: unknown t ${JSON.stringify(String(o.t))}`);
  }
}

/**
 * Splits a byte stream into frames. Small frames are handed out as views of the incoming chunk;
 * a frame spread over chunks is assembled once, when its last byte arrives.
 */
export class FrameDecoder {
  private parts: Buffer[] = [];
  private buffered = 0;
  /** Length of the frame being assembled, or -1 while its header is incomplete. */
  private need = -1;

  constructor(
    private readonly max: number,
    private readonly onFrame: (body: Uint8Array) => void,
  ) {}

  /** Throws `protocol_error` on a frame header above the limit; the connection is then unusable. */
  push(chunk: Buffer): void {
    if (this.buffered === 0 && this.need < 0) {
      let off = 0;
      while (chunk.length - off >= 4) {
        const n = chunk.readUInt32BE(off);
        this.check(n);
        if (chunk.length - off - 4 < n) break;
        this.onFrame(chunk.subarray(off + 4, off + 4 + n));
        off += 4 + n;
      }
      if (off === chunk.length) return;
      chunk = chunk.subarray(off);
    }
    this.parts.push(chunk);
    this.buffered += chunk.length;
    for (;;) {
      if (this.need < 0) {
        if (this.buffered < 4) return;
        const head = this.take(4);
        this.need = head.readUInt32BE(0);
        this.check(this.need);
      }
      if (this.buffered < this.need) return;
      const body = this.take(this.need);
      this.need = -1;
      this.onFrame(body);
    }
  }

  private check(n: number): void {
    if (n > this.max)
      throw rpcError(RpcCode.ProtocolError, `frame of ${n} bytes exceeds the limit of ${this.max}`);
  }

  private take(n: number): Buffer {
    // An empty frame (header 0) can arrive with nothing buffered after its header.
    if (n === 0) return Buffer.alloc(0);
    let out: Buffer;
    const first = this.parts[0]!;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.parts.shift();
      else this.parts[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let off = 0;
      while (off < n) {
        const p = this.parts[0]!;
        const k = Math.min(p.length, n - off);
        p.copy(out, off, 0, k);
        off += k;
        if (k === p.length) this.parts.shift();
        else this.parts[0] = p.subarray(k);
      }
    }
    this.buffered -= n;
    return out;
  }
}
