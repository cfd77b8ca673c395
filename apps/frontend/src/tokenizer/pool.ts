/**
 * Tokenization off the event loop: long uncached texts go to worker threads, each with its own
 * copy of the tokenizer, so a 100k-token prompt does not stall every other stream for ~0.2 s.
 *
 * No head-of-line blocking (issue 17): a job goes to an idle thread, else waits in one FIFO queue
 * (never behind a particular busy thread). A large job (`largeChars` and up) may hold at most
 * `threads - 1` threads at once (one with a single thread), so with two or more threads a run of huge
 * prompts always leaves a thread for ordinary ones; `canStartNow` tells the encoder when every thread
 * is held by large jobs, and it then encodes a normal-size text inline instead of queueing it.
 * Every job has a time budget (`budgetMs`, `--dyn-preprocess-budget-ms`): a job still running when
 * it ends has its thread terminated and replaced, and fails with 413 `tokenize_budget_exceeded`, so one
 * pathological prompt holds one thread for at most the budget (time in the queue does not count:
 * waiting is overload, not a costly prompt).
 * The queue is bounded in characters (`maxQueuedChars`, default `DEFAULT_MAX_QUEUED_CHARS`): a job
 * that would take it past the bound while something already waits fails at once with 503
 * `tokenizer_overloaded` (and `Retry-After`), instead of holding its text in memory behind a queue
 * that already holds seconds of work; a job that finds the queue empty is always accepted.
 */
import { Worker } from 'node:worker_threads';
import { KvrError } from '@kvrouter/protocols';
import type { RenderOptions, TemplateMessage } from './template.js';
import { DEFAULT_PREFIX_CACHE_TOKENS, type EncodeStats, type TokenizerSpec } from './types.js';

/** Default time budget of one tokenization job (`--dyn-preprocess-budget-ms`). */
const DEFAULT_TOKENIZE_BUDGET_MS = 10_000;
/** Texts of at least this many characters (~256k tokens) are large jobs. */
const DEFAULT_LARGE_CHARS = 1 << 20;
/**
 * Characters the queue may hold: 64 Mi (~128 MB of UTF-16 text), i.e. 64 agent turns of 1 M
 * characters (~8 ms of a thread each: about half a second of one thread's work) or ~2,000
 * 8k-token chats.
 */
const DEFAULT_MAX_QUEUED_CHARS = 1 << 26;

export interface TokenizerPoolOptions {
  /** Time budget of one job on its thread, in ms; 0 = none. */
  budgetMs?: number;
  /** Characters from which a job counts as large (test hook). */
  largeChars?: number;
  /** Characters the queue may hold before new jobs get 503 `tokenizer_overloaded` (test hook). */
  maxQueuedChars?: number;
  /**
   * How each thread's own prompt encoder tokenizes whole chat prompts (`chat` jobs): the main
   * encoder's `--tokenizer` mode and prefix-cache bound (default fastokens, 16 M ids).
   */
  encoder?: { mode: 'default' | 'fastokens'; cacheTokens?: number };
}

/** What a thread is started with (worker.ts). */
export interface PoolWorkerData {
  spec: TokenizerSpec;
  encoder: { mode: 'default' | 'fastokens'; cacheTokens?: number };
}

/** A chat prompt rendered and tokenized on a thread (the thread's template and prefix cache). */
export interface ChatJob {
  messages: readonly TemplateMessage[];
  options: RenderOptions;
  /** Refused (400 naming `messages`) when the rendered text cannot fit, before tokenizing. */
  contextLength: number;
}

/** What a thread answers. */
interface Reply {
  id?: number;
  out?: Uint32Array[];
  stats?: EncodeStats;
  /** The thread's prefix-cache ids after a chat job. */
  held?: number;
  error?: { message: string; code?: string; status?: number; detail?: Record<string, unknown> };
}

interface Job {
  id: number;
  texts: string[];
  whole: boolean;
  /** A chat prompt instead of texts. */
  chat?: ChatJob;
  /** The thread whose prefix cache holds this conversation (chat jobs): the job waits for it. */
  prefer?: number;
  stats?: EncodeStats;
  large: boolean;
  chars: number;
  resolve: (v: Uint32Array[]) => void;
  reject: (e: Error) => void;
}

