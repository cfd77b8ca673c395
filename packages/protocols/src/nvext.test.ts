import { describe, expect, it } from 'vitest';
import { KvrError } from './errors.js';
import { parseJson } from './events/json.js';
import {
  directRoutingTarget,
  isQueryOnly,
  parseNvext,
  parseRoutingConstraints,
  pinnedWorker,
  priorityJump,
  routingConstraintsToJson,
} from './nvext.js';

/** Asserts the exact 400 `invalid_request` error and the field it names. */
function expectInvalid(f: () => unknown, message: string, field: string): void {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(KvrError);
  const k = err as KvrError;
  expect(k.code).toBe('invalid_request');
  expect(k.status).toBe(400);
  expect(k.message).toBe(message);
  expect(k.detail).toEqual({ field });
}

describe('parseNvext', () => {
  it('parses every field of §15 from a lossless JSON body', () => {
    const body = parseJson(`{"nvext": {
      "backend_instance_id": 18446744073709551615, "prefill_worker_id": "7587872800778374919", "decode_worker_id": 3,
      "dp_rank": 2, "prefill_dp_rank": 0, "token_data": [1, 2, 4294967295],
      "agent_hints": {"priority": -3, "latency_sensitivity": 0.5, "strict_priority": 1, "osl": 256,
                      "speculative_prefill": true, "kv_overlap_score_credit": 0.25},
      "session_control": {"session_id": "s-1", "action": "open", "timeout": 60},
      "extra_fields": ["worker_id", "timing"], "annotations": ["query_instance_id:x"],
      "ignore_eos": true}}`) as { nvext: unknown };
    const n = parseNvext(body.nvext);
    expect(n).toEqual({
      backend_instance_id: 18446744073709551615n,
      prefill_worker_id: 7587872800778374919n,
      decode_worker_id: 3n,
      dp_rank: 2,
      prefill_dp_rank: 0,
      token_data: new Uint32Array([1, 2, 4294967295]),
      agent_hints: {
        priority: -3,
        latency_sensitivity: 0.5,
        strict_priority: 1,
        osl: 256,
        speculative_prefill: true,
        kv_overlap_score_credit: 0.25,
      },
      session_control: { session_id: 's-1', action: 'open', timeout: 60 },
      extra_fields: ['worker_id', 'timing'],
      annotations: ['query_instance_id:x'],
      other: { ignore_eos: true },
    });
  });

  it('treats absent and null as unset; session timeout defaults to 300 s', () => {
    expect(parseNvext(undefined)).toEqual({});
    expect(parseNvext(null)).toEqual({});
    expect(parseNvext({ backend_instance_id: null, agent_hints: null })).toEqual({});
    expect(parseNvext({ session_control: { session_id: 'a' } })).toEqual({
      session_control: { session_id: 'a', timeout: 300 },
    });
  });

  it.each([1.5, -0.1, '0.5', Number.NaN, true])(
    'rejects kv_overlap_score_credit %s with the docs/configuration.md message',
    (v) => {
      expectInvalid(
        () => parseNvext({ agent_hints: { kv_overlap_score_credit: v } }),
        'nvext.agent_hints.kv_overlap_score_credit must be between 0.0 and 1.0',
        'nvext.agent_hints.kv_overlap_score_credit',
      );
    },
  );

  it('accepts the credit bounds 0 and 1', () => {
    expect(
      parseNvext({ agent_hints: { kv_overlap_score_credit: 0 } }).agent_hints?.kv_overlap_score_credit,
    ).toBe(0);
    expect(
      parseNvext({ agent_hints: { kv_overlap_score_credit: 1 } }).agent_hints?.kv_overlap_score_credit,
    ).toBe(1);
  });

  it('rejects a session_id over 1024 characters (the router holds ids; issue 17)', () => {
    expect(
      parseNvext({ session_control: { session_id: 'x'.repeat(1024) } }).session_control?.session_id,
    ).toHaveLength(1024);
    expectInvalid(
      () => parseNvext({ session_control: { session_id: 'x'.repeat(1025) } }),
      'nvext.session_control.session_id must be at most 1024 characters',
      'nvext.session_control.session_id',
    );
  });

  it.each(['delete', 'OPEN', 3])('rejects session action %s with the docs/configuration.md message', (a) => {
    expectInvalid(
      () => parseNvext({ session_control: { session_id: 's', action: a } }),
      'nvext.session_control.action must be one of open, close, bind',
      'nvext.session_control.action',
    );
  });

  it.each([0, -5])('rejects session timeout %s with the docs/configuration.md message', (t) => {
    expectInvalid(
      () => parseNvext({ session_control: { session_id: 's', timeout: t } }),
      'nvext.session_control.timeout must be > 0',
      'nvext.session_control.timeout',
    );
  });

  it.each([
    [
      { session_control: { session_id: 's', timeout: 1.5 } },
      'nvext.session_control.timeout must be an integer number of seconds',
      'nvext.session_control.timeout',
    ],
    [
      { session_control: { action: 'bind' } },
      'nvext.session_control.session_id must be a non-empty string',
      'nvext.session_control.session_id',
    ],
    [{ session_control: 'x' }, 'nvext.session_control must be an object', 'nvext.session_control'],
    [
      { backend_instance_id: -1 },
      'nvext.backend_instance_id must be a u64 (an integer or a decimal string)',
      'nvext.backend_instance_id',
    ],
    [
      { backend_instance_id: 2 ** 60 },
      'nvext.backend_instance_id must be a u64 (an integer or a decimal string)',
      'nvext.backend_instance_id',
    ],
    [
      { decode_worker_id: '18446744073709551616' },
      'nvext.decode_worker_id must be a u64 (an integer or a decimal string)',
      'nvext.decode_worker_id',
    ],
    [{ dp_rank: 2 ** 32 }, 'nvext.dp_rank must be an integer between 0 and 4294967295', 'nvext.dp_rank'],
    [
      { token_data: [1, -2] },
      'nvext.token_data[1] must be a token id between 0 and 4294967295',
      'nvext.token_data[1]',
    ],
    [{ token_data: 'abc' }, 'nvext.token_data must be an array of token ids', 'nvext.token_data'],
    [
      { agent_hints: { priority: 2 ** 31 } },
      'nvext.agent_hints.priority must be an integer between -2147483648 and 2147483647',
      'nvext.agent_hints.priority',
    ],
    [
      { agent_hints: { osl: 1.5 } },
      'nvext.agent_hints.osl must be an integer between 0 and 4294967295',
      'nvext.agent_hints.osl',
    ],
    [
      { agent_hints: { speculative_prefill: 1 } },
      'nvext.agent_hints.speculative_prefill must be a boolean',
      'nvext.agent_hints.speculative_prefill',
    ],
    [{ agent_hints: [] }, 'nvext.agent_hints must be an object', 'nvext.agent_hints'],
    [{ extra_fields: ['a', 1] }, 'nvext.extra_fields must be an array of strings', 'nvext.extra_fields'],
  ])('rejects %j', (raw, message, field) => {
    expectInvalid(() => parseNvext(raw), message, field);
  });

  it('rejects a non-object nvext', () => {
    expectInvalid(() => parseNvext([1]), 'nvext must be an object', 'nvext');
  });

  it('does not let a "__proto__" member reach a prototype', () => {
    const n = parseNvext(parseJson('{"__proto__": {"polluted": true}, "dp_rank": 1}'));
    expect(n).toEqual({ dp_rank: 1 });
    expect(Object.getPrototypeOf(n)).toBe(Object.prototype);
  });
});

