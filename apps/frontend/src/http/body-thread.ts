/**
 * Large request bodies (issue 14, agent prompts): parsed from their bytes, inline or on a thread.
 *
 * Why: a 584 kB chat body of mixed-script text decoded into one string is a 1 MB two-byte string,
 * and on this VM every string over ~128 kB gets freshly mapped pages: ~4-6 ms per agent turn before
 * JSON.parse even starts. `parseBodyBytes` (json-bytes.ts) parses the bytes value by value instead
 * (~2.3 ms of CPU for that body, all of it on the event loop), and `BodyBytes` carries a body of
 * `BYTES_PARSE_MIN` (64 KiB) or more from the reader to the handler, which parses it in
 * `parseBody` (so the parse counts in the request's time, as the inline parse of a small body does).
 *
 * The body thread (`--http-body-thread-bytes` N > 0; off by default): bodies of N bytes or more
 * are parsed there by the same parser and the loop receives the parsed object by structured clone
 * (~0.7 ms on the loop for 584 kB, ~5.4 ms of process CPU in all, against ~2.3 ms inline: the
 * thread saves loop time and costs CPU; docs in the frontend README). One thread, started at the
 * first such body, holding the process only while it has a body, shared by every frontend in the
 * process; a thread that dies fails its pending bodies with 500 and the next body starts a fresh
 * one. Results equal inline parsing of the decoded text in every path: the same lossless JSON
 * reader (`parseJson`: u64 integers as bigints), the same UTF-8 decoding (invalid bytes become
 * U+FFFD, a leading byte-order mark is dropped), the same 400 `invalid_json` naming `body`.
 */
import { Worker } from 'node:worker_threads';
import { KvrError, parseJson } from '@kvrouter/protocols';
import { workerFromSources } from '../tokenizer/pool.js';
import { BAIL, joinChunks, parseJsonBytes, type StringCache } from './json-bytes.js';

/** Default of `--http-body-thread-bytes`: 0, no body goes to the body thread (parsing from bytes inline costs less in all). */
export const BODY_THREAD_BYTES = 0;

/** A body the thread parsed already (`parseBody` returns `value`). */
export class ParsedBody {
  constructor(readonly value: unknown) {}
}

/**
 * Bodies of at least this many bytes are parsed from their bytes (`BodyBytes`) instead of being
 * decoded into one string first: past ~64 KiB of mixed-script text the decoded string passes
 * V8's ~128 kB large-object size and costs ~15 µs per 4 KiB page on this VM (a 90 kB agent body:
 * 1.34 ms decoded + parsed, 0.28 ms from bytes; a 36 kB chat body: 0.06 ms vs 0.09 ms).
 */
export const BYTES_PARSE_MIN = 64 * 1024;

/**
 * With a string cache (`--http-body-string-cache-mb`, on by default), bodies from this size on are
 * parsed from their bytes too: their long strings (`STRING_CACHE_MIN` = 128 bytes and more) are then
 * taken from the cache when an earlier body sent them (a chat's system prompt and history), not
 * decoded again. A smaller body holds no string worth it.
 */
export const CACHED_BYTES_PARSE_MIN = 2 * 1024;

/**
 * A body's chunks as received, parsed when the handler asks (`parseBody`), so that its parse counts
 * in the request's own time as inline parsing does. Holds the chunks until then, nothing after.
 */
export class BodyBytes {
  private chunks: readonly Buffer[] | null;
  constructor(
    chunks: readonly Buffer[],
    private readonly size: number,
    private readonly strings: StringCache | null = null,
  ) {
    this.chunks = chunks;
  }

  /** The parsed body (`parseBodyBytes`); throws the 400 `invalid_json` of inline parsing. Once. */
  parse(): unknown {
    const chunks = this.chunks;
    if (chunks === null) throw new Error('BodyBytes.parse: parsed already');
    this.chunks = null;
    return parseBodyBytes(joinChunks(chunks, this.size), this.strings);
  }
}

