/**
 * Which worker serves a media request: round robin over the ready workers of the model's worker
 * sets whose card declares the capability (`model_type` embedding / images / videos). No KV
 * scoring: these requests leave no reusable KV cache behind (docs/protocol.md "HTTP endpoints").
 *
 * Refusals: images / videos when no worker of the fleet declares the capability at all are 501
 * `not_implemented` (whatever the model); otherwise an unknown model is 404 `model_not_found`, and a
 * model whose workers lack the capability is 404 for images / videos (the contract) and 400
 * naming `model` for embeddings (the model exists, the request asks it for something else).
 */
import { KvrError } from '@kvrouter/protocols';
import { errorTypeOf, type RequestTracker } from '@kvrouter/metrics';
import type { ModelDeploymentCard, Transport } from '@kvrouter/runtime';
import { badRequest, modelNotFound } from '../errors.js';
import type { InferenceService } from '../service.js';
import type { ModelRegistry, WorkerSet } from '../models.js';

export type Capability = 'embedding' | 'images' | 'videos';

const WHAT: Record<Capability, string> = {
  embedding: 'embeddings',
  images: 'image generation',
  videos: 'video generation',
};

export interface MediaTarget {
  set: WorkerSet;
  workerId: bigint;
  transport: Transport;
  card: ModelDeploymentCard;
}

/**
 * Request metrics of one media request (`dynamo_frontend_requests_total{endpoint}`, duration,
 * in-flight): started once a worker set is chosen; a request refused before counts as rejected.
 */
export class MediaRequest {
  private tracker: RequestTracker | null = null;
  private readonly t0 = performance.now();

  constructor(
    private readonly svc: InferenceService,
    private readonly endpoint: string,
    private readonly stream: boolean,
  ) {}

  started(t: MediaTarget, model: string, stream = this.stream): void {
    this.tracker = t.set.lifecycle.start(
      { model, endpoint: this.endpoint, requestType: stream ? 'stream' : 'unary' },
      this.t0,
    );
  }

  ok(): void {
    this.tracker?.end('');
  }

  failed(model: unknown, e: unknown, aborted: boolean): void {
    if (this.tracker) {
      if (aborted) this.tracker.disconnected();
      else this.tracker.end(errorTypeOf(e));
    } else if (typeof model === 'string' && model.length > 0)
      this.svc.countRejected(model, this.endpoint, this.stream, e, this.t0);
  }
}

export class MediaPicker {
  private rr = 0;

  constructor(private readonly registry: ModelRegistry) {}

  pick(model: string, cap: Capability): MediaTarget {
    const m = this.registry.models.get(model);
    const ready = (s: WorkerSet) => s.readyCount > 0;
    if (cap !== 'embedding' && !this.registry.allSets().some((s) => ready(s) && s.modelTypes.includes(cap)))
      throw new KvrError(
        'not_implemented',
        `no worker serves ${WHAT[cap]}: no registered model card declares model_type ${cap}`,
        501,
      );
    if (!m || !m.sets.some(ready)) throw modelNotFound(model);
    const sets = m.sets.filter((s) => ready(s) && s.modelTypes.includes(cap));
    if (sets.length === 0) {
      const types = [...new Set(m.sets.flatMap((s) => s.modelTypes))].join(', ');
      const msg = `model: ${model} does not serve ${WHAT[cap]} (its workers' cards declare model_type [${types}])`;
      if (cap === 'embedding') throw badRequest('model', msg);
      throw new KvrError('model_not_found', msg, 404, { field: 'model' });
    }
    const candidates: MediaTarget[] = [];
    for (const set of sets)
      for (const w of set.workers.values())
        if (w.routed && !w.down && w.transport && w.card)
          candidates.push({ set, workerId: w.id, transport: w.transport, card: w.card });
    if (candidates.length === 0)
      throw new KvrError(
        'no_eligible_workers',
        `no ready worker serves ${WHAT[cap]} for model ${model}`,
        503,
      );
    this.rr = (this.rr + 1) % candidates.length;
    return candidates[this.rr]!;
  }
}
