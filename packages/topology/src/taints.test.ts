import { describe, expect, it } from 'vitest';
import { parseTopologyTaint, topologyTaint, workerTaints } from './taints.js';

describe('topology taints', () => {
  it('builds the canonical dynamo.topology/<domain>=<value> form (seed example)', () => {
    expect(topologyTaint('zone', 'us-east-1a')).toBe('dynamo.topology/zone=us-east-1a');
    expect(
      workerTaints({ topology_domains: { zone: 'us-east-1a', rack: 'rack-22' }, taints: ['gpu=h100'] }),
    ).toEqual(new Set(['gpu=h100', 'dynamo.topology/zone=us-east-1a', 'dynamo.topology/rack=rack-22']));
    expect(workerTaints({})).toEqual(new Set());
  });

  it('parses a topology taint back, value may contain =', () => {
    expect(parseTopologyTaint('dynamo.topology/zone=a=b')).toEqual({ domain: 'zone', value: 'a=b' });
    expect(parseTopologyTaint('dynamo.topology/=x')).toBeNull();
    expect(parseTopologyTaint('other/zone=x')).toBeNull();
  });
});
