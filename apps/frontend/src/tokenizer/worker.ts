/** A tokenizer thread: encodes texts posted by `TokenizerPool` with its own copy of the tokenizer. */
import { parentPort, workerData } from 'node:worker_threads';
import { loadTokenizer } from './load.js';
import type { TokenizerSpec } from './types.js';

interface Job {
  id: number;
  texts: string[];
  /** true: recognise special tokens (whole prompts); false: plain pieces. */
  whole: boolean;
}

// The main thread already said which engine it uses.
const { tokenizer } = loadTokenizer(workerData as TokenizerSpec, () => undefined);
parentPort!.on('message', (job: Job) => {
  try {
    const out = job.texts.map((t) =>
      Uint32Array.from(job.whole ? tokenizer.encode(t) : tokenizer.encodeText(t)),
    );
    parentPort!.postMessage(
      { id: job.id, out },
      out.map((a) => a.buffer),
    );
  } catch (e) {
    parentPort!.postMessage({ id: job.id, error: { message: (e as Error).message } });
  }
});
// First use builds lazy tables (BPE ranks, regexes): done before `ready`, so a job's time budget
// (pool.ts) measures tokenizing, not loading.
tokenizer.encode('warm up the tokenizer');
parentPort!.postMessage({ ready: true });
