/**
 * Several simulated workers in one process (`--num-workers N`): each its own discovery lease,
 * instance id, request-plane server, event plane and engine; all share one pass scheduler (one
 * timer for the process). Used by the mocker app and by a frontend that embeds workers.
 */
import { KvrError } from '@kvrouter/protocols';
import type { EventPlane } from '@kvrouter/kv-events';
import type { Discovery } from '@kvrouter/runtime';
import { disaggForWorker } from './disagg.js';
import { defaultPassScheduler } from './pass-scheduler.js';
import { SimWorker, type RequestPlaneSpec, type SimWorkerOptions, type StopOptions } from './worker.js';

export interface SimFleetOptions extends Omit<
  SimWorkerOptions,
  'discovery' | 'eventPlane' | 'requestPlane' | 'kvEventRelay'
> {
  numWorkers: number;
  /** Opens one discovery handle (one lease) per worker. */
  openDiscovery: () => Promise<Discovery>;
  /** The plane of each worker; a fixed tcp `port` becomes `port + index`. */
  requestPlane: RequestPlaneSpec;
  /** The event plane of one worker (publisher id = its lease id), or null for none. */
  eventPlane?: ((publisherId: bigint, discovery: Discovery) => EventPlane | null) | null;
  /** Wait before each worker starts (models engine start-up), ms. Default 0. */
  startupDelayMs?: number;
  /** Worker i starts `i × staggerMs` after the first. Default 0. */
  staggerMs?: number;
  /** Worker i's KV event relay (e.g. its own vLLM ZMQ ports); none = events go straight to the publisher. */
  kvEventRelayFor?: ((index: number) => SimWorkerOptions['kvEventRelay']) | null;
  /** Worker i's token stream seed is `seed + i`. Default the engine config's seed (0). */
  seed?: number;
}

/** `--stagger-delay -1` (auto), implementation choice: small fleets start at once, large ones spread their registrations. */
export function autoStaggerMs(numWorkers: number): number {
  if (numWorkers <= 32) return 0;
  if (numWorkers <= 128) return 100;
  return 200;
}

export class SimFleet {
  private constructor(readonly workers: readonly SimWorker[]) {}

  /** Starts every worker; if one fails, the ones already started are stopped and the error is thrown. */
  static async start(o: SimFleetOptions): Promise<SimFleet> {
    const n = o.numWorkers;
    if (!Number.isInteger(n) || n < 1 || n > 4096)
      throw new KvrError('invalid_argument', `numWorkers: must be an integer in [1, 4096], got ${n}`, 400, {
        field: 'numWorkers',
      });
    for (const f of ['startupDelayMs', 'staggerMs'] as const) {
      const v = o[f] ?? 0;
      if (typeof v !== 'number' || !(v >= 0) || !Number.isFinite(v))
        throw new KvrError('invalid_argument', `${f}: must be a finite number >= 0, got ${v}`, 400, {
          field: f,
        });
    }
    const scheduler = o.scheduler ?? defaultPassScheduler();
    const clock = scheduler.clock;
    const sleep = (ms: number) =>
      ms > 0 ? new Promise<void>((r) => void clock.setTimeout(r, ms)) : Promise.resolve();
    const seed = o.seed ?? o.engine?.seed ?? 0;
    const started: SimWorker[] = [];
    const results = await Promise.allSettled(
      Array.from({ length: n }, async (_, i) => {
        await sleep(i * (o.staggerMs ?? 0) + (o.startupDelayMs ?? 0));
        const d = await o.openDiscovery();
        let plane: EventPlane | null;
        try {
          plane = o.eventPlane ? o.eventPlane(d.leaseId, d) : null;
        } catch (e) {
          await d.close().catch(() => undefined);
          throw e;
        }
        const rp = o.requestPlane;
        const w = await SimWorker.start({
          ...o,
          discovery: d,
          eventPlane: plane,
          scheduler,
          requestPlane:
            rp.kind === 'tcp' && rp.port !== undefined && rp.port !== 0 ? { ...rp, port: rp.port + i } : rp,
          engine: { ...o.engine, seed: (seed + i) >>> 0 },
          kvEventRelay: o.kvEventRelayFor?.(i) ?? null,
          disagg: o.disagg ? disaggForWorker(o.disagg, i) : o.disagg,
        });
        started.push(w);
        return w;
      }),
    );
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) {
      await Promise.all(started.map((w) => w.stop().catch(() => undefined)));
      throw failed.reason;
    }
    return new SimFleet(results.map((r) => (r as PromiseFulfilledResult<SimWorker>).value));
  }

  /** Stops every worker (see `SimWorker.stop`). */
  async stop(opts: StopOptions = {}): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop(opts)));
  }
}
