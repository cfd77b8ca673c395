/**
 * A tokenizer thread: encodes texts posted by `TokenizerPool` with its own copy of the tokenizer,
 * and renders + tokenizes whole chat prompts (`chat` jobs) with its own copy of the chat template
 * and its own prompt encoder (same `--tokenizer` mode and prefix-cache bound as the main thread's).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { KvrError } from '@kvrouter/protocols';
import { PromptEncoder } from './encoder.js';
import { loadTokenizer } from './load.js';
import type { ChatJob, PoolWorkerData } from './pool.js';
import type { EncodeStats } from './types.js';

interface Job {
  id: number;
  texts?: string[];
  /** true: recognise special tokens (whole prompts); false: plain pieces. */
  whole?: boolean;
  chat?: ChatJob;
}

const data = workerData as PoolWorkerData;
// The main thread already said which engine it uses.
const { tokenizer, template } = loadTokenizer(data.spec, () => undefined);
const encoder = new PromptEncoder({ tokenizer, ...data.encoder });

function fail(id: number, e: unknown): void {
  const error =
    e instanceof KvrError
      ? { message: e.message, code: e.code, status: e.status, detail: e.detail }
      : { message: (e as Error).message };
  parentPort!.postMessage({ id, error });
}

async function chat(id: number, c: ChatJob): Promise<void> {
  try {
    const stats: EncodeStats = { tokenizedChars: 0, offloaded: true };
    // No pool here: the encoder renders, checks the bound and tokenizes inline on this thread, as
    // the main thread's inline path does (the template's pieces, never one large string).
    const ids = await encoder.encodeChatHere(template, c.messages, c.options, c.contextLength, stats);
    // `held`: this thread's prefix-cache size, for dynamo_frontend_table_*{table="tokenizer_prefix_cache_tokens"}.
    parentPort!.postMessage({ id, out: [ids], stats, held: encoder.cacheTokensHeld }, [
      ids.buffer as ArrayBuffer,
    ]);
  } catch (e) {
    fail(id, e);
  }
}

parentPort!.on('message', (job: Job) => {
  if (job.chat) {
    void chat(job.id, job.chat);
    return;
  }
  try {
    const out = job.texts!.map((t) =>
      Uint32Array.from(job.whole ? tokenizer.encode(t) : tokenizer.encodeText(t)),
    );
    parentPort!.postMessage(
      { id: job.id, out },
      out.map((a) => a.buffer),
    );
  } catch (e) {
    fail(job.id, e);
  }
});
// First use builds lazy tables (BPE ranks, regexes): done before `ready`, so a job's time budget
// (pool.ts) measures tokenizing, not loading.
tokenizer.encode('warm up the tokenizer');
parentPort!.postMessage({ ready: true });
