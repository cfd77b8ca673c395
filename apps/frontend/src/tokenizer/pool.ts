/**
 * Tokenization off the event loop: long uncached texts go to worker threads, each with its own
 * copy of the tokenizer, so a 100k-token prompt does not stall every other stream for ~0.2 s.
 */
import { Worker } from 'node:worker_threads';
import { KvrError } from '@kvrouter/protocols';
import type { TokenizerSpec } from './types.js';

interface Pending {
  resolve: (v: Uint32Array[]) => void;
  reject: (e: Error) => void;
}

/** tsx's ESM API (a dev dependency of the repository root; only used when running from sources). */
function tsxApi(): string {
  return import.meta.resolve('tsx/esm/api');
}

export class TokenizerPool {
  private readonly workers: Worker[] = [];
  private readonly pending = new Map<number, Pending>();
  private readonly ready: Promise<void>;
  private next = 0;
  private seq = 0;
  private closed = false;

  constructor(spec: TokenizerSpec, threads: number) {
    const source = import.meta.url.endsWith('.ts');
    const file = new URL(source ? './worker.ts' : './worker.js', import.meta.url);
    const readies: Promise<void>[] = [];
    for (let i = 0; i < threads; i++) {
      // From sources the entry is a small script that registers tsx's loader in the thread and then
      // imports the .ts file (a .ts entry would be rejected before any --import hook applies).
      const w = source
        ? new Worker(
            `import(${JSON.stringify(tsxApi())}).then((t) => { t.register(); return import(${JSON.stringify(file.href)}); })`,
            { eval: true, workerData: spec },
          )
        : new Worker(file, { workerData: spec });
      w.unref();
      readies.push(
        new Promise<void>((resolve, reject) => {
          w.once('error', reject);
          const onReady = (m: { ready?: boolean }) => {
            if (!m.ready) return;
            w.off('message', onReady);
            resolve();
          };
          w.on('message', onReady);
        }),
      );
      w.on('message', (m: { id?: number; out?: Uint32Array[]; error?: { message: string } }) => {
        if (m.id === undefined) return;
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        if (m.error) p.reject(new KvrError('tokenizer_error', m.error.message, 500));
        else p.resolve(m.out!);
      });
      w.on('error', (e) => this.failAll(e));
      this.workers.push(w);
    }
    this.ready = Promise.all(readies).then(() => undefined);
    this.ready.catch(() => undefined);
  }

  /** Resolves once every thread has loaded its tokenizer. */
  whenReady(): Promise<void> {
    return this.ready;
  }

  encode(texts: string[], whole: boolean): Promise<Uint32Array[]> {
    if (this.closed) return Promise.reject(new KvrError('tokenizer_closed', 'tokenizer pool is closed', 503));
    const id = ++this.seq;
    const w = this.workers[this.next++ % this.workers.length]!;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      w.postMessage({ id, texts, whole });
    });
  }

  private failAll(e: Error): void {
    for (const p of this.pending.values())
      p.reject(new KvrError('tokenizer_error', `tokenizer thread failed: ${e.message}`, 500));
    this.pending.clear();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.failAll(new Error('closed'));
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
