/**
 * Disaggregated serving end to end (docs/protocol.md §13, §14): simulated prefill and decode workers in
 * two topology zones behind a real frontend, requests over HTTP, placements read from the
 * response's `nvext.worker_id`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { topologyMetrics, TopologyMetrics } from '@kvrouter/metrics';
import { DisaggScenario } from './disagg-scenario.js';
import type { Logger } from './models.js';

let sc: DisaggScenario | null = null;
afterEach(async () => {
  await sc?.close();
  sc = null;
});

const capture = (): Logger & { lines: string[] } => {
  const lines: string[] = [];
  return { lines, info: () => {}, warn: (m) => lines.push(m), error: (m) => lines.push(m) };
};

const decodeEp = TopologyMetrics.labels({ namespace: 'dynamo', component: 'backend', endpoint: 'generate' });

describe('disaggregated serving across two topology domains', () => {
  it('required: every decode placement stays in the prefill worker zone; prefill and decode both run', async () => {
    sc = await DisaggScenario.start({
      enforcement: 'required',
      zones: [
        { name: 'z1', prefill: 1, decode: 2 },
        { name: 'z2', prefill: 1, decode: 2 },
      ],
    });
    const st = await sc.run({ requests: 120, concurrency: 8, promptLen: 96, maxTokens: 3 });
    expect(st.firstError).toBeNull();
    expect(st.ok).toBe(120);
    expect(st.crossDomain).toBe(0);
    // both prefill zones were used (KV routing among prefill workers), so both decode zones were too
    expect(st.byDecodeZone.z1).toBeGreaterThan(0);
    expect(st.byDecodeZone.z2).toBeGreaterThan(0);
    expect(sc.prefillSubmitted('z1') + sc.prefillSubmitted('z2')).toBe(120);
    // decode workers paid no prefill: every prompt arrived as transferred KV
    for (const f of sc.decodeFleets.values())
      for (const w of f.workers) expect(w.engine.stats().prefillTokensComputed).toBe(0);
    const m = topologyMetrics(sc.fe.metrics.registry);
    expect(
      m.decodePlacements.labels({ ...decodeEp, enforcement: 'required', placement: 'in_domain' }).value,
    ).toBe(120);
    expect(
      m.decodePlacements.labels({ ...decodeEp, enforcement: 'required', placement: 'cross_domain' }).value,
    ).toBe(0);
  }, 60_000);

  it('required with no compatible decode worker: 503 before any prefill is dispatched', async () => {
    const log = capture();
    sc = await DisaggScenario.start({
      enforcement: 'required',
      zones: [
        { name: 'z1', prefill: 1, decode: 1 },
        { name: 'z3', prefill: 1, decode: 0 },
      ],
      log,
    });
    const z3 = sc.prefillFleets.get('z3')!.workers[0]!.instanceId;
    const r = await sc.request(sc.prompt(64), 2, z3);
    expect(r.status).toBe(503);
    expect(r.error).toContain('dynamo.topology/zone=z3');
    expect(sc.prefillSubmitted('z3')).toBe(0);
    expect(topologyMetrics(sc.fe.metrics.registry).requiredUnsatisfied.labels(decodeEp).value).toBe(1);
    expect(log.lines.some((l) => l.startsWith('topology: the required policy returns no endpoint'))).toBe(
      true,
    );
    // the prefill router's booking was released
    const pset = sc.fe.registry.models.get('mock-model')!.disagg.sets.find((s) => s.workers.has(z3))!;
    expect(pset.router.liveRequestCount).toBe(0);
    // the z1 pair still serves (unpinned requests may pick either prefill worker: the prefill
    // router does not look at decode capacity, so z3 prefill requests keep failing closed)
    expect(
      (await sc.request(sc.prompt(64), 2, sc.prefillFleets.get('z1')!.workers[0]!.instanceId)).status,
    ).toBe(200);
    expect(sc.prefillSubmitted('z1')).toBe(1);
    // query-only: both legs routed, neither dispatched
    const q = await fetch(`${sc.fe.url}/v1/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-prefill-instance-id': sc.prefillFleets.get('z1')!.workers[0]!.instanceId.toString(),
      },
      body: JSON.stringify({
        model: 'mock-model',
        prompt: sc.prompt(64),
        max_tokens: 2,
        nvext: { annotations: ['query_instance_id:x'] },
      }),
    });
    const qt = await q.text();
    expect(q.status).toBe(200);
    expect(qt).toContain(`"prefill_worker_id":${sc.prefillFleets.get('z1')!.workers[0]!.instanceId}`);
    expect(qt).toContain(`"decode_worker_id":${sc.decodeFleets.get('z1')!.workers[0]!.instanceId}`);
    expect(sc.prefillSubmitted('z1')).toBe(1);
  }, 30_000);

  it('preferred 0.85: in-domain at equal loads, spills over when the domain saturates', async () => {
    sc = await DisaggScenario.start({
      enforcement: 'preferred',
      preferredWeight: 0.85,
      zones: [
        { name: 'z1', prefill: 1, decode: 1 },
        { name: 'z2', prefill: 0, decode: 3 },
      ],
    });
    // One request at a time: every decode worker has the same (zero) load when it is scored.
    const calm = await sc.run({ requests: 60, concurrency: 1, promptLen: 96, maxTokens: 3 });
    expect(calm.ok).toBe(60);
    expect(calm.inDomain / calm.ok).toBeGreaterThanOrEqual(0.9);
    // 32 at a time on the one z1 decode worker: its booked blocks pass twice the others' and it spills.
    const busy = await sc.run({ requests: 160, concurrency: 32, promptLen: 96, maxTokens: 16 });
    expect(busy.ok).toBe(160);
    expect(busy.crossDomain).toBeGreaterThan(0);
    expect(busy.inDomain / busy.ok).toBeLessThan(calm.inDomain / calm.ok);
  }, 60_000);

  it('fail closed: a prefill worker publishing preferred without a weight fails the request before prefill', async () => {
    sc = await DisaggScenario.start({
      enforcement: 'preferred',
      preferredWeight: 0.5,
      zones: [{ name: 'z1', prefill: 1, decode: 1 }],
    });
    // Strip the weight from the prefill card as the router sees it (card validation would reject it on the wire).
    const pset = sc.fe.registry.models.get('mock-model')!.disagg.sets[0]!;
    for (const w of pset.workers.values()) w.card!.runtime_config.kv_transfer_preferred_weight = null;
    const r = await sc.request(sc.prompt(64), 2);
    expect(r.status).toBe(503);
    expect(r.error).toContain('kv_transfer_preferred_weight');
    expect(sc.prefillSubmitted('z1')).toBe(0);
    expect(
      topologyMetrics(sc.fe.metrics.registry).constraintErrors.labels({
        ...decodeEp,
        reason: 'weight_missing',
      }).value,
    ).toBe(1);
  }, 30_000);
});

describe('bootstrap variant', () => {
  it('prefill in the background, decode dispatched at once and waiting for the room; required still holds', async () => {
    sc = await DisaggScenario.start({
      enforcement: 'required',
      bootstrap: true,
      zones: [
        { name: 'z1', prefill: 1, decode: 1 },
        { name: 'z2', prefill: 1, decode: 1 },
      ],
    });
    const st = await sc.run({ requests: 40, concurrency: 4, promptLen: 96, maxTokens: 3 });
    expect(st.firstError).toBeNull();
    expect(st.ok).toBe(40);
    expect(st.crossDomain).toBe(0);
    const model = sc.fe.registry.models.get('mock-model')!;
    expect(model.disagg.bootstrapLegs).toBe(40);
    expect(model.disagg.sequentialLegs).toBe(0);
    expect(sc.prefillSubmitted('z1') + sc.prefillSubmitted('z2')).toBe(40);
    for (const f of sc.decodeFleets.values())
      for (const w of f.workers) expect(w.engine.stats().prefillTokensComputed).toBe(0);
    // every background prefill ended and released its prefill-router booking
    await sc.until(() => model.disagg.sets.every((s) => s.router.liveRequestCount === 0));
  }, 60_000);
});

describe('topology diagnostics', () => {
  it('a prefill worker without published metadata among ones with it: served unconstrained, counted and logged', async () => {
    const log = capture();
    sc = await DisaggScenario.start({
      enforcement: 'required',
      zones: [{ name: 'z1', prefill: 2, decode: 1 }],
      log,
    });
    const [a, b] = sc.prefillFleets.get('z1')!.workers;
    const pset = sc.fe.registry.models.get('mock-model')!.disagg.sets[0]!;
    const rc = pset.workers.get(a!.instanceId)!.card!.runtime_config;
    rc.kv_transfer_domain = null;
    rc.kv_transfer_enforcement = null;
    const r = await sc.request(sc.prompt(64), 2, a!.instanceId);
    expect(r.status).toBe(200);
    const m = topologyMetrics(sc.fe.metrics.registry);
    expect(m.metadataMissing.labels(decodeEp).value).toBe(1);
    expect(log.lines.some((l) => l.startsWith('topology: the router does not see topology metadata'))).toBe(
      true,
    );
    // the worker that publishes its policy is not a symptom
    expect((await sc.request(sc.prompt(64), 2, b!.instanceId)).status).toBe(200);
    expect(m.metadataMissing.labels(decodeEp).value).toBe(1);
    expect(
      m.decodePlacements.labels({ ...decodeEp, enforcement: 'required', placement: 'in_domain' }).value,
    ).toBe(1);
  }, 30_000);
});

describe('activation, --enforce-disagg, --decode-fallback', () => {
  it('no prefill worker ever seen: aggregated, or 503 with --enforce-disagg', async () => {
    sc = await DisaggScenario.start({ enforcement: null, zones: [{ name: 'z1', prefill: 0, decode: 1 }] });
    const r = await sc.request(sc.prompt(64), 2);
    expect(r.status).toBe(200);
    expect(r.prefill).toBe(r.decode);
    await sc.close();
    sc = await DisaggScenario.start({
      enforcement: null,
      zones: [{ name: 'z1', prefill: 0, decode: 1 }],
      frontendArgs: ['--enforce-disagg'],
    });
    const e = await sc.request(sc.prompt(64), 2);
    expect(e.status).toBe(503);
    expect(e.error).toContain('--enforce-disagg');
  }, 30_000);

  it('every prefill worker gone: 503, or aggregated on the decode workers with --decode-fallback', async () => {
    for (const fallback of [false, true]) {
      sc = await DisaggScenario.start({
        enforcement: null,
        zones: [{ name: 'z1', prefill: 1, decode: 1 }],
        frontendArgs: fallback ? ['--decode-fallback'] : [],
      });
      const before = await sc.request(sc.prompt(64), 2);
      expect(before.status).toBe(200);
      expect(before.prefill).not.toBe(before.decode);
      await sc.prefillFleets.get('z1')!.stop();
      await sc.until(() => sc!.fe.registry.models.get('mock-model')!.disagg.readyCount === 0);
      const after = await sc.request(sc.prompt(64), 2);
      if (fallback) {
        expect(after.status).toBe(200);
        expect(after.prefill).toBe(after.decode);
        // served aggregated: the decode worker computed the prompt itself
        expect(sc.decodeFleets.get('z1')!.workers[0]!.engine.stats().prefillTokensComputed).toBeGreaterThan(
          0,
        );
      } else {
        expect(after.status).toBe(503);
        expect(after.error).toContain('--decode-fallback');
      }
      await sc.close();
      sc = null;
    }
  }, 60_000);
});
