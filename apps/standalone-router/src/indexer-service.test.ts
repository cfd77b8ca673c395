/**
 * The standalone HTTP indexer (§7.8) against real ZMQ PUB sockets publishing vLLM-format batches
 * (§4: 3 frames `[topic, seq (8 B BE), msgpack [ts, events, dp_rank]]`), queried over HTTP.
 */
import { spawnSync } from 'node:child_process';
import { beU64, encodeMsgpack, parseJson, stringifyJson } from '@kvrouter/protocols';
import { afterEach, describe, expect, it } from 'vitest';
import { Publisher } from 'zeromq';
import { IndexerService } from './indexer-service.js';
import { REPO, eventually } from '@kvrouter/testkit';

// docs/protocol.md §2.4 test vectors (bs = 4): local hashes of tokens [0..3], [4..7] and [1,2,3,4].
const H_0_3 = 9143094415614847814n;
const H_4_7 = 12124091508212882195n;
const H_1_4 = 14643705804678351452n;

type Nested = Record<string, Record<string, number> | undefined>;
/** The reply bodies of §7.8 (and the error body), as the tests read them. */
interface Body {
  status?: string;
  scores?: Nested;
  tree_sizes?: Nested;
  frequencies?: number[];
  workers?: { instance_id: bigint | number; dp_rank: number; model_name: string; tenant_id: string }[];
  models?: {
    model_name: string;
    events: {
      worker_id: bigint | number;
      event: { dp_rank: number; data: { stored: { blocks: { tokens_hash: bigint }[] } } };
    }[];
  }[];
  peers?: string[];
  dp_ranks?: number[];
  error?: { param?: string; code?: string };
}

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** A vLLM engine's KV event publisher. */
class Engine {
  readonly pub = new Publisher({ linger: 0 });
  endpoint = '';
  private seq = 0n;
  private probes: number[] = [];

  async start(): Promise<this> {
    await this.pub.bind('tcp://127.0.0.1:0');
    this.endpoint = this.pub.lastEndpoint!;
    return this;
  }

  async batch(events: unknown[], dpRank: number | null = null): Promise<void> {
    await this.pub.send([
      Buffer.alloc(0),
      Buffer.from(beU64(this.seq++)),
      Buffer.from(encodeMsgpack([1.0, events, dpRank])),
    ]);
  }

  /**
   * PUB/SUB drops messages until the subscriber's connection is up: store throwaway blocks (tokens
   * 1..4, external hashes of their own) until the indexer shows one, then remove them all.
   */
  async untilHeard(heard: () => Promise<boolean>, dpRank: number | null = null): Promise<void> {
    await eventually(
      async () => {
        const h = 900_000 + this.probes.length;
        this.probes.push(h);
        await this.batch([['BlockStored', [h], null, [1, 2, 3, 4], 4, null, null, null]], dpRank);
        await new Promise((r) => setTimeout(r, 20));
        return heard();
      },
      10_000,
      'the indexer subscribed',
    );
    await this.batch([['BlockRemoved', this.probes, null]], dpRank);
    this.probes = [];
  }

