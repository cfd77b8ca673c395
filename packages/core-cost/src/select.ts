/**
 * Worker picking over computed costs (docs/protocol.md §8.6), the pin shortcut (§12, §15), the
 * preferred-taint multiplier (§13) and the selection errors of §8.1 / §11.
 *
 * Randomness is injected: `rand()` must return u ∈ [0, 1). Each function documents how many
 * samples it draws so replays stay deterministic.
 */
import { KvrError, type WorkerWithDpRank } from '@kvrouter/protocols';
import { finiteNonNeg, invalid, nonNegInt } from './validate.js';

export type Uniform = () => number;

export const ALL_WORKERS_BUSY_MESSAGE = 'All workers are busy, please retry later';

export const allWorkersBusy = (): KvrError =>
  new KvrError('all_workers_busy', ALL_WORKERS_BUSY_MESSAGE, 503, { error_type: 'overload' });
export const noEligibleWorkers = (): KvrError =>
  new KvrError('no_eligible_workers', 'no eligible workers', 503);
export const pinnedWorkerBusy = (w: WorkerWithDpRank): KvrError =>
  new KvrError(
    'pinned_worker_busy',
    `pinned worker ${w.worker_id} (dp_rank ${w.dp_rank}) is busy, please retry later`,
    503,
    { error_type: 'overload', worker_id: w.worker_id.toString(), dp_rank: w.dp_rank },
  );

export function checkSample(u: number): number {
  if (!(u >= 0 && u < 1)) throw invalid('random sample', 'must be in [0, 1)', u);
  return u;
}

/**
 * Index of the minimum of `values[0..n)`; the k-th candidate tying the current minimum replaces
 * the pick when `rand() < 1/k` (reservoir, one pass; draws one sample per tie after the first).
 * Ties are exact float equality. `skip[i]` truthy excludes candidate i. −1 when nothing is left.
 */
export function argminReservoir(
  values: ArrayLike<number>,
  n: number,
  rand: Uniform,
  skip?: ArrayLike<boolean | number>,
): number {
  let best = -1;
  let bestV = Infinity;
  let ties = 0;
  for (let i = 0; i < n; i++) {
    if (skip?.[i]) continue;
    const v = values[i];
    if (best < 0 || v < bestV || bestV !== bestV) {
      best = i;
      bestV = v;
      ties = 1;
    } else if (v === bestV) {
      ties++;
      if (checkSample(rand()) * ties < 1) best = i;
    }
  }
  return best;
}

let scratch = new Float64Array(256);

/**
 * §8.6, T > 0: `p_i ∝ exp(−(c_i − min) / (range · T))` sampled with one `u` by cumulative sum,
 * falling back to the last candidate. Equal costs → uniform `floor(u·n)`. A non-finite range is
 * replaced by the largest |cost|; weights that come out NaN count as 0.
 */
export function softmaxSample(costs: ArrayLike<number>, n: number, temperature: number, u: number): number {
  if (!(temperature > 0) || !Number.isFinite(temperature))
    throw invalid('temperature', 'must be > 0', temperature);
  checkSample(u);
  if (n <= 0) return -1;
  let min = Infinity;
  let max = -Infinity;
  let maxAbs = 0;
  for (let i = 0; i < n; i++) {
    const c = costs[i];
    if (c < min) min = c;
    if (c > max) max = c;
    const a = Math.abs(c);
    if (a > maxAbs) maxAbs = a;
  }
  if (max === min) return Math.min(n - 1, Math.floor(u * n));
  const range = Number.isFinite(max - min) ? max - min : maxAbs;
  const scale = range * temperature;
  if (scratch.length < n) scratch = new Float64Array(Math.max(n, scratch.length * 2));
  let total = 0;
  for (let i = 0; i < n; i++) {
    const w = Math.exp(-(costs[i] - min) / scale);
    const ww = w === w ? w : 0;
    scratch[i] = ww;
    total += ww;
  }
  const target = u * total;
  let cum = 0;
  for (let i = 0; i < n; i++) {
    cum += scratch[i];
    if (target < cum) return i;
  }
  return n - 1;
}

/** Softmax probabilities (for decision logs and tests), same rules as `softmaxSample`. */
export function softmaxProbabilities(costs: ArrayLike<number>, n: number, temperature: number): Float64Array {
  const p = new Float64Array(n);
  if (n === 0) return p;
  let min = Infinity;
  let max = -Infinity;
  let maxAbs = 0;
  for (let i = 0; i < n; i++) {
    min = Math.min(min, costs[i]);
    max = Math.max(max, costs[i]);
    maxAbs = Math.max(maxAbs, Math.abs(costs[i]));
  }
  if (max === min) return p.fill(1 / n);
  const range = Number.isFinite(max - min) ? max - min : maxAbs;
  let total = 0;
  for (let i = 0; i < n; i++) {
    const w = Math.exp(-(costs[i] - min) / (range * temperature));
    p[i] = w === w ? w : 0;
    total += p[i];
  }
  for (let i = 0; i < n; i++) p[i] = p[i] / total;
  return p;
}

/**
 * §8.6: T = 0 → `argminReservoir`; T > 0 → `softmaxSample` with exactly one sample.
 * Returns −1 only for n = 0.
 */
export function pickIndex(costs: ArrayLike<number>, n: number, temperature: number, rand: Uniform): number {
  finiteNonNeg('temperature', temperature);
  nonNegInt('n', n);
  if (n === 0) return -1;
  return temperature === 0 ? argminReservoir(costs, n, rand) : softmaxSample(costs, n, temperature, rand());
}

/**
 * The pin shortcut (§8.6, §12, §15): a pinned worker skips scoring. Returns the candidate index of
 * the pinned rank — `dp_rank` when given, else the lowest rank of that worker among the candidates
 * (its start rank) — or −1 when the pin is not a candidate (the caller then sends it direct without
 * booking, §15). A pinned rank that is busy fails with 503 and is never rerouted (§8.1).
 */
export function pinnedShortcut(
  workers: readonly WorkerWithDpRank[],
  n: number,
  pin: { worker_id: bigint; dp_rank?: number | null },
  busy?: ArrayLike<boolean | number>,
): number {
  let found = -1;
  for (let i = 0; i < n; i++) {
    const w = workers[i];
    if (w.worker_id !== pin.worker_id) continue;
    if (pin.dp_rank !== undefined && pin.dp_rank !== null) {
      if (w.dp_rank === pin.dp_rank) {
        found = i;
        break;
      }
    } else if (found < 0 || w.dp_rank < workers[found].dp_rank) found = i;
  }
  if (found >= 0 && busy?.[found]) throw pinnedWorkerBusy(workers[found]);
  return found;
}

/** §13: `exp(−tanh(Σ weights of the preferred taints the worker holds))`, in [e^−1, 1] for weights ≥ 0. */
export function preferredTaintMultiplier(weightsHeld: number | Iterable<number>): number {
  let sum = 0;
  if (typeof weightsHeld === 'number') sum = weightsHeld;
  else for (const w of weightsHeld) sum += w;
  if (!Number.isFinite(sum)) throw invalid('preferred taint weights', 'must sum to a finite number', sum);
  return Math.exp(-Math.tanh(sum));
}
