/**
 * core-cost hot paths, per routing decision and per lifecycle event:
 * - score: computeCosts + pick over 64 / 256 candidates (T = 0 and T = 0.5), and the ttft policy's
 *   computeTtftCosts + pickTtft;
 * - loads: MultiWorkerSequences.fillLoads for 256 ranks with a 128-block prompt (one walk of the
 *   holder tree for every rank's prefix depth, flat per-slot load rows), looked up by rank and
 *   with the (slot, generation) the router caches — the full snapshot taken before scoring;
 * - book: addRequest + free of a 128-block prompt on a rank already holding 1000 requests, and of
 *   a 2048-block (32k-token) prompt sharing 1024 blocks with live requests, on one of 256 ranks;
 * - output: addOutputTokens per streamed token on a 128-block request with osl;
 * - queue: push + pop at a depth of 10 000.
 * Figures: median ns per operation (median of reps of the mean over a batch).
 */
import {
  CandidateBatch,
  computeCosts,
  CostBreakdown,
  DEFAULT_COST_PARAMS,
  DEFAULT_TTFT_PARAMS,
  MultiWorkerSequences,
  computeTtftCosts,
  pickIndex,
  pickTtft,
  RouterQueue,
  type AddRequestInput,
} from '@kvrouter/core-cost';
import type { WorkerWithDpRank } from '@kvrouter/protocols';
import type { Row, Suite, SuiteContext } from '../harness.js';

/** xorshift32: deterministic and allocation-free. */
function rng(seed: number) {
  let s = seed >>> 0 || 1;
  const u32 = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>>= 0);
  };
  return { u32, next: () => u32() / 4294967296 };
}

function medianNs(fn: (i: number) => void, iters: number, reps: number): number {
  for (let i = 0; i < Math.min(iters, 200); i++) fn(i);
  const t: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) fn(i);
    t.push(Number(process.hrtime.bigint() - t0) / iters);
  }
  t.sort((a, b) => a - b);
  return t[Math.floor(t.length / 2)];
}

const rank = (i: number) => ({ worker_id: BigInt(1000 + (i >> 3)), dp_rank: i & 7 }) as WorkerWithDpRank;

function chain(family: number, n: number): Uint32Array {
  const a = new Uint32Array(2 * n);
  for (let k = 0; k < n; k++) {
    a[2 * k] = Math.imul(family + 1, 0x9e3779b1) ^ k;
    a[2 * k + 1] = (family * 7919 + k) >>> 0;
  }
  return a;
}

