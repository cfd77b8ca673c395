/**
 * `pnpm --filter @kvrouter/standalone-router bench [--quick] [--out FILE]`: what a routing decision
 * costs when the index or the whole router is another process's. One process, loopback sockets:
 *
 * - `local index`: a KvRouter with its own index holding the same blocks (the baseline);
 * - `remote index (tcp)`: a `KvRouter` on a `RemoteIndexer` asking the standalone router's served index
 *   (`kv_indexer_query`) over the tcp request plane, then deciding locally (`--use-remote-indexer`);
 * - `route over tcp` / `route over HTTP`: the standalone router's own `route` endpoint.
 *
 * 16 workers (mem discovery records), 8k-token prompts (bs 16 = 512 blocks) from 16 prompt families;
 * each worker holds a random-length prefix of one family (approximate mode, so the served index is
 * filled directly and no KV event recovery runs). Every call is query-only (nothing booked). Prints a
 * table and one JSON object (also written to `--out`).
 */
import fs from 'node:fs';
import http from 'node:http';
import { resolveConfig } from '@kvrouter/config';
import {
  computeLocalBlockHashes,
  computeSequenceHashes,
  RemoteIndexerQueryCodec,
  RemoteIndexerRecordRequestCodec,
  type WorkerId,
} from '@kvrouter/protocols';
import { ApproxIndexer } from '@kvrouter/radix-indexer';
import { KvRouter, RemoteIndexer, type RoutingRecorder } from '@kvrouter/router';
import { MemDiscoveryHub, TcpRequestClient, registerInstance, registerModelCard } from '@kvrouter/runtime';
import { StandaloneRouter } from './service.js';

const quick = process.argv.includes('--quick');
const outIdx = process.argv.indexOf('--out');
const out = outIdx > 0 ? process.argv[outIdx + 1] : undefined;
const N = quick ? 300 : 3000;
const WORKERS = 16;
const FAMILIES = 16;
const ISL = 8192;
const BS = 16;
const PATH = { namespace: 'bench', component: 'backend', endpoint: 'generate' };
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

// Deterministic "random" so reruns hold the same blocks.
let seed = 12345;
const rnd = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;

const prompt = (f: number): Uint32Array =>
  Uint32Array.from({ length: ISL }, (_, i) => (f * 7919 + i * 31 + 1) % 100_000);
const prompts = Array.from({ length: FAMILIES }, (_, f) => prompt(f));

async function measure(
  name: string,
  fn: (i: number) => Promise<unknown>,
): Promise<{ name: string; p50: number; p90: number; p99: number }> {
  for (let i = 0; i < Math.min(200, N); i++) await fn(i);
  const us: number[] = [];
  for (let i = 0; i < N; i++) {
    const t = process.hrtime.bigint();
    await fn(i);
    us.push(Number(process.hrtime.bigint() - t) / 1000);
    if (!quick && i % 1000 === 999) process.stderr.write(`  ${name}: ${i + 1}/${N}\n`);
  }
  us.sort((a, b) => a - b);
  const q = (p: number): number => Math.round(us[Math.min(us.length - 1, Math.floor(p * us.length))]!);
  return { name, p50: q(0.5), p90: q(0.9), p99: q(0.99) };
}

const hub = new MemDiscoveryHub();
const { config } = resolveConfig(
  'router',
  ['--router-mode', 'kv', '--no-router-kv-events', '--serve-indexer'],
  { DYN_SYSTEM_PORT: '0' },
);
const sr = await StandaloneRouter.start(config, PATH, { log: quiet, memHub: hub, systemHost: '127.0.0.1' });
const ids: WorkerId[] = [];
for (let i = 0; i < WORKERS; i++) {
  const d = hub.connect();
  await registerInstance(d, { ...PATH, transport: { tcp: '127.0.0.1:9' } });
  await registerModelCard(d, {
    ...PATH,
    card: {
      display_name: 'm',
      kv_cache_block_size: BS,
      context_length: 131072,
      runtime_config: { total_kv_blocks: 100_000 },
    },
  });
  ids.push(d.leaseId as WorkerId);
}
while (sr.workerCount < WORKERS || sr.modelNames.length === 0) await new Promise((r) => setTimeout(r, 5));

