/**
 * The frontend's router honours `--router-durable-kv-events` (JetStream, docs/protocol.md §5.3) and
 * `--serve-indexer` (§7.7) the way the standalone router does: etcd + nats-server with JetStream, a
 * mocker process whose two workers publish their KV events to JetStream (`--durable-kv-events`), and
 * frontends in this process.
 * - A (durable, `--router-snapshot-threshold 3`, `--serve-indexer`): the repeat of a prompt is routed on
 *   cache overlap (decision log: 4 blocks = 64 tokens / 16), `kv_cache_events_applied` counts the
 *   stream's events, and past 3 messages the index is snapshotted and the stream purged.
 * - D (`--use-remote-indexer`) reads A's served index.
 * - B (durable, started later) rebuilds the overlap from the snapshot and what is left of the stream;
 *   C (`--router-reset-states`) purges both, so it sees only what is published after it started.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseJson } from '@kvrouter/protocols';
import { RemoteIndexer } from '@kvrouter/router';
import {
  eventually,
  startEtcd,
  startMocker,
  startNats,
  type Proc,
  type ServiceHandle,
} from '@kvrouter/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from './frontend.js';
import type { Logger } from './models.js';
import { captureLog, readySet, startFrontend } from './test-helpers.js';

const NS = 'fedurable';
let etcd: ServiceHandle;
let nats: ServiceHandle;
let mocker: Proc;
const frontends: Frontend[] = [];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-fe-durable-'));

async function frontend(extra: string[], log: Logger): Promise<Frontend> {
  const fe = await startFrontend(
    [
      ...['--discovery-backend', 'etcd', '--event-plane', 'nats', '--namespace', NS],
      ...['--router-mode', 'kv', '--router-event-threads', '1'],
      ...extra,
    ],
    { env: { ETCD_ENDPOINTS: etcd.url, NATS_SERVER: nats.url }, log },
  );
  frontends.push(fe);
  return fe;
}

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: true })]);
  mocker = startMocker({ etcd: etcd.url, nats: nats.url }, NS, 2, ['--durable-kv-events']);
}, 60_000);

afterAll(async () => {
  for (const fe of frontends) await fe.close(0);
  await mocker?.kill();
  await Promise.all([etcd?.stop(), nats?.stop()]);
  fs.rmSync(dir, { recursive: true, force: true });
});

/** 64 token ids = 4 full blocks of the mocker's 16. */
const prompt = (base: number) => Array.from({ length: 64 }, (_, i) => base + 3 * i);
const PROMPT = prompt(5000);

async function complete(fe: Frontend, p: number[]): Promise<bigint> {
  const r = await fetch(`${fe.url}/v1/completions`, {
    method: 'POST',
    body: JSON.stringify({
      model: 'mock-model',
      prompt: p,
      max_tokens: 2,
      nvext: { extra_fields: ['worker_id'] },
    }),
  });
  expect(r.status).toBe(200);
  const body = parseJson(await r.text()) as { nvext: { worker_id: { decode_worker_id: bigint | number } } };
  return BigInt(body.nvext.worker_id.decode_worker_id);
}

const setOf = (fe: Frontend) => readySet(fe, 2);

/** Overlap blocks of a query-only decision (nothing dispatched or booked). */
async function overlapOf(fe: Frontend, p: number[]): Promise<number> {
  const set = await setOf(fe);
  const d = await set.router.route({
    requestId: `q-${Math.random()}`,
    tokens: Uint32Array.from(p),
    queryOnly: true,
  });
  return d.overlapBlocks;
}

const appliedStored = (metrics: string): number => {
  const m = /dynamo_component_kv_cache_events_applied\{status="ok",event_type="stored"\} (\d+)/.exec(metrics);
  return m ? Number(m[1]) : 0;
};

