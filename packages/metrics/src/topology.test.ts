import { describe, expect, it } from 'vitest';
import { createRegistry } from './registry.js';
import { scrape, valueOf } from './test-helpers.js';
import { TOPOLOGY, TopologyMetrics, topologyMetrics } from './topology.js';

describe('topology diagnostics families', () => {
  it('one set per registry, counters with the decode endpoint labels', async () => {
    const r = createRegistry();
    const m = topologyMetrics(r);
    expect(topologyMetrics(r)).toBe(m);
    const ep = TopologyMetrics.labels({ namespace: 'ns', component: 'backend', endpoint: 'generate' });
    m.decodePlacements.inc({ ...ep, enforcement: 'preferred', placement: 'cross_domain' }, 2);
    m.requiredUnsatisfied.inc(ep);
    m.constraintErrors.inc({ ...ep, reason: 'weight_missing' });
    const s = await scrape(r);
    expect(
      valueOf(s, TOPOLOGY.decodePlacements, { ...ep, enforcement: 'preferred', placement: 'cross_domain' }),
    ).toBe(2);
    expect(valueOf(s, TOPOLOGY.requiredUnsatisfied, ep)).toBe(1);
    expect(valueOf(s, TOPOLOGY.constraintErrors, { ...ep, reason: 'weight_missing' })).toBe(1);
    expect(() => new TopologyMetrics(r)).toThrow(/already registered/);
  });
});
