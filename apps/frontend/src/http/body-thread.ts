/**
 * Large request bodies decoded and parsed off the event loop (issue 14, agent prompts).
 *
 * Why: a 500 kB chat body of mixed-script text is ~4 ms of UTF-8 decoding into a 1 MB two-byte
 * string plus ~1 ms of JSON.parse, on the event loop, for every agent turn; most of the decode is
 * V8 mapping fresh pages for that one large string. A thread decodes and parses it instead; the
 * event loop pays one copy of the bytes and the structured clone of the parsed object (its strings
 * are the messages, each small enough for ordinary heap pages): ~0.4 ms for 500 kB.
 *
 * Bodies of at least `--http-body-thread-bytes` (64 KiB) go there (smaller ones cost less inline than the round
 * trip). One thread, started at the first large body, holding the process only while it has a body, shared
 * by every frontend in the process; a thread that dies fails its pending bodies with 500 and the
 * next large body starts a fresh one. Results equal inline parsing: the same lossless JSON reader
 * (`parseJson`: u64 integers as bigints), the same UTF-8 decoding (invalid bytes become U+FFFD, a
 * leading byte-order mark is dropped), the same 400 `invalid_json` naming the field `body`.
 */
import { Worker } from 'node:worker_threads';
import { KvrError, parseJson } from '@kvrouter/protocols';
import { workerFromSources } from '../tokenizer/pool.js';

/** Default of `--http-body-thread-bytes`: bodies of at least this many bytes are parsed on the body thread. */
export const BODY_THREAD_BYTES = 64 * 1024;

/** A body the thread parsed already (`parseBody` returns `value`). */
export class ParsedBody {
  constructor(readonly value: unknown) {}
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
