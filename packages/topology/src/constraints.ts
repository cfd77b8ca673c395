/**
 * `RoutingConstraints` (PROTOCOL §13): the type and its JSON form live in `@kvrouter/protocols`
 * (nvext); this adds the union with derived constraints and the two checks a router makes.
 */
import {
  emptyRoutingConstraints,
  parseRoutingConstraints,
  routingConstraintsToJson,
  type RoutingConstraints,
} from '@kvrouter/protocols';

export {
  emptyRoutingConstraints,
  parseRoutingConstraints,
  routingConstraintsToJson,
  type RoutingConstraints,
};

/**
 * Union of the request's own constraints and derived ones, as a new object (neither input changes).
 * Required taints: set union. Preferred taints: map union; a taint present in both takes the
 * derived weight (the seed's "added to the existing preferred_taints" read as a map insert).
 */
export function mergeConstraints(
  own: RoutingConstraints | null | undefined,
  derived: RoutingConstraints | null | undefined,
): RoutingConstraints {
  const out = emptyRoutingConstraints();
  for (const c of [own, derived]) {
    if (!c) continue;
    for (const t of c.required_taints) out.required_taints.add(t);
    for (const [t, w] of c.preferred_taints) out.preferred_taints.set(t, w);
  }
  return out;
}

/** Required = hard filter: the worker must hold every required taint. */
export function satisfiesRequired(
  taints: ReadonlySet<string>,
  c: RoutingConstraints | null | undefined,
): boolean {
  if (!c) return true;
  for (const t of c.required_taints) if (!taints.has(t)) return false;
  return true;
}

/** Σ weights of the preferred taints the worker holds (the argument of exp(−tanh(·))). */
export function preferredWeightHeld(
  taints: ReadonlySet<string>,
  c: RoutingConstraints | null | undefined,
): number {
  let sum = 0;
  if (c) for (const [t, w] of c.preferred_taints) if (taints.has(t)) sum += w;
  return sum;
}

export function isEmptyConstraints(c: RoutingConstraints | null | undefined): boolean {
  return !c || (c.required_taints.size === 0 && c.preferred_taints.size === 0);
}
