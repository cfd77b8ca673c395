/**
 * One snapshot per tick from state that already exists: router getters (loads, queue, thresholds),
 * the index's tree sizes and applied counts, event cursors, and metric families read from the
 * registry (no hot-path work: rates are differences between ticks). Readings are kept for
 * `windowS` seconds; rates use the reading `rateS` seconds back, histograms the oldest one.
 */
import { RankBusyState } from '@kvrouter/core-cost';
import type { DecisionTap } from './decisions.js';
import { histogramSnapshot, readHistogram, windowOf, type HistogramReading } from './histogram.js';
import type {
  CatalogWorkerLike,
  RuntimeConfigLike,
  WorkerView,
  DashboardSnapshot,
  DashboardSource,
  MetricSample,
  ModelSnapshot,
  RegistryLike,
  ReportedCache,
  RouterSetView,
  SeriesRef,
  SignalSnapshot,
  WorkerSnapshot,
} from './types.js';

/** The routed workers with a card, as the page's worker views (`maxBatched`: the card's effective `max_num_batched_tokens`). */
export function* routedWorkerViews<R extends RuntimeConfigLike>(
  workers: Iterable<CatalogWorkerLike<R>>,
  maxBatched: (rc: R) => number,
): Iterable<WorkerView> {
  for (const w of workers) {
    if (!w.routed || !w.card) continue;
    const rc = w.card.runtime_config;
    yield {
      id: w.id,
      dpStart: rc.data_parallel_start_rank,
      dpSize: rc.data_parallel_size,
      totalKvBlocks: rc.total_kv_blocks,
      maxNumBatchedTokens: maxBatched(rc),
    };
  }
}

/** Families shown as truth-check signals (issue 19) when the registry has them. */
export const SIGNAL_PATTERN = /truth|reported|mispredict|stale|divergen/;

export interface SnapshotOptions {
  /** Wall-clock ms (default `Date.now`). */
  now?: () => number;
  /** Histogram window (default 60 s). */
  windowS?: number;
  /** Rate window (default 5 s). */
  rateS?: number;
  /** Tick period announced to the page (default 1000 ms). */
  intervalMs?: number;
  /** Decisions sent (default 8). */
  decisions?: number;
}

interface SetReading {
  decisions: { count: number; sum: number } | null;
  ttft: HistogramReading | null;
  itl: HistogramReading | null;
  events: number | null;
  reported: ReportedCache | null;
}

interface Reading {
  t: number;
  sets: Map<string, SetReading>;
}

const copyOf = (r: ReportedCache | null): ReportedCache | null => (r ? { ...r } : null);

const setKey = (s: RouterSetView): string =>
  `${s.model}\u0000${s.namespace}\u0000${s.component}\u0000${s.endpoint}\u0000${s.role}`;

async function familySamples(reg: RegistryLike, name: string): Promise<MetricSample[] | null> {
  const m = reg.getSingleMetric(name);
  if (!m) return null;
  const r = (await m.get()) as { values?: MetricSample[] } | undefined;
  return r?.values ?? null;
}

export class SnapshotBuilder {
  private readonly now: () => number;
  private readonly windowMs: number;
  private readonly rateMs: number;
  private readonly intervalMs: number;
  private readonly decisionCount: number;
  private history: Reading[] = [];

  constructor(
    private readonly source: DashboardSource,
    private readonly tap: DecisionTap | null,
    o: SnapshotOptions = {},
  ) {
    this.now = o.now ?? Date.now;
    this.windowMs = (o.windowS ?? 60) * 1000;
    this.rateMs = (o.rateS ?? 5) * 1000;
    this.intervalMs = o.intervalMs ?? 1000;
    this.decisionCount = o.decisions ?? 8;
  }

