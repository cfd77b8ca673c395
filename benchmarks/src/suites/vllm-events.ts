/**
 * The vLLM event path of a worker adapter and the ZMQ broker relay.
 *
 * 1. Engine → adapter: a child process plays the engine (`VllmZmqPublisher`: 3-frame vLLM batches,
 *    32-block `BlockStored` with their token ids, bs 16, and 32-hash `BlockRemoved` so the cache levels
 *    off); this process is the adapter (`VllmZmqIngest` → `KvEventPublisher` with its local indexer),
 *    timed from the first event received to the last one numbered and indexed. The engine keeps at
 *    most WINDOW batches ahead of what the adapter reports (IPC), so PUB never drops. Also the
 *    adapter's two halves alone on pre-encoded payloads: decode + convert (local hashes of the tokens),
 *    and publish + local indexer.
 * 2. Event plane relay: 256-byte messages from one `ZmqEventPlane` to another, direct and through an
 *    in-process `ZmqBroker` (its proxy runs on a libzmq thread), same flow control.
 * 3. What the adapter adds per request: a vLLM-compatible mocker process (speedup 1000, so engine
 *    time is small) and a worker adapter process in front of it; the same streamed requests sent
 *    sequentially straight to the engine's HTTP API and through the adapter (tcp request plane),
 *    time to first token and to the last one.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { VllmKvEventDecoder, encodeMsgpack } from '@kvrouter/protocols';
import {
  KvEventPublisher,
  VllmZmqIngest,
  VllmZmqPublisher,
  ZmqBroker,
  ZmqEventPlane,
  kvEventsTopic,
  parseBrokerUrl,
  type VllmPublishEvent,
} from '@kvrouter/kv-events';
import {
  MemDiscoveryHub,
  TcpRequestClient,
  createDiscovery,
  parseInstance,
  type Transport,
} from '@kvrouter/runtime';
import { Rng } from '@kvrouter/testkit';
import { stats, type Row, type Suite } from '../harness.js';

const BS = 16;
const EVENT_BLOCKS = 32;
/** Chains of EVENT_BLOCKS blocks kept cached; older ones are removed. */
const CACHED_CHAINS = 256;
const WINDOW = 2000;
const CHILD_ENV = 'KVR_BENCH_VLLM_ENGINE';

/** Batch i: a fresh 32-block chain, plus the removal of the chain stored CACHED_CHAINS batches ago. */
function batch(i: number, rng: Rng): VllmPublishEvent[] {
  const hashes = (k: number) =>
    Array.from({ length: EVENT_BLOCKS }, (_, b) => BigInt(k) * 1000n + BigInt(b) + 1n);
  const out: VllmPublishEvent[] = [
    {
      type: 'BlockStored',
      block_hashes: hashes(i),
      parent_block_hash: null,
      token_ids: Array.from({ length: EVENT_BLOCKS * BS }, () => rng.int(1, 32000)),
      block_size: BS,
    },
  ];
  if (i >= CACHED_CHAINS) out.push({ type: 'BlockRemoved', block_hashes: hashes(i - CACHED_CHAINS) });
  return out;
}

const blockEventsOf = (i: number) => EVENT_BLOCKS + (i >= CACHED_CHAINS ? EVENT_BLOCKS : 0);

async function engineProcess(): Promise<void> {
  const pub = await VllmZmqPublisher.bind({ endpoint: 'tcp://127.0.0.1:0', bufferSteps: 0 });
  let received = 0;
  let go: { batches: number } | null = null;
  let wake: (() => void) | null = null;
  process.on('message', (m: { received?: number; go?: { batches: number }; probe?: boolean }) => {
    if (m.received !== undefined) received = m.received;
    if (m.go) go = m.go;
    if (m.probe) pub.publish([{ type: 'AllBlocksCleared' }]);
    wake?.();
  });
  process.send!({ endpoint: pub.endpoint });
  while (go === null) await new Promise<void>((r) => (wake = r));
  const total = (go as { batches: number }).batches;
  const rng = new Rng(7);
  // Payloads are built before the clock starts on the other side; only their sends are timed.
  const batches = Array.from({ length: total }, (_, i) => batch(i, rng));
  process.send!({ built: true });
  for (let i = 0; i < total; i++) {
    while (i - received >= WINDOW) await new Promise<void>((r) => (wake = r));
    pub.publish(batches[i]);
    if (i % 256 === 0) await pub.flush();
  }
  await pub.flush();
  await new Promise<void>((r) => process.once('disconnect', r));
  await pub.close();
}

