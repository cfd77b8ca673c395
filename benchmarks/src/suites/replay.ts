/**
 * Deterministic replay speed: the `multi-turn` synthetic workload (the must-show workload of
 * tools/replay/README.md) on 8 simulated workers with the real KvRouter in kv mode. One hour of
 * session arrivals (10 minutes with --quick); reports wall time of the simulation and of the
 * oracle bounds, and CPU time (steadier than wall time on a shared machine).
 */
import { resolveConfig } from '@kvrouter/config';
import { generateSynthetic, kvRouterPolicy, oracleBounds, PRESETS, runSimulation } from '@kvrouter/sim';
import type { Row, Suite } from '../harness.js';

export const suite: Suite = {
  name: 'replay',
  description:
    'deterministic simulation: multi-turn workload, 8 workers, kv router, wall time per simulated hour',
  async run(ctx) {
    const preset = PRESETS['multi-turn']!;
    const traceS = ctx.quick ? 600 : 3600;
    const rows = generateSynthetic({ ...preset, sessions: Math.round(preset.sessionRate! * traceS) }, 0);
    const { config } = resolveConfig('router', ['--router-mode', 'kv'], {});
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let simMs = 0;
    const res = await runSimulation(rows, { numWorkers: 8, seed: 0 }, kvRouterPolicy(config), {
      onProgress: (p) => {
        simMs = p.simMs;
        ctx.progress(`simulated ${(p.simMs / 60_000).toFixed(0)} min`, p.done, p.total);
      },
    });
    const wall = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const t1 = performance.now();
    const o = oracleBounds(rows, {
      blockSize: 64,
      capacityBlocks: 8 * 16384,
      traceBlockSize: 512,
      vocabSize: 32000,
    });
    const oracleWall = (performance.now() - t1) / 1000;
    let prompt = 0;
    for (const u of res.units) prompt += u.promptTokens;
    return [
      {
        name: `multi-turn, ${traceS / 60} min of arrivals (${(simMs / 60_000).toFixed(1)} simulated min), 8 workers, kv`,
        value: wall,
        unit: 's wall',
        extra: {
          requests: rows.length,
          promptMTokens: +(prompt / 1e6).toFixed(1),
          cpuS: +((cpu.user + cpu.system) / 1e6).toFixed(1),
          simSpeedup: +(simMs / 1000 / wall).toFixed(0),
          oracleWallS: +oracleWall.toFixed(1),
          pooledHit: +o.pooledHitRate.toFixed(4),
        },
      },
    ] satisfies Row[];
  },
};