  async build(): Promise<DashboardSnapshot> {
    const t = this.now();
    const reg = this.source.registry;
    const cache = new Map<string, Promise<MetricSample[] | null>>();
    const samples = (name: string): Promise<MetricSample[] | null> => {
      let p = cache.get(name);
      if (!p) cache.set(name, (p = reg ? familySamples(reg, name) : Promise.resolve(null)));
      return p;
    };
    const hist = async (ref: SeriesRef | undefined): Promise<HistogramReading | null> => {
      if (!ref) return null;
      const s = await samples(ref.name);
      return s ? readHistogram(ref.name, s, ref.labels) : null;
    };

    const sets = [...this.source.sets()];
    const reading: Reading = { t, sets: new Map() };
    const models: ModelSnapshot[] = [];
    const workerModel = new Map<string, string>();
    // Readings older than the window go; the oldest kept one is the histogram baseline.
    this.history = this.history.filter((r) => t - r.t <= this.windowMs);
    const oldest = this.history[0] ?? null;
    let rateBase: Reading | null = null;
    for (const r of this.history) if (t - r.t >= this.rateMs) rateBase = r;
    rateBase ??= oldest;

    for (const s of sets) {
      const key = setKey(s);
      const hr = await hist(s.series.hitRate);
      let events: number | null = null;
      let applied: Record<string, number> | null = null;
      if (s.appliedCounts) {
        applied = {};
        events = 0;
        for (const [k, v] of s.appliedCounts()) {
          applied[k] = v;
          events += v;
        }
      }
      const sr: SetReading = {
        decisions: hr ? { count: hr.count, sum: hr.sum } : null,
        ttft: await hist(s.series.ttft),
        itl: await hist(s.series.itl),
        events,
        // Copied: a source may hand out its live counters.
        reported: s.reported ? copyOf(s.reported()) : null,
      };
      reading.sets.set(key, sr);
      const base = rateBase?.sets.get(key) ?? null;
      const histBase = oldest?.sets.get(key) ?? null;
      const dt = rateBase ? (t - rateBase.t) / 1000 : 0;

      let decisionsPerSec: number | null = null;
      let predicted: number | null = null;
      if (sr.decisions) {
        const c0 = base?.decisions?.count ?? 0;
        const s0 = base?.decisions?.sum ?? 0;
        const dc = sr.decisions.count - c0;
        if (dt > 0) decisionsPerSec = Math.max(0, dc) / dt;
        // Without a baseline the mean is over every decision so far.
        if (dc > 0) predicted = (sr.decisions.sum - s0) / dc;
        else if (!base && sr.decisions.count > 0) predicted = sr.decisions.sum / sr.decisions.count;
      }
      let reported: number | null = null;
      let predictedOfReported: number | null = null;
      let reportedRequests = 0;
      if (sr.reported) {
        const b = histBase?.reported ?? null;
        const d = {
          requests: sr.reported.requests - (b?.requests ?? 0),
          prompt: sr.reported.promptTokens - (b?.promptTokens ?? 0),
          rep: sr.reported.reportedCachedTokens - (b?.reportedCachedTokens ?? 0),
          pred: sr.reported.predictedCachedTokens - (b?.predictedCachedTokens ?? 0),
        };
        reportedRequests = d.requests;
        if (d.prompt > 0) {
          reported = d.rep / d.prompt;
          predictedOfReported = d.pred / d.prompt;
        }
      }
      let eventsPerSec: number | null = null;
      if (events !== null && dt > 0 && base?.events != null)
        eventsPerSec = Math.max(0, events - base.events) / dt;

      const workers = this.workersOf(s);
      for (const w of workers) workerModel.set(w.worker_id, s.model);
      models.push({
        model: s.model,
        namespace: s.namespace,
        component: s.component,
        endpoint: s.endpoint,
        role: s.role,
        mode: s.router.mode,
        block_size: s.router.blockSize,
        queue_depth: s.router.queueDepth,
        workers,
        decisions_per_sec: decisionsPerSec,
        hit_rate: {
          predicted,
          reported,
          predicted_of_reported: predictedOfReported,
          reported_requests: reportedRequests,
        },
        ttft: sr.ttft ? histogramSnapshot(windowOf(sr.ttft, histBase?.ttft ?? null)) : null,
        itl: sr.itl ? histogramSnapshot(windowOf(sr.itl, histBase?.itl ?? null)) : null,
        events_per_sec: eventsPerSec,
        events_applied: applied,
      });
    }
    this.history.push(reading);

    const decisions = this.tap ? this.tap.recent(this.decisionCount) : [];
    for (const d of decisions) d.model = workerModel.get(d.worker_id) ?? d.model;
    return {
      app: this.source.app,
      ts: t,
      interval_ms: this.intervalMs,
      window_s: this.windowMs / 1000,
      tick_ms: null,
      models,
      decisions,
      signals: reg ? await this.signals(reg) : [],
    };
  }

