import { KvrError } from '@kvrouter/protocols';

/**
 * A worker's topology environment cannot be used; the worker exits at startup (docs/configuration.md
 * "Worker-side" messages). `detail.field` names the environment variable.
 */
export class TopologyConfigError extends KvrError {
  constructor(message: string, field: string) {
    super('topology_config', message, 400, { field });
    this.name = 'TopologyConfigError';
  }
}

/** Why decode constraints could not be derived from the chosen prefill worker (PROTOCOL §13 fail-closed). */
export type ConstraintErrorReason =
  | 'domain_missing'
  | 'domain_value_missing'
  | 'enforcement_missing'
  | 'enforcement_invalid'
  | 'weight_missing';

/**
 * The prefill worker's published topology is incomplete, so the router cannot derive authoritative
 * decode constraints: the request fails (503) before prefill is dispatched.
 */
export class TopologyConstraintError extends KvrError {
  declare readonly detail: { reason: ConstraintErrorReason; field: string; worker_id?: string };
  constructor(reason: ConstraintErrorReason, field: string, message: string, workerId?: string) {
    super('topology_constraint_unavailable', message, 503, {
      reason,
      field,
      ...(workerId !== undefined ? { worker_id: workerId } : {}),
    });
    this.name = 'TopologyConstraintError';
  }
}