interface Thread {
  worker: Worker;
  ready: Promise<void>;
  /** Loaded its tokenizer (a job's budget starts when it is on a loaded thread). */
  loaded: boolean;
  job: Job | null;
  timer: NodeJS.Timeout | null;
  /** Its own prompt encoder's prefix cache (chat jobs): ids held as of its last chat job. */
  cacheHeld: number;
}

/** tsx's ESM API (a dev dependency of the repository root; only used when running from sources). */
function tsxApi(): string {
  return import.meta.resolve('tsx/esm/api');
}

/**
 * A worker thread running the module `jsUrl` (its `.ts` source when this app runs from sources:
 * a small script registers tsx's loader in the thread and then imports it, since a .ts entry would
 * be rejected before any --import hook applies).
 */
export function workerFromSources(jsUrl: URL, workerData: unknown): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(jsUrl, { workerData });
  const file = new URL(jsUrl.href.replace(/\.js$/, '.ts'));
  return new Worker(
    `import(${JSON.stringify(tsxApi())}).then((t) => { t.register(); return import(${JSON.stringify(file.href)}); })`,
    { eval: true, workerData },
  );
}

/** A job that could not be posted to a thread (structured clone failed); nothing ran. */
export class UnsendableJob extends Error {
  constructor(readonly reason: unknown) {
    super(`tokenizer job could not be sent to a thread: ${(reason as Error)?.message ?? String(reason)}`);
  }
}

/** `field`: what the client sent the text in (`prompt`, or `messages` for a chat job). */
function budgetExceeded(budgetMs: number, chars: number, field: 'prompt' | 'messages'): KvrError {
  return new KvrError(
    'tokenize_budget_exceeded',
    `${field}: tokenizing ${chars} characters did not finish within the budget of ${budgetMs} ms (--dyn-preprocess-budget-ms); send a shorter prompt`,
    413,
    { field, budget_ms: budgetMs, chars },
  );
}

export class TokenizerPool {
  private readonly threads: Thread[] = [];
  private readonly queue: Job[] = [];
  private readonly ready: Promise<void>;
  private readonly budgetMs: number;
  private readonly largeChars: number;
  private readonly maxQueuedChars: number;
  /** Σ chars of the queued jobs. */
  private queuedChars = 0;
  private readonly workerData: PoolWorkerData;
  private seq = 0;
  private closed = false;
  /** Threads replaced because a job ran past its budget. */
  replaced = 0;

  constructor(
    private readonly spec: TokenizerSpec,
    threads: number,
    o: TokenizerPoolOptions = {},
  ) {
    if (!Number.isInteger(threads) || threads < 1)
      throw new RangeError(`tokenizer threads must be a positive integer, got ${threads}`);
    this.budgetMs = o.budgetMs ?? DEFAULT_TOKENIZE_BUDGET_MS;
    this.largeChars = o.largeChars ?? DEFAULT_LARGE_CHARS;
    this.maxQueuedChars = o.maxQueuedChars ?? DEFAULT_MAX_QUEUED_CHARS;
    this.workerData = { spec, encoder: o.encoder ?? { mode: 'fastokens' } };
    for (let i = 0; i < threads; i++) this.threads.push(this.spawn());
    this.ready = Promise.all(this.threads.map((t) => t.ready)).then(() => undefined);
    this.ready.catch(() => undefined);
  }

