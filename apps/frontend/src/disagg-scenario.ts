/**
 * A disaggregated fleet across topology domains, for the disaggregation tests and `pnpm bench
 * disagg`: per zone, simulated prefill workers (component `prefill`, card type `prefill`) and
 * decode workers (component `backend`), each publishing `topology_domains = {zone}` and the KV
 * transfer policy; a real frontend (`--router-mode kv`) on a loopback port over the same mem
 * discovery, in-process request plane and event bus. Requests go over HTTP with
 * `nvext.extra_fields = ["worker_id"]`, so every placement is read from the response.
 */
import { InprocEventBus } from '@kvrouter/kv-events';
import { resolveConfig } from '@kvrouter/config';
import { InprocHub, MemDiscoveryHub, type ModelRuntimeConfig } from '@kvrouter/runtime';
import { SimFleet, type SimWorkerOptions } from '@kvrouter/sim-worker';
import { KvrError, silentLogger, type Logger } from '@kvrouter/protocols';

type EngineConfig = NonNullable<SimWorkerOptions['engine']>;
import { Frontend } from './frontend.js';

export interface ZoneSpec {
  name: string;
  prefill: number;
  decode: number;
}

export interface ScenarioOptions {
  zones: ZoneSpec[];
  /** Transfer policy every worker publishes; null = no topology at all. */
  enforcement: 'required' | 'preferred' | null;
  preferredWeight?: number;
  /** Prefill workers listen on a bootstrap port (OS-assigned): the frontend uses the bootstrap variant. */
  bootstrap?: boolean;
  engine?: EngineConfig;
  frontendArgs?: string[];
  log?: Logger;
  model?: string;
}

export interface Placement {
  status: number;
  prefill: string | null;
  decode: string | null;
  error: string | null;
}

export interface RunStats {
  requests: number;
  ok: number;
  errors: number;
  /** Decode worker in the prefill worker's zone. */
  inDomain: number;
  crossDomain: number;
  /** Completed requests per decode zone. */
  byDecodeZone: Record<string, number>;
  seconds: number;
  /** Client-side request latency (send → full response), ms, over successful requests. */
  latencyP50Ms: number;
  latencyP90Ms: number;
  firstError: string | null;
}

/** Fast engines: §17 timing divided by 100, small KV cache. */
const SCENARIO_ENGINE: EngineConfig = { speedupRatio: 100, numGpuBlocks: 4096, blockSize: 16 };

export class DisaggScenario {
  private seed = 0x9e3779b9;

  private constructor(
    readonly fe: Frontend,
    readonly model: string,
    /** Worker id (decimal) → zone. */
    readonly zoneOf: Map<string, string>,
    readonly prefillFleets: Map<string, SimFleet>,
    readonly decodeFleets: Map<string, SimFleet>,
  ) {}

  static async start(o: ScenarioOptions): Promise<DisaggScenario> {
    const memHub = new MemDiscoveryHub();
    const inprocHub = new InprocHub();
    const bus = new InprocEventBus();
    const model = o.model ?? 'mock-model';
    const engine = { ...SCENARIO_ENGINE, ...o.engine };
    const zoneOf = new Map<string, string>();
    const prefillFleets = new Map<string, SimFleet>();
    const decodeFleets = new Map<string, SimFleet>();
    const fleets: SimFleet[] = [];
    const fleet = async (zone: string, role: 'prefill' | 'decode', n: number): Promise<SimFleet> => {
      const rc: Partial<ModelRuntimeConfig> =
        o.enforcement === null
          ? {}
          : {
              topology_domains: { zone },
              kv_transfer_domain: 'zone',
              kv_transfer_enforcement: o.enforcement,
              kv_transfer_preferred_weight:
                o.enforcement === 'preferred' ? (o.preferredWeight ?? 0.85) : null,
            };
      const f = await SimFleet.start({
        numWorkers: n,
        openDiscovery: async () => memHub.connect(),
        namespace: 'dynamo',
        component: role === 'prefill' ? 'prefill' : 'backend',
        modelName: model,
        requestPlane: { kind: 'inproc', hub: inprocHub },
        eventPlane: (id) => bus.plane({ publisherId: id }),
        engine,
        card: { runtimeConfig: rc },
        disagg: {
          mode: role,
          kvBytesPerToken: 114_688,
          bandwidthGBps: 64,
          ...(o.bootstrap ? { bootstrapPorts: [0] } : {}),
        },
      });
      fleets.push(f);
      for (const w of f.workers) zoneOf.set(w.instanceId.toString(), zone);
      return f;
    };
    try {
      for (const z of o.zones) {
        if (z.prefill > 0) prefillFleets.set(z.name, await fleet(z.name, 'prefill', z.prefill));
        if (z.decode > 0) decodeFleets.set(z.name, await fleet(z.name, 'decode', z.decode));
      }
      const { config } = resolveConfig(
        'frontend',
        [
          '--http-host',
          '127.0.0.1',
          '--http-port',
          '0',
          '--router-mode',
          'kv',
          '--mocker-workers',
          '0',
          ...(o.frontendArgs ?? []),
        ],
        {},
      );
      const fe = await Frontend.start(config, {
        log: o.log ?? silentLogger,
        memHub,
        inprocHub,
        eventBus: bus,
        tokenizerThreads: 0,
      });
      const s = new DisaggScenario(fe, model, zoneOf, prefillFleets, decodeFleets);
      s.closers.push(...fleets.map((f) => () => f.stop()));
      const decode = o.zones.reduce((a, z) => a + z.decode, 0);
      const prefill = o.zones.reduce((a, z) => a + z.prefill, 0);
      await s.until(() => {
        const m = fe.registry.models.get(model);
        return (
          !!m && m.sets.reduce((a, x) => a + x.readyCount, 0) === decode && m.disagg.readyCount === prefill
        );
      });
      return s;
    } catch (e) {
      await Promise.all(fleets.map((f) => f.stop()));
      throw e;
    }
  }

