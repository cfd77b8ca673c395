import {
  RemoteIndexerQueryResponseCodec,
  RemoteIndexerRecordResponseCodec,
  computeLocalBlockHashes,
  computeSequenceHashes,
  pairsToU64s,
  type ExternalSequenceBlockHash,
  type LocalBlockHash,
  type RouterEvent,
  type WorkerId,
} from '@kvrouter/protocols';
import { ApproxIndexer, RadixIndexer } from '@kvrouter/radix-indexer';
import { describe, expect, it } from 'vitest';
import { forwardPayload, parseRequestRef, parseRoute, toRouteRequest } from './api.js';
import { parseEndpointPath, splitEndpointArg } from './args.js';
import { ServedIndexer } from '@kvrouter/router-host';

const ids = (): string => 'generated';

describe('route / free payloads', () => {
  it('parses a full route payload', () => {
    const p = parseRoute(
      {
        request_id: 'r1',
        token_ids: [1, 2, 4294967295],
        lora_name: 'a',
        query_only: true,
        backend_instance_id: '18446744073709551615',
        dp_rank: 2,
        router_config_override: { router_temperature: 0.5 },
      },
      ids,
    );
    expect(p.request_id).toBe('r1');
    expect([...p.token_ids]).toEqual([1, 2, 4294967295]);
    expect(p.backend_instance_id).toBe(18446744073709551615n);
    const r = toRouteRequest(p);
    expect(r.queryOnly).toBe(true);
    expect(r.nvext).toEqual({ backend_instance_id: 18446744073709551615n, dp_rank: 2 });
    expect(r.overrides).toEqual({ router_temperature: 0.5 });
  });

  it('generates a request id when none is given', () => {
    expect(parseRoute({ token_ids: [] }, ids).request_id).toBe('generated');
  });

  it.each([
    [null, 'body'],
    [[], 'body'],
    [{}, 'token_ids'],
    [{ token_ids: [1, -1] }, 'token_ids[1]'],
    [{ token_ids: [1.5] }, 'token_ids[0]'],
    [{ token_ids: [2 ** 32] }, 'token_ids[0]'],
    [{ token_ids: [], request_id: '' }, 'request_id'],
    [{ token_ids: [], query_only: 'yes' }, 'query_only'],
    [{ token_ids: [], lora_name: 3 }, 'lora_name'],
    [{ token_ids: [], backend_instance_id: 'x' }, 'backend_instance_id'],
    [{ token_ids: [], dp_rank: -1 }, 'dp_rank'],
    [{ token_ids: [], router_config_override: { nope: 1 } }, 'router_config_override.nope'],
    [
      { token_ids: [], router_config_override: { router_temperature: 'hot' } },
      'router_config_override.router_temperature',
    ],
  ])('rejects %j naming %s', (body, field) => {
    try {
      parseRoute(body, ids);
      expect.unreachable();
    } catch (e) {
      expect((e as { status: number }).status).toBe(400);
      expect((e as { detail: { field: string } }).detail.field).toBe(field);
    }
  });

  it('generate forwards the worker payload without the router-only fields', () => {
    const body = {
      token_ids: [1],
      model: 'm',
      stop_conditions: { max_tokens: 2 },
      query_only: false,
      backend_instance_id: 5,
      router_config_override: {},
      lora_name: 'x',
      dp_rank: 3,
    };
    expect(forwardPayload(body, 'r9', 1)).toEqual({
      token_ids: [1],
      model: 'm',
      stop_conditions: { max_tokens: 2 },
      request_id: 'r9',
      dp_rank: 1,
    });
  });

  it('free and mark_prefill_completed need a request id', () => {
    expect(parseRequestRef({ request_id: 'x' })).toEqual({ request_id: 'x' });
    expect(() => parseRequestRef({})).toThrow(/request_id: is required/);
  });
});

describe('--endpoint', () => {
  it('takes dyn:// and plain forms, dotted namespaces, last one wins', () => {
    expect(parseEndpointPath('dyn://a.b.c')).toEqual({ namespace: 'a', component: 'b', endpoint: 'c' });
    expect(parseEndpointPath('x.y.b.c')).toEqual({ namespace: 'x.y', component: 'b', endpoint: 'c' });
    const s = splitEndpointArg(['--router-mode', 'kv', '--endpoint', 'a.b.c', '--endpoint=d.e.f']);
    expect(s.rest).toEqual(['--router-mode', 'kv']);
    expect(s.endpoint).toEqual({ namespace: 'd', component: 'e', endpoint: 'f' });
    expect(splitEndpointArg(['--router-mode', 'kv']).endpoint).toBeNull();
  });
  it('rejects malformed paths and a missing value', () => {
    expect(() => parseEndpointPath('a.b')).toThrow(/dyn:\/\/namespace.component.endpoint/);
    expect(() => parseEndpointPath('a..c')).toThrow(/--endpoint/);
    expect(() => splitEndpointArg(['--endpoint'])).toThrow(/expected one argument/);
  });
});

