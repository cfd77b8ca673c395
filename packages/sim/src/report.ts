/**
 * Run summary and its JSON form. The report holds only simulated quantities (no wall time, no
 * dates), so equal inputs and seed give byte-identical JSON. Percentiles are nearest-rank
 * (value at ceil(q·n) − 1 of the sorted samples), rounded to µs for ms figures.
 */
import { GAP_CAUSES, type GapColumns } from './gap.js';
import type { OracleResult } from './oracle.js';
import type { RequestColumns, SimResult, UnitSummary } from './simulation.js';

export interface Percentiles {
  n: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface Report {
  format: 'kvrouter-replay-report/1';
  policy: string;
  /** What was run: sim config, engine config and any caller-supplied router settings. */
  config: Record<string, unknown>;
  requests: {
    total: number;
    finished: number;
    rejected: number;
    unfinished: number;
    rejections: Record<string, { count: number; example: string }>;
  };
  ttft_ms: Percentiles;
  /** Per-request mean inter-token latency ((last − first token) / (tokens − 1)), requests with ≥ 2 tokens. */
  itl_ms: Percentiles;
  e2e_ms: Percentiles;
  /** Arrival to routing decision (router queue, §10). */
  queue_wait_ms: Percentiles;
  throughput: {
    duration_s: number;
    requests_per_s: number;
    input_tokens_per_s: number;
    output_tokens_per_s: number;
  };
  cache: {
    /** Online runs without usage data report null figures. */
    prompt_tokens: number;
    cached_tokens: number;
    /** As the engines saw it: cached / prompt tokens at first admission. */
    hit_rate: number;
    /** What the router expected: min(overlap blocks × bs, isl) / isl, summed. */
    router_expected_hit_rate: number;
  };
  oracle: {
    capacity_blocks: number;
    pooled_lru_hit_rate: number;
    infinite_hit_rate: number;
    /** hit_rate / pooled_lru_hit_rate. */
    fraction_of_pooled: number;
  } | null;
  /** Simulated runs only (online runs do not see engine internals). */
  load_balance: {
    /** Per worker (ranks summed), ascending worker id. */
    busy_ms: number[];
    requests: number[];
    /** Coefficient of variation (population std / mean) of busy time across workers. */
    busy_cv: number;
    /** Mean busy time / run duration. */
    mean_utilization: number;
  } | null;
  preemptions: number | null;
  evicted_blocks: number | null;
  /**
   * Why the run falls short of the oracle (simulated runs; engine truth at each decision, `gap.ts`),
   * in prompt tokens over finished requests. Null for online runs.
   */
  oracle_gap: {
    /** Pooled-LRU oracle hits minus this run's hits (null without the oracle). */
    gap_tokens: number | null;
    /** Sent away from a worker that held a longer prefix: the tokens that worker held beyond the chosen one. */
    routed_away_tokens: number;
    routed_away_requests: number;
    /** `routed_away_tokens` split by what outweighed the overlap. */
    routed_away_by_cause: Record<string, number>;
    /** Computed earlier by some worker, held by none at the decision. */
    evicted_tokens: number;
    /** Mean share of cached blocks held by more than one worker (sampled at arrivals). */
    duplicate_share: number;
  } | null;
}

/** What a report is built from: a simulation, or an online run's client-side measurements. */
export interface RunData {
  policy: string;
  config: Record<string, unknown>;
  requests: RequestColumns;
  /** Engine block size (router expected hit rate). */
  blockSize: number;
  rejections: Record<string, { count: number; example: string }>;
  /** Engine-side figures; null for online runs. */
  units: UnitSummary[] | null;
  gap?: GapColumns | null;
}

export function simRunData(res: SimResult): RunData {
  return {
    policy: res.policy,
    config: { ...res.config, engine: { ...res.engine } },
    requests: res.requests,
    blockSize: res.engine.blockSize,
    rejections: res.rejections,
    units: res.units,
    gap: res.gap,
  };
}

const r3 = (x: number): number => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : x);
const r6 = (x: number): number => (Number.isFinite(x) ? Math.round(x * 1e6) / 1e6 : x);

/** Nearest-rank percentiles of the finite values. */
export function distOf(values: ArrayLike<number>): Percentiles {
  const v: number[] = [];
  for (let i = 0; i < values.length; i++) if (Number.isFinite(values[i]!)) v.push(values[i]!);
  const s = Float64Array.from(v).sort();
  const n = s.length;
  if (n === 0) return { n: 0, mean: NaN, p50: NaN, p90: NaN, p99: NaN, max: NaN };
  let sum = 0;
  for (const x of s) sum += x;
  const at = (q: number): number => s[Math.max(0, Math.ceil(q * n) - 1)]!;
  return { n, mean: r3(sum / n), p50: r3(at(0.5)), p90: r3(at(0.9)), p99: r3(at(0.99)), max: r3(s[n - 1]!) };
}