  private spawn(): Thread {
    const w = workerFromSources(new URL('./worker.js', import.meta.url), this.workerData);
    w.unref();
    const t: Thread = {
      worker: w,
      ready: Promise.resolve(),
      loaded: false,
      job: null,
      timer: null,
      cacheHeld: 0,
    };
    t.ready = new Promise<void>((resolve, reject) => {
      w.once('error', reject);
      const onReady = (m: { ready?: boolean }) => {
        if (!m.ready) return;
        w.off('message', onReady);
        t.loaded = true;
        resolve();
        this.pump();
      };
      w.on('message', onReady);
    });
    t.ready.catch(() => undefined);
    w.on('message', (m: Reply) => {
      if (m.held !== undefined) t.cacheHeld = m.held;
      const job = t.job;
      if (m.id === undefined || job === null || job.id !== m.id) return;
      this.finish(t);
      const err = m.error;
      // A request error found on the thread (a template's raise_exception, a prompt that cannot
      // fit) keeps its code, status and field; anything else is the tokenizer's failure.
      if (err)
        job.reject(
          err.code !== undefined && err.status !== undefined && err.status < 500
            ? new KvrError(err.code as 'invalid_request', err.message, err.status, err.detail)
            : new KvrError('tokenizer_error', err.message, 500),
        );
      else {
        // Not `prefix`: a thread's prefix-cache names are its own (the same number names another
        // entry here), and the router's hash chains must never take one for another.
        if (job.stats && m.stats) Object.assign(job.stats, m.stats, { offloaded: true, prefix: undefined });
        job.resolve(m.out!);
      }
      this.pump();
    });
    w.on('error', (e) => {
      const job = t.job;
      this.finish(t);
      job?.reject(new KvrError('tokenizer_error', `tokenizer thread failed: ${e.message}`, 500));
      this.replace(t);
    });
    // Ended without an error (process.exit in the thread, an outside terminate): its job would
    // otherwise wait forever (budget 0) or be blamed on the prompt (413 at the budget). Threads this
    // pool terminated itself are no longer in `threads` by then.
    w.on('exit', (code) => {
      if (this.closed || !this.threads.includes(t)) return;
      const job = t.job;
      this.finish(t);
      job?.reject(new KvrError('tokenizer_error', `tokenizer thread exited with code ${code}`, 500));
      this.replace(t);
    });
    return t;
  }

  private finish(t: Thread): void {
    if (t.timer) clearTimeout(t.timer);
    t.timer = null;
    t.job = null;
  }

  /** Terminates a thread (stuck or failed) and puts a fresh one in its place. */
  private replace(t: Thread): void {
    const i = this.threads.indexOf(t);
    if (i < 0) return;
    void t.worker.terminate().catch(() => undefined);
    if (this.closed) return;
    this.replaced++;
    this.threads[i] = this.spawn();
    this.pump();
  }

  /** Resolves once every thread has loaded its tokenizer. */
  whenReady(): Promise<void> {
    return this.ready;
  }

  private largeRunning(): number {
    let n = 0;
    for (const t of this.threads) if (t.job?.large) n++;
    return n;
  }

  private largeCap(): number {
    return Math.max(1, this.threads.length - 1);
  }

  /**
   * Whether a job of `chars` characters would start at once rather than wait. False means every
   * thread is busy; the encoder then tokenizes a normal-size text inline.
   */
  canStartNow(chars: number): boolean {
    if (this.queue.length > 0) return false;
    const idle = this.threads.some((t) => t.job === null && t.loaded);
    return idle && (chars < this.largeChars || this.largeRunning() < this.largeCap());
  }

  /** Whether every thread is busy and at least one of them with a large job. */
  heldByLarge(): boolean {
    return this.threads.every((t) => t.job !== null) && this.largeRunning() > 0;
  }

  encode(texts: string[], whole: boolean): Promise<Uint32Array[]> {
    let chars = 0;
    for (const s of texts) chars += s.length;
    return this.submit({ texts, whole }, chars);
  }

  /**
   * Renders a chat prompt with the thread's template and tokenizes it with the thread's prompt
   * encoder (its own prefix cache). `chars`: the prompt's size estimate (the large-job rule);
   * `affinity`: a conversation key, so that every turn of one conversation lands on the same
   * thread and finds its previous turns in that thread's cache (the job waits for that thread).
   */
  async encodeChat(
    chat: ChatJob,
    chars: number,
    affinity: number,
    stats?: EncodeStats,
    signal?: AbortSignal,
  ): Promise<Uint32Array> {
    const prefer = (affinity >>> 0) % this.threads.length;
    return (
      await this.submit({ texts: [], whole: true, chat, prefer, ...(stats ? { stats } : {}) }, chars, signal)
    )[0]!;
  }

