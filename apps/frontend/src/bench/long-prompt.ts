/**
 * The long-prompt path of one agent request, stage by stage, with a real model's tokenizer.json
 * and chat template: read the body's bytes and parse the JSON as the frontend does (a body of
 * 64 KiB or more straight from its bytes, no whole-body string), validate it, render the chat
 * template over the whole history, tokenize (`fastokens`: incremental across turns; `default`:
 * whole prompt), hash the blocks and chain the sequence hashes, look the chain up in a radix index
 * that holds the previous turn, and encode the request-plane frame the worker receives. Three
 * runs: `fastokens` and `default` inline on this thread, and `threads` as the frontend runs a long
 * agent request by default (the prompt rendered and tokenized incrementally on a tokenizer
 * thread). Figures are event-loop milliseconds (active time of this thread's loop while the stage
 * runs, idle waits excluded), which is the stage's CPU on this thread on a quiet machine. Run by
 * benchmarks/src/suites/long-prompt.ts:
 *
 *   node --conditions=source --import tsx apps/frontend/src/bench/long-prompt.ts <model dir> <corpus dir> [quick]
 *
 * Workload: one agent session growing from ~20k to ~150k tokens by ~2k tokens per turn (tool calls
 * and tool results in the history), block size 16 (index depth ~6k-9k at the end).
 * Prints one JSON line: per stage, on-loop ms per request (median and mean over the turns, and at the
 * last turn), with the prompt's tokens, body bytes and blocks; and `chatCpu`, the process CPU ms
 * (every thread: the tokenizer thread's work and both sides of the structured clone included) from
 * the validated messages to the ids (render + tokenize), which is what decides between the
 * tokenizer thread and the event loop for these prompts.
 */
import { computeLocalBlockHashes, computeSequenceHashes } from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';
import { HashChains } from '@kvrouter/router';
import { encodeFrame, TCP_MAX_FRAME } from '@kvrouter/runtime';
import { resolveConfig } from '@kvrouter/config';
import { bodyOf } from '../http/body-thread.js';
import { StringCache } from '../http/json-bytes.js';
import { parseBody } from '../http/util.js';
import { parseChatRequest } from '../openai/validate.js';
import { PromptEncoder } from '../tokenizer/encoder.js';
import { loadTokenizer } from '../tokenizer/load.js';
import { TokenizerPool } from '../tokenizer/pool.js';
import type { TemplateMessage } from '../tokenizer/template.js';
import type { EncodeStats } from '../tokenizer/types.js';
import { agentTurns, corpusText } from './agent.js';

const [modelDir, corpusDir, quickArg] = process.argv.slice(2);
if (!modelDir || !corpusDir) throw new Error('usage: long-prompt.ts <model dir> <corpus dir> [quick]');
const quick = quickArg === 'quick';
const BS = 16;
const DEFAULTS = resolveConfig('frontend', [], {}).config;
const WORKERS = 8;

const loaded = loadTokenizer({ kind: 'hf', dir: modelDir });
const text = corpusText(corpusDir, 0x2545f491);
const turns = agentTurns(text, { fromTokens: 20_000, toTokens: quick ? 40_000 : 150_000, stepTokens: 2_000 });

type Stage =
  'decode' | 'parse' | 'validate' | 'render' | 'encode' | 'hash' | 'hashWhole' | 'lookup' | 'frame';
const STAGES: Stage[] = [
  'decode',
  'parse',
  'validate',
  'render',
  'encode',
  'hash',
  'hashWhole',
  'lookup',
  'frame',
];

/** Process CPU ms (all threads) since `c0`. */
function cpuSince(c0: NodeJS.CpuUsage): number {
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
}

/** Milliseconds this thread's event loop was active while `fn` ran (waits for other threads excluded). */
async function loopMs(fn: () => unknown): Promise<number> {
  const e0 = performance.eventLoopUtilization();
  await fn();
  return performance.eventLoopUtilization(e0).active;
}

