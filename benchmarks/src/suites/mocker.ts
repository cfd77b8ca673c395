/**
 * Mocker token timing in real time: 64 simulated workers in one process (one shared pass timer),
 * speedup 1, inproc request plane, mem discovery. Every request's send time and every token's
 * arrival time are recorded at the client; afterwards each worker's arrivals are replayed into a
 * fresh `SimEngine` on a virtual timeline (the engine model alone, none of the driver's code), and
 * the observed times are compared with the model's:
 * - isolated: requests spaced so that each runs alone (the model is exact: error = timer jitter);
 * - loaded: Poisson arrivals, batches form (errors also include arrivals that fall on the other side
 *   of a pass boundary than in the replay).
 * Figures: relative error of end-to-end latency, TTFT and mean ITL per request (p50 / p90), the
 * share of requests within 5 %, and the absolute per-token lateness.
 */
import { SimEngine, type EngineConfig } from '@kvrouter/engine-sim';
import { InprocHub, InprocRequestClient, MemDiscoveryHub } from '@kvrouter/runtime';
import { PassScheduler, SimFleet } from '@kvrouter/sim-worker';
import { type GenerateItem } from '@kvrouter/protocols';
import { Rng } from '@kvrouter/testkit';
import { stats, type Row, type Suite, type SuiteContext } from '../harness.js';

const WORKERS = 64;
const ENGINE: Partial<EngineConfig> = { numGpuBlocks: 16384, blockSize: 64 };

interface Sent {
  id: string;
  worker: number;
  t: number;
  tokens: Uint32Array;
  maxTokens: number;
  got: number[];
}

interface Plan {
  worker: number;
  at: number;
  isl: number;
  osl: number;
}

function isolatedPlan(rng: Rng, durationMs: number): Plan[] {
  // One request per worker at a time, the next 300-600 ms after the previous one's expected end.
  const out: Plan[] = [];
  for (let w = 0; w < WORKERS; w++) {
    let t = rng.next() * 200;
    for (;;) {
      const isl = rng.int(256, 2048);
      const osl = rng.int(16, 64);
      if (t > durationMs) break;
      out.push({ worker: w, at: t, isl, osl });
      t += 40 + osl * 7 + 300 + rng.next() * 300;
    }
  }
  return out.sort((a, b) => a.at - b.at);
}

function poissonPlan(rng: Rng, durationMs: number, ratePerWorker: number): Plan[] {
  const out: Plan[] = [];
  for (let w = 0; w < WORKERS; w++) {
    let t = 0;
    for (;;) {
      t += (-Math.log(1 - rng.next()) * 1000) / ratePerWorker;
      if (t > durationMs) break;
      out.push({ worker: w, at: t, isl: rng.int(256, 4096), osl: rng.int(16, 128) });
    }
  }
  return out.sort((a, b) => a.at - b.at);
}

/** Token arrival times of the engine model for one worker's arrivals (same seed, same order). */
function modelTimes(seed: number, reqs: Sent[]): Map<string, number[]> {
  const eng = new SimEngine({ ...ENGINE, seed });
  const out = new Map<string, number[]>(reqs.map((r) => [r.id, []]));
  let i = 0;
  let t = 0;
  let passEnd = -Infinity;
  while (i < reqs.length || eng.hasWork()) {
    // A lane that has work starts its next pass when the previous one ends; an idle one at the next arrival.
    t = eng.hasWork() ? passEnd : Math.max(t, reqs[i].t);
    while (i < reqs.length && reqs[i].t <= t) {
      const r = reqs[i++];
      eng.enqueue({ id: r.id, tokenIds: r.tokens, maxTokens: r.maxTokens }, t);
    }
    const res = eng.step(t);
    passEnd = t + res.durationMs;
    for (const e of res.emitted) out.get(e.requestId)!.push(passEnd);
  }
  return out;
}