  /**
   * `signal`: the client's; aborted while the job still waits in the queue, the job leaves it and
   * fails with 499 (under overload the queue otherwise ran every abandoned request's prompt).
   */
  private submit(
    j: Pick<Job, 'texts' | 'whole' | 'chat' | 'prefer' | 'stats'>,
    chars: number,
    signal?: AbortSignal,
  ): Promise<Uint32Array[]> {
    if (this.closed) return Promise.reject(new KvrError('tokenizer_closed', 'tokenizer pool is closed', 503));
    const gone = () => new KvrError('cancelled', 'client disconnected', 499);
    if (signal?.aborted) return Promise.reject(gone());
    if (this.queue.length > 0 && this.queuedChars + chars > this.maxQueuedChars)
      return Promise.reject(
        new KvrError(
          'tokenizer_overloaded',
          `${j.chat ? 'messages' : 'prompt'}: ${this.queue.length} prompts (${this.queuedChars} characters) already wait for a tokenizer thread, the bound is ${this.maxQueuedChars} characters; retry later`,
          503,
          {
            field: j.chat ? 'messages' : 'prompt',
            queued: this.queue.length,
            queued_chars: this.queuedChars,
          },
        ),
      );
    return new Promise((resolve, reject) => {
      const job: Job = { ...j, id: ++this.seq, large: chars >= this.largeChars, chars, resolve, reject };
      if (signal) {
        const onAbort = () => {
          const i = this.queue.indexOf(job);
          if (i < 0) return;
          this.queue.splice(i, 1);
          this.queuedChars -= job.chars;
          reject(gone());
        };
        signal.addEventListener('abort', onAbort, { once: true });
        const off = () => signal.removeEventListener('abort', onAbort);
        job.resolve = (v) => {
          off();
          resolve(v);
        };
        job.reject = (e) => {
          off();
          reject(e);
        };
      }
      this.queue.push(job);
      this.queuedChars += chars;
      this.pump();
    });
  }

  /** Starts queued jobs on idle threads, oldest first; a large job waits while large jobs hold the cap. */
  private pump(): void {
    for (let i = 0; i < this.queue.length;) {
      const idle = this.threads.find((t) => t.job === null && t.loaded);
      if (!idle) return;
      const job = this.queue[i]!;
      const want = job.prefer === undefined ? idle : this.threads[job.prefer]!;
      if ((job.large && this.largeRunning() >= this.largeCap()) || want.job !== null || !want.loaded) {
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      this.queuedChars -= job.chars;
      want.job = job;
      if (this.budgetMs > 0) {
        want.timer = setTimeout(() => {
          if (want.job !== job) return;
          this.finish(want);
          job.reject(budgetExceeded(this.budgetMs, job.chars, job.chat ? 'messages' : 'prompt'));
          this.replace(want);
        }, this.budgetMs);
        want.timer.unref();
      }
      try {
        want.worker.postMessage(
          job.chat ? { id: job.id, chat: job.chat } : { id: job.id, texts: job.texts, whole: job.whole },
        );
      } catch (e) {
        // Not clonable (a tool schema nested deeper than structured clone's stack): the thread
        // stays free, the job fails with UnsendableJob (the encoder then renders it inline). Thrown
        // from here it would have left the thread held by a job it never got, or, when pump ran
        // from a thread's reply, ended the process.
        this.finish(want);
        job.reject(new UnsendableJob(e));
      }
    }
  }

  /** Threads running a job. */
  get busy(): number {
    let n = 0;
    for (const t of this.threads) if (t.job !== null) n++;
    return n;
  }

  /** Prompt-prefix cache ids the threads' own encoders hold (chat jobs; as of each one's last chat job). */
  get cacheTokensHeld(): number {
    let n = 0;
    for (const t of this.threads) n += t.cacheHeld;
    return n;
  }

  /** The bound of `cacheTokensHeld`: `--tokenizer-prefix-cache-tokens` per thread (loaded or not yet). */
  get cacheTokenLimit(): number {
    return this.threads.length * (this.workerData.encoder.cacheTokens ?? DEFAULT_PREFIX_CACHE_TOKENS);
  }

  /** Jobs waiting for a thread. */
  get queued(): number {
    return this.queue.length;
  }

  async close(): Promise<void> {
    this.closed = true;
    const err = new KvrError('tokenizer_closed', 'tokenizer pool is closed', 503);
    for (const j of this.queue.splice(0)) j.reject(err);
    this.queuedChars = 0;
    for (const t of this.threads) {
      const job = t.job;
      this.finish(t);
      job?.reject(err);
    }
    await Promise.all(this.threads.map((t) => t.worker.terminate()));
  }
}
