/**
 * `--use-remote-indexer` (docs/protocol.md §7.7) on a frontend: instead of a tree of its own, each
 * worker set asks the index a standalone router serves on the worker component
 * (`kv_indexer_query`), round robin over the serving instances it sees in discovery. An instance
 * leaves the rotation the moment discovery drops it or a call to it fails on the transport
 * (refused, dropped, timed out), and the same query goes to the next one (issue 18); a failed
 * instance still in discovery is probed in the background (an empty query every second) and
 * comes back when a probe answers or discovery announces it again. A query that no instance
 * answers is logged (at most one line per 10 s, with the count), counted in
 * `dynamo_component_router_remote_indexer_query_failures_total`, and the request routes on load
 * alone. Approximate mode (`--no-router-kv-events`) also sends each decision to
 * `kv_indexer_record_routing_decision` (failures: `..._write_failures_total`).
 */
import {
  KV_INDEXER_QUERY_ENDPOINT,
  KV_INDEXER_RECORD_ENDPOINT,
  KvrError,
  RemoteIndexerQueryCodec,
  RemoteIndexerRecordRequestCodec,
  u64ToHex,
} from '@kvrouter/protocols';
import type { RouterEndpointMetrics } from '@kvrouter/metrics';
import { RemoteIndexer, type RemoteIndexerClient } from '@kvrouter/router';
import {
  watchInstances,
  type Discovery,
  type RequestClient,
  type Transport,
  type TypedWatch,
  type Instance,
} from '@kvrouter/runtime';

/** A routing decision cannot wait for the request plane's 10 s unary default. */
export const REMOTE_QUERY_TIMEOUT_MS = 1000;
const LOG_EVERY_MS = 10_000;

/** Transport failures that say nothing about the query itself: the instance is unreachable. */
const UNREACHABLE = new Set(['cannot_connect', 'disconnected', 'connection_timeout', 'request_timeout']);

const PROBE_EVERY_MS = 1000;

interface Served {
  readonly id: bigint;
  transport: Transport;
  /** A call failed on the transport: out of the rotation until a probe answers or discovery re-announces it. */
  down: boolean;
}

/** The live instances of one endpoint, in discovery order, for round-robin picks. */
class Instances {
  private readonly byId = new Map<bigint, Served>();
  private rr = 0;
  private readonly watch: TypedWatch<Instance>;

  constructor(
    discovery: Discovery,
    namespace: string,
    component: string,
    endpoint: string,
    private readonly onChange: (msg: string) => void,
  ) {
    const watch = watchInstances(discovery, { namespace, component, endpoint });
    this.watch = watch;
    void (async () => {
      try {
        for await (const ch of watch) {
          if (ch.type === 'put') {
            const id = ch.value.instance_id;
            const was = this.byId.get(id);
            if (was?.down) this.onChange(`instance ${u64ToHex(id)} announced again; back in rotation`);
            this.byId.set(id, { id, transport: ch.value.transport, down: false });
          } else if (ch.type === 'delete') this.byId.delete(ch.parts.instance_id);
        }
      } catch {
        // Closed or failed: the list stays as it was; queries then fail and are counted.
      }
    })();
  }

  /** The reachable instances in the order to try them: round robin from the next one. */
  candidates(): Served[] {
    const up = [...this.byId.values()].filter((s) => !s.down);
    const n = up.length;
    if (n === 0) return [];
    this.rr = (this.rr + 1) % n;
    return [...up.slice(this.rr), ...up.slice(0, this.rr)];
  }

  /** Instances in discovery that a failed call took out of the rotation. */
  downOnes(): Served[] {
    return [...this.byId.values()].filter((s) => s.down);
  }

  markDown(s: Served, e: unknown): void {
    // Discovery may have replaced or dropped it meanwhile.
    if (this.byId.get(s.id) !== s || s.down) return;
    s.down = true;
    this.onChange(`instance ${u64ToHex(s.id)} unreachable (${(e as Error).message}); out of rotation`);
  }

  markUp(s: Served): void {
    if (this.byId.get(s.id) !== s || !s.down) return;
    s.down = false;
    this.onChange(`instance ${u64ToHex(s.id)} answers again; back in rotation`);
  }

  close(): void {
    this.watch.close();
  }
}

/**
 * Calls `candidates` in turn until one answers; a transport failure takes that instance out of the
 * rotation and moves on, any other failure (the instance answered) ends the attempt.
 */
