/**
 * Benchmark workloads of real text (packages/tokenizer/fixtures/corpus: prose, code, JSON, 13
 * languages), shared by the prompt-stage benches (encode.ts, long-prompt.ts) and the frontend load
 * client (load.ts): deterministic (seeded), no dependency.
 * - `chatTurns`: multi-turn chat sessions growing to ~`maxTokens` (system prompt, 300-600-token
 *   user turns, ~200-token replies), requests interleaved across sessions;
 * - `agentTurns`: one agent session growing from ~`fromTokens` to ~`toTokens` by ~`stepTokens` per
 *   turn, each turn an assistant tool call (`read_file`) and its tool result.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Rng } from '@kvrouter/testkit';
import type { TemplateMessage } from '../tokenizer/template.js';

/** CPU milliseconds (user + system) of `fn` on this process. */
export function cpuMs(fn: () => void): number {
  const c0 = process.cpuUsage();
  fn();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
}

/** Text source: `text(tokens)` = ~`tokens` tokens (~3.5 characters each) of corpus slices from seeded places. */
export interface CorpusText {
  text(tokens: number): string;
  int(lo: number, hi: number): number;
}

export function corpusText(corpusDir: string, seed: number): CorpusText {
  const corpus = fs
    .readdirSync(corpusDir)
    .filter((f) => f.endsWith('.txt') && !f.startsWith('own-chat'))
    .sort()
    .map((f) => fs.readFileSync(path.join(corpusDir, f), 'utf8'));
  const rng = new Rng(seed);
  const int = (lo: number, hi: number) => rng.int(lo, hi);
  return {
    int,
    text(tokens: number): string {
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
    },
  };
}

export function chatTurns(
  c: CorpusText,
  sessions: number,
  maxTokens: number,
): { s: number; conv: TemplateMessage[] }[] {
  const convs: TemplateMessage[][] = [];
  const lens: number[] = [];
  for (let s = 0; s < sessions; s++) {
    convs.push([{ role: 'system', content: c.text(c.int(300, 1200)) }]);
    lens.push(0);
  }
  const steps: { s: number; conv: TemplateMessage[] }[] = [];
  const live = new Set(convs.keys());
  while (live.size > 0) {
    const s = [...live][c.int(0, live.size - 1)]!;
    const conv = convs[s]!;
    if (conv.length > 1) conv.push({ role: 'assistant', content: c.text(200) });
    conv.push({ role: 'user', content: c.text(c.int(300, 600)) });
    lens[s] = lens[s]! + 700;
    steps.push({ s, conv: [...conv] });
    if (lens[s]! >= maxTokens) live.delete(s);
  }
  return steps;
}

export function agentTurns(
  c: CorpusText,
  o: { fromTokens: number; toTokens: number; stepTokens: number },
): TemplateMessage[][] {
  const conv: TemplateMessage[] = [
    { role: 'system', content: c.text(o.fromTokens / 2) },
    { role: 'user', content: c.text(o.fromTokens / 2) },
  ];
  const out: TemplateMessage[][] = [[...conv]];
  for (let n = o.fromTokens; n < o.toTokens; n += o.stepTokens) {
    conv.push({
      role: 'assistant',
      content: '',
      tool_calls: [
        {
          type: 'function',
          function: {
            name: 'read_file',
            arguments: { path: `src/file_${c.int(0, 999)}.ts`, offset: c.int(0, 500) },
          },
        },
      ],
    } as TemplateMessage);
    conv.push({ role: 'tool', content: c.text(o.stepTokens - 100) });
    out.push([...conv]);
  }
  return out;
}