async function run(mode: 'default' | 'fastokens' | 'threads') {
  const threads = mode === 'threads';
  // A fresh tokenizer thread (an empty prefix cache) per run, as the inline runs get a fresh encoder.
  const pool = threads
    ? new TokenizerPool(loaded.spec, 1, { budgetMs: 0, encoder: { mode: 'fastokens' } })
    : null;
  await pool?.whenReady();
  const enc = new PromptEncoder({
    tokenizer: loaded.tokenizer,
    mode: threads ? 'fastokens' : mode,
    // As `--tokenizer-thread-chat-chars 65536` (fastokens alone keeps chats inline).
    ...(pool ? { pool, template: loaded.template, offloadChatChars: 65_536 } : {}),
  });
  // Other workers hold unrelated chains of the same depth, so the lookup walks a populated table.
  const index = new RadixIndexer({ initialCapacity: 1 << 18 });
  const samples: Record<Stage, number[]> = {
    decode: [],
    parse: [],
    validate: [],
    render: [],
    encode: [],
    hash: [],
    hashWhole: [],
    lookup: [],
    frame: [],
  };
  const chatCpu: number[] = [];
  // The router's kept hash chains and hashing scratch (packages/router/src/hash-chains.ts).
  const chains = new HashChains();
  let localBuf = new Uint32Array(0);
  let seqBuf = new Uint32Array(0);
  // The frontend's body string cache at its default size (`--http-body-string-cache-mb`), one per run.
  const strings = new StringCache(DEFAULTS.httpBodyStringCacheMb * 1024 * 1024);
  let last = { tokens: 0, bodyBytes: 0, blocks: 0, matched: 0 };
  for (const [t, conv] of turns.entries()) {
    const bytes = Buffer.from(JSON.stringify({ model: 'm', messages: conv, max_tokens: 64, stream: true }));
    const bodyBytes = bytes.length;
    let raw: unknown;
    // As the frontend reads a body with its default flags (every mode; the body thread is off, the
    // body string cache on): `decode` is the body reader's work at the body's end (the body stays
    // bytes), `parse` is parseBody's (parsed from its bytes, http/json-bytes.ts; strings the
    // session's earlier turns sent come from the cache).
    let body!: ReturnType<typeof bodyOf>;
    const decode = await loopMs(() => (body = bodyOf([bytes], bytes.length, 0, strings)));
    const parse = await loopMs(async () => {
      raw = parseBody(await body);
    });
    let req!: ReturnType<typeof parseChatRequest>;
    const validate = await loopMs(() => {
      req = parseChatRequest(raw);
    });
    const messages = req.messages as TemplateMessage[];
    const opts = { addGenerationPrompt: true };
    let rendered: string[] = [];
    const c0 = process.cpuUsage();
    // Inline: what encodeChat does on the event loop, the template's pieces (never one string) then
    // the prefix-cache cut + hash + BPE of the new text over them. Threads: the tokenizer thread
    // renders and tokenizes (its on-loop cost is all under `encode`).
    const render = threads
      ? 0
      : await loopMs(() => (rendered = loaded.template.renderPieces!(messages, opts)));
    let ids!: Uint32Array;
    const st: EncodeStats = { tokenizedChars: 0, offloaded: false };
    const encode = await loopMs(async () => {
      ids = threads
        ? await enc.encodeChat(loaded.template, messages, opts, 1 << 30, st)
        : await enc.encodeRendered(rendered, st);
    });
    chatCpu.push(cpuSince(c0));
    // `hash`: as the router hashes the prompt (from the end of the earlier turn's kept chain when
    // the encoder names the prefix it extends: fastokens inline); `hashWhole`: every block.
    let seq!: Uint32Array;
    if (localBuf.length < 2 * Math.ceil(ids.length / BS)) {
      localBuf = new Uint32Array(4 * Math.ceil(ids.length / BS));
      seqBuf = new Uint32Array(localBuf.length);
    }
    const hash = await loopMs(() => {
      if (st.prefix === undefined) seq = computeSequenceHashes(computeLocalBlockHashes(ids, BS));
      else seq = seqBuf.subarray(0, 2 * chains.hash(st.prefix, ids, BS, localBuf, seqBuf));
    });
    const hashWhole = await loopMs(() => {
      computeSequenceHashes(computeLocalBlockHashes(ids, BS));
    });
    let matched = 0;
    const lookup = await loopMs(() => {
      matched = index.findMatchesBySeq(seq).scores.size;
    });
    const frame = await loopMs(() => {
      encodeFrame(
        {
          t: 'req',
          id: t,
          endpoint: 'generate',
          payload: {
            request_id: `r${t}`,
            model: 'm',
            token_ids: ids,
            stop_conditions: { max_tokens: 64 },
            sampling_options: {},
          },
        },
        TCP_MAX_FRAME,
        'payload',
      );
    });
    // The engine that served this turn now caches its prompt (one Stored event of the whole chain);
    // another worker caches an unrelated chain of the same length.
    const local = computeLocalBlockHashes(ids, BS);
    const n = local.length >> 1;
    index.applyStoredPairs(BigInt(t % WORKERS), 0, null, seq, local, n);
    const otherLocal = Uint32Array.from(local, (x, i) => (i & 1 ? x ^ 0x5bd1e995 : x) >>> 0);
    const other = computeSequenceHashes(otherLocal);
    index.applyStoredPairs(BigInt((t + 1) % WORKERS), 0, null, other, otherLocal, n);
    for (const [k, v] of Object.entries({
      decode,
      parse,
      validate,
      render,
      encode,
      hash,
      hashWhole,
      lookup,
      frame,
    }))
      samples[k as Stage].push(v);
    last = { tokens: ids.length, bodyBytes, blocks: n, matched };
  }
  await pool?.close();
  const med = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? NaN;
  const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
  // `tail`: the median of the last 5 turns (~140k-150k tokens).
  const fig = (v: number[]) => ({
    p50: +med(v).toFixed(3),
    mean: +mean(v).toFixed(3),
    last: +v[v.length - 1]!.toFixed(3),
    tail: +med(v.slice(-5)).toFixed(3),
  });
  const out: Record<string, unknown> = { turns: turns.length, last, chatCpu: fig(chatCpu) };
  for (const s of STAGES) out[s] = fig(samples[s]);
  return out;
}