if (process.env[CHILD_ENV] && process.send) void engineProcess();

async function enginePath(
  batches: number,
  ctx: { progress(l: string, d: number, t: number): void },
): Promise<Row[]> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [CHILD_ENV]: '1' },
    execArgv: ['--conditions=source', '--import', 'tsx'],
  });
  const msgs: Array<Record<string, unknown>> = [];
  let notify: (() => void) | null = null;
  child.on('message', (m: Record<string, unknown>) => {
    msgs.push(m);
    notify?.();
  });
  const waitFor = async (key: string) => {
    for (;;) {
      const m = msgs.find((x) => key in x);
      if (m) return m;
      await new Promise<void>((r) => (notify = r));
    }
  };
  const { endpoint } = (await waitFor('endpoint')) as { endpoint: string };
  let events = 0;
  let blockEvents = 0;
  let t0 = 0;
  let t1 = 0;
  let counting = false;
  let done: () => void = () => undefined;
  const finished = new Promise<void>((r) => (done = r));
  const expected = Array.from({ length: batches }, (_, i) => blockEventsOf(i)).reduce((a, b) => a + b, 0);
  const pub = new KvEventPublisher({
    workerId: 1n,
    localIndexer: true,
    sink: {
      publishEvent: (e) => {
        events++;
        if (!counting) return;
        const d = e.event.data;
        if (typeof d !== 'object') return;
        if (blockEvents === 0) t0 = performance.now();
        blockEvents += 'stored' in d ? d.stored.blocks.length : d.removed.block_hashes.length;
        if (blockEvents >= expected) {
          t1 = performance.now();
          done();
        }
      },
    },
  });
  let received = 0;
  let baseMessages = 0;
  const ingest = new VllmZmqIngest({ endpoint, publisher: pub, kvBlockSize: BS });
  // Report progress so the engine keeps its window; the ingest's stats count decoded batches.
  const report = setInterval(() => {
    const s = ingest.stats;
    if (s.messages !== received) {
      received = s.messages;
      child.send({ received: counting ? received - baseMessages : 0 });
    }
  }, 2);
  // Slow joiner: probe until the subscription is live.
  while (events === 0) {
    child.send({ probe: true });
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 50));
  baseMessages = ingest.stats.messages;
  counting = true;
  child.send({ go: { batches } });
  await waitFor('built');
  const progress = setInterval(
    () => ctx.progress('engine -> adapter block events', blockEvents, expected),
    1000,
  );
  await finished;
  clearInterval(progress);
  clearInterval(report);
  const lost = ingest.stats;
  await ingest.close();
  await pub.close();
  child.disconnect();
  const rate = blockEvents / ((t1 - t0) / 1000);
  return [
    {
      name: `vLLM ZMQ engine process -> VllmZmqIngest -> KvEventPublisher + local indexer (bs ${BS}, ${EVENT_BLOCKS}-block events)`,
      value: Math.round(rate),
      unit: 'block-events/s',
      extra: {
        batches,
        blockEvents,
        ms: Math.round(t1 - t0),
        decodeFailures: lost.decodeFailures,
        load1: loadavg()[0].toFixed(1),
      },
    },
  ];
}

function halves(batches: number): Row[] {
  const rng = new Rng(7);
  const payloads = Array.from({ length: batches }, (_, i) =>
    encodeMsgpack([
      1.0,
      batch(i, rng).map((e) =>
        e.type === 'BlockStored'
          ? ['BlockStored', e.block_hashes.map(Number), null, Array.from(e.token_ids), BS, null, 'GPU', null]
          : [
              'BlockRemoved',
              (e as Extract<VllmPublishEvent, { type: 'BlockRemoved' }>).block_hashes.map(Number),
              'GPU',
            ],
      ),
      null,
    ]),
  );
  const blockEvents = Array.from({ length: batches }, (_, i) => blockEventsOf(i)).reduce((a, b) => a + b, 0);
  const dec = new VllmKvEventDecoder({ kvBlockSize: BS });
  let t = performance.now();
  const converted = payloads.map((p) => dec.decodePayload(p));
  const decodeMs = performance.now() - t;
  const pub = new KvEventPublisher({
    workerId: 1n,
    localIndexer: true,
    sink: { publishEvent: () => undefined },
  });
  t = performance.now();
  for (const evs of converted)
    for (const c of evs) pub.engineEvent({ dp_rank: c.dp_rank, storage_tier: c.storage_tier, data: c.data });
  pub.flush();
  const applyMs = performance.now() - t;
  return [
    {
      name: 'decode + convert alone (msgpack batch, local hashes of the token ids)',
      value: Math.round(blockEvents / (decodeMs / 1000)),
      unit: 'block-events/s',
    },
    {
      name: 'KvEventPublisher + local indexer alone',
      value: Math.round(blockEvents / (applyMs / 1000)),
      unit: 'block-events/s',
    },
  ];
}

