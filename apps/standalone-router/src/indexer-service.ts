/**
 * The standalone HTTP indexer (docs/protocol.md §7.8; upstream `python -m dynamo.indexer`): engines
 * are registered by their vLLM ZMQ PUB endpoint; each registration runs a `VllmZmqIngest` whose
 * converted events go straight into the model's index (no event plane). Queries answer in tokens.
 *
 * - `POST /register {instance_id, endpoint, model_name, block_size, tenant_id?, dp_rank?, replay_endpoint?}`
 * - `POST /unregister {instance_id, model_name, tenant_id?, dp_rank?}` (no rank: every rank of the instance)
 * - `GET /workers`
 * - `POST /query {token_ids, model_name, tenant_id?, lora_name?}`, `POST /query_by_hash {block_hashes, model_name, tenant_id?}`
 *   → `{"scores": {"<instance_id>": {"<dp_rank>": matched_tokens}}, "frequencies": [], "tree_sizes": {...blocks}}`
 * - `GET /dump` → every model's index as Stored events (§3.7)
 * - `POST /register_peer {url}`, `GET /peers`; `--peers` recovers registrations and indexes from peers at startup
 */
import {
  KvrError,
  RouterEventCodec,
  computeLocalBlockHashes,
  invalidRequest as bad,
  parseJson,
  parseU64,
  stringifyJson,
  type RouterEvent,
  type WorkerId,
} from '@kvrouter/protocols';
import { KvEventPublisher, VllmZmqIngest } from '@kvrouter/kv-events';
import type { KvIndexer, OverlapScores } from '@kvrouter/radix-indexer';
import { createKvIndexer } from '@kvrouter/radix-indexer/pool';
import { startJsonServer, type JsonServer, type Reply } from './http.js';
import type { Logger } from './service.js';

export const DEFAULT_TENANT = 'default';

export interface IndexerServiceOptions {
  /** `--block-size`: used when a registration gives none (and as the usual engine block size). */
  blockSize: number;
  /** `--port` (8090; 0 = any free port). */
  port: number;
  host?: string;
  /** `--threads`: writer lanes of each model's index (1 = single-threaded). */
  threads: number;
  /** `--peers`: indexers to recover registrations and index contents from at startup. */
  peers?: readonly string[];
  log: Logger;
}

export interface Registration {
  instance_id: WorkerId;
  model_name: string;
  tenant_id: string;
  dp_rank: number;
  endpoint: string;
  block_size: number;
  replay_endpoint: string | null;
}

interface Live {
  reg: Registration;
  ingest: VllmZmqIngest;
  publisher: KvEventPublisher;
}

interface ModelIndex {
  model_name: string;
  tenant_id: string;
  blockSize: number;
  index: KvIndexer;
  /** `${instance_id}:${dp_rank}` → live registration. */
  regs: Map<string, Live>;
}

function obj(v: unknown): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad('body', 'expected a JSON object');
  return v as Record<string, unknown>;
}

function str(o: Record<string, unknown>, k: string, required: true): string;
function str(o: Record<string, unknown>, k: string, required: false): string | null;
function str(o: Record<string, unknown>, k: string, required: boolean): string | null {
  const v = o[k];
  if (v === undefined || v === null) {
    if (required) throw bad(k, 'is required');
    return null;
  }
  if (typeof v !== 'string' || v.length === 0) throw bad(k, 'must be a non-empty string');
  return v;
}

function uint(o: Record<string, unknown>, k: string, min: number, max: number): number | null {
  const v = o[k];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw bad(k, `must be an integer ${min}..${max}`);
  return v;
}

function u64(o: Record<string, unknown>, k: string): bigint {
  const v = o[k];
  if (v === undefined || v === null) throw bad(k, 'is required');
  try {
    return parseU64(v as bigint | number | string);
  } catch {
    throw bad(k, 'must be a u64 (an integer or a decimal string)');
  }
}

const modelKey = (model: string, tenant: string): string => `${model}\u0000${tenant}`;

