/**
 * Truth-checked routing metrics (issue 19): `dynamo_frontend_router_truth_{mode, drift, load_only,
 * checks_total}`. The app hands `update` the current report of every model (plain data); series of
 * models and workers that are gone are dropped, so the label sets stay bounded by the fleet.
 */
import type { Registry } from 'prom-client';
import { TRUTH, TRUTH_MODE_VALUES, type TruthModeValue } from './names.js';
import { counter, gauge } from './registry.js';
import { type CounterFamily, type GaugeFamily, reserveNames } from './series.js';
import { checkCount, checkOneOf, checkRatio, checkString, workerIdLabel } from './validate.js';

export interface TruthModelSnapshot {
  model: string;
  mode: TruthModeValue;
  /** Requests compared so far (monotonic per model while it is served). */
  checks: number;
  workers: readonly { workerId: bigint; drift: number; loadOnly: boolean }[];
}

export class TruthMetrics {
  readonly mode: GaugeFamily<'model' | 'mode'>;
  readonly drift: GaugeFamily<'model' | 'worker_id'>;
  readonly loadOnly: GaugeFamily<'model' | 'worker_id'>;
  readonly checksTotal: CounterFamily<'model'>;

  constructor(registry: Registry) {
    reserveNames(registry, Object.values(TRUTH));
    this.mode = gauge(
      registry,
      TRUTH.mode,
      'Truth-checked routing mode per model: 1 for the current mode (exact, degraded, fallback), 0 for the others',
      ['model', 'mode'],
    );
    this.drift = gauge(
      registry,
      TRUTH.drift,
      'Drift between the router-predicted and the engine-reported cached tokens per worker (fraction of the prompt, EWMA)',
      ['model', 'worker_id'],
    );
    this.loadOnly = gauge(
      registry,
      TRUTH.loadOnly,
      '1 while the worker is routed on load alone (its KV index picture is wrong or silent)',
      ['model', 'worker_id'],
    );
    this.checksTotal = counter(
      registry,
      TRUTH.checksTotal,
      'Requests whose engine-reported cached tokens were compared with the router prediction',
      ['model'],
    );
  }

  /** The current state of every served model (a model absent here has its series dropped). */
  update(models: readonly TruthModelSnapshot[]): void {
    for (const m of models) {
      checkString('model', m.model);
      checkOneOf('mode', TRUTH_MODE_VALUES, m.mode);
      checkCount('checks', m.checks);
      for (const w of m.workers) {
        workerIdLabel('worker_id', w.workerId);
        checkRatio('drift', w.drift);
      }
    }
    const models_ = new Set(models.map((m) => m.model));
    const live = new Set<string>();
    for (const m of models) {
      for (const v of TRUTH_MODE_VALUES) this.mode.set({ model: m.model, mode: v }, v === m.mode ? 1 : 0);
      const c = this.checksTotal.labels({ model: m.model });
      if (m.checks > c.value) c.inc(m.checks - c.value);
      for (const w of m.workers) {
        const l = { model: m.model, worker_id: workerIdLabel('worker_id', w.workerId) };
        live.add(`${l.model}\u0001${l.worker_id}`);
        this.drift.set(l, w.drift);
        this.loadOnly.set(l, w.loadOnly ? 1 : 0);
      }
    }
    for (const s of [...this.mode.all()]) if (!models_.has(s.labels.model)) this.mode.remove(s.labels);
    for (const s of [...this.checksTotal.all()])
      if (!models_.has(s.labels.model)) this.checksTotal.remove(s.labels);
    for (const g of [this.drift, this.loadOnly])
      for (const s of [...g.all()])
        if (!live.has(`${s.labels.model}\u0001${s.labels.worker_id}`)) g.remove(s.labels);
  }
}