/**
 * `encodeChat` of the session's last turn (~150k tokens) alone, fastokens, inline (on this thread)
 * vs on a tokenizer thread, as the frontend does it in a running session: per repetition a
 * conversation of its own (its system prompt numbered) replays the session's last 6 turns from
 * freshly parsed messages (the first one cold, the next ones incremental, so the cold turn's
 * garbage is mostly collected by then), and the last turn is measured. Process CPU ms (every
 * thread), and this thread's event-loop ms. Modes alternate, so both see the same machine.
 */
async function lastTurn(reps: number) {
  const pool = new TokenizerPool(loaded.spec, 1, { budgetMs: 0, encoder: { mode: 'fastokens' } });
  await pool.whenReady();
  const threaded = new PromptEncoder({
    tokenizer: loaded.tokenizer,
    mode: 'fastokens',
    pool,
    template: loaded.template,
    offloadChatChars: 65_536,
  });
  const opts = { addGenerationPrompt: true };
  const cpu = { inline: [] as number[], threads: [] as number[] };
  const loop = { inline: [] as number[], threads: [] as number[] };
  const replay = turns.slice(-6);
  for (let r = 0; r < reps; r++)
    for (const mode of ['inline', 'threads'] as const) {
      const enc =
        mode === 'threads' ? threaded : new PromptEncoder({ tokenizer: loaded.tokenizer, mode: 'fastokens' });
      const own = (conv: TemplateMessage[]) =>
        JSON.parse(
          JSON.stringify([
            { ...conv[0]!, content: `session ${r}: ${conv[0]!.content as string}` },
            ...conv.slice(1),
          ]),
        ) as TemplateMessage[];
      for (const conv of replay.slice(0, -1)) await enc.encodeChat(loaded.template, own(conv), opts, 1 << 30);
      const messages = own(replay.at(-1)!);
      const c0 = process.cpuUsage();
      loop[mode].push(await loopMs(() => enc.encodeChat(loaded.template, messages, opts, 1 << 30)));
      cpu[mode].push(cpuSince(c0));
    }
  await pool.close();
  const med = (v: number[]) => +[...v].sort((a, b) => a - b)[v.length >> 1]!.toFixed(3);
  return {
    reps,
    inline: { cpu: med(cpu.inline), loop: med(loop.inline) },
    threads: { cpu: med(cpu.threads), loop: med(loop.threads) },
  };
}

// Warm-up (JIT) on the first turns, then the measured runs.
await run('fastokens');
await run('threads');
const result = {
  engine: loaded.engine,
  fastokens: await run('fastokens'),
  default: await run('default'),
  threads: await run('threads'),
  lastTurn: await lastTurn(quick ? 3 : 11),
};
process.stdout.write(`${JSON.stringify(result)}\n`);
