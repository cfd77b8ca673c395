/**
 * The seam between the event loop and whatever picks workers. The simulator measures the real
 * router: `kvRouterPolicy` wraps `KvRouter` from `@kvrouter/router` for every `--router-mode`,
 * fed by the simulated engines' KV events and loads exactly as the frontend feeds it. The only
 * other implementation is a bare round-robin used to test the loop on its own.
 */
import type { ReadText } from '@kvrouter/aic-model';
import type { ResolvedConfig } from '@kvrouter/config';
import {
  KvrError,
  type Clock,
  type RouterEvent,
  type WorkerId,
  type WorkerWithDpRank,
} from '@kvrouter/protocols';
import type { DecisionExplanation, PrefillDurationPredictor, RouterConfigFields } from '@kvrouter/router';
import { buildLocalIndex, createRouter, planRouter } from '@kvrouter/router-host/assembly';

export interface SimWorker {
  id: WorkerId;
  dpSize: number;
  /** Per rank (`total_kv_blocks`). */
  totalKvBlocks: number;
  maxNumBatchedTokens: number;
}

export interface PolicyContext {
  /** Virtual clock whose timers are events of the simulation. */
  clock: Clock;
  /** Seeded uniform [0, 1) stream reserved for the router. */
  random: () => number;
  /** Engine KV block size. */
  blockSize: number;
  workers: readonly SimWorker[];
}

export interface PolicyRequest {
  requestId: string;
  tokens: Uint32Array;
  isl: number;
  osl: number;
}

export interface PolicyDecision {
  worker: WorkerWithDpRank;
  /** Device-overlap blocks the router expected on that rank (0 when it keeps no index). */
  overlapBlocks: number;
  /** The router's explanation with every candidate's terms (kv mode), for the oracle-gap causes. */
  explanation?: DecisionExplanation;
}

export interface LoadReport {
  worker_id: WorkerId;
  dp_rank: number;
  kv_used_blocks: number;
}

export interface RoutingPolicy {
  readonly name: string;
  /** Exactly one of `done` / `fail` is called, now or later (a queued request). */
  route(req: PolicyRequest, done: (d: PolicyDecision) => void, fail: (err: unknown) => void): void;
  /**
   * Route calls whose outcome is decided but whose callback has not run yet. A promise-based router
   * settles in microtasks; the loop drains them before it moves the clock, so results stay ordered.
   */
  settling(): number;
  onFirstToken(requestId: string): void;
  /** Cumulative output tokens after a pass. */
  onOutputTokens(requestId: string, total: number): void;
  onFinish(requestId: string): void;
  onKvEvent(ev: RouterEvent): void;
  onLoad(load: LoadReport): void;
  close(): void;
}

export type PolicyFactory = (ctx: PolicyContext) => RoutingPolicy;

/** Cycles over ranks in (worker, rank) order; no state besides the cursor. For loop tests. */
export const roundRobinPolicy: PolicyFactory = (ctx) => {
  const ranks: WorkerWithDpRank[] = [];
  for (const w of ctx.workers) for (let r = 0; r < w.dpSize; r++) ranks.push({ worker_id: w.id, dp_rank: r });
  let next = 0;
  return {
    name: 'sim-round-robin',
    route(_req, done) {
      const worker = ranks[next]!;
      next = (next + 1) % ranks.length;
      done({ worker, overlapBlocks: 0 });
    },
    settling: () => 0,
    onFirstToken() {},
    onOutputTokens() {},
    onFinish() {},
    onKvEvent() {},
    onLoad() {},
    close() {},
  };
};

export interface KvPolicyOptions {
  /**
   * Reads `--aic-model-path`'s config.json (the CLI's I/O, injected to keep this package pure);
   * without it only the built-in model ids of `@kvrouter/aic-model` resolve.
   */
  readText?: ReadText;
  /**
   * Replaces the predictor built from the `--aic-*` flags (calibration experiments, e.g. one that
   * matches the simulated engine's own timing); used only with `--router-prefill-load-model aic`.
   */
  prefillDurationPredictor?: PrefillDurationPredictor;
}

/**
 * The production router driven on the virtual clock, assembled by `@kvrouter/router-host/assembly`
 * exactly as the frontend and the standalone router assemble theirs (index choice §7.4, refusals,
 * AIC predictor). The simulator always uses the single-threaded index (`--router-event-threads` is
 * ignored: writer threads would make event application asynchronous and the run non-deterministic).
 */
export function kvRouterPolicy(
  config: RouterConfigFields | ResolvedConfig<'router'>,
  popts: KvPolicyOptions = {},
): PolicyFactory {
  // Fails on options the simulator cannot honour before anything is built.
  const plan = planRouter(config, 'simulator', {
    ...(popts.readText ? { readText: popts.readText } : {}),
    ...(popts.prefillDurationPredictor ? { predictor: popts.prefillDurationPredictor } : {}),
  });
  const params = plan.params;
  return (ctx) => {
    if (params.blockSizeOverride !== null && params.blockSizeOverride !== ctx.blockSize) {
      throw new KvrError(
        'invalid_argument',
        `--kv-cache-block-size ${params.blockSizeOverride} differs from the engines' block size ${ctx.blockSize}`,
        400,
        { flag: '--kv-cache-block-size' },
      );
    }
    const indexer = buildLocalIndex(params.index, { now: () => ctx.clock.now() });
    // Approximate mode learns only from its own decisions (§7.5): engine events are not applied.
    const eventSink = params.index.kind === 'events' ? indexer : null;
    const router = createRouter(plan, {
      blockSize: ctx.blockSize,
      clock: ctx.clock,
      random: ctx.random,
      indexer,
    });
    for (const w of ctx.workers) {
      router.addWorker({
        workerId: w.id,
        dpStart: 0,
        dpSize: w.dpSize,
        totalKvBlocks: w.totalKvBlocks,
        maxNumBatchedTokens: w.maxNumBatchedTokens,
      });
    }
    let outstanding = 0;
    return {
      name: (params.policy.mode ?? 'kv') + (params.policy.cost?.policy === 'ttft' ? ' (ttft)' : ''),
      route(req, done, fail) {
        outstanding++;
        router.route({ requestId: req.requestId, tokens: req.tokens, isl: req.isl, explain: true }).then(
          (d) => {
            outstanding--;
            done({ worker: d.worker, overlapBlocks: d.overlapBlocks, explanation: d.explanation });
          },
          (e: unknown) => {
            outstanding--;
            fail(e);
          },
        );
      },
      // Parked requests wait for a later event; the rest resolve within microtasks.
      settling: () => outstanding - router.queueDepth,
      onFirstToken: (id) => void router.markPrefillCompleted(id),
      onOutputTokens: params.policy.trackOutputBlocks
        ? (id, n) => void router.onOutputTokens(id, n)
        : () => {},
      onFinish: (id) => void router.free(id),
      onKvEvent: eventSink ? (ev) => eventSink.applyEvent(ev) : () => {},
      onLoad: (l) => void router.ingestLoad(l),
      close: () => router.close(),
    };
  };
}