/** §7.8 reply: scores in tokens (blocks × block size), tree sizes in blocks, nested by instance then rank. */
function scoresReply(o: OverlapScores, blockSize: number): unknown {
  const nest = (m: Map<string, number>, mul: number): Record<string, Record<string, number>> => {
    const out: Record<string, Record<string, number>> = {};
    for (const [k, n] of m) {
      const w = o.workers.get(k);
      const [id, rank] = w ? [String(w.worker_id), String(w.dp_rank)] : k.split(':');
      (out[id!] ??= {})[rank!] = n * mul;
    }
    return out;
  };
  return { scores: nest(o.scores, blockSize), frequencies: o.frequencies, tree_sizes: nest(o.treeSizes, 1) };
}

export class IndexerService {
  private readonly models = new Map<string, ModelIndex>();
  private readonly peers = new Set<string>();
  private http: JsonServer | null = null;
  private closed = false;

  private constructor(private readonly o: IndexerServiceOptions) {
    if (!Number.isSafeInteger(o.blockSize) || o.blockSize < 1)
      throw bad('block-size', 'must be an integer >= 1');
    if (!Number.isSafeInteger(o.threads) || o.threads < 1) throw bad('threads', 'must be an integer >= 1');
  }

  static async start(o: IndexerServiceOptions): Promise<IndexerService> {
    const s = new IndexerService(o);
    try {
      s.http = await startJsonServer(
        {
          'POST /register': (b) => s.register(b),
          'POST /unregister': (b) => s.unregister(b),
          'GET /workers': () => ({ json: { workers: s.workers() } }),
          'POST /query': (b) => s.query(b),
          'POST /query_by_hash': (b) => s.queryByHash(b),
          'GET /dump': async () => ({ json: await s.dump() }),
          'POST /register_peer': (b) => s.registerPeer(b),
          'GET /peers': () => ({ json: { peers: [...s.peers].sort() } }),
          'GET /health': () => ({
            json: { status: 'healthy', models: s.models.size, workers: s.workers().length },
          }),
        },
        o.port,
        o.host,
      );
      for (const p of o.peers ?? []) await s.recoverFrom(p);
    } catch (e) {
      await s.close();
      throw e;
    }
    o.log.info(
      `indexer listening on ${s.url} (block size ${o.blockSize}, ${o.threads} writer lane(s) per model)`,
    );
    return s;
  }

  get url(): string {
    return this.http?.url ?? '';
  }

  private model(name: string, tenant: string, blockSize: number | null): ModelIndex {
    const key = modelKey(name, tenant);
    let m = this.models.get(key);
    if (!m) {
      if (blockSize === null)
        throw new KvrError(
          'not_found',
          `no worker is registered for model ${JSON.stringify(name)} (tenant ${JSON.stringify(tenant)})`,
          404,
          { field: 'model_name' },
        );
      m = {
        model_name: name,
        tenant_id: tenant,
        blockSize,
        index: createKvIndexer({
          threads: this.o.threads,
          onError: (e) => this.o.log.warn(`index ${name}: ${e.message}`),
        }),
        regs: new Map(),
      };
      this.models.set(key, m);
    }
    return m;
  }

