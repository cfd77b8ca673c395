/**
 * Per-worker gauges (`dynamo_frontend_worker_*`, labels `worker_id`, `dp_rank`, `worker_type`) and
 * the router queue gauge `dynamo_frontend_router_queue_pending_requests{worker_type}` (§16, §10).
 */
import type { Registry } from 'prom-client';
import type { WorkerWithDpRank } from '@kvrouter/protocols';
import { QUEUE_PENDING, WORKER, WORKER_LABELS, WORKER_TYPES, type WorkerType } from './names.js';
import { gauge } from './registry.js';
import { type GaugeFamily, type GaugeSeries, reserveNames } from './series.js';
import { checkCount, checkNonNeg, checkOneOf, dpRankLabel, workerIdLabel } from './validate.js';

type WL = (typeof WORKER_LABELS)[number];

/** The load fields of one `ActiveLoad` (§5.5); null = not reported, the gauge keeps its value. */
export interface LoadReport {
  worker_id: bigint;
  dp_rank: number;
  active_decode_blocks: number | null;
  active_prefill_tokens: number | null;
}

export class WorkerMetrics {
  readonly activeDecodeBlocks: GaugeFamily<WL>;
  readonly activePrefillTokens: GaugeFamily<WL>;
  readonly lastTimeToFirstTokenSeconds: GaugeFamily<WL>;
  readonly lastInputSequenceTokens: GaugeFamily<WL>;
  readonly lastInterTokenLatencySeconds: GaugeFamily<WL>;
  readonly queuePendingRequests: GaugeFamily<'worker_type'>;

  constructor(registry: Registry) {
    reserveNames(registry, [...Object.values(WORKER), QUEUE_PENDING]);
    const g = (name: string, help: string) => gauge(registry, name, help, WORKER_LABELS);
    this.activeDecodeBlocks = g(WORKER.activeDecodeBlocks, 'Active KV cache decode blocks per worker');
    this.activePrefillTokens = g(WORKER.activePrefillTokens, 'Active prefill tokens queued per worker');
    this.lastTimeToFirstTokenSeconds = g(
      WORKER.lastTimeToFirstTokenSeconds,
      'Last observed time to first token per worker (seconds)',
    );
    this.lastInputSequenceTokens = g(
      WORKER.lastInputSequenceTokens,
      'Input sequence tokens of the request of the last observed time to first token per worker',
    );
    this.lastInterTokenLatencySeconds = g(
      WORKER.lastInterTokenLatencySeconds,
      'Last observed inter-token latency per worker (seconds)',
    );
    this.queuePendingRequests = gauge(
      registry,
      QUEUE_PENDING,
      'Requests pending in the router scheduler queue',
      ['worker_type'],
    );
  }

  /** Router-side load of one rank (the router's `publishLoad` hook shape). */
  setLoad(load: LoadReport, workerType: WorkerType): void {
    const l = this.labels(load?.worker_id, load?.dp_rank, workerType);
    const d = load.active_decode_blocks;
    const p = load.active_prefill_tokens;
    if (d != null) checkNonNeg('active_decode_blocks', d);
    if (p != null) checkNonNeg('active_prefill_tokens', p);
    if (d != null) this.activeDecodeBlocks.set(l, d);
    if (p != null) this.activePrefillTokens.set(l, p);
  }

  /** TTFT and the ISL of the same request, attributed to the worker that did the prefill. */
  setLastTtft(w: WorkerWithDpRank, workerType: WorkerType, ttftSeconds: number, isl: number): void {
    const l = this.labels(w?.worker_id, w?.dp_rank, workerType);
    checkNonNeg('ttft', ttftSeconds);
    checkCount('isl', isl);
    this.lastTimeToFirstTokenSeconds.set(l, ttftSeconds);
    this.lastInputSequenceTokens.set(l, isl);
  }

  /** ITL attributed to the worker that decodes. */
  setLastItl(w: WorkerWithDpRank, workerType: WorkerType, itlSeconds: number): void {
    const l = this.labels(w?.worker_id, w?.dp_rank, workerType);
    checkNonNeg('itl', itlSeconds);
    this.lastInterTokenLatencySeconds.set(l, itlSeconds);
  }

  /** The last-ITL gauge of one worker rank, for callers that set it per streamed chunk. */
  lastItlSeries(w: WorkerWithDpRank, workerType: WorkerType): GaugeSeries<WL> {
    return this.lastInterTokenLatencySeconds.labels(this.labels(w?.worker_id, w?.dp_rank, workerType));
  }

  /** Queue depth (the router's `onQueueChange` hook shape). */
  setQueuePending(workerType: WorkerType, pending: number): void {
    const t = checkOneOf('worker_type', WORKER_TYPES, workerType);
    this.queuePendingRequests.set({ worker_type: t }, checkCount('pending', pending));
  }

  /**
   * Drops every series of a worker that left, so a fleet that churns does not grow the exposition
   * without bound (upstream keeps them; its workers rarely change ids).
   */
  removeWorker(workerId: bigint): void {
    const id = workerIdLabel('worker_id', workerId);
    for (const g of [
      this.activeDecodeBlocks,
      this.activePrefillTokens,
      this.lastTimeToFirstTokenSeconds,
      this.lastInputSequenceTokens,
      this.lastInterTokenLatencySeconds,
    ])
      for (const s of [...g.all()]) if (s.labels.worker_id === id) g.remove(s.labels);
  }

  private labels(workerId: bigint, dpRank: number, workerType: WorkerType): Record<WL, string> {
    return {
      worker_id: workerIdLabel('worker_id', workerId),
      dp_rank: dpRankLabel('dp_rank', dpRank),
      worker_type: checkOneOf('worker_type', WORKER_TYPES, workerType),
    };
  }
}