  close(): void {
    this.pub.close();
  }
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function service(peers: string[] = []): Promise<
  IndexerService & {
    call(method: string, path: string, body?: unknown): Promise<{ status: number; json: Body }>;
  }
> {
  const s = await IndexerService.start({
    blockSize: 4,
    port: 0,
    host: '127.0.0.1',
    threads: 1,
    peers,
    log: quiet,
  });
  cleanups.push(() => s.close());
  return Object.assign(s, {
    async call(method: string, path: string, body?: unknown) {
      const r = await fetch(`${s.url}${path}`, {
        method,
        ...(body === undefined ? {} : { body: stringifyJson(body) }),
      });
      return { status: r.status, json: parseJson(await r.text()) as Body };
    },
  });
}

async function engine(): Promise<Engine> {
  const e = await new Engine().start();
  cleanups.push(() => e.close());
  return e;
}

const probeScore =
  (s: Awaited<ReturnType<typeof service>>, id: string, rank: string) => async (): Promise<boolean> =>
    (await s.call('POST', '/query', { model_name: 'm', token_ids: [1, 2, 3, 4] })).json.scores?.[id]?.[
      rank
    ] === 4;

describe('standalone HTTP indexer (§7.8)', () => {
  it("indexes registered engines' vLLM events and answers queries in tokens", async () => {
    const s = await service();
    const a = await engine();
    const b = await engine();
    expect(
      (
        await s.call('POST', '/register', {
          instance_id: 7,
          endpoint: a.endpoint,
          model_name: 'm',
          block_size: 4,
        })
      ).status,
    ).toBe(201);
    expect(
      (
        await s.call('POST', '/register', {
          instance_id: '9',
          endpoint: b.endpoint,
          model_name: 'm',
          block_size: 4,
          dp_rank: 1,
        })
      ).status,
    ).toBe(201);
    await a.untilHeard(probeScore(s, '7', '0'));
    await b.untilHeard(probeScore(s, '9', '1'), 1);

    await a.batch([['BlockStored', [11, 12], null, [0, 1, 2, 3, 4, 5, 6, 7], 4, null, 'GPU', null]]);
    await b.batch([['BlockStored', [21], null, [0, 1, 2, 3], 4, null, null, null]], 1);
    // Query tokens 0..9: two full blocks of 4. Instance 7 holds both (2 x 4 = 8 tokens), 9 the first (4).
    const want = {
      scores: { '7': { '0': 8 }, '9': { '1': 4 } },
      frequencies: [],
      tree_sizes: { '7': { '0': 2 }, '9': { '1': 1 } },
    };
    const q = await eventually(
      async () => {
        const r = await s.call('POST', '/query', {
          model_name: 'm',
          token_ids: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        });
        return r.json.scores?.['9']?.['1'] === 4 && r.json.scores?.['7']?.['0'] === 8 ? r : null;
      },
      10_000,
      "both engines' blocks",
    );
    expect(q.json).toEqual(want);
    expect(
      (await s.call('POST', '/query_by_hash', { model_name: 'm', block_hashes: [H_0_3, H_4_7] })).json,
    ).toEqual(want);
    // Blocks [1,2,3,4] are nobody's first block.
    expect(
      (await s.call('POST', '/query_by_hash', { model_name: 'm', block_hashes: [H_1_4] })).json.scores,
    ).toEqual({});

    // Removing block 12 on instance 7 leaves it the first block only: 4 tokens.
    await a.batch([['BlockRemoved', [12], null]]);
    await eventually(
      async () =>
        (await s.call('POST', '/query', { model_name: 'm', token_ids: [0, 1, 2, 3, 4, 5, 6, 7] })).json
          .scores?.['7']?.['0'] === 4,
      10_000,
      'the removal',
    );

    const workers = (await s.call('GET', '/workers')).json.workers!;
    expect(workers.map((w) => [w.instance_id, w.dp_rank, w.model_name, w.tenant_id])).toEqual([
      [7, 0, 'm', 'default'],
      [9, 1, 'm', 'default'],
    ]);

    // The dump holds exactly what is held: block 11 of 7, block 21 of 9 (rank 1).
    const dump = (await s.call('GET', '/dump')).json.models!;
    expect(dump).toHaveLength(1);
    const held = dump[0]!.events.map((e) => [
      BigInt(e.worker_id),
      e.event.dp_rank,
      e.event.data.stored.blocks.map((x) => BigInt(x.tokens_hash)),
    ]);
    expect(held.sort((x, y) => (x[0]! < y[0]! ? -1 : 1))).toEqual([
      [7n, 0, [H_0_3]],
      [9n, 1, [H_0_3]],
    ]);

    expect((await s.call('POST', '/unregister', { instance_id: 9, model_name: 'm' })).json).toMatchObject({
      status: 'unregistered',
      dp_ranks: [1],
    });
    expect(
      (await s.call('POST', '/query', { model_name: 'm', token_ids: [0, 1, 2, 3] })).json.scores,
    ).toEqual({ '7': { '0': 4 } });
  }, 60_000);

  it('rejects bad registrations and queries with the field named', async () => {
    const s = await service();
    const a = await engine();
    const cases: [string, unknown, number, string][] = [
      ['/register', { endpoint: a.endpoint, model_name: 'm' }, 400, 'instance_id'],
      ['/register', { instance_id: 1, endpoint: 'http://x', model_name: 'm' }, 400, 'endpoint'],
      ['/register', { instance_id: 1, endpoint: a.endpoint }, 400, 'model_name'],
      [
        '/register',
        { instance_id: 1, endpoint: a.endpoint, model_name: 'm', block_size: 0 },
        400,
        'block_size',
      ],
      ['/register', { instance_id: -1, endpoint: a.endpoint, model_name: 'm' }, 400, 'instance_id'],
      ['/query', { model_name: 'nobody', token_ids: [1] }, 404, 'model_name'],
      ['/unregister', { instance_id: 1, model_name: 'nobody' }, 404, 'model_name'],
    ];
    for (const [path, body, status, field] of cases) {
      const r = await s.call('POST', path, body);
      expect([path, r.status, r.json.error?.param]).toEqual([path, status, field]);
    }
    // A model keeps the block size of its first registration (default --block-size = 4).
    expect(
      (await s.call('POST', '/register', { instance_id: 1, endpoint: a.endpoint, model_name: 'm' })).status,
    ).toBe(201);
    const mismatch = await s.call('POST', '/register', {
      instance_id: 2,
      endpoint: a.endpoint,
      model_name: 'm',
      block_size: 16,
    });
    expect([mismatch.status, mismatch.json.error?.param]).toEqual([400, 'block_size']);
    const badQuery = await s.call('POST', '/query', { model_name: 'm', token_ids: [1, 'x'] });
    expect([badQuery.status, badQuery.json.error?.param]).toEqual([400, 'token_ids[1]']);
    const badHash = await s.call('POST', '/query_by_hash', { model_name: 'm', block_hashes: [1, -2] });
    expect([badHash.status, badHash.json.error?.param]).toEqual([400, 'block_hashes[1]']);
    expect((await s.call('POST', '/unregister', { instance_id: 5, model_name: 'm' })).status).toBe(404);
    expect((await s.call('GET', '/workers')).json.workers).toHaveLength(1);
  });

  it("--peers: a new indexer starts from a peer's index and engines, then follows the engines itself", async () => {
    const first = await service();
    const a = await engine();
    await first.call('POST', '/register', {
      instance_id: 7,
      endpoint: a.endpoint,
      model_name: 'm',
      block_size: 4,
    });
    await a.untilHeard(probeScore(first, '7', '0'));
    await a.batch([['BlockStored', [11], null, [0, 1, 2, 3], 4, null, null, null]]);
    const q = { model_name: 'm', token_ids: [0, 1, 2, 3, 4, 5, 6, 7] };
    await eventually(
      async () => (await first.call('POST', '/query', q)).json.scores?.['7']?.['0'] === 4,
      10_000,
      'block 11 in the first indexer',
    );

    const second = await service([first.url]);
    expect((await second.call('POST', '/query', q)).json).toEqual(
      (await first.call('POST', '/query', q)).json,
    );
    expect((await second.call('GET', '/workers')).json).toEqual((await first.call('GET', '/workers')).json);
    expect((await first.call('GET', '/peers')).json.peers).toEqual([second.url]);

    // The second one subscribed to the engine too: a child of block 11 (tokens 4..7) reaches both.
    await eventually(
      async () => {
        await a.batch([['BlockStored', [12], 11, [4, 5, 6, 7], 4, null, null, null]]);
        return (await second.call('POST', '/query', q)).json.scores?.['7']?.['0'] === 8;
      },
      10_000,
      'the new event in the second indexer',
    );
    // Both indexers subscribe to the engine's PUB on their own sockets; the first may see it a moment later.
    await eventually(
      async () => (await first.call('POST', '/query', q)).json.scores?.['7']?.['0'] === 8,
      10_000,
      'the new event in the first indexer',
    );
  }, 60_000);

  it('the CLI requires --block-size (exit 2)', () => {
    const r = spawnSync(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'apps/standalone-router/src/indexer-main.ts', '--port', '0'],
      {
        cwd: REPO,
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--block-size');
  });
});