async function firstAnswer(
  set: Instances,
  call: (t: Transport) => Promise<unknown>,
  none: () => KvrError,
): Promise<unknown> {
  let last: KvrError | null = null;
  for (const s of set.candidates()) {
    try {
      return await call(s.transport);
    } catch (e) {
      if (!UNREACHABLE.has((e as KvrError).code)) throw e;
      set.markDown(s, e);
      last = e as KvrError;
    }
  }
  throw last ?? none();
}

export interface RemoteIndexOptions {
  discovery: Discovery;
  client: RequestClient;
  namespace: string;
  component: string;
  /** The card's `display_name`: served indexes are keyed by it. */
  modelName: string;
  approximate: boolean;
  metrics: RouterEndpointMetrics;
  warn: (msg: string) => void;
  timeoutMs?: number;
  /** Background probe period of instances a failure took out (default 1 s). */
  probeEveryMs?: number;
}

export function createRemoteIndex(o: RemoteIndexOptions): { indexer: RemoteIndexer; close(): void } {
  const { namespace: ns, component: comp } = o;
  const note = (ep: string) => (msg: string) => o.warn(`remote indexer ${ns}/${comp}/${ep}: ${msg}`);
  const queries = new Instances(
    o.discovery,
    ns,
    comp,
    KV_INDEXER_QUERY_ENDPOINT,
    note(KV_INDEXER_QUERY_ENDPOINT),
  );
  const records = o.approximate
    ? new Instances(o.discovery, ns, comp, KV_INDEXER_RECORD_ENDPOINT, note(KV_INDEXER_RECORD_ENDPOINT))
    : null;
  const timeoutMs = o.timeoutMs ?? REMOTE_QUERY_TIMEOUT_MS;
  const none = (ep: string): KvrError =>
    new KvrError(
      'no_remote_indexer',
      `no ${ep} instance on ${ns}/${comp} (start a router with --serve-indexer)`,
      503,
    );
  const client: RemoteIndexerClient = {
    query: (q) =>
      firstAnswer(
        queries,
        (t) =>
          o.client.unary(t, KV_INDEXER_QUERY_ENDPOINT, RemoteIndexerQueryCodec.toValue(q), { timeoutMs }),
        () => none(KV_INDEXER_QUERY_ENDPOINT),
      ),
    record: (r) =>
      records
        ? firstAnswer(
            records,
            (t) =>
              o.client.unary(t, KV_INDEXER_RECORD_ENDPOINT, RemoteIndexerRecordRequestCodec.toValue(r), {
                timeoutMs,
              }),
            () => none(KV_INDEXER_RECORD_ENDPOINT),
          )
        : Promise.reject(none(KV_INDEXER_RECORD_ENDPOINT)),
  };
  // Instances a failure took out but discovery still lists (a pause shorter than the lease, a
  // network blip): an empty query, off the request path, brings them back when answered.
  const probe = { model_name: o.modelName, block_hashes: [] };
  const probing = new Set<bigint>();
  const prober = setInterval(() => {
    // A serving router answers both endpoints on one server: the query endpoint probes either.
    for (const set of records ? [queries, records] : [queries])
      for (const s of set.downOnes()) {
        if (probing.has(s.id)) continue;
        probing.add(s.id);
        o.client
          .unary(s.transport, KV_INDEXER_QUERY_ENDPOINT, RemoteIndexerQueryCodec.toValue(probe), {
            timeoutMs,
          })
          .then(
            () => set.markUp(s),
            () => undefined,
          )
          .finally(() => probing.delete(s.id));
      }
  }, o.probeEveryMs ?? PROBE_EVERY_MS);
  prober.unref();
  const throttled = (what: string) => {
    let last = -Infinity;
    let since = 0;
    return (e: unknown): void => {
      since++;
      const now = Date.now();
      if (now - last < LOG_EVERY_MS) return;
      o.warn(
        `remote indexer ${ns}/${comp}: ${what} failed (${since} since the last report), routing on load alone: ${(e as Error).message}`,
      );
      last = now;
      since = 0;
    };
  };
  const logQuery = throttled('query');
  const logWrite = throttled('routing-decision write');
  const indexer = new RemoteIndexer({
    modelName: o.modelName,
    client,
    approximate: o.approximate,
    onQueryFailure: (e) => {
      o.metrics.remoteQueryFailed();
      logQuery(e);
    },
    onWriteFailure: (e) => {
      o.metrics.remoteWriteFailed();
      logWrite(e);
    },
  });
  return {
    indexer,
    close: () => {
      clearInterval(prober);
      queries.close();
      records?.close();
    },
  };
}
