/**
 * `pnpm bench long-prompt`: one agent request's path through the frontend, stage by stage, with a
 * real model (Qwen3's tokenizer.json and chat template): the body read and JSON-parsed as the
 * frontend does (`decode`: the reader's work at the body's end; `parse`: a body of 64 KiB or more
 * straight from its bytes, no whole-body string), validation, chat-template render, tokenization
 * (`fastokens` incremental vs `default` whole prompt), block + sequence hashing (block size 16; the router's way, from the earlier turn's kept hash chain
 * when the encoder names the prefix a prompt extends, and every block for comparison),
 * radix-index lookup at depth ~6k-9k, and the request-plane frame encode; figures are event-loop
 * milliseconds per request (the stage's CPU on the event-loop thread on a quiet machine). A third
 * run, `threads`, is what the frontend does by default for such requests: the prompt rendered and
 * tokenized on a tokenizer thread (its on-loop cost is under `encode`). The session grows from ~20k to ~150k tokens by ~2k per turn (tool calls in the history). Runs
 * apps/frontend/src/bench/long-prompt.ts in a child process (benchmarks never import an app).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CORPUS_DIR, FAMILIES, familyDir } from '@kvrouter/tokenizer/testing';
import type { Row, Suite, SuiteContext } from '../harness.js';

const script = fileURLToPath(new URL('../../../apps/frontend/src/bench/long-prompt.ts', import.meta.url));
const STAGES = ['decode', 'parse', 'validate', 'render', 'encode', 'hash', 'lookup', 'frame'] as const;

interface StageFigures {
  p50: number;
  mean: number;
  last: number;
  /** Median of the last 5 turns (~140k-150k tokens). */
  tail: number;
}

export const suite: Suite = {
  name: 'long-prompt',
  description:
    'one agent request (20k -> 150k tokens, +2k per turn) stage by stage: UTF-8 decode, parse, validate, render, tokenize, hash, index lookup, frame encode (event-loop ms per request, Qwen3; inline fastokens / default, and threads: prompt on a tokenizer thread), and render + tokenize in process CPU ms',
  async run(ctx: SuiteContext): Promise<Row[]> {
    const fam = FAMILIES.find((f) => f.name === 'qwen3')!;
    ctx.progress('qwen3 agent session', 0, 1);
    const args = ['--conditions=source', '--import', 'tsx', script, familyDir(fam), CORPUS_DIR];
    if (ctx.quick) args.push('quick');
    const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 24 });
    if (r.status !== 0) throw new Error(`long-prompt.ts failed: ${r.stderr}`);
    ctx.progress('qwen3 agent session', 1, 1);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<
      string,
      Record<string, StageFigures | number | Record<string, number>>
    >;
    const rows: Row[] = [];
    for (const mode of ['fastokens', 'default', 'threads']) {
      const m = res[mode]!;
      const last = m.last as Record<string, number>;
      let total = 0;
      for (const st of STAGES) {
        const f = m[st] as StageFigures;
        total += f.p50;
        rows.push({
          name: `${mode}: ${st}`,
          value: f.p50,
          unit: 'loop ms p50',
          extra: { mean: f.mean, 'last turn': f.last, 'last 5 p50': f.tail },
        });
      }
      // `hash` is what the router does (from the earlier turn's kept chain when the encoder names
      // the prefix the prompt extends: fastokens inline); every block hashed, for comparison.
      const whole = m.hashWhole as StageFigures;
      rows.push({
        name: `${mode}: hash, every block (not in the sum)`,
        value: whole.p50,
        unit: 'loop ms p50',
        extra: { mean: whole.mean, 'last turn': whole.last, 'last 5 p50': whole.tail },
      });
      // Messages -> ids (render + tokenize) in process CPU, every thread: on a tokenizer thread this
      // adds the thread's work and both sides of the clone, which loop ms leave out.
      const c = m.chatCpu as StageFigures;
      rows.push({
        name: `${mode}: render + tokenize, process CPU`,
        value: c.p50,
        unit: 'CPU ms p50',
        extra: { mean: c.mean, 'last turn': c.last, 'last 5 p50': c.tail },
      });
      rows.push({
        name: `${mode}: all stages`,
        value: +total.toFixed(3),
        unit: 'loop ms (sum of p50)',
        extra: {
          turns: m.turns as number,
          'last prompt tokens': last.tokens!,
          'last body bytes': last.bodyBytes!,
          'last blocks': last.blocks!,
        },
      });
    }
    const lt = res.lastTurn as unknown as Record<'inline' | 'threads', { cpu: number; loop: number }> & {
      reps: number;
    };
    for (const mode of ['inline', 'threads'] as const)
      rows.push({
        name: `last turn (~150k tokens) encodeChat, ${mode}`,
        value: lt[mode].cpu,
        unit: 'process CPU ms p50',
        extra: { 'loop ms p50': lt[mode].loop, repetitions: lt.reps },
      });
    return rows;
  },
};
