import { KvrError } from '@kvrouter/protocols';
import { resolveEngineConfig, type EngineConfig } from './config.js';
import { EngineCore } from './engine-core.js';
import { SglangCore } from './sglang-core.js';
import { DEFAULT_HASHER, type BlockHasher } from './hasher.js';
import { POLYNOMIAL_TIMING, type TimingModel } from './timing.js';
import type { EngineLoad, EngineRequest, EngineStats, StepResult } from './types.js';

export interface EngineDeps {
  /** Block hashing; default the protocols XXH3 (§2). */
  hasher?: BlockHasher;
  /** Pass timing; default the §17 polynomials. */
  timing?: TimingModel;
  /** Stored blocks carry their tokens (`token_ids`), for vLLM-format events (§4); default off (no copies). */
  blockTokenIds?: boolean;
}

/** One dp rank's scheduler: vLLM flavour (`EngineCore`) or SGLang flavour (`SglangCore`), same surface. */
export type RankCore = EngineCore | SglangCore;

/**
 * A simulated engine: one independent `EngineCore` / `SglangCore` (by `engineType`) (block manager + scheduler) per data-parallel rank.
 * Ranks have their own timelines, so each is stepped on its own; the caller picks a request's rank.
 */
export class SimEngine {
  readonly config: Readonly<EngineConfig>;
  readonly ranks: readonly RankCore[];

  constructor(config: Partial<EngineConfig> = {}, deps: EngineDeps = {}) {
    this.config = resolveEngineConfig(config);
    const hasher = deps.hasher ?? DEFAULT_HASHER;
    const timing = deps.timing ?? POLYNOMIAL_TIMING;
    const ranks: RankCore[] = [];
    const Core = this.config.engineType === 'sglang' ? SglangCore : EngineCore;
    for (let r = 0; r < this.config.dataParallelSize; r++)
      ranks.push(new Core(r, this.config, hasher, timing, deps.blockTokenIds === true));
    this.ranks = ranks;
  }

  enqueue(req: EngineRequest, now: number): void {
    const rank = this.rank(req.dpRank ?? 0, 'dpRank');
    for (const core of this.ranks) {
      if (core !== rank && core.has(req.id)) {
        throw new KvrError('invalid_request', `request id: duplicate live request id ${req.id}`, 400, {
          field: 'id',
        });
      }
    }
    rank.enqueue(req, now);
  }

  step(now: number, dpRank = 0): StepResult {
    return this.rank(dpRank, 'dpRank').step(now);
  }

  cancel(requestId: string): boolean {
    for (const core of this.ranks) if (core.cancel(requestId)) return true;
    return false;
  }

  hasWork(dpRank = 0): boolean {
    return this.rank(dpRank, 'dpRank').hasWork;
  }

  load(dpRank = 0): EngineLoad {
    return this.rank(dpRank, 'dpRank').load();
  }

  /** Sequence hashes held in both pools of one rank (tests, dumps). */
  cachedBlocks(dpRank = 0): Set<bigint> {
    return this.rank(dpRank, 'dpRank').cachedBlocks();
  }

  stats(dpRank = 0): EngineStats {
    return this.rank(dpRank, 'dpRank').stats();
  }

  private rank(dpRank: number, field: string): RankCore {
    const core = Number.isInteger(dpRank) ? this.ranks[dpRank] : undefined;
    if (core === undefined) {
      throw new KvrError(
        'invalid_request',
        `${field}: expected an integer in [0, ${this.ranks.length - 1}], got ${String(dpRank)}`,
        400,
        { field },
      );
    }
    return core;
  }
}
