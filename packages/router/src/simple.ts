/**
 * The non-KV modes (§8.8): round-robin, random, least-loaded, device-aware-weighted, power-of-two and direct,
 * over the same worker set, filters and busy verdicts; and a pin to a worker the router does not
 * know (§15), sent direct without booking. No load is booked; the live entry keeps the in-flight
 * count.
 */
import {
  RoundRobin,
  noEligibleWorkers,
  pinnedWorkerBusy,
  selectDeviceAwareWeighted,
  selectLeastLoaded,
  selectPowerOfTwo,
  selectRandom,
  type Instance,
} from '@kvrouter/core-cost';
import type { WorkerWithDpRank } from '@kvrouter/protocols';
import type { Bookings } from './booking.js';
import type { Explainer } from './explain.js';
import type { AdmissionGate } from './gate.js';
import { hasAll, type Pending, type Pin } from './intent.js';
import type { ResolvedOptions } from './options.js';
import type { ReasonCode, RoutingDecision } from './types.js';
import type { WorkerEntry, WorkerSet } from './workers.js';

export class SimpleModes {
  private readonly rr = new RoundRobin();

  constructor(
    private readonly o: ResolvedOptions,
    private readonly workers: WorkerSet,
    private readonly gate: AdmissionGate,
    private readonly bookings: Bookings,
    private readonly explain: Explainer,
  ) {}

  /** round-robin, random, least-loaded, device-aware-weighted, direct (§8.8). */
  admit(p: Pending): RoutingDecision {
    const o = this.o;
    let entry: WorkerEntry | undefined;
    let dpRank: number;
    let reason: ReasonCode;
    const pin = p.where.pin;
    this.gate.nextEpoch();
    const now = o.clock.now();
    if (pin) {
      entry = this.workers.get(pin.workerId);
      if (!entry) return this.unknownPin(p, pin, o.mode === 'direct' ? 'direct' : 'pinned_unbooked');
      dpRank = pin.dpRank ?? entry.dpStart;
      if (!this.workers.rank(entry.id, dpRank) || !compatible(entry, p)) throw noEligibleWorkers();
      if (this.gate.workerBusy(entry, now)) throw pinnedWorkerBusy({ worker_id: entry.id, dp_rank: dpRank });
      reason = o.mode === 'direct' ? 'direct' : 'pinned';
    } else {
      const pool = this.workers.workers.filter((w) => compatible(w, p));
      const inst: Instance[] = pool.map((w) => ({
        id: w.id,
        busy: this.gate.workerBusy(w, now),
        inflight: w.inflight,
        deviceType: w.deviceType,
      }));
      let i: number;
      switch (o.mode) {
        case 'random':
          i = selectRandom(inst, o.random());
          reason = 'random';
          break;
        case 'least-loaded':
          i = selectLeastLoaded(inst, o.random);
          reason = 'least_loaded';
          break;
        case 'power-of-two':
          i = selectPowerOfTwo(inst, o.random(), o.random());
          reason = 'power_of_two';
          break;
        case 'device-aware-weighted':
          i = selectDeviceAwareWeighted(inst, o.random, o.cudaToCpuRatio);
          reason = 'device_aware_weighted';
          break;
        default:
          i = this.rr.select(inst);
          reason = 'round_robin';
      }
      entry = pool[i];
      dpRank = entry.dpStart;
    }
    const w = { worker_id: entry.id, dp_rank: dpRank } as WorkerWithDpRank;
    if (!p.intent.queryOnly) this.bookings.bookUnloaded(p.intent.id, w, entry);
    return this.explain.simpleDecision(p, w, reason);
  }

  /** A pin to a worker the router does not know: sent direct without booking (§15). */
  unknownPin(p: Pending, pin: Pin, reason: ReasonCode = 'pinned_unbooked'): RoutingDecision {
    const w = { worker_id: pin.workerId, dp_rank: pin.dpRank ?? 0 } as WorkerWithDpRank;
    if (!p.intent.queryOnly) this.bookings.bookUnloaded(p.intent.id, w, undefined);
    return this.explain.simpleDecision(p, w, reason);
  }
}

function compatible(w: WorkerEntry, p: Pending): boolean {
  const { allowed, required } = p.where;
  if (allowed && !allowed.has(w.id)) return false;
  return !required || hasAll(w.taints, required);
}