async function relay(messages: number, viaBroker: boolean): Promise<Row> {
  const hub = new MemDiscoveryHub();
  const broker = viaBroker ? await ZmqBroker.start() : null;
  const opts = {
    bindHost: '127.0.0.1',
    advertiseHost: '127.0.0.1',
    joinDelayMs: 100,
    broker: broker ? parseBrokerUrl(broker.url) : null,
  };
  const topic = kvEventsTopic('bench', 'backend');
  const pub = new ZmqEventPlane({ publisherId: 1n, discovery: hub.connect(), ...opts });
  const sub = new ZmqEventPlane({ publisherId: 2n, discovery: hub.connect(), ...opts });
  const s = sub.subscribe(topic);
  const payload = new Uint8Array(256).fill(7);
  let got = 0;
  let t0 = 0;
  const reader = (async () => {
    for await (const env of s) {
      if (env.payload[0] !== 7) continue;
      if (got === 0) t0 = performance.now();
      if (++got >= messages) break;
    }
  })();
  // Probe until the path is live (discovery + connect + subscription propagation).
  const probe = new Uint8Array([0]);
  const seen = (async () => {
    for (let i = 0; i < 100 && got === 0; i++) {
      pub.publish(topic, probe);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  await seen;
  for (let i = 0; i < messages; i++) {
    while (i - got >= WINDOW * 10) await new Promise((r) => setImmediate(r));
    pub.publish(topic, payload);
    if (i % 1000 === 0) await pub.flush();
  }
  await reader;
  const ms = performance.now() - t0;
  s.close();
  await pub.close();
  await sub.close();
  await broker?.close();
  return {
    name: `event plane ${viaBroker ? 'through a ZMQ broker' : 'ZMQ direct'}: 256-byte messages, publisher and subscriber in one process`,
    value: Math.round(messages / (ms / 1000)),
    unit: 'msgs/s',
    extra: { messages, ms: Math.round(ms), load1: loadavg()[0].toFixed(1) },
  };
}

const appScript = (p: string) => fileURLToPath(new URL(`../../../apps/${p}`, import.meta.url));

function startApp(script: string, args: string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['--conditions=source', '--import', 'tsx', appScript(script), ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

const firstLine = (c: ChildProcess, re: RegExp): Promise<string> =>
  new Promise((resolve, reject) => {
    const rl = createInterface({ input: c.stdout! });
    rl.on('line', (l) => {
      if (re.test(l)) {
        rl.close();
        resolve(l);
      }
    });
    c.once('exit', (code) => reject(new Error(`${script(c)} exited with ${code}`)));
  });
const script = (c: ChildProcess) => c.spawnargs.find((a) => a.endsWith('.ts')) ?? 'child';

async function adapterOverhead(
  requests: number,
  ctx: { progress(l: string, d: number, t: number): void },
): Promise<Row[]> {
  const env = { DYN_FILE_KV: mkdtempSync(join(tmpdir(), 'kvr-bench-fkv-')) };
  const engine = startApp(
    'mocker/src/main.ts',
    [
      '--model-path',
      'bench',
      '--http-host',
      '127.0.0.1',
      '--http-ports',
      '0',
      '--zmq-kv-events-ports',
      '0',
      '--block-size',
      '16',
      '--speedup-ratio',
      '1000',
    ],
    {},
  );
  const children = [engine];
  try {
    const e = (
      JSON.parse(await firstLine(engine, /^\{"engines"/)) as {
        engines: Array<{ http: string; kv_events: string[] }>;
      }
    ).engines[0];
    const worker = startApp(
      'worker/src/main.ts',
      [
        '--engine-url',
        e.http,
        '--block-size',
        '16',
        '--kv-events-endpoint',
        e.kv_events[0],
        '--discovery-backend',
        'file',
      ],
      env,
    );
    children.push(worker);
    const id = BigInt(
      (JSON.parse(await firstLine(worker, /^\{"instance_id"/)) as { instance_id: string }).instance_id,
    );
    const d = await createDiscovery({ backend: 'file', fileRoot: env.DYN_FILE_KV });
    const inst = (await d.list('v1/instances/dynamo/backend/generate/'))
      .map((kv) => parseInstance(kv.value))
      .find((i) => i.instance_id === id)!;
    await d.close();
    const transport: Transport = inst.transport;
    const client = new TcpRequestClient();
    const prompt = (i: number) => Array.from({ length: 64 }, (_, k) => 1 + ((i * 64 + k) % 30000));
    const MAX = 32;

    const direct = async (i: number): Promise<[number, number]> => {
      const t0 = performance.now();
      const r = await fetch(`${e.http}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({
          prompt: prompt(i),
          max_tokens: MAX,
          stream: true,
          return_token_ids: true,
          ignore_eos: true,
        }),
      });
      const reader = r.body!.getReader() as ReadableStreamDefaultReader<Uint8Array>;
      let first = 0;
      for (;;) {
        const { done } = await reader.read();
        if (done) break;
        if (first === 0) first = performance.now() - t0;
      }
      return [first, performance.now() - t0];
    };
    const viaAdapter = async (i: number): Promise<[number, number]> => {
      const t0 = performance.now();
      let first = 0;
      let n = 0;
      for await (const it of client.stream(transport, 'generate', {
        request_id: `b${i}`,
        model: 'bench',
        token_ids: prompt(i),
        stop_conditions: { max_tokens: MAX },
      }) as AsyncIterable<{ token_ids: number[] }>) {
        if (first === 0) first = performance.now() - t0;
        n += it.token_ids.length;
      }
      if (n !== MAX) throw new Error(`adapter stream returned ${n} tokens, expected ${MAX}`);
      return [first, performance.now() - t0];
    };
    const rows: Row[] = [];
    const paths = [
      ['straight to the engine (HTTP SSE)', direct],
      ['through the worker adapter (tcp request plane -> HTTP SSE)', viaAdapter],
    ] as const;
    for (let i = 0; i < 20; i++)
      for (const [, fn] of paths) await fn(100_000 + 2 * i + (fn === direct ? 0 : 1)); // warm-up
    // Interleaved, so drift in machine load hits both paths alike.
    const ttft: number[][] = [[], []];
    const total: number[][] = [[], []];
    for (let i = 0; i < requests; i++) {
      for (const [k, [, fn]] of paths.entries()) {
        const [a, b] = await fn(2 * i + k);
        ttft[k].push(a);
        total[k].push(b);
      }
      if (i % 50 === 0) ctx.progress('requests (both paths)', i, requests);
    }
    const measured = paths.map(([name], k) => {
      const st = stats(ttft[k]);
      const tt = stats(total[k]);
      rows.push({
        name: `${MAX}-token stream, 64-token prompt, sequential, ${name}: time to first token p50`,
        value: Number(st.p50.toFixed(2)),
        unit: 'ms',
        extra: {
          ttftP90: st.p90.toFixed(2),
          totalP50: tt.p50.toFixed(2),
          totalP90: tt.p90.toFixed(2),
          requests,
          load1: loadavg()[0].toFixed(1),
        },
      });
      return { ttft: st.p50, total: tt.p50 };
    });
    await client.close();
    const [a, b] = measured;
    rows.push({
      name: 'adapter overhead per request (p50 difference, end of stream)',
      value: Number((b.total - a.total).toFixed(2)),
      unit: 'ms',
      extra: { ttftDiff: (b.ttft - a.ttft).toFixed(2) },
    });
    return rows;
  } finally {
    for (const c of children) c.kill('SIGKILL');
  }
}

export const suite: Suite = {
  name: 'vllm-events',
  description:
    'vLLM ZMQ KV events from an engine process through the worker adapter path; event plane direct vs through a ZMQ broker',
  async run(ctx) {
    const batches = ctx.quick ? 1000 : 8000;
    const rows: Row[] = [];
    rows.push(...(await enginePath(batches, ctx)));
    rows.push(...halves(batches));
    const msgs = ctx.quick ? 20_000 : 200_000;
    const direct = await relay(msgs, false);
    const brokered = await relay(msgs, true);
    brokered.extra = { ...brokered.extra, vsDirect: (brokered.value / direct.value).toFixed(2) };
    rows.push(direct, brokered);
    rows.push(...(await adapterOverhead(ctx.quick ? 50 : 300, ctx)));
    return rows;
  },
};
