/**
 * Honest health (issue 17), Dynamo's semantics: *live* = the process serves HTTP; *healthy* = it
 * can route: discovery reachable, at least one worker per model, the NATS connection up where the
 * request plane or the KV event plane needs it. `probeHealth` runs the connection probes (each
 * bounded by a timeout) and the caller's own checks, and says why when it is not healthy.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { errorMessage } from '@kvrouter/protocols';
import type { Discovery, LeaseStatus } from './discovery/index.js';

/** One check's outcome: the string `ok`, or the reason it failed. */
export type CheckResult = string;

export interface HealthReport {
  healthy: boolean;
  /** Every check by name (`discovery`, `nats`, `workers`, ...): `ok` or why not. */
  checks: Record<string, CheckResult>;
  /** The failed checks' reasons, one line each (empty when healthy). */
  reasons: string[];
  /** The discovery lease (issue 18): a gap while it lasts (check `lease`), and the last gap after it ended. */
  lease?: LeaseStatus;
}

export interface HealthProbeOptions {
  /** Probed with a key read (etcd); mem and file backends are always reachable. */
  discovery?: Discovery | null;
  /** Probed with a round trip; give it only where routing needs NATS. */
  nats?: NatsConnection | null;
  /** What NATS carries here, for the reason (e.g. `KV event plane`). */
  natsRole?: string;
  /** The caller's own checks by name (e.g. `workers`), evaluated after the probes. */
  checks?: Record<string, () => CheckResult>;
  /** Per probe; default 1000 ms. */
  timeoutMs?: number;
}

/** The key the discovery probe reads (absent is fine: a read that answers is what counts). */
export const HEALTH_PROBE_KEY = 'v1/kvrouter/health-probe';

export const DEFAULT_HEALTH_TIMEOUT_MS = 1000;

async function withTimeout(p: Promise<unknown>, ms: number, what: string): Promise<CheckResult> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      p,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      }),
    ]);
    return 'ok';
  } catch (e) {
    return errorMessage(e);
  } finally {
    clearTimeout(timer);
  }
}

export async function probeHealth(o: HealthProbeOptions): Promise<HealthReport> {
  const ms = o.timeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
  const checks: Record<string, CheckResult> = {};
  const probes: Promise<void>[] = [];
  const d = o.discovery;
  // Read before any probe awaits: the state at the moment /health was asked.
  const lease = d?.leaseStatus();
  if (d) {
    if (d.backend === 'etcd')
      probes.push(
        withTimeout(d.get(HEALTH_PROBE_KEY), ms, 'etcd').then((r) => {
          checks.discovery = r === 'ok' ? r : `discovery (etcd) unreachable: ${r}`;
        }),
      );
    else checks.discovery = 'ok';
  }
  const nc = o.nats;
  if (nc) {
    const role = o.natsRole ? ` (${o.natsRole})` : '';
    if (nc.isClosed()) checks.nats = `NATS${role} connection closed`;
    else
      probes.push(
        // rtt() throws at once while disconnected, else pings the server.
        withTimeout(
          Promise.resolve().then(() => nc.rtt()),
          ms,
          'NATS',
        ).then((r) => {
          checks.nats = r === 'ok' ? r : `NATS${role} not connected: ${r}`;
        }),
      );
  }
  if (lease)
    checks.lease =
      lease.state === 'held'
        ? 'ok'
        : `discovery lease lost ${Date.now() - lease.lostAt!} ms ago (${lease.lastError}); re-registering`;
  await Promise.all(probes);
  for (const [name, f] of Object.entries(o.checks ?? {})) {
    try {
      checks[name] = f();
    } catch (e) {
      checks[name] = errorMessage(e);
    }
  }
  const reasons = Object.values(checks).filter((r) => r !== 'ok');
  return { healthy: reasons.length === 0, checks, reasons, ...(lease ? { lease } : {}) };
}
