/**
 * engine-sim throughput: N simulated engines on a virtual clock, Poisson arrivals, prompts sharing
 * a few long prefixes. Reports wall time per simulated hour and per pass. Proposed by the engine-sim
 * owner; needs "@kvrouter/engine-sim": "workspace:*" in benchmarks/package.json.
 */
import { SimEngine } from '@kvrouter/engine-sim';
import { Rng } from '@kvrouter/testkit';
import type { Row, Suite } from '../harness.js';

function simulate(engines: number, simMs: number, ratePerEngine: number) {
  const rng = new Rng(1);
  const prefixes = Array.from({ length: 32 }, (_, k) =>
    Uint32Array.from({ length: 2048 }, (_, i) => 1 + ((k * 7919 + i * 31) % 31999)),
  );
  let uniq = 1;
  const eng = Array.from({ length: engines }, (_, i) => new SimEngine({ seed: i }));
  const busyUntil = new Float64Array(engines);
  let nextArrival = 0;
  let now = 0;
  let id = 0;
  let passes = 0;
  let tokens = 0;
  const t0 = performance.now();
  for (;;) {
    let e = -1;
    let te = Infinity;
    for (let i = 0; i < engines; i++) {
      if (eng[i]!.hasWork() && busyUntil[i]! < te) {
        te = busyUntil[i]!;
        e = i;
      }
    }
    if (nextArrival <= te && nextArrival < simMs) {
      now = nextArrival;
      const isl = rng.int(512, 8192);
      const p = new Uint32Array(isl);
      const shared = rng.bool(0.7) ? Math.min(2048, isl) : 0;
      if (shared > 0) p.set(rng.pick(prefixes).subarray(0, shared));
      for (let i = shared; i < isl; i++) p[i] = 1 + (((uniq++ * 2654435761) >>> 0) % 31999);
      const k = rng.int(0, engines - 1);
      eng[k]!.enqueue({ id: `r${id++}`, tokenIds: p, maxTokens: rng.int(50, 500) }, now);
      nextArrival += (-Math.log(1 - rng.next()) * 1000) / (ratePerEngine * engines);
      continue;
    }
    if (e < 0) break;
    // An engine that sat idle has a stale busyUntil: it starts when its work arrived.
    now = Math.max(now, te);
    const r = eng[e]!.step(now);
    busyUntil[e] = now + r.durationMs;
    passes++;
    tokens += r.emitted.length;
  }
  return { wallMs: performance.now() - t0, passes, tokens, requests: id };
}

export const suite: Suite = {
  name: 'engine-sim',
  description: 'simulated engines on a virtual clock: wall time per simulated hour',
  async run(ctx) {
    const rows: Row[] = [];
    const simMs = ctx.quick ? 300_000 : 3_600_000;
    for (const rate of [1, 2]) {
      ctx.progress(`rate ${rate}/s/engine`, 0, 1);
      const r = simulate(8, simMs, rate);
      ctx.progress(`rate ${rate}/s/engine`, 1, 1);
      rows.push({
        name: `8 engines, ${simMs / 60_000} simulated min, ${rate} req/s/engine`,
        value: r.wallMs / 1000,
        unit: 's wall',
        extra: {
          requests: r.requests,
          passes: r.passes,
          tokens: r.tokens,
          usPerPass: +((r.wallMs * 1000) / r.passes).toFixed(2),
        },
      });
    }
    return rows;
  },
};
