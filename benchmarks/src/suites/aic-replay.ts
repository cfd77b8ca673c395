/**
 * The AIC must-show: static prompt load (`--router-prefill-load-model none`) vs AIC oldest-prefill
 * decay on a prefill-heavy workload, with the deterministic simulator (same engines and trace for
 * every configuration; results depend on the seed, not on machine load). Engines use the §17
 * polynomial timing, so three predictors are compared: none, the analytic AIC model for the
 * configuration the polynomial resembles (nvidia/Llama-3.1-8B-Instruct-FP8, h200_sxm, vLLM), and
 * an engine-matched predictor (a lone request's exact prefill time on an idle simulated engine),
 * which bounds what a perfectly calibrated model could do. Each under the default cost (prompt
 * blocks of active requests counted as decode load) and with `--no-router-track-active-blocks`
 * (the prompt-side load alone).
 *
 * The same comparison from the command line (README of packages/aic-model):
 *   pnpm replay compare --synthetic custom --sessions 6000 --session-rate 40 --turns const:1 \
 *     --system-prompts 8 --system-prompt-tokens 1024 --user-tokens lognormal:6000:0.6:1024:32000 \
 *     --output-tokens const:16 --num-workers 8 -c "--router-mode kv" -c "--router-mode kv \
 *     --router-prefill-load-model aic --aic-backend vllm --aic-system h200_sxm \
 *     --aic-model-path nvidia/Llama-3.1-8B-Instruct-FP8"
 */
import { resolveConfig } from '@kvrouter/config';
import { DEFAULT_ENGINE_CONFIG, POLYNOMIAL_TIMING } from '@kvrouter/engine-sim';
import {
  buildReport,
  generateSynthetic,
  kvRouterPolicy,
  parseDist,
  runSimulation,
  type KvPolicyOptions,
} from '@kvrouter/sim';
import type { Row, Suite } from '../harness.js';

const AIC = [
  '--router-prefill-load-model',
  'aic',
  '--aic-backend',
  'vllm',
  '--aic-system',
  'h200_sxm',
  '--aic-model-path',
  'nvidia/Llama-3.1-8B-Instruct-FP8',
];

/** Prefill of the uncached tokens alone on an idle engine: passes of at most max_num_batched_tokens. */
function engineMatched(q: { isl: number; prefixTokens: number }): number {
  const chunk = DEFAULT_ENGINE_CONFIG.maxNumBatchedTokens;
  let t = 0;
  for (let left = q.isl - Math.min(q.prefixTokens, q.isl); left > 0; left -= chunk)
    t += POLYNOMIAL_TIMING.prefillMs(Math.min(left, chunk));
  return t;
}

export const suite: Suite = {
  name: 'aic-replay',
  description:
    'TTFT with static vs AIC-decayed prefill load: prefill-heavy trace, 8 simulated workers near capacity',
  async run(ctx) {
    const sessions = ctx.quick ? 1500 : 6000;
    const rows = generateSynthetic(
      {
        sessions,
        sessionRate: 40,
        turns: parseDist('const:1', '--turns'),
        systemPrompts: 8,
        systemPromptTokens: 1024,
        userTokens: parseDist('lognormal:6000:0.6:1024:32000', '--user-tokens'),
        outputTokens: parseDist('const:16', '--output-tokens'),
      },
      0,
    );
    const variants: [string, string[]][] = [
      ['default cost', []],
      ['--no-router-track-active-blocks', ['--no-router-track-active-blocks']],
    ];
    const predictors: [string, string[], KvPolicyOptions][] = [
      ['none', [], {}],
      ['aic analytic', AIC, {}],
      ['aic engine-matched', AIC, { prefillDurationPredictor: engineMatched }],
    ];
    const out: Row[] = [];
    const total = variants.length * predictors.length;
    let step = 0;
    for (const [vName, vFlags] of variants) {
      let base: { p50: number; p90: number; p99: number; mean: number } | null = null;
      for (const [pName, pFlags, popts] of predictors) {
        ctx.progress(`${vName} · ${pName}`, step++, total);
        const { config } = resolveConfig('router', ['--router-mode', 'kv', ...vFlags, ...pFlags], {});
        const res = await runSimulation(rows, { numWorkers: 8, seed: 0 }, kvRouterPolicy(config, popts));
        const r = buildReport(res, null);
        const t = r.ttft_ms;
        base ??= t;
        out.push({
          name: `${vName} · ${pName}`,
          value: t.p50,
          unit: 'ms TTFT p50',
          extra: {
            p90: t.p90,
            p99: t.p99,
            mean: t.mean,
            'p50 x none': +(t.p50 / base.p50).toFixed(3),
            'p90 x none': +(t.p90 / base.p90).toFixed(3),
            'p99 x none': +(t.p99 / base.p99).toFixed(3),
            requests: rows.length,
            utilization: r.load_balance ? +r.load_balance.mean_utilization.toFixed(3) : 'n/a',
          },
        });
      }
    }
    ctx.progress('done', total, total);
    return out;
  },
};