describe('nvext helpers', () => {
  it('priorityJump = max(priority, 0), falling back to latency_sensitivity', () => {
    expect(priorityJump(parseNvext({ agent_hints: { priority: 5, latency_sensitivity: 9 } }))).toBe(5);
    expect(priorityJump(parseNvext({ agent_hints: { priority: -5 } }))).toBe(0);
    expect(priorityJump(parseNvext({ agent_hints: { latency_sensitivity: 2.5 } }))).toBe(2.5);
    expect(priorityJump(undefined)).toBe(0);
  });

  it('isQueryOnly looks for the query_instance_id: annotation', () => {
    expect(isQueryOnly(parseNvext({ annotations: ['a', 'query_instance_id:anything'] }))).toBe(true);
    expect(isQueryOnly(parseNvext({ annotations: ['query_instance_id'] }))).toBe(false);
    expect(isQueryOnly(undefined)).toBe(false);
  });

  it('the x-worker-instance-id header wins over nvext.backend_instance_id', () => {
    const n = parseNvext({ backend_instance_id: 5 });
    expect(pinnedWorker(n)).toBe(5n);
    expect(pinnedWorker(n, '18446744073709551615')).toBe(18446744073709551615n);
    expect(() => pinnedWorker(n, 'abc')).toThrow(/x-worker-instance-id must be a u64/);
  });

  it('direct routing without a target is the docs/configuration.md 400', () => {
    expectInvalid(
      () => directRoutingTarget(parseNvext({})),
      'direct routing requires nvext.backend_instance_id or x-worker-instance-id',
      'nvext.backend_instance_id',
    );
    expect(directRoutingTarget(parseNvext({}), '7')).toBe(7n);
  });
});

describe('RoutingConstraints (§13)', () => {
  it('parses the JSON form and writes it back with empty members omitted', () => {
    const c = parseRoutingConstraints({
      required_taints: ['dynamo.topology/rack=r1'],
      preferred_taints: { 'dynamo.topology/zone=z': 0.85 },
    });
    expect([...c.required_taints]).toEqual(['dynamo.topology/rack=r1']);
    expect(c.preferred_taints.get('dynamo.topology/zone=z')).toBe(0.85);
    expect(routingConstraintsToJson(c)).toEqual({
      required_taints: ['dynamo.topology/rack=r1'],
      preferred_taints: { 'dynamo.topology/zone=z': 0.85 },
    });
    expect(routingConstraintsToJson(parseRoutingConstraints(undefined))).toEqual({});
  });

  it('rejects a non-numeric weight, naming it', () => {
    expectInvalid(
      () => parseRoutingConstraints({ preferred_taints: { t: 'high' } }),
      'routing_constraints.preferred_taints.t must be a finite number',
      'routing_constraints.preferred_taints.t',
    );
  });
});
