import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import {
  DIRECT_ROUTING_MESSAGE,
  RoundRobin,
  selectDeviceAwareWeighted,
  selectDirect,
  selectLeastLoaded,
  selectRandom,
  type Instance,
} from './modes.js';

const inst = (id: number, more: Partial<Instance> = {}): Instance => ({ id: BigInt(id), ...more });
const never = () => {
  throw new Error('no sample expected');
};

function kvr(fn: () => unknown): KvrError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(KvrError);
    return e as KvrError;
  }
  throw new Error('expected a KvrError');
}

describe('round-robin', () => {
  it('cycles in ascending id order whatever the list order', () => {
    const rr = new RoundRobin();
    const xs = [inst(30), inst(10), inst(20)];
    const ids = Array.from({ length: 5 }, () => xs[rr.select(xs)].id);
    expect(ids).toEqual([10n, 20n, 30n, 10n, 20n]);
  });

  it('skips busy instances and follows membership changes', () => {
    const rr = new RoundRobin();
    const xs = [inst(10), inst(20, { busy: true }), inst(30)];
    expect(xs[rr.select(xs)].id).toBe(10n);
    expect(xs[rr.select(xs)].id).toBe(30n);
    expect(xs[rr.select(xs)].id).toBe(10n);
    // 15 joins after 10 was picked: it is next
    const ys = [...xs, inst(15)];
    expect(ys[rr.select(ys)].id).toBe(15n);
    expect(ys[rr.select(ys)].id).toBe(30n);
  });

  it('empty → 503 no eligible workers; all busy → 503 all workers busy', () => {
    const rr = new RoundRobin();
    const e1 = kvr(() => rr.select([]));
    expect([e1.status, e1.message]).toEqual([503, 'no eligible workers']);
    const e2 = kvr(() => rr.select([inst(1, { busy: true })]));
    expect([e2.status, e2.message]).toEqual([503, 'All workers are busy, please retry later']);
  });
});

describe('random', () => {
  it('uniform over free instances: the floor(u·free)-th free one', () => {
    const xs = [inst(1), inst(2, { busy: true }), inst(3), inst(4)];
    // 3 free: u 0 → 0th (id 1); u 0.5 → floor(1.5) = 1st (id 3); u 0.999 → 2nd (id 4)
    expect(selectRandom(xs, 0)).toBe(0);
    expect(selectRandom(xs, 0.5)).toBe(2);
    expect(selectRandom(xs, 0.999)).toBe(3);
    expect(() => selectRandom(xs, 1)).toThrow(KvrError);
  });
});

describe('least-loaded', () => {
  it('fewest in-flight among free; ties by reservoir sample', () => {
    const xs = [
      inst(1, { inflight: 3 }),
      inst(2, { inflight: 1 }),
      inst(3, { inflight: 1 }),
      inst(4, { inflight: 2 }),
    ];
    // tie between idx 1 and 2: second tie replaces when u·2 < 1
    expect(selectLeastLoaded(xs, () => 0.3)).toBe(2);
    expect(selectLeastLoaded(xs, () => 0.7)).toBe(1);
    // a busy idle instance is skipped
    const ys = [inst(1, { inflight: 0, busy: true }), inst(2, { inflight: 5 })];
    expect(selectLeastLoaded(ys, never)).toBe(1);
  });
});

describe('device-aware-weighted (ratio 8)', () => {
  const cpu = (id: number, inflight: number) => inst(id, { deviceType: 'cpu', inflight });
  const gpu = (id: number, inflight: number) => inst(id, { deviceType: 'cuda', inflight });

  it('CPU group iff cpu_inflight < floor(noncpu_inflight · cpu_count / (ratio · noncpu_count))', () => {
    // idle: 0 < floor(0) false → non-CPU; least-loaded there (idx 3, inflight 0)
    expect(selectDeviceAwareWeighted([cpu(1, 0), cpu(2, 0), gpu(3, 1), gpu(4, 0)], never)).toBe(3);
    // GPUs 8 + 8 = 16: floor(16·2/(8·2)) = 2; CPU 0 < 2 → CPU group, least-loaded idx 1
    expect(selectDeviceAwareWeighted([cpu(1, 1), cpu(2, 0), gpu(3, 8), gpu(4, 8)], never)).toBe(1);
    // CPU 1 + 1 = 2: 2 < 2 false → GPU group
    expect(selectDeviceAwareWeighted([cpu(1, 1), cpu(2, 1), gpu(3, 8), gpu(4, 9)], never)).toBe(2);
    // GPUs 7 + 8 = 15: floor(30/16) = 1; CPU 1 < 1 false → GPU. (Without the floor, 1 < 1.875
    // would have picked the CPU group.)
    expect(selectDeviceAwareWeighted([cpu(1, 1), cpu(2, 0), gpu(3, 7), gpu(4, 8)], never)).toBe(2);
  });

  it('the ratio comes from DYN_ENCODER_CUDA_TO_CPU_RATIO', () => {
    // ratio 2: floor(15·2/(2·2)) = 7; CPU 1 < 7 → CPU group (idx 1)
    expect(selectDeviceAwareWeighted([cpu(1, 1), cpu(2, 0), gpu(3, 7), gpu(4, 8)], never, 2)).toBe(1);
    expect(() => selectDeviceAwareWeighted([cpu(1, 0)], never, 0)).toThrow(KvrError);
  });

  it('one class only (or the other class all busy) → plain least-loaded', () => {
    expect(selectDeviceAwareWeighted([gpu(1, 4), gpu(2, 3)], never)).toBe(1);
    expect(selectDeviceAwareWeighted([cpu(1, 4), cpu(2, 3)], never)).toBe(1);
    const xs = [inst(1, { deviceType: 'cpu', inflight: 9 }), inst(2, { inflight: 0, busy: true })];
    expect(selectDeviceAwareWeighted(xs, never)).toBe(0);
  });
});

describe('direct', () => {
  it('missing instance id → 400 with the docs/configuration.md message', () => {
    const e = kvr(() => selectDirect(undefined));
    expect(e.status).toBe(400);
    expect(e.message).toBe('direct routing requires nvext.backend_instance_id or x-worker-instance-id');
    expect(DIRECT_ROUTING_MESSAGE).toBe(e.message);
    expect(kvr(() => selectDirect(null)).status).toBe(400);
  });

  it('passes the pinned id through; busy → 503', () => {
    expect(selectDirect(2n ** 63n + 5n)).toBe(2n ** 63n + 5n);
    expect(kvr(() => selectDirect(7n, true)).status).toBe(503);
  });
});