/** A body's text: UTF-8 (invalid bytes become U+FFFD) without a leading byte-order mark (express's decoder drops it too). */
export function utf8Text(b: Buffer): string {
  const text = b.toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** The 400 of a body that is not JSON (inline and threaded parsing give the same one). */
export function invalidJson(message: string): KvrError {
  return new KvrError('invalid_json', `request body is not valid JSON: ${message}`, 400, { field: 'body' });
}

/**
 * A body's bytes parsed as `parseJson(utf8Text(b))` would parse them, without the whole-body string
 * (json-bytes.ts); what that parser does not vouch for (syntax errors included) takes that path,
 * so values and the 400 `invalid_json` are the same.
 */
export function parseBodyBytes(b: Buffer, strings: StringCache | null = null): unknown {
  const v = parseJsonBytes(b, strings);
  if (v !== BAIL) return v;
  try {
    return parseJson(utf8Text(b));
  } catch (e) {
    throw invalidJson((e as Error).message);
  }
}

/**
 * What the body reader hands the handler for a whole body of `size` bytes received in `chunks`
 * (`parseBody` turns each into the parsed body): from `threadBytes` (`--http-body-thread-bytes`, 0 =
 * never) on, the body thread's parse; from `BYTES_PARSE_MIN` (`CACHED_BYTES_PARSE_MIN` with a
 * string cache) on, the bytes (`BodyBytes`); else its text (UTF-8, BOM dropped).
 */
export function bodyOf(
  chunks: Buffer[],
  size: number,
  threadBytes: number,
  strings: StringCache | null = null,
): string | BodyBytes | Promise<ParsedBody> {
  if (threadBytes > 0 && size >= threadBytes) return parseOnBodyThread(Buffer.concat(chunks, size));
  if (size >= (strings === null ? BYTES_PARSE_MIN : CACHED_BYTES_PARSE_MIN))
    return new BodyBytes(chunks, size, strings);
  return utf8Text(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
}

interface Pending {
  resolve: (v: ParsedBody) => void;
  reject: (e: Error) => void;
}

class BodyThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private seq = 0;
  dead = false;

  constructor() {
    this.worker = workerFromSources(new URL('./body-worker.js', import.meta.url), null);
    this.worker.on('message', (m: { id: number; value?: unknown; error?: string; bytes?: Uint8Array }) => {
      const p = this.pending.get(m.id);
      if (p === undefined) return;
      this.pending.delete(m.id);
      if (this.pending.size === 0) this.worker.unref();
      if (m.error !== undefined) p.reject(invalidJson(m.error));
      else if (m.bytes !== undefined) {
        // The thread could not send the value back (see body-worker.ts): parsed here, as inline.
        try {
          p.resolve(
            new ParsedBody(
              parseJson(utf8Text(Buffer.from(m.bytes.buffer, m.bytes.byteOffset, m.bytes.byteLength))),
            ),
          );
        } catch (e) {
          p.reject(invalidJson((e as Error).message));
        }
      } else p.resolve(new ParsedBody(m.value));
    });
    const fail = (why: string) => {
      this.dead = true;
      const e = new KvrError('internal', `request body: the body thread ${why}`, 500);
      for (const p of this.pending.values()) p.reject(e);
      this.pending.clear();
    };
    this.worker.on('error', (e) => fail(`failed: ${e.message}`));
    this.worker.on('exit', (code) => fail(`exited with code ${code}`));
    // Held only while a body is on it (after the listeners: adding one refs the thread again).
    this.worker.unref();
  }

  parse(bytes: Buffer): Promise<ParsedBody> {
    return new Promise((resolve, reject) => {
      const id = ++this.seq;
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      // A buffer that owns its whole ArrayBuffer moves without a copy; a view into a larger one is copied.
      const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
      this.worker.postMessage({ id, bytes }, own ? [bytes.buffer as ArrayBuffer] : []);
    });
  }
}

let shared: BodyThread | null = null;

/** Decodes (UTF-8) and parses `bytes` on the body thread. */
export function parseOnBodyThread(bytes: Buffer): Promise<ParsedBody> {
  if (shared === null || shared.dead) shared = new BodyThread();
  return shared.parse(bytes);
}