describe('frontend --router-durable-kv-events and --serve-indexer', () => {
  let a: Frontend;
  const logA = captureLog();
  const decisions = path.join(dir, 'a-decisions.jsonl');

  it('routes on cache overlap read from JetStream, counts the applied events, snapshots past the threshold', async () => {
    a = await frontend(
      [
        ...['--router-durable-kv-events', '--router-snapshot-threshold', '3', '--serve-indexer'],
        ...['--decision-log', decisions, '--decision-log-sample', '1'],
      ],
      logA,
    );
    await setOf(a);
    await eventually(
      async () =>
        logA.lines.some((l) =>
          /durable KV events: consumer [0-9a-f]+ on stream namespace-fedurable-component-backend-kv-events/.test(
            l,
          ),
        ),
      15_000,
      'the durable consumer',
    );
    const w = await complete(a, PROMPT);
    // The worker's stored events reach the frontend's index only through JetStream.
    await eventually(
      async () => (await overlapOf(a, PROMPT)) === 4,
      15_000,
      'the 4 blocks through JetStream',
    );
    expect(await complete(a, PROMPT)).toBe(w);
    const lines = fs
      .readFileSync(decisions, 'utf8')
      .trim()
      .split('\n')
      .map(
        (l) =>
          parseJson(l) as {
            overlap_blocks: number;
            query_only: boolean;
            worker_id: bigint | number;
            required_blocks: number;
          },
      );
    const dispatched = lines.filter((l) => !l.query_only);
    expect(dispatched).toHaveLength(2);
    expect(dispatched[0]).toMatchObject({ overlap_blocks: 0, required_blocks: 4 });
    expect(dispatched[1]).toMatchObject({ overlap_blocks: 4, required_blocks: 4 });
    expect(BigInt(dispatched[1]!.worker_id)).toBe(w);
    const metrics = await (await fetch(`${a.url}/metrics`)).text();
    expect(appliedStored(metrics)).toBeGreaterThan(0);

    // More distinct prompts: more than 3 messages in the stream make A snapshot its index and purge.
    for (const base of [20_000, 30_000, 40_000]) await complete(a, prompt(base));
    await eventually(
      async () => logA.lines.some((l) => /snapshot of \d+ blocks .*stream purged below \d+/.test(l)),
      20_000,
      'a snapshot past --router-snapshot-threshold 3',
    );
    expect(logA.lines.filter((l) => l.startsWith('warn') || l.startsWith('error'))).toEqual([]);
  }, 120_000);

  it('serves its index to a frontend with --use-remote-indexer', async () => {
    const d = await frontend(['--use-remote-indexer'], captureLog());
    const set = await setOf(d);
    expect(set.indexer).toBeInstanceOf(RemoteIndexer);
    expect(
      logA.lines.some((l) =>
        l.includes('serving the event-driven index of model mock-model on fedurable/backend'),
      ),
    ).toBe(true);
    await eventually(async () => (await overlapOf(d, PROMPT)) === 4, 15_000, "A's served overlap");
    // Queries sent before D's discovery watch listed A's instance count as failures; later ones answer.
    const stats = (set.indexer as RemoteIndexer).stats;
    expect(stats.queries).toBeGreaterThan(stats.failures);
  }, 60_000);

  it('a later router rebuilds the index from snapshot + stream; --router-reset-states starts from nothing', async () => {
    const b = await frontend(['--router-durable-kv-events'], captureLog());
    await eventually(async () => (await overlapOf(b, PROMPT)) === 4, 15_000, 'the replayed overlap in B');

    const logC = captureLog();
    const c = await frontend(['--router-durable-kv-events', '--router-reset-states'], logC);
    await setOf(c);
    await eventually(
      async () => logC.lines.some((l) => l.includes('(stream and snapshot reset)')),
      15_000,
      "C's consumer after the reset",
    );
    // Published after C started: C sees it, so its consumer is live...
    const fresh = prompt(50_000);
    await complete(a, fresh);
    await eventually(async () => (await overlapOf(c, fresh)) === 4, 15_000, 'the new prompt in C');
    // ...but nothing from before the reset, which B (started before it) still holds.
    expect(await overlapOf(c, PROMPT)).toBe(0);
    expect(await overlapOf(b, PROMPT)).toBe(4);
  }, 90_000);
});
