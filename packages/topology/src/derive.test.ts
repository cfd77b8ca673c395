import { describe, expect, it } from 'vitest';
import { TopologyConstraintError } from './errors.js';
import { deriveDecodeConstraints } from './derive.js';

const reasonOf = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(TopologyConstraintError);
    expect((e as TopologyConstraintError).status).toBe(503);
    return (e as TopologyConstraintError).detail.reason;
  }
  throw new Error('expected a TopologyConstraintError');
};

describe('deriveDecodeConstraints (§13)', () => {
  it('required → the prefill worker domain taint as a required taint (seed example)', () => {
    const d = deriveDecodeConstraints({
      topology_domains: { zone: 'us-east-1a', rack: 'rack-22' },
      kv_transfer_domain: 'zone',
      kv_transfer_enforcement: 'required',
    });
    expect(d.kind).toBe('required');
    if (d.kind === 'none') return;
    expect(d.constraints.required_taints).toEqual(new Set(['dynamo.topology/zone=us-east-1a']));
    expect(d.constraints.preferred_taints.size).toBe(0);
  });

  it('preferred → a preferred taint with the worker weight; other domains are not used', () => {
    const d = deriveDecodeConstraints({
      topology_domains: { zone: 'us-east-1a', rack: 'rack-22' },
      kv_transfer_domain: 'zone',
      kv_transfer_enforcement: 'preferred',
      kv_transfer_preferred_weight: 0.85,
    });
    expect(d.kind).toBe('preferred');
    if (d.kind === 'none') return;
    expect(d.constraints.preferred_taints).toEqual(new Map([['dynamo.topology/zone=us-east-1a', 0.85]]));
    expect(d.constraints.required_taints.size).toBe(0);
  });

  it('no transfer policy → none', () => {
    expect(deriveDecodeConstraints(null).kind).toBe('none');
    expect(deriveDecodeConstraints({ topology_domains: { zone: 'a' } }).kind).toBe('none');
  });

  it('fails closed on each incomplete policy', () => {
    expect(
      reasonOf(() =>
        deriveDecodeConstraints({
          kv_transfer_domain: 'zone',
          kv_transfer_enforcement: 'required',
          topology_domains: {},
        }),
      ),
    ).toBe('domain_value_missing');
    expect(
      reasonOf(() =>
        deriveDecodeConstraints({ kv_transfer_domain: 'zone', topology_domains: { zone: 'a' } }),
      ),
    ).toBe('enforcement_missing');
    expect(
      reasonOf(() =>
        deriveDecodeConstraints({ kv_transfer_enforcement: 'required', topology_domains: { zone: 'a' } }),
      ),
    ).toBe('domain_missing');
    expect(
      reasonOf(() =>
        deriveDecodeConstraints({
          kv_transfer_domain: 'zone',
          kv_transfer_enforcement: 'preferred',
          topology_domains: { zone: 'a' },
        }),
      ),
    ).toBe('weight_missing');
    expect(
      reasonOf(() =>
        deriveDecodeConstraints({
          kv_transfer_domain: 'zone',
          kv_transfer_enforcement: 'preferred',
          kv_transfer_preferred_weight: 1.5,
          topology_domains: { zone: 'a' },
        }),
      ),
    ).toBe('weight_missing');
    expect(
      reasonOf(() =>
        deriveDecodeConstraints({
          kv_transfer_domain: 'zone',
          kv_transfer_enforcement: 'soft',
          topology_domains: { zone: 'a' },
        }),
      ),
    ).toBe('enforcement_invalid');
  });

  it('the error names the field and the worker', () => {
    try {
      deriveDecodeConstraints({ kv_transfer_domain: 'zone', kv_transfer_enforcement: 'required' }, '0x2a');
      expect.unreachable();
    } catch (e) {
      const err = e as TopologyConstraintError;
      expect(err.code).toBe('topology_constraint_unavailable');
      expect(err.detail.field).toBe('topology_domains.zone');
      expect(err.message).toContain('prefill worker 0x2a');
    }
  });
});