function stored(worker: bigint, tokens: number[], bs: number): RouterEvent {
  const local = pairsToU64s(computeLocalBlockHashes(tokens, bs)) as LocalBlockHash[];
  return {
    worker_id: worker as WorkerId,
    storage_tier: 'device',
    event: {
      event_id: 1n,
      dp_rank: 0,
      data: {
        stored: {
          parent_hash: null,
          start_position: null,
          blocks: local.map((h, i) => ({
            block_hash: BigInt(1000 + i) as ExternalSequenceBlockHash,
            tokens_hash: h,
            mm_extra_info: null,
          })),
        },
      },
    },
  } as RouterEvent;
}

describe('served index (§7.7)', () => {
  const tokens = Array.from({ length: 48 }, (_, i) => i + 1); // 48 / 16 = 3 blocks
  const local = pairsToU64s(computeLocalBlockHashes(tokens, 16));

  it('answers a query with the wire scores of the bound model, an {"Error"} otherwise', () => {
    const ix = new RadixIndexer();
    ix.applyEvent(stored(7n, tokens.slice(0, 32), 16)); // worker 7 holds the first 2 blocks
    const s = new ServedIndexer(false);
    s.bind('m', ix);
    const r = RemoteIndexerQueryResponseCodec.fromValue(s.query({ model_name: 'm', block_hashes: local }));
    expect(r).toEqual({
      Scores: {
        scores: [[{ worker_id: 7n, dp_rank: 0 }, 2]],
        frequencies: [],
        tree_sizes: [[{ worker_id: 7n, dp_rank: 0 }, 2]],
      },
    });
    expect(s.query({ model_name: 'x', block_hashes: local })).toEqual({
      Error: expect.stringContaining('no index is served for model "x"') as string,
    });
    expect(s.query({ model_name: 'm' })).toEqual({
      Error: expect.stringContaining('block_hashes') as string,
    });
  });

  it('records decisions only in approximate mode', () => {
    const approx = new ApproxIndexer({
      ttlSecs: 120,
      maxTreeSize: 1000,
      pruneTargetRatio: 0.8,
      now: () => 0,
    });
    const s = new ServedIndexer(true);
    s.bind('m', approx);
    const rec = {
      model_name: 'm',
      worker: { worker_id: 9n, dp_rank: 0 },
      local_hashes: local,
      sequence_hashes: pairsToU64s(computeSequenceHashes(computeLocalBlockHashes(tokens, 16))),
    };
    expect(RemoteIndexerRecordResponseCodec.fromValue(s.record(rec))).toBe('Recorded');
    // The recorded 3 blocks are now what the index reports for worker 9.
    const q = RemoteIndexerQueryResponseCodec.fromValue(s.query({ model_name: 'm', block_hashes: local }));
    expect(q).toMatchObject({ Scores: { scores: [[{ worker_id: 9n, dp_rank: 0 }, 3]] } });

    const ev = new ServedIndexer(false);
    ev.bind('m', new RadixIndexer());
    expect(ev.record(rec)).toEqual({ Error: expect.stringContaining('event-driven') as string });
    expect(s.record({ ...rec, sequence_hashes: [] })).toEqual({
      Error: expect.stringContaining('sequence_hashes') as string,
    });
  });
});

describe('HTTP body parsing', () => {
  it('keeps integers beyond 2^53 exact, parses the rest natively, and reports bad JSON', async () => {
    const { parseBodyJson } = await import('./http.js');
    expect(parseBodyJson('{"a": 18446744073709551615, "b": [1, 2.5, "1234567890123456789"]}')).toEqual({
      a: 18446744073709551615n,
      b: [1, 2.5, '1234567890123456789'],
    });
    expect(parseBodyJson('{"token_ids": [123456789012345, 1]}')).toEqual({ token_ids: [123456789012345, 1] });
    expect(() => parseBodyJson('{"a": ')).toThrow();
  });
});
