/**
 * The frontend's prompt stage alone (chat template render + PromptEncoder) with a real model's
 * tokenizer.json and chat template, inline on this thread, `default` (whole prompt) vs `fastokens`
 * (incremental prefix cache). Run by benchmarks/src/suites/tokenizer-frontend.ts:
 *
 *   node --conditions=source --import tsx apps/frontend/src/bench/encode.ts <model dir> <corpus dir> [quick]
 *
 * Workloads, built from the corpus text (prose, code, JSON, 13 languages):
 * - chat: 24 sessions of multi-turn chat growing to ~8k tokens (system prompt, 300-600-token user
 *   turns, ~200-token replies), requests interleaved across sessions;
 * - agent: one session growing from ~20k to ~150k tokens by ~2k tokens per turn, with tool calls
 *   and tool results in the history.
 * Prints one JSON line: per workload and mode, CPU ms per request (render, encode) and tokens.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PromptEncoder } from '../tokenizer/encoder.js';
import { loadTokenizer } from '../tokenizer/load.js';
import type { TemplateMessage } from '../tokenizer/template.js';

const [modelDir, corpusDir, quickArg] = process.argv.slice(2);
if (!modelDir || !corpusDir) throw new Error('usage: encode.ts <model dir> <corpus dir> [quick]');
const quick = quickArg === 'quick';
const corpus = fs
  .readdirSync(corpusDir)
  .filter((f) => f.endsWith('.txt') && !f.startsWith('own-chat'))
  .sort()
  .map((f) => fs.readFileSync(path.join(corpusDir, f), 'utf8'));

/** Deterministic xorshift in [0, 1). */
let seed = 0x2545f491;
const rnd = (): number => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 2 ** 32;
};
const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
/** ~`tokens` tokens of corpus text (~3.5 characters per token): slices from random places. */
const text = (tokens: number): string => {
  let want = Math.round(tokens * 3.5);
  const parts: string[] = [];
  while (want > 0) {
    const t = corpus[int(0, corpus.length - 1)]!;
    const n = Math.min(t.length, want, 20_000);
    const at = int(0, t.length - n);
    parts.push(t.slice(at, at + n));
    want -= n;
  }
  return parts.join('\n\n');
};

const loaded = loadTokenizer({ kind: 'hf', dir: modelDir });
const tok = loaded.tokenizer;

interface Sample {
  renderMs: number;
  encodeMs: number;
  tokens: number;
  tokenized: number;
}

function cpuMs(fn: () => void): number {
  const c0 = process.cpuUsage();
  fn();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
}

async function measure(enc: PromptEncoder, conv: TemplateMessage[], out: Sample[]): Promise<void> {
  let rendered = '';
  const renderMs = cpuMs(() => {
    rendered = loaded.template.render(conv, { addGenerationPrompt: true });
  });
  const stats = { tokenizedChars: 0, offloaded: false };
  const c0 = process.cpuUsage();
  const ids = await enc.encode(rendered, stats);
  const c = process.cpuUsage(c0);
  out.push({
    renderMs,
    encodeMs: (c.user + c.system) / 1000,
    tokens: ids.length,
    tokenized: stats.tokenizedChars,
  });
}

function chatScript(sessions: number, maxTokens: number): { s: number; conv: TemplateMessage[] }[] {
  const convs: TemplateMessage[][] = [];
  const lens: number[] = [];
  for (let s = 0; s < sessions; s++) {
    convs.push([{ role: 'system', content: text(int(300, 1200)) }]);
    lens.push(0);
  }
  const steps: { s: number; conv: TemplateMessage[] }[] = [];
  const live = new Set(convs.keys());
  while (live.size > 0) {
    const s = [...live][int(0, live.size - 1)]!;
    const conv = convs[s]!;
    if (conv.length > 1) conv.push({ role: 'assistant', content: text(200) });
    conv.push({ role: 'user', content: text(int(300, 600)) });
    lens[s] = lens[s]! + 700;
    steps.push({ s, conv: [...conv] });
    if (lens[s]! >= maxTokens) live.delete(s);
  }
  return steps;
}

function agentScript(from: number, to: number, step: number): TemplateMessage[][] {
  const conv: TemplateMessage[] = [
    { role: 'system', content: text(from / 2) },
    { role: 'user', content: text(from / 2) },
  ];
  const out: TemplateMessage[][] = [[...conv]];
  for (let n = from; n < to; n += step) {
    conv.push({
      role: 'assistant',
      content: '',
      tool_calls: [
        {
          type: 'function',
          function: {
            name: 'read_file',
            arguments: { path: `src/file_${int(0, 999)}.ts`, offset: int(0, 500) },
          },
        },
      ],
    } as TemplateMessage);
    conv.push({ role: 'tool', content: text(step - 100) });
    out.push([...conv]);
  }
  return out;
}

const summary = (xs: Sample[]) => {
  const med = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? NaN;
  const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
  return {
    requests: xs.length,
    tokensMean: Math.round(mean(xs.map((x) => x.tokens))),
    encodeMsMean: +mean(xs.map((x) => x.encodeMs)).toFixed(3),
    encodeMsP50: +med(xs.map((x) => x.encodeMs)).toFixed(3),
    renderMsMean: +mean(xs.map((x) => x.renderMs)).toFixed(3),
    tokenizedCharsMean: Math.round(mean(xs.map((x) => x.tokenized))),
  };
};

const result: Record<string, unknown> = { engine: loaded.engine };
const chat = chatScript(quick ? 6 : 24, 8000);
const agent = agentScript(20_000, quick ? 40_000 : 150_000, 2_000);
for (const mode of ['default', 'fastokens'] as const) {
  // Warm-up (JIT, word cache) on other text, then a fresh encoder per workload.
  const warm = new PromptEncoder({ tokenizer: tok, mode });
  for (const st of chatScript(2, 3000))
    await warm.encode(loaded.template.render(st.conv, { addGenerationPrompt: true }));
  const chatSamples: Sample[] = [];
  const e1 = new PromptEncoder({ tokenizer: tok, mode });
  for (const st of chat) await measure(e1, st.conv, chatSamples);
  const agentSamples: Sample[] = [];
  const e2 = new PromptEncoder({ tokenizer: tok, mode });
  for (const conv of agent) await measure(e2, conv, agentSamples);
  result[`chat ${mode}`] = summary(chatSamples);
  result[`agent ${mode}`] = summary(agentSamples);
}
process.stdout.write(`${JSON.stringify(result)}\n`);