const local = new ApproxIndexer({
  ttlSecs: 3600,
  maxTreeSize: 1 << 22,
  pruneTargetRatio: 0.8,
  now: Date.now,
});
const served = sr.index as (ApproxIndexer & RoutingRecorder) | null;
if (!served) throw new Error('the standalone router has no index');
for (let i = 0; i < WORKERS; i++) {
  const l = computeLocalBlockHashes(prompts[i % FAMILIES]!, BS);
  const s = computeSequenceHashes(l);
  const n = 1 + Math.floor(rnd() * (ISL / BS));
  for (const ix of [local, served]) ix.recordRouting({ worker_id: ids[i]!, dp_rank: 0 }, l, s, n);
}

const clock = {
  now: Date.now,
  setTimeout: (f: () => void, ms: number) => setTimeout(f, ms),
  clearTimeout: (h: unknown) => clearTimeout(h as NodeJS.Timeout),
};
const baseline = new KvRouter({ blockSize: BS, deps: { clock, random: rnd, indexer: local } });
const tcp = new TcpRequestClient();
const remote = new RemoteIndexer({
  modelName: 'm',
  client: {
    query: (q) => tcp.unary(sr.transport, 'kv_indexer_query', RemoteIndexerQueryCodec.toValue(q)),
    record: (r) =>
      tcp.unary(
        sr.transport,
        'kv_indexer_record_routing_decision',
        RemoteIndexerRecordRequestCodec.toValue(r),
      ),
  },
});
const viaRemote = new KvRouter({ blockSize: BS, deps: { clock, random: rnd, indexer: remote } });
for (const id of ids) {
  baseline.addWorker({ workerId: id });
  viaRemote.addWorker({ workerId: id });
}

const arrays = prompts.map((p) => [...p]);
const url = `${sr.systemUrl}/route`;
const results = [];
process.stderr.write(
  `standalone-router bench: ${WORKERS} workers, ISL ${ISL}, bs ${BS}, ${N} calls per case\n`,
);
results.push(
  await measure('local index (in-process KvRouter)', (i) =>
    baseline.route({ requestId: `l${i}`, tokens: prompts[i % FAMILIES]!, queryOnly: true }),
  ),
);
results.push(
  await measure('remote index (tcp kv_indexer_query)', (i) =>
    viaRemote.route({ requestId: `r${i}`, tokens: prompts[i % FAMILIES]!, queryOnly: true }),
  ),
);
results.push(
  await measure('standalone route over tcp', (i) =>
    tcp.unary(sr.transport, 'route', { token_ids: arrays[i % FAMILIES], query_only: true }),
  ),
);
// node:http with a keep-alive agent: undici's fetch adds ~10 ms per call on this machine (not the server's cost).
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const post = (body: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const q = http.request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
      (r) => {
        r.resume();
        r.on('end', () => (r.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${r.statusCode}`))));
      },
    );
    q.on('error', reject);
    // Headers and body leave in one write (else Nagle holds the body behind the headers' ACK).
    q.setHeader('content-length', Buffer.byteLength(body));
    q.end(body);
  });
results.push(
  await measure('standalone route over HTTP', (i) =>
    post(JSON.stringify({ token_ids: arrays[i % FAMILIES], query_only: true })),
  ),
);
agent.destroy();
if (remote.stats.failures > 0) throw new Error(`${remote.stats.failures} remote queries failed`);

const { loadavg } = await import('node:os');
const report = {
  suite: 'standalone-router',
  quick,
  n: N,
  workers: WORKERS,
  isl: ISL,
  blockSize: BS,
  loadavg: loadavg().map((x) => Math.round(x * 100) / 100),
  results,
};
console.log(`\n| case | p50 µs | p90 µs | p99 µs |\n|---|---|---|---|`);
for (const r of results) console.log(`| ${r.name} | ${r.p50} | ${r.p90} | ${r.p99} |`);
console.log(`\nload average ${report.loadavg.join(' ')}\n${JSON.stringify(report)}`);
if (out) fs.writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);

baseline.close();
viaRemote.close();
await tcp.close();
await sr.close();
process.exit(0);
