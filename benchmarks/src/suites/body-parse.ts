/**
 * `pnpm bench body-parse`: where a large chat body is parsed (issue 14). One agent request's body
 * (~150k, ~75k, ~20k tokens of the bench's agent session; an 8k-token chat for contrast) from its
 * 64 KiB socket chunks to the parsed object: decoded whole and parsed (`whole text`, the frontend
 * before), parsed from its bytes on the event loop (`bytes inline`, the default), and on the body
 * thread (`body thread`, `--http-body-thread-bytes`). Event-loop ms and process CPU ms per body,
 * medians. Runs apps/frontend/src/bench/body-parse.ts in a child process (benchmarks never import
 * an app).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CORPUS_DIR } from '@kvrouter/tokenizer/testing';
import type { Row, Suite, SuiteContext } from '../harness.js';

const script = fileURLToPath(new URL('../../../apps/frontend/src/bench/body-parse.ts', import.meta.url));

export const suite: Suite = {
  name: 'body-parse',
  description:
    'one chat body from socket chunks to the parsed object: decoded whole + JSON.parse, parsed from its bytes inline (default), on the body thread (event-loop ms and process CPU ms, medians)',
  async run(ctx: SuiteContext): Promise<Row[]> {
    ctx.progress('bodies', 0, 1);
    const args = ['--conditions=source', '--import', 'tsx', script, CORPUS_DIR];
    if (ctx.quick) args.push('quick');
    const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 24 });
    if (r.status !== 0) throw new Error(`body-parse.ts failed: ${r.stderr}`);
    ctx.progress('bodies', 1, 1);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<
      string,
      Record<string, { loopMs: number; cpuMs: number } | number>
    >;
    const rows: Row[] = [];
    for (const [body, m] of Object.entries(res)) {
      const bytes = m.bytes as number;
      for (const [way, f] of Object.entries(m)) {
        if (typeof f === 'number') continue;
        rows.push({
          name: `${body}: ${way}`,
          value: f.loopMs,
          unit: 'loop ms p50',
          extra: { 'process CPU ms p50': f.cpuMs, 'body bytes': bytes },
        });
      }
    }
    return rows;
  },
};