export function buildReport(
  res: SimResult | RunData,
  oracle: OracleResult | null,
  extraConfig: Record<string, unknown> = {},
): Report {
  const run = 'engine' in res ? simRunData(res) : res;
  const c = run.requests;
  const n = c.arrival.length;
  const ttft = new Float64Array(n).fill(NaN);
  const itl = new Float64Array(n).fill(NaN);
  const e2e = new Float64Array(n).fill(NaN);
  const wait = new Float64Array(n).fill(NaN);
  let finished = 0;
  let rejected = 0;
  let start = Infinity;
  let end = -Infinity;
  let inTok = 0;
  let outTok = 0;
  let expected = 0;
  let expectedIsl = 0;
  const bs = run.blockSize;
  for (let k = 0; k < n; k++) {
    if (c.arrival[k]! < start) start = c.arrival[k]!;
    if (c.status[k] === 2) rejected++;
    if (c.status[k] !== 1) continue;
    finished++;
    if (c.finish[k]! > end) end = c.finish[k]!;
    ttft[k] = c.firstToken[k]! - c.arrival[k]!;
    e2e[k] = c.finish[k]! - c.arrival[k]!;
    wait[k] = c.routed[k]! - c.arrival[k]!;
    if (c.tokens[k]! > 1) itl[k] = (c.finish[k]! - c.firstToken[k]!) / (c.tokens[k]! - 1);
    inTok += c.isl[k]!;
    outTok += c.tokens[k]!;
    expected += Math.min(c.routerOverlapBlocks[k]! * bs, c.isl[k]!);
    expectedIsl += c.isl[k]!;
  }
  let prompt = 0;
  let cached = 0;
  let preempt = 0;
  let evicted = 0;
  let balance: Report['load_balance'] = null;
  const durationMs = finished > 0 ? end - start : 0;
  if (run.units) {
    const busy = new Map<bigint, { busy: number; requests: number }>();
    for (const u of run.units) {
      prompt += u.promptTokens;
      cached += u.cachedTokens;
      preempt += u.preemptions;
      evicted += u.evictedBlocks;
      const w = busy.get(u.workerId) ?? { busy: 0, requests: 0 };
      w.busy += u.busyMs;
      w.requests += u.requests;
      busy.set(u.workerId, w);
    }
    const perWorker = [...busy.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map((e) => e[1]);
    const busyMs = perWorker.map((w) => w.busy);
    const mean = busyMs.reduce((a, b) => a + b, 0) / busyMs.length;
    const variance = busyMs.reduce((a, b) => a + (b - mean) ** 2, 0) / busyMs.length;
    balance = {
      busy_ms: busyMs.map(r3),
      requests: perWorker.map((w) => w.requests),
      busy_cv: mean > 0 ? r6(Math.sqrt(variance) / mean) : 0,
      mean_utilization: durationMs > 0 ? r6(mean / durationMs) : 0,
    };
  } else {
    // Client side: cached tokens as the server reported them (usage), per finished request.
    for (let k = 0; k < n; k++) {
      if (c.status[k] !== 1) continue;
      prompt += c.isl[k]!;
      cached += c.cachedTokens[k]!;
    }
  }
  const dur = durationMs / 1000;
  const hit = prompt > 0 ? cached / prompt : 0;
  let gapReport: Report['oracle_gap'] = null;
  const g = run.gap;
  if (g) {
    const byCause: Record<string, number> = {};
    for (const cause of GAP_CAUSES) byCause[cause] = 0;
    let away = 0;
    let awayReq = 0;
    let evictedTok = 0;
    for (let k = 0; k < n; k++) {
      if (c.status[k] !== 1) continue;
      const lost = (g.bestHeld[k]! - g.chosenHeld[k]!) * bs;
      if (lost > 0) {
        away += lost;
        awayReq++;
        const cause = GAP_CAUSES[g.cause[k]! - 1];
        if (cause) byCause[cause] += lost;
      }
      evictedTok += Math.max(0, g.seen[k]! - g.bestHeld[k]!) * bs;
    }
    gapReport = {
      gap_tokens: oracle ? Math.round(oracle.pooledCachedTokens - cached) : null,
      routed_away_tokens: away,
      routed_away_requests: awayReq,
      routed_away_by_cause: byCause,
      evicted_tokens: evictedTok,
      duplicate_share: r6(g.duplicateShare),
    };
  }
  return {
    format: 'kvrouter-replay-report/1',
    policy: run.policy,
    config: { ...run.config, ...extraConfig },
    requests: {
      total: n,
      finished,
      rejected,
      unfinished: n - finished - rejected,
      rejections: run.rejections,
    },
    ttft_ms: distOf(ttft),
    itl_ms: distOf(itl),
    e2e_ms: distOf(e2e),
    queue_wait_ms: distOf(wait),
    throughput: {
      duration_s: r3(dur),
      requests_per_s: dur > 0 ? r6(finished / dur) : 0,
      input_tokens_per_s: dur > 0 ? r3(inTok / dur) : 0,
      output_tokens_per_s: dur > 0 ? r3(outTok / dur) : 0,
    },
    cache: {
      prompt_tokens: prompt,
      cached_tokens: cached,
      hit_rate: r6(hit),
      router_expected_hit_rate: expectedIsl > 0 ? r6(expected / expectedIsl) : 0,
    },
    oracle: oracle
      ? {
          capacity_blocks: oracle.capacityBlocks,
          pooled_lru_hit_rate: r6(oracle.pooledHitRate),
          infinite_hit_rate: r6(oracle.infiniteHitRate),
          fraction_of_pooled: oracle.pooledHitRate > 0 ? r6(hit / oracle.pooledHitRate) : 0,
        }
      : null,
    load_balance: balance,
    preemptions: run.units ? preempt : null,
    evicted_blocks: run.units ? evicted : null,
    oracle_gap: gapReport,
  };
}

/** Stable JSON: bigints as numbers (as strings beyond 2^53), non-finite numbers as null, 2-space indent. */
export function reportJson(report: Report): string {
  return (
    JSON.stringify(
      report,
      (_k, v: unknown) =>
        typeof v === 'bigint'
          ? v <= BigInt(Number.MAX_SAFE_INTEGER)
            ? Number(v)
            : v.toString()
          : typeof v === 'number' && !Number.isFinite(v)
            ? null
            : v,
      2,
    ) + '\n'
  );
}
