/**
 * Truth-checked routing in the frontend (issue 19): every second (and before each `/metrics` or
 * `/health` answer) the truth report of every worker set's router is read, aggregated per model,
 * exported (`dynamo_frontend_router_truth_*`) and logged when it changes: a worker routed on load
 * alone (and why), a worker back on its index, a model's mode (`exact`, `degraded`, `fallback`).
 * The router compares; this module only reports.
 */
import { u64ToHex } from '@kvrouter/protocols';
import type { TruthMetrics } from '@kvrouter/metrics';
import type { TruthMode, TruthReport } from '@kvrouter/router';
import type { Logger, ModelRegistry } from './models.js';

/** How often the reports are read (ms): the warning comes at most this long after the router's switch. */
const TRUTH_POLL_MS = 1000;

export interface ModelTruth {
  mode: TruthMode;
  reasons: string[];
  /** Requests compared so far. */
  checks: number;
  workers: {
    worker_id: string;
    state: string;
    reason: string | null;
    drift: number;
    samples: number;
    index_blocks: number;
  }[];
}

export interface TruthWatchOptions {
  registry: ModelRegistry;
  metrics: TruthMetrics | null;
  log: Logger;
  intervalMs?: number;
}

export class TruthWatch {
  private readonly timer: NodeJS.Timeout;
  private readonly modes = new Map<string, TruthMode>();
  /** `model/worker` → load-only reason, to log each switch once. */
  private readonly loadOnly = new Map<string, string>();

  constructor(private readonly o: TruthWatchOptions) {
    this.timer = setInterval(() => this.report(), o.intervalMs ?? TRUTH_POLL_MS);
    this.timer.unref();
  }

  /** Reads every router's report now, exports and logs what changed; per served model. */
  report(): Record<string, ModelTruth> {
    const per = new Map<string, TruthReport[]>();
    for (const s of this.o.registry.allSets()) {
      // Disaggregated models are not checked: the engine that reports cached tokens is the prefill
      // worker, routed by another router (the decode set would stay "converging" for ever).
      if (s.role !== 'decode' || (this.o.registry.models.get(s.model)?.disagg.sets.length ?? 0) > 0) continue;
      const r = s.router.truthReport();
      if (r === null) continue;
      let l = per.get(s.model);
      if (!l) per.set(s.model, (l = []));
      l.push(r);
    }
    const out: Record<string, ModelTruth> = {};
    for (const [model, reports] of [...per].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      out[model] = merge(reports);
    this.o.metrics?.update(
      Object.entries(out).map(([model, m]) => ({
        model,
        mode: m.mode,
        checks: m.checks,
        workers: m.workers.map((w) => ({
          workerId: BigInt(w.worker_id),
          drift: w.drift,
          loadOnly: w.state === 'load_only',
        })),
      })),
    );
    this.logChanges(out);
    return out;
  }

  close(): void {
    clearInterval(this.timer);
  }

  private logChanges(models: Record<string, ModelTruth>): void {
    const log = this.o.log;
    const seen = new Set<string>();
    for (const [model, m] of Object.entries(models)) {
      for (const w of m.workers) {
        const key = `${model}/${w.worker_id}`;
        if (w.state !== 'load_only') continue;
        seen.add(key);
        if (this.loadOnly.get(key) === w.reason) continue;
        this.loadOnly.set(key, w.reason ?? '');
        const why =
          w.reason === 'drift'
            ? `its predicted cached tokens drift from the engine's by ${(w.drift * 100).toFixed(0)}% of the prompt`
            : w.reason === 'index_empty'
              ? 'the index has applied no KV event of any worker'
              : 'no KV events from it reach the index';
        log.warn(
          `routing truth: worker ${u64ToHex(BigInt(w.worker_id))} of ${model} is routed on load alone: ${why}`,
        );
      }
      const before = this.modes.get(model);
      if (before !== m.mode) {
        this.modes.set(model, m.mode);
        const line = `routing truth: model ${model} is ${m.mode.toUpperCase()}${
          m.reasons.length > 0 ? ` (${m.reasons.join('; ')})` : ''
        }`;
        // Still verifying (a new model or worker, no fault found) is news, not a warning.
        const converging = m.mode === 'degraded' && m.reasons.every((r) => r.startsWith('converging'));
        if (m.mode === 'exact' || converging) log.info(line);
        else log.warn(line);
      }
    }
    for (const key of [...this.loadOnly.keys()])
      if (!seen.has(key)) {
        this.loadOnly.delete(key);
        const [model, id] = key.split('/') as [string, string];
        if (models[model]?.workers.some((w) => w.worker_id === id))
          log.info(`routing truth: worker ${u64ToHex(BigInt(id))} of ${model} is routed on its index again`);
      }
    for (const model of [...this.modes.keys()]) if (!(model in models)) this.modes.delete(model);
  }
}

/** One model's reports (one per worker set): fallback if all are, exact if all are, else degraded. */
function merge(reports: TruthReport[]): ModelTruth {
  const modes = reports.map((r) => r.mode);
  const mode: TruthMode = modes.every((m) => m === 'fallback')
    ? 'fallback'
    : modes.every((m) => m === 'exact')
      ? 'exact'
      : 'degraded';
  return {
    mode,
    reasons: reports.flatMap((r) => r.reasons),
    checks: reports.reduce((s, r) => s + r.samples, 0),
    workers: reports.flatMap((r) =>
      r.workers.map((w) => ({
        worker_id: w.workerId.toString(),
        state: w.state,
        reason: w.reason,
        drift: w.drift,
        samples: w.samples,
        index_blocks: w.indexBlocks,
      })),
    ),
  };
}
