/**
 * The frontend's prompt stage with real models (chat template render + PromptEncoder, inline, one
 * thread): `default` (whole prompt per request) vs `fastokens` (incremental prefix cache), on
 * multi-turn chat growing to ~8k tokens and an agent session growing from ~20k to ~150k tokens by
 * ~2k per turn with tool calls. Runs apps/frontend/src/bench/encode.ts per model in a child
 * process (benchmarks never import an app) and reports CPU ms per request for each stage.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CORPUS_DIR, FAMILIES, familyDir } from '@kvrouter/tokenizer/testing';
import type { Row, Suite, SuiteContext } from '../harness.js';

const script = fileURLToPath(new URL('../../../apps/frontend/src/bench/encode.ts', import.meta.url));

interface Summary {
  requests: number;
  tokensMean: number;
  encodeMsMean: number;
  encodeMsP50: number;
  renderMsMean: number;
  tokenizedCharsMean: number;
}

export const suite: Suite = {
  name: 'tokenizer-frontend',
  description:
    'frontend prompt stage with real models: template render + encode CPU ms per request, default vs fastokens (incremental), 8k-token chat and 20k->150k agent sessions',
  async run(ctx: SuiteContext): Promise<Row[]> {
    const rows: Row[] = [];
    const families = FAMILIES.filter((f) =>
      ctx.quick ? f.name === 'qwen3' : f.name === 'qwen3' || f.name === 'deepseek_v3',
    );
    for (const [i, fam] of families.entries()) {
      ctx.progress(`${fam.name}`, i, families.length);
      const args = ['--conditions=source', '--import', 'tsx', script, familyDir(fam), CORPUS_DIR];
      if (ctx.quick) args.push('quick');
      const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 24 });
      if (r.status !== 0) throw new Error(`encode.ts (${fam.name}) failed: ${r.stderr}`);
      const res = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, Summary | string>;
      for (const w of ['chat', 'agent'])
        for (const mode of ['default', 'fastokens']) {
          const s = res[`${w} ${mode}`] as Summary;
          rows.push({
            name: `${fam.name} ${w} ${mode}`,
            value: s.encodeMsMean,
            unit: 'encode ms/req',
            extra: {
              'encode p50': s.encodeMsP50,
              'render ms': s.renderMsMean,
              tokens: s.tokensMean,
              'tokenized chars': s.tokenizedCharsMean,
              requests: s.requests,
              engine: res.engine as string,
            },
          });
        }
    }
    ctx.progress('done', families.length, families.length);
    return rows;
  },
};
