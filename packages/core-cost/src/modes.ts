/**
 * Selection for the non-KV router modes (docs/protocol.md §8.8). Every mode skips busy instances; an
 * empty instance list fails with 503 "no eligible workers", a list with no free instance with 503
 * "All workers are busy, please retry later". Randomness is injected (u ∈ [0, 1)).
 */
import { KvrError } from '@kvrouter/protocols';
import { allWorkersBusy, argminReservoir, noEligibleWorkers, type Uniform } from './select.js';
import { invalid, nonNegInt, posInt } from './validate.js';

export const ROUTER_MODES = [
  'round-robin',
  'random',
  'kv',
  'direct',
  'least-loaded',
  'device-aware-weighted',
  'power-of-two',
] as const;
export type RouterMode = (typeof ROUTER_MODES)[number];

/** `DYN_ENCODER_CUDA_TO_CPU_RATIO` default. */
export const DEFAULT_CUDA_TO_CPU_RATIO = 8;

export const DIRECT_ROUTING_MESSAGE =
  'direct routing requires nvext.backend_instance_id or x-worker-instance-id';

export interface Instance {
  id: bigint;
  /** Busy per §11 (already false for every instance when admission control is off). */
  busy?: boolean;
  /** In-flight requests the frontend has dispatched to it and not yet finished. */
  inflight?: number;
  /** `cpu` puts it in the CPU group of device-aware-weighted. */
  deviceType?: string;
}

function checkFree(instances: readonly Instance[]): number {
  if (instances.length === 0) throw noEligibleWorkers();
  let free = 0;
  for (const x of instances) if (!x.busy) free++;
  if (free === 0) throw allWorkersBusy();
  return free;
}

function sample(u: number): number {
  if (!(u >= 0 && u < 1)) throw invalid('random sample', 'must be in [0, 1)', u);
  return u;
}

/**
 * Cycles over free instances in ascending id order: the next pick is the smallest free id above
 * the previous pick, wrapping to the smallest. Keying on the last id (not a counter) keeps the
 * cycle fair when instances join, leave or turn busy.
 */
export class RoundRobin {
  private last: bigint | null = null;

  select(instances: readonly Instance[]): number {
    checkFree(instances);
    let next = -1;
    let first = -1;
    for (let i = 0; i < instances.length; i++) {
      const x = instances[i];
      if (x.busy) continue;
      if (first < 0 || x.id < instances[first].id) first = i;
      if (this.last !== null && x.id > this.last && (next < 0 || x.id < instances[next].id)) next = i;
    }
    const pick = next >= 0 ? next : first;
    this.last = instances[pick].id;
    return pick;
  }
}

/** Uniform over free instances with one sample: the ⌊u·free⌋-th free one in list order. */
export function selectRandom(instances: readonly Instance[], u: number): number {
  const free = checkFree(instances);
  let k = Math.floor(sample(u) * free);
  for (let i = 0; i < instances.length; i++) {
    if (instances[i].busy) continue;
    if (k-- === 0) return i;
  }
  return -1; // unreachable: k < free
}

const inflightOf = (x: Instance): number =>
  x.inflight === undefined ? 0 : nonNegInt('inflight', x.inflight);

/** Fewest in-flight requests among free instances; ties broken by reservoir sampling (`rand`). */
export function selectLeastLoaded(instances: readonly Instance[], rand: Uniform): number {
  checkFree(instances);
  return leastLoadedWhere(instances, rand, () => true);
}

function leastLoadedWhere(instances: readonly Instance[], rand: Uniform, inGroup: (x: Instance) => boolean) {
  const load = instances.map(inflightOf);
  const skip = instances.map((x) => !!x.busy || !inGroup(x));
  return argminReservoir(load, instances.length, rand, skip);
}

/**
 * `power-of-two` (Dynamo's power-of-two-choices): two distinct free instances drawn uniformly
 * (two samples, `u1` over all free, `u2` over the rest), the one with fewer in-flight requests;
 * a tie keeps the first draw. One free instance: that one (both samples still drawn by callers).
 */
export function selectPowerOfTwo(instances: readonly Instance[], u1: number, u2: number): number {
  const free = checkFree(instances);
  const a = selectRandom(instances, u1);
  if (free === 1) return a;
  let k = Math.floor(sample(u2) * (free - 1));
  let b = -1;
  for (let i = 0; i < instances.length; i++) {
    if (instances[i].busy || i === a) continue;
    if (k-- === 0) {
      b = i;
      break;
    }
  }
  return inflightOf(instances[b]) < inflightOf(instances[a]) ? b : a;
}

/**
 * Splits free instances into CPU (`deviceType === 'cpu'`) and non-CPU groups; picks the CPU group
 * iff `cpu_inflight < floor(noncpu_inflight · cpu_count / (ratio · noncpu_count))`, then the
 * least-loaded instance inside the group. With one class only it is plain least-loaded.
 */
export function selectDeviceAwareWeighted(
  instances: readonly Instance[],
  rand: Uniform,
  ratio: number = DEFAULT_CUDA_TO_CPU_RATIO,
): number {
  posInt('ratio', ratio);
  checkFree(instances);
  let cpuCount = 0,
    cpuInflight = 0,
    gpuCount = 0,
    gpuInflight = 0;
  for (const x of instances) {
    if (x.busy) continue;
    if (x.deviceType === 'cpu') {
      cpuCount++;
      cpuInflight += inflightOf(x);
    } else {
      gpuCount++;
      gpuInflight += inflightOf(x);
    }
  }
  if (cpuCount === 0 || gpuCount === 0) return leastLoadedWhere(instances, rand, () => true);
  const useCpu = cpuInflight < floorDiv(gpuInflight * cpuCount, ratio * gpuCount);
  return leastLoadedWhere(instances, rand, (x) => (x.deviceType === 'cpu') === useCpu);
}

/** Exact floor of a / b for non-negative safe integers (a float quotient can round up to the next integer). */
function floorDiv(a: number, b: number): number {
  let q = Math.floor(a / b);
  if (q * b > a) q--;
  return q;
}

/**
 * `direct`: the worker comes from `nvext.backend_instance_id` / `x-worker-instance-id`; missing →
 * 400. A pinned instance known to be busy fails with 503.
 */
export function selectDirect(pin: bigint | null | undefined, busy = false): bigint {
  if (pin === null || pin === undefined)
    throw new KvrError('direct_routing_requires_instance', DIRECT_ROUTING_MESSAGE, 400, {
      field: 'nvext.backend_instance_id',
    });
  if (busy) throw allWorkersBusy();
  return pin;
}
