import { describe, expect, it } from 'vitest';
import { TOPOLOGY_DIAGNOSTICS, symptomLogLine } from './diagnostics.js';

describe('diagnostics table', () => {
  it('one row per symptom of the seed, router-side ones with a dynamo_component_router_topology_ metric', () => {
    expect(TOPOLOGY_DIAGNOSTICS.map((r) => r.symptom)).toEqual([
      'worker_exits_at_startup',
      'required_no_endpoint',
      'preferred_cross_domain',
      'metadata_missing',
      'constraints_underivable',
    ]);
    for (const r of TOPOLOGY_DIAGNOSTICS.slice(1))
      expect(r.metric).toMatch(/^dynamo_component_router_topology_[a-z_]+_total/);
  });

  it('log lines carry the context and the check', () => {
    expect(
      symptomLogLine('required_no_endpoint', {
        model: 'm',
        prefillWorker: '0x1',
        taint: 'dynamo.topology/zone=a',
      }),
    ).toBe(
      'topology: the required policy returns no endpoint (model=m prefill_worker=0x1 taint=dynamo.topology/zone=a); ' +
        "likely cause: no decode worker holds the generated topology taint of the selected prefill worker; check: the workers' ModelRuntimeConfig topology metadata and decode worker placement",
    );
  });
});
