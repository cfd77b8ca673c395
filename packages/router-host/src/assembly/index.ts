/**
 * The pure half of router assembly (no I/O: the deterministic simulator imports it as
 * `@kvrouter/router-host/assembly`): config -> router params with every refusal in one place, the
 * AIC predictor from the `--aic-*` flags, the local index of the plan, and the router itself.
 * The io half (`host.ts`) adds the writer-thread pool, the event feed, channels and transports.
 */
import { aicModelFromFlags, type AicFlags, type ReadText } from '@kvrouter/aic-model';
import { KvrError, type Clock } from '@kvrouter/protocols';
import { ApproxIndexer, RadixIndexer, type KvIndexer } from '@kvrouter/radix-indexer';
import {
  KvRouter,
  routerParamsFromConfig,
  type IndexPlan,
  type KvRouterOptions,
  type PrefillDurationPredictor,
  type RemoteIndexer,
  type RouterConfigFields,
  type RouterHooks,
  type RouterParams,
  type RouterPorts,
  type RoutingRecorder,
} from '@kvrouter/router';

/** Who hosts the router: what each can build differs only in the remote index. */
export type RouterHostKind = 'frontend' | 'standalone-router' | 'simulator';

/** An index a router can own: event-driven, approximate (records its own decisions) or the pool. */
export type HostIndex = KvIndexer & Partial<RoutingRecorder>;

/** A refused option: stops startup with a message naming the flag (`not_supported`, exit code 2 in the CLIs). */
export function refuse(flag: string, why: string): KvrError {
  return new KvrError('not_supported', `${flag}: ${why}`, 400, { field: flag.replace(/^--/, '') });
}

/** Why a host cannot use `--use-remote-indexer` (null: it can). */
const REMOTE_INDEX_REFUSAL: Record<RouterHostKind, string | null> = {
  frontend: null,
  'standalone-router':
    'is for frontends; a standalone router keeps its own index (and can serve it with --serve-indexer)',
  simulator: 'no remote indexer in the simulator',
};

/**
 * Every option a host refuses, in one place (the config resolver has already checked ranges and
 * cross-field rules). Throws the first refusal.
 */
export function checkRouterParams(params: RouterParams, host: RouterHostKind): void {
  const remote = REMOTE_INDEX_REFUSAL[host];
  if (params.index.kind === 'remote' && remote !== null) throw refuse('--use-remote-indexer', remote);
  if (params.index.kind === 'approximate' && params.index.cachePolicy === 'lru')
    throw refuse(
      '--router-approximate-cache-policy',
      'lru is not implemented by the approximate indexer yet (allowed: ttl)',
    );
}

/** What a host needs to build routers: the params and, with `--router-prefill-load-model aic`, the predictor. */
export interface RouterPlan {
  readonly host: RouterHostKind;
  readonly params: RouterParams;
  readonly predictor: PrefillDurationPredictor | null;
}

export interface PlanOptions {
  /** Reads `--aic-model-path`'s config.json (I/O injected); without it only built-in model ids resolve. */
  readText?: ReadText;
  /** Replaces the predictor built from the `--aic-*` flags (calibration experiments); only used with aic. */
  predictor?: PrefillDurationPredictor;
}

const hasAicFlags = (c: object): c is AicFlags =>
  'aicBackend' in c && 'aicSystem' in c && 'aicModelPath' in c;

/**
 * The one entry point from configuration to a router plan: params (§7.4 index choice), refusals,
 * and the AIC predictor (§9.4; an `--aic-*` error surfaces here, at startup).
 */
export function planRouter(
  config: RouterConfigFields | (RouterConfigFields & AicFlags),
  host: RouterHostKind,
  o: PlanOptions = {},
): RouterPlan {
  let params = routerParamsFromConfig(config, o.readText);
  checkRouterParams(params, host);
  // Only kv mode reads overlaps: the other modes keep no index and subscribe to no KV events.
  if ((params.policy.mode ?? 'kv') !== 'kv' && params.index.kind !== 'none')
    params = { ...params, index: { ...params.index, kind: 'none' } };
  let predictor: PrefillDurationPredictor | null = null;
  if (params.aic) {
    if (o.predictor) predictor = o.predictor;
    else if (!hasAicFlags(config))
      throw refuse('--router-prefill-load-model', 'aic needs the --aic-* fields of a resolved config');
    else predictor = aicPredictor(config, o.readText);
  }
  return { host, params, predictor };
}

/** The AIC prefill-duration predictor (§9.4); throws naming the offending `--aic-*` flag. */
export function aicPredictor(flags: AicFlags, readText?: ReadText): PrefillDurationPredictor {
  return aicModelFromFlags(flags, readText).predictor();
}

/** The writer-thread pool (`@kvrouter/radix-indexer/pool`), injected by io hosts. */
export type IndexPool = (o: { threads: number; approximate?: ApproxSettings }) => HostIndex;

/** Approximate-mode retention (§7.5) on a clock. */
export interface ApproxSettings {
  ttlSecs: number;
  maxTreeSize: number;
  pruneTargetRatio: number;
  now: () => number;
}

/**
 * The local index of a plan (§7.4): none, event-driven or approximate; null for `none` and
 * `remote` (a remote index needs transports: `host.ts`). Without `pool` (the simulator) the index
 * is single-threaded whatever `--router-event-threads` says: writer threads would make event
 * application asynchronous.
 */
export function buildLocalIndex(
  plan: IndexPlan,
  o: { now: () => number; pool?: IndexPool | null },
): HostIndex | null {
  switch (plan.kind) {
    case 'none':
    case 'remote':
      return null;
    case 'events':
      return o.pool ? o.pool({ threads: plan.eventThreads }) : new RadixIndexer();
    case 'approximate': {
      const approximate = {
        ttlSecs: plan.ttlSecs,
        maxTreeSize: plan.maxTreeSize,
        pruneTargetRatio: plan.pruneTargetRatio,
        now: o.now,
      };
      return o.pool && plan.eventThreads > 1
        ? o.pool({ threads: plan.eventThreads, approximate })
        : new ApproxIndexer(approximate);
    }
  }
}

/** The block size a router uses: `--kv-cache-block-size` when set, else the card's (engine's). */
export function blockSizeOf(params: RouterParams, engineBlockSize: number): number {
  return params.blockSizeOverride ?? engineBlockSize;
}

export interface RouterWiring {
  blockSize: number;
  clock: Clock;
  random: () => number;
  /** High-resolution timer for overhead timings; default the clock. */
  hrtime?: () => number;
  indexer: HostIndex | null;
  /** With `--use-remote-indexer`: the remote index replaces `indexer`. */
  remote?: RemoteIndexer | null;
  ports?: RouterPorts;
  hooks?: RouterHooks;
  /** Last adjustment of the options, e.g. a prefill worker set's phase (§14). */
  adjust?: (o: KvRouterOptions) => KvRouterOptions;
}

/** The router of a plan: the only place that turns a `RouterPlan` into `KvRouterOptions`. */
export function createRouter(plan: RouterPlan, w: RouterWiring): KvRouter {
  const base: KvRouterOptions = {
    blockSize: w.blockSize,
    policy: plan.params.policy,
    deps: {
      clock: w.clock,
      random: w.random,
      ...(w.hrtime ? { hrtime: w.hrtime } : {}),
      indexer: w.remote ?? w.indexer,
      prefillDurationPredictor: plan.predictor,
    },
    ...(w.ports ? { ports: w.ports } : {}),
    ...(w.hooks ? { hooks: w.hooks } : {}),
  };
  return new KvRouter(w.adjust ? w.adjust(base) : base);
}