export const suite: Suite = {
  name: 'cost',
  description: 'core-cost: scoring, load snapshot, booking, output tracking, queue (ns per op)',
  run(ctx: SuiteContext): Promise<Row[]> {
    const rows: Row[] = [];
    const reps = ctx.quick ? 5 : 15;
    const r = rng(42);
    const total = 11;
    let done = 0;
    const step = (label: string) => ctx.progress(label, ++done, total);

    // --- score ---------------------------------------------------------------------------
    for (const n of [64, 256]) {
      const batch = new CandidateBatch(n).reset(n);
      for (let i = 0; i < n; i++) {
        batch.workers[i] = rank(i);
        batch.deviceBlocks[i] = r.u32() % 128;
        batch.hostExtBlocks[i] = r.u32() % 8;
        batch.activePrefillTokens[i] = r.u32() % 20_000;
        batch.activeDecodeBlocks[i] = r.u32() % 4000;
        batch.activeRequests[i] = r.u32() % 64;
        batch.activePrefixDepth[i] = r.u32() % 64;
      }
      const out = new CostBreakdown();
      const req = { isl: 2048, blockSize: 16 };
      const p = { ...DEFAULT_COST_PARAMS, creditDecay: 1 };
      for (const t of [0, 0.5]) {
        const params = { ...p, temperature: t };
        const ns = medianNs(
          () => {
            computeCosts(batch, req, params, out);
            pickIndex(out.cost, n, t, r.next);
          },
          ctx.quick ? 2000 : 20_000,
          reps,
        );
        rows.push({
          name: `computeCosts + pick, ${n} candidates, T=${t}`,
          value: ns,
          unit: 'ns/decision',
          extra: { nsPerCandidate: +(ns / n).toFixed(1) },
        });
        step('score');
      }
      for (let i = 0; i < n; i++) {
        batch.prefillRate[i] = 30 + (r.u32() % 20);
        batch.capacityBlocks[i] = 16_384;
      }
      const ns = medianNs(
        () => {
          computeTtftCosts(batch, req, DEFAULT_TTFT_PARAMS, true, 0.75, 0.25, out);
          pickTtft(out.cost, out.cachedTokens, n, r.next);
        },
        ctx.quick ? 2000 : 20_000,
        reps,
      );
      rows.push({
        name: `computeTtftCosts + pickTtft, ${n} candidates`,
        value: ns,
        unit: 'ns/decision',
        extra: { nsPerCandidate: +(ns / n).toFixed(1) },
      });
      step('score');
    }

    // --- loads snapshot ------------------------------------------------------------------
    const ranks = 256;
    const m = new MultiWorkerSequences({ blockSize: 16, trackOutputBlocks: true, randomU32: r.u32 });
    const prompt = chain(0, 128);
    let id = 0;
    for (let i = 0; i < ranks; i++) {
      // each rank holds 8 requests; some share a prefix of the benchmark prompt
      for (let k = 0; k < 8; k++) {
        const seq = k === 0 ? prompt.slice(0, 2 * (i % 128)) : chain(1 + i * 8 + k, 64);
        m.addRequest(rank(i), { requestId: `s${id++}`, isl: (seq.length / 2) * 16 + 5, seqHashes: seq }, 0);
      }
    }
    const batch = new CandidateBatch(ranks).reset(ranks);
    for (let i = 0; i < ranks; i++) batch.workers[i] = rank(i);
    const loadNs = medianNs(() => m.fillLoads(batch, prompt, 0), ctx.quick ? 500 : 5000, reps);
    rows.push({
      name: `fillLoads, ${ranks} ranks, 128-block prompt (rank lookup)`,
      value: loadNs,
      unit: 'ns/decision',
      extra: { nsPerCandidate: +(loadNs / ranks).toFixed(1) },
    });
    for (let i = 0; i < ranks; i++) {
      batch.loadSlot[i] = m.slotOf(rank(i));
      batch.loadGen[i] = m.slotGen(batch.loadSlot[i]);
    }
    const slotNs = medianNs(() => m.fillLoads(batch, prompt, 0), ctx.quick ? 500 : 5000, reps);
    rows.push({
      name: `fillLoads, ${ranks} ranks, 128-block prompt (cached slots, as the router)`,
      value: slotNs,
      unit: 'ns/decision',
      extra: { nsPerCandidate: +(slotNs / ranks).toFixed(1) },
    });
    step('loads');

    // --- booking -------------------------------------------------------------------------
    const one = new MultiWorkerSequences({ blockSize: 16, randomU32: r.u32 });
    const w = rank(0);
    for (let k = 0; k < 1000; k++)
      one.addRequest(w, { requestId: `bg${k}`, isl: 128 * 16, seqHashes: chain(10_000 + k, 128) }, 0);
    const inputs: AddRequestInput[] = Array.from({ length: 64 }, (_, k) => ({
      requestId: `b${k}`,
      isl: 128 * 16,
      cachedTokens: 512,
      seqHashes: chain(20_000 + k, 128),
    }));
    const bookNs = medianNs(
      (i) => {
        const inp = inputs[i & 63];
        one.addRequest(w, inp, 1);
        one.free(inp.requestId, 1);
      },
      ctx.quick ? 2000 : 20_000,
      reps,
    );
    rows.push({
      name: 'addRequest + free, 128-block prompt, 1000 live on the rank',
      value: bookNs,
      unit: 'ns/request',
      extra: { nsPerBlock: +(bookNs / 128).toFixed(1) },
    });
    step('book');

    // 32k-token prompts on 256 ranks: each rank holds 4 half-prompts of 4 of 16 families; a
    // booking shares 1024 blocks of its family with the rank and adds 1024 (as in `pnpm bench router`).
    const big = new MultiWorkerSequences({ blockSize: 16, randomU32: r.u32 });
    const fams = Array.from({ length: 16 }, (_, f) => chain(50_000 + f, 2048));
    for (let i = 0; i < ranks; i++)
      for (let k = 0; k < 4; k++)
        big.addRequest(
          rank(i),
          { requestId: `g${i}-${k}`, isl: 1024 * 16, seqHashes: fams[(i + k) % 16].subarray(0, 2048) },
          0,
        );
    const bigPrompts = Array.from({ length: 64 }, (_, k) => {
      const p = fams[k % 16].slice();
      p.set(chain(60_000 + k, 512), 2 * 1536);
      return p;
    });
    const bigNs = medianNs(
      (i) => {
        const id = `big${i}`;
        big.addRequest(
          rank((i * 37) & 255),
          { requestId: id, isl: 2048 * 16, seqHashes: bigPrompts[i & 63] },
          1,
        );
        big.free(id, 1);
      },
      ctx.quick ? 200 : 2000,
      reps,
    );
    rows.push({
      name: 'addRequest + free, 2048-block prompt, 256 ranks x 4 live half-prompts',
      value: bigNs,
      unit: 'ns/request',
      extra: { nsPerBlock: +(bigNs / 2048).toFixed(1) },
    });

    // --- output tokens -------------------------------------------------------------------
    const out = new MultiWorkerSequences({ blockSize: 16, trackOutputBlocks: true, randomU32: r.u32 });
    const streams = 64;
    for (let k = 0; k < streams; k++)
      out.addRequest(
        w,
        {
          requestId: `o${k}`,
          isl: 128 * 16,
          seqHashes: chain(30_000 + k, 128),
          expectedOutputTokens: 1 << 30,
        },
        0,
      );
    const produced = new Uint32Array(streams);
    const outNs = medianNs(
      (i) => {
        const k = i % streams;
        out.addOutputTokens(`o${k}`, ++produced[k], 0);
      },
      ctx.quick ? 2000 : 20_000,
      reps,
    );
    rows.push({
      name: 'addOutputTokens with osl, ~128-block request',
      value: outNs,
      unit: 'ns/token',
    });
    step('output');

    // --- queue ---------------------------------------------------------------------------
    const q = new RouterQueue<number>('fcfs', 0);
    let t = 0;
    for (let k = 0; k < 10_000; k++) q.push({ id: `q${k}`, now: t++, priorityJump: r.u32() % 4 }, k);
    let next = 10_000;
    const qNs = medianNs(
      () => {
        const k = next++;
        q.push({ id: `q${k}`, now: t++, priorityJump: r.u32() % 4 }, k);
        q.pop();
      },
      ctx.quick ? 5000 : 50_000,
      reps,
    );
    rows.push({ name: 'RouterQueue push + pop at depth 10 000 (fcfs)', value: qNs, unit: 'ns/op' });
    step('queue');

    return Promise.resolve(rows);
  },
};
