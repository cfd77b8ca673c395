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
import { PromptEncoder } from '../tokenizer/encoder.js';
import { loadTokenizer } from '../tokenizer/load.js';
import type { TemplateMessage } from '../tokenizer/template.js';
import { agentTurns, chatTurns, corpusText, cpuMs } from './agent.js';

const [modelDir, corpusDir, quickArg] = process.argv.slice(2);
if (!modelDir || !corpusDir) throw new Error('usage: encode.ts <model dir> <corpus dir> [quick]');
const quick = quickArg === 'quick';
const corpus = corpusText(corpusDir, 0x2545f491);

const loaded = loadTokenizer({ kind: 'hf', dir: modelDir });
const tok = loaded.tokenizer;

interface Sample {
  renderMs: number;
  encodeMs: number;
  tokens: number;
  tokenized: number;
}

async function measure(enc: PromptEncoder, conv: TemplateMessage[], out: Sample[]): Promise<void> {
  // As encodeChat renders and tokenizes a chat inline: the template's pieces, then fastokens cuts
  // and hashes them as they are (default tokenizes their concatenation).
  let rendered: string[] = [];
  const opts = { addGenerationPrompt: true };
  const renderMs = cpuMs(() => {
    rendered = loaded.template.renderPieces?.(conv, opts) ?? [loaded.template.render(conv, opts)];
  });
  const stats = { tokenizedChars: 0, offloaded: false };
  const c0 = process.cpuUsage();
  const ids = await enc.encodeRendered(rendered, stats);
  const c = process.cpuUsage(c0);
  out.push({
    renderMs,
    encodeMs: (c.user + c.system) / 1000,
    tokens: ids.length,
    tokenized: stats.tokenizedChars,
  });
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
const chat = chatTurns(corpus, quick ? 6 : 24, 8000);
const agent = agentTurns(corpus, {
  fromTokens: 20_000,
  toTokens: quick ? 40_000 : 150_000,
  stepTokens: 2_000,
});
for (const mode of ['default', 'fastokens'] as const) {
  // Warm-up (JIT, word cache) on other text, then a fresh encoder per workload.
  const warm = new PromptEncoder({ tokenizer: tok, mode });
  for (const st of chatTurns(corpusText(corpusDir, 7), 2, 3000))
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