  /** `POST /register`. Re-registering the same engine endpoint is a no-op; a new endpoint replaces the old one. */
  register(body: unknown): Reply {
    if (this.closed) throw new KvrError('shutting_down', 'indexer is shutting down', 503);
    const b = obj(body);
    const reg: Registration = {
      instance_id: u64(b, 'instance_id') as WorkerId,
      endpoint: str(b, 'endpoint', true),
      model_name: str(b, 'model_name', true),
      block_size: uint(b, 'block_size', 1, 0xffffffff) ?? this.o.blockSize,
      tenant_id: str(b, 'tenant_id', false) ?? DEFAULT_TENANT,
      dp_rank: uint(b, 'dp_rank', 0, 0xffffffff) ?? 0,
      replay_endpoint: str(b, 'replay_endpoint', false),
    };
    if (!/^(tcp|ipc|inproc):\/\/.+/.test(reg.endpoint))
      throw bad(
        'endpoint',
        `must be a ZMQ endpoint like tcp://host:port, got ${JSON.stringify(reg.endpoint)}`,
      );
    if (reg.replay_endpoint !== null && !/^(tcp|ipc|inproc):\/\/.+/.test(reg.replay_endpoint))
      throw bad(
        'replay_endpoint',
        `must be a ZMQ endpoint like tcp://host:port, got ${JSON.stringify(reg.replay_endpoint)}`,
      );
    const existing = this.models.get(modelKey(reg.model_name, reg.tenant_id));
    if (existing && existing.blockSize !== reg.block_size)
      throw bad(
        'block_size',
        `model ${JSON.stringify(reg.model_name)} is indexed with block size ${existing.blockSize}, got ${reg.block_size}`,
      );
    const m = this.model(reg.model_name, reg.tenant_id, reg.block_size);
    const key = `${reg.instance_id}:${reg.dp_rank}`;
    const old = m.regs.get(key);
    if (old && old.reg.endpoint === reg.endpoint && old.reg.replay_endpoint === reg.replay_endpoint)
      return { json: { status: 'already_registered', ...old.reg } };
    if (old) this.stop(m, key, old);
    const publisher = new KvEventPublisher({
      workerId: reg.instance_id,
      dpRanks: [reg.dp_rank],
      localIndexer: false,
      sink: { publishEvent: (ev) => m.index.applyEvent(ev) },
      onEngineDropped: (n) =>
        this.o.log.warn(
          `engine ${reg.endpoint} (instance ${reg.instance_id}, rank ${reg.dp_rank}): ${n} event batch(es) lost`,
        ),
      onError: (e) => this.o.log.warn(`index ${reg.model_name}: ${(e as Error).message}`),
    });
    const ingest = new VllmZmqIngest({
      endpoint: reg.endpoint,
      publisher,
      kvBlockSize: reg.block_size,
      dpRank: reg.dp_rank,
      replayEndpoint: reg.replay_endpoint,
      onWarning: (w) => this.o.log.warn(`engine ${reg.endpoint}: ${w}`),
      onError: (e) => this.o.log.warn(`engine ${reg.endpoint}: ${(e as Error).message}`),
    });
    m.regs.set(key, { reg, ingest, publisher });
    this.o.log.info(
      `registered instance ${reg.instance_id} rank ${reg.dp_rank} of ${reg.model_name} at ${reg.endpoint}`,
    );
    return { status: 201, json: { status: 'registered', ...reg } };
  }

  private stop(m: ModelIndex, key: string, live: Live): void {
    const warn = (e: unknown): void =>
      this.o.log.warn(`engine ${live.reg.endpoint}: close: ${(e as Error).message}`);
    live.ingest.close().catch(warn);
    live.publisher.close().catch(warn);
    m.regs.delete(key);
    m.index.removeWorkerDpRank(live.reg.instance_id, live.reg.dp_rank);
  }

  /** `POST /unregister`: stops listening to the engine and forgets its blocks. */
  unregister(body: unknown): Reply {
    const b = obj(body);
    const id = u64(b, 'instance_id');
    const name = str(b, 'model_name', true);
    const tenant = str(b, 'tenant_id', false) ?? DEFAULT_TENANT;
    const rank = uint(b, 'dp_rank', 0, 0xffffffff);
    const m = this.model(name, tenant, null);
    const keys = [...m.regs.keys()].filter((k) => {
      const r = m.regs.get(k)!.reg;
      return r.instance_id === id && (rank === null || r.dp_rank === rank);
    });
    if (keys.length === 0)
      throw new KvrError(
        'not_found',
        `instance ${id}${rank === null ? '' : ` rank ${rank}`} is not registered for model ${JSON.stringify(name)}`,
        404,
        { field: 'instance_id' },
      );
    for (const k of keys) this.stop(m, k, m.regs.get(k)!);
    return {
      json: {
        status: 'unregistered',
        instance_id: id,
        model_name: name,
        tenant_id: tenant,
        dp_ranks: keys.map((k) => Number(k.split(':')[1])).sort((x, y) => x - y),
      },
    };
  }

  workers(): Registration[] {
    const out: Registration[] = [];
    for (const m of this.models.values()) for (const l of m.regs.values()) out.push(l.reg);
    return out.sort((a, b) =>
      a.model_name !== b.model_name
        ? a.model_name < b.model_name
          ? -1
          : 1
        : a.instance_id !== b.instance_id
          ? a.instance_id < b.instance_id
            ? -1
            : 1
          : a.dp_rank - b.dp_rank,
    );
  }