  private workersOf(s: RouterSetView): WorkerSnapshot[] {
    const r = s.router;
    const sizes = s.treeSizes ? s.treeSizes() : null;
    const t = r.busyThresholds;
    const anyThreshold =
      t.activeDecodeBlocks !== null || t.activePrefillTokens !== null || t.activePrefillTokensFrac !== null;
    const out: WorkerSnapshot[] = [];
    for (const w of s.workers()) {
      for (let rank = w.dpStart; rank < w.dpStart + w.dpSize; rank++) {
        const ww = { worker_id: w.id, dp_rank: rank };
        const l = r.rankLoad(ww);
        let busy: boolean | null = null;
        if (anyThreshold) {
          const b = new RankBusyState();
          b.observe({
            active_prefill_tokens: l.active_prefill_tokens,
            active_decode_blocks: l.active_decode_blocks,
          });
          busy = b.isBusy(t, {
            totalKvBlocks: w.totalKvBlocks,
            maxNumBatchedTokens: w.maxNumBatchedTokens ?? Number.MAX_SAFE_INTEGER,
          });
        }
        const c = s.cursor ? s.cursor(w.id, rank) : null;
        out.push({
          worker_id: w.id.toString(),
          dp_rank: rank,
          active_prefill_tokens: l.active_prefill_tokens,
          active_decode_blocks: l.active_decode_blocks,
          active_requests: l.active_requests,
          inflight: rank === w.dpStart ? r.inflight(w.id) : 0,
          total_kv_blocks: w.totalKvBlocks,
          max_num_batched_tokens: w.maxNumBatchedTokens,
          cached_blocks: sizes ? (sizes.get(`${w.id}:${rank}`) ?? 0) : null,
          busy,
          events: c ? { state: c.state, phase: c.phase, last_event_id: c.last.toString() } : null,
        });
      }
    }
    out.sort((a, b) =>
      a.worker_id === b.worker_id
        ? a.dp_rank - b.dp_rank
        : BigInt(a.worker_id) < BigInt(b.worker_id)
          ? -1
          : 1,
    );
    return out;
  }

  private async signals(reg: RegistryLike): Promise<SignalSnapshot[]> {
    const out: SignalSnapshot[] = [];
    for (const m of reg.getMetricsAsArray()) {
      if (!SIGNAL_PATTERN.test(m.name)) continue;
      const got = (await reg.getSingleMetric(m.name)?.get()) as
        { type: string; values: MetricSample[] } | undefined;
      if (!got) continue;
      const series: SignalSnapshot['series'] = [];
      for (const v of got.values) {
        // Histograms: their sum and count only (buckets would flood the table).
        const mn = v.metricName ?? m.name;
        if (mn.endsWith('_bucket')) continue;
        const labels: Record<string, string> = {};
        for (const [k, x] of Object.entries({ ...v.sharedLabels, ...v.labels })) labels[k] = String(x);
        if (mn !== m.name) labels.__series = mn.slice(m.name.length + 1);
        series.push({ labels, value: v.value });
      }
      out.push({ name: m.name, type: got.type, series });
    }
    return out;
  }
}