async function runScenario(name: string, plan: Plan[], ctx: SuiteContext): Promise<Row[]> {
  const disc = new MemDiscoveryHub();
  const rpc = new InprocHub();
  const scheduler = new PassScheduler();
  const fleet = await SimFleet.start({
    numWorkers: WORKERS,
    openDiscovery: async () => disc.connect(),
    namespace: 'bench',
    component: 'mocker',
    modelName: 'mock',
    engine: ENGINE,
    requestPlane: { kind: 'inproc', hub: rpc },
    scheduler,
    seed: 0,
  });
  const client = new InprocRequestClient(rpc);
  const rng = new Rng(7);
  const elu0 = performance.eventLoopUtilization();
  const sent: Sent[] = [];
  const streams: Promise<void>[] = [];
  const t0 = performance.now() + 50;
  let idx = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now() - t0;
      while (idx < plan.length && plan[idx].at <= now) {
        const p = plan[idx++];
        const tokens = new Uint32Array(p.isl);
        for (let k = 0; k < p.isl; k++) tokens[k] = 1 + rng.int(0, 31997);
        const s: Sent = {
          id: `r${idx}`,
          worker: p.worker,
          t: performance.now(),
          tokens,
          maxTokens: p.osl,
          got: [],
        };
        sent.push(s);
        const w = fleet.workers[p.worker];
        streams.push(
          (async () => {
            const payload = {
              request_id: s.id,
              model: 'mock',
              token_ids: tokens,
              stop_conditions: { max_tokens: p.osl },
            };
            for await (const item of client.stream<GenerateItem>(w.instance.transport, 'generate', payload)) {
              const at = performance.now();
              for (let k = 0; k < item.token_ids.length; k++) s.got.push(at);
            }
          })(),
        );
      }
      if (idx % 500 === 0) ctx.progress(`${name} sending`, idx, plan.length);
      if (idx < plan.length) setTimeout(tick, Math.max(0, Math.min(5, plan[idx].at - now)));
      else resolve();
    };
    setTimeout(tick, 50);
  });
  await Promise.all(streams);
  const elu = performance.eventLoopUtilization(elu0);
  const lagResets = fleet.workers.reduce((a, w) => a + w.stats.lagResets, 0);
  await client.close();
  await fleet.stop();

  const e2e: number[] = [];
  const ttft: number[] = [];
  const itl: number[] = [];
  const lateness: number[] = [];
  let within5 = 0;
  let sameCount = 0;
  for (let w = 0; w < WORKERS; w++) {
    const reqs = sent.filter((s) => s.worker === w);
    // Arrival order = send order; times are relative to performance.now(), as the workers' clock.
    const model = modelTimes(w, reqs);
    for (const s of reqs) {
      const m = model.get(s.id)!;
      if (m.length !== s.got.length) continue;
      sameCount++;
      for (let k = 0; k < m.length; k++) lateness.push(s.got[k] - m[k]);
      const rel = (a: number, b: number) => Math.abs(a - b) / b;
      const e = rel(s.got.at(-1)! - s.t, m.at(-1)! - s.t);
      e2e.push(e * 100);
      if (e <= 0.05) within5++;
      ttft.push(rel(s.got[0] - s.t, m[0] - s.t) * 100);
      if (m.length > 1) {
        const gotItl = (s.got.at(-1)! - s.got[0]) / (m.length - 1);
        const modelItl = (m.at(-1)! - m[0]) / (m.length - 1);
        itl.push(rel(gotItl, modelItl) * 100);
      }
    }
  }
  const se = stats(e2e);
  const st = stats(ttft);
  const si = stats(itl);
  const sl = stats(lateness);
  const sa = stats(lateness.map(Math.abs));
  const label = `${name}: ${WORKERS} workers, ${sent.length} requests`;
  return [
    {
      name: `${label}, end-to-end latency error vs model`,
      value: se.p50,
      unit: '% p50',
      extra: {
        p90: se.p90,
        p99: se.p99,
        within5pct: `${((within5 / Math.max(1, sameCount)) * 100).toFixed(1)}%`,
      },
    },
    {
      name: `${label}, TTFT error vs model`,
      value: st.p50,
      unit: '% p50',
      extra: { p90: st.p90, p99: st.p99 },
    },
    {
      name: `${label}, mean ITL error vs model`,
      value: si.p50,
      unit: '% p50',
      extra: { p90: si.p90, p99: si.p99 },
    },
    {
      name: `${label}, token lateness vs model`,
      value: sl.p50,
      unit: 'ms p50',
      extra: { mean: sl.mean, p90: sl.p90, p99: sl.p99, tokens: lateness.length, lagResets },
    },
    {
      name: `${label}, |token time − model|`,
      value: sa.p50,
      unit: 'ms p50',
      extra: { p90: sa.p90, p99: sa.p99 },
    },
    { name: `${label}, event loop utilisation (workers + client)`, value: elu.utilization * 100, unit: '%' },
  ];
}

export const suite: Suite = {
  name: 'mocker',
  description: '64 simulated workers in one process at speedup 1: token timing vs the engine model',
  async run(ctx) {
    const durationMs = ctx.quick ? 3000 : 10_000;
    const rows: Row[] = [];
    rows.push(...(await runScenario('isolated', isolatedPlan(new Rng(1), durationMs), ctx)));
    rows.push(...(await runScenario('poisson 2 req/s/worker', poissonPlan(new Rng(2), durationMs, 2), ctx)));
    return rows;
  },
};