  /** `POST /query`: token ids hashed with the model's block size (and LoRA name, §2.1). */
  query(body: unknown): Reply {
    const b = obj(body);
    const m = this.model(str(b, 'model_name', true), str(b, 'tenant_id', false) ?? DEFAULT_TENANT, null);
    const t = b.token_ids;
    if (!Array.isArray(t)) throw bad('token_ids', 'must be an array of token ids');
    const tokens = new Uint32Array(t.length);
    for (let i = 0; i < t.length; i++) {
      const x: unknown = t[i];
      if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 0xffffffff)
        throw bad(`token_ids[${i}]`, 'must be an integer 0..4294967295');
      tokens[i] = x;
    }
    const lora = str(b, 'lora_name', false);
    const local = computeLocalBlockHashes(tokens, m.blockSize, lora ? { loraName: lora } : undefined);
    return { json: scoresReply(m.index.findMatches(local), m.blockSize) };
  }

  /** `POST /query_by_hash`: the query's local block hashes (§2.1) directly. */
  queryByHash(body: unknown): Reply {
    const b = obj(body);
    const m = this.model(str(b, 'model_name', true), str(b, 'tenant_id', false) ?? DEFAULT_TENANT, null);
    const h = b.block_hashes;
    if (!Array.isArray(h)) throw bad('block_hashes', 'must be an array of u64 block hashes');
    const hashes = h.map((x: unknown, i) => {
      try {
        return parseU64(x as bigint | number | string);
      } catch {
        throw bad(`block_hashes[${i}]`, 'must be a u64 (an integer or a decimal string)');
      }
    });
    return { json: scoresReply(m.index.findMatches(hashes), m.blockSize) };
  }

  /** `GET /dump`: each model's index as Stored events, parents first (§3.7). */
  async dump(): Promise<{
    models: { model_name: string; tenant_id: string; block_size: number; events: unknown[] }[];
  }> {
    const out = [];
    for (const m of this.models.values()) {
      const events = await m.index.dump();
      out.push({
        model_name: m.model_name,
        tenant_id: m.tenant_id,
        block_size: m.blockSize,
        events: events.map((e) => RouterEventCodec.toValue(e)),
      });
    }
    return { models: out };
  }

  registerPeer(body: unknown): Reply {
    const url = str(obj(body), 'url', true);
    if (!/^https?:\/\/[^/]+/.test(url))
      throw bad('url', `must be an http(s) URL, got ${JSON.stringify(url)}`);
    this.peers.add(url.replace(/\/+$/, ''));
    return { json: { peers: [...this.peers].sort() } };
  }

  /**
   * `--peers`: copy a peer's index contents (its dump), then subscribe to the same engines. Events
   * between the two steps may be missed; the engines' next events and replays refill them.
   */
  private async recoverFrom(peer: string): Promise<void> {
    const base = peer.replace(/\/+$/, '');
    try {
      const get = async (p: string): Promise<unknown> => {
        const r = await fetch(`${base}${p}`, { signal: AbortSignal.timeout(10_000) });
        if (!r.ok) throw new Error(`GET ${p}: HTTP ${r.status}`);
        return parseJson(await r.text());
      };
      const dump = (await get('/dump')) as {
        models?: { model_name: string; tenant_id: string; block_size: number; events: unknown[] }[];
      };
      let events = 0;
      for (const d of dump.models ?? []) {
        const m = this.model(d.model_name, d.tenant_id, d.block_size);
        for (const e of d.events) {
          m.index.applyEvent(RouterEventCodec.fromValue(e) as RouterEvent);
          events++;
        }
      }
      const workers = ((await get('/workers')) as { workers?: unknown[] }).workers ?? [];
      for (const w of workers) this.register(w);
      this.peers.add(base);
      // Let the peer know about this one too.
      if (this.url)
        await fetch(`${base}/register_peer`, {
          method: 'POST',
          body: stringifyJson({ url: this.url }),
          signal: AbortSignal.timeout(10_000),
        }).catch(() => undefined);
      this.o.log.info(`recovered ${events} events and ${workers.length} registrations from peer ${base}`);
    } catch (e) {
      this.o.log.warn(`peer ${base}: recovery failed: ${(e as Error).message}`);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.http?.close();
    for (const m of this.models.values()) {
      for (const l of m.regs.values()) await Promise.allSettled([l.ingest.close(), l.publisher.close()]);
      await m.index.close();
    }
    this.models.clear();
  }
}