  private readonly closers: (() => Promise<void>)[] = [];

  async until(cond: () => boolean, ms = 10_000): Promise<void> {
    const end = performance.now() + ms;
    while (!cond()) {
      if (performance.now() > end)
        throw new KvrError('startup_timeout', 'disagg scenario: workers did not become routable in time');
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** `n` fresh random token ids (no shared prefixes unless `prefix` is given). */
  prompt(n: number, prefix: readonly number[] = []): number[] {
    const out = [...prefix];
    let x = this.seed;
    while (out.length < n) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      out.push(1 + (x % 50_000));
    }
    this.seed = x || 1;
    return out;
  }

  async request(prompt: number[], maxTokens: number, prefillPin?: bigint): Promise<Placement> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (prefillPin !== undefined) headers['x-prefill-instance-id'] = prefillPin.toString();
    const r = await fetch(`${this.fe.url}/v1/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        model: this.model,
        prompt,
        max_tokens: maxTokens,
        nvext: { extra_fields: ['worker_id'] },
      }),
    });
    const text = await r.text();
    if (r.status !== 200) return { status: r.status, prefill: null, decode: null, error: text };
    // Ids are u64: read them from the text rather than through JSON numbers.
    const id = (k: string): string | null => new RegExp(`"${k}":\\s*"?(\\d+)`).exec(text)?.[1] ?? null;
    return { status: 200, prefill: id('prefill_worker_id'), decode: id('decode_worker_id'), error: null };
  }

  /** `requests` requests, `concurrency` at a time (closed loop); placements tallied by zone. */
  async run(o: {
    requests: number;
    concurrency: number;
    promptLen: number;
    maxTokens: number;
    prefillPin?: bigint;
    onProgress?: (done: number) => void;
  }): Promise<RunStats> {
    const st: RunStats = {
      requests: o.requests,
      ok: 0,
      errors: 0,
      inDomain: 0,
      crossDomain: 0,
      byDecodeZone: {},
      seconds: 0,
      latencyP50Ms: NaN,
      latencyP90Ms: NaN,
      firstError: null,
    };
    const lat: number[] = [];
    let next = 0;
    const t0 = performance.now();
    const lane = async (): Promise<void> => {
      while (next < o.requests) {
        next++;
        const t = performance.now();
        const p = await this.request(this.prompt(o.promptLen), o.maxTokens, o.prefillPin);
        if (p.status !== 200) {
          st.errors++;
          st.firstError ??= `${p.status} ${p.error}`;
        } else {
          st.ok++;
          lat.push(performance.now() - t);
          const pz = this.zoneOf.get(p.prefill ?? '');
          const dz = this.zoneOf.get(p.decode ?? '') ?? '?';
          st.byDecodeZone[dz] = (st.byDecodeZone[dz] ?? 0) + 1;
          if (pz !== undefined && pz === dz) st.inDomain++;
          else st.crossDomain++;
        }
        const done = st.ok + st.errors;
        if (o.onProgress && done % 100 === 0) o.onProgress(done);
      }
    };
    await Promise.all(Array.from({ length: o.concurrency }, lane));
    st.seconds = (performance.now() - t0) / 1000;
    lat.sort((x, y) => x - y);
    if (lat.length > 0) {
      st.latencyP50Ms = lat[Math.floor(0.5 * lat.length)]!;
      st.latencyP90Ms = lat[Math.min(lat.length - 1, Math.floor(0.9 * lat.length))]!;
    }
    return st;
  }

  /** Requests each prefill fleet's workers received (engine submissions). */
  prefillSubmitted(zone: string): number {
    return (this.prefillFleets.get(zone)?.workers ?? []).reduce((a, w) => a + w.stats.submitted, 0);
  }

  async close(): Promise<void> {
    await this.fe.close(0);
    await Promise.all(this.closers.map((c) => c()));
  }
}
