import { describe, expect, it } from 'vitest';
import { emptyRoutingConstraints, type RoutingConstraints } from '@kvrouter/protocols';
import {
  isEmptyConstraints,
  mergeConstraints,
  parseRoutingConstraints,
  preferredWeightHeld,
  routingConstraintsToJson,
  satisfiesRequired,
} from './constraints.js';

const rc = (req: string[], pref: [string, number][]): RoutingConstraints => ({
  required_taints: new Set(req),
  preferred_taints: new Map(pref),
});

describe('RoutingConstraints', () => {
  it('JSON omits empty members', () => {
    expect(routingConstraintsToJson(emptyRoutingConstraints())).toEqual({});
    expect(routingConstraintsToJson(rc(['b', 'a'], []))).toEqual({ required_taints: ['a', 'b'] });
    expect(routingConstraintsToJson(rc([], [['z', 0.85]]))).toEqual({ preferred_taints: { z: 0.85 } });
    expect(JSON.stringify(routingConstraintsToJson(rc(['t'], [['p', 0.5]])))).toBe(
      '{"required_taints":["t"],"preferred_taints":{"p":0.5}}',
    );
  });

  it('merge is a union and changes neither input; a taint in both takes the derived weight', () => {
    const own = rc(
      ['user=a'],
      [
        ['dynamo.topology/zone=z1', 0.2],
        ['user=p', 0.3],
      ],
    );
    const derived = rc(['dynamo.topology/zone=z1'], [['dynamo.topology/zone=z1', 0.85]]);
    const m = mergeConstraints(own, derived);
    expect(m.required_taints).toEqual(new Set(['user=a', 'dynamo.topology/zone=z1']));
    expect(m.preferred_taints).toEqual(
      new Map([
        ['dynamo.topology/zone=z1', 0.85],
        ['user=p', 0.3],
      ]),
    );
    expect(own.required_taints.size).toBe(1);
    expect(own.preferred_taints.get('dynamo.topology/zone=z1')).toBe(0.2);
    expect(mergeConstraints(null, undefined)).toEqual(emptyRoutingConstraints());
    expect(isEmptyConstraints(mergeConstraints(null, null))).toBe(true);
    expect(isEmptyConstraints(m)).toBe(false);
  });

  it('required is all-of; preferred sums the held weights', () => {
    const c = rc(
      ['a', 'b'],
      [
        ['a', 0.5],
        ['c', 0.25],
        ['d', 0.125],
      ],
    );
    expect(satisfiesRequired(new Set(['a', 'b', 'x']), c)).toBe(true);
    expect(satisfiesRequired(new Set(['a']), c)).toBe(false);
    expect(satisfiesRequired(new Set(), null)).toBe(true);
    // holds a and c: 0.5 + 0.25 = 0.75
    expect(preferredWeightHeld(new Set(['a', 'c']), c)).toBe(0.75);
    expect(preferredWeightHeld(new Set(['x']), c)).toBe(0);
  });

  it('parses the JSON form and names a bad field', () => {
    const c = parseRoutingConstraints({ required_taints: ['t'], preferred_taints: { p: 0.5 } });
    expect(c).toEqual(rc(['t'], [['p', 0.5]]));
    expect(() => parseRoutingConstraints({ preferred_taints: { p: 'x' } })).toThrow(
      /routing_constraints.preferred_taints.p/,
    );
  });
});
