import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { MemDiscoveryHub, type Discovery } from './discovery/index.js';
import {
  buildModelCard,
  canonicalJson,
  cardChecksum,
  parseModelCard,
  registerModelCard,
  verifyCardChecksum,
  watchModelCards,
  type ModelDeploymentCard,
} from './model-card.js';
import {
  encodeInstance,
  parseEventChannel,
  parseInstance,
  registerEventChannel,
  registerInstance,
  watchEventChannels,
  watchInstances,
  type TypedChange,
  type TypedWatch,
} from './registration.js';

const ID = 7587872800778374919n; // the §6.3 example; hex 694d8a1c2b3e4f07

function fieldOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    if (e instanceof KvrError) return `${e.code}:${String(e.detail?.field)}`;
    throw e;
  }
  return undefined;
}

async function take<T>(w: TypedWatch<T>, n: number): Promise<TypedChange<T>[]> {
  const out: TypedChange<T>[] = [];
  while (out.length < n) {
    const r = await w.next();
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

describe('instances (§6.3)', () => {
  it('registers the exact key and JSON of the §6.3 example, id with all digits', async () => {
    const hub = new MemDiscoveryHub();
    const d = hub.connect({ leaseId: ID });
    const reg = await registerInstance(d, {
      namespace: 'dynamo',
      component: 'backend',
      endpoint: 'generate',
      transport: { tcp: '10.0.0.5:41231' },
      device_type: 'cuda',
    });
    expect(reg.key).toBe('v1/instances/dynamo/backend/generate/694d8a1c2b3e4f07');
    expect(await d.get(reg.key)).toBe(
      '{"namespace":"dynamo","component":"backend","endpoint":"generate","instance_id":7587872800778374919,"transport":{"tcp":"10.0.0.5:41231"},"device_type":"cuda"}',
    );
    expect(reg.record.instance_id).toBe(ID);
    await reg.unregister();
    expect(await d.get(reg.key)).toBeNull();
    await d.close();
  });

  it('parses the §6.3 text losslessly and checks it against its key', () => {
    const text = `{"namespace": "dynamo", "component": "backend", "endpoint": "generate",
 "instance_id": 7587872800778374919, "transport": {"tcp": "10.0.0.5:41231"}, "device_type": "cuda"}`;
    const key = 'v1/instances/dynamo/backend/generate/694d8a1c2b3e4f07';
    expect(parseInstance(text, key)).toEqual({
      namespace: 'dynamo',
      component: 'backend',
      endpoint: 'generate',
      instance_id: ID,
      transport: { tcp: '10.0.0.5:41231' },
      device_type: 'cuda',
    });
    expect(fieldOf(() => parseInstance(text, 'v1/instances/dynamo/backend/generate/694d8a1c2b3e4f08'))).toBe(
      'decode_error:key',
    );
    const without = parseInstance(text.replace(', "device_type": "cuda"', ''));
    expect('device_type' in without).toBe(false);
    expect(
      parseInstance(text.replace('{"tcp": "10.0.0.5:41231"}', '{"nats_tcp": "ns.x"}')).transport,
    ).toEqual({
      nats_tcp: 'ns.x',
    });
  });

  it('rejects malformed records naming the field', () => {
    const ok = { namespace: 'n', component: 'c', endpoint: 'e', instance_id: 1n, transport: { tcp: 'h:1' } };
    const bad = (patch: object): string | undefined =>
      fieldOf(() => parseInstance(encodeInstanceLoose({ ...ok, ...patch })));
    expect(bad({ transport: { tcp: 'h:1', http: 'x' } })).toBe('decode_error:transport');
    expect(bad({ transport: { smoke: 'x' } })).toBe('decode_error:transport');
    expect(bad({ transport: { tcp: 5 } })).toBe('decode_error:transport.tcp');
    expect(bad({ device_type: 'gpu' })).toBe('decode_error:device_type');
    expect(bad({ namespace: '' })).toBe('decode_error:namespace');
    expect(bad({ instance_id: -1 })).toBe('decode_error:instance_id');
    expect(fieldOf(() => parseInstance('{"namespace":'))).toBe('decode_error:instance');
    expect(fieldOf(() => encodeInstance({ ...ok, instance_id: 1n << 64n }))).toBe(
      'invalid_argument:instance_id',
    );
  });

  it('watchInstances: scoped listing, typed puts, invalid records reported, deletes with key parts', async () => {
    const hub = new MemDiscoveryHub();
    const worker = hub.connect({ leaseId: 0x1an });
    const other = hub.connect({ leaseId: 0x2bn });
    const frontend = hub.connect();
    await registerInstance(worker, {
      namespace: 'ns',
      component: 'backend',
      endpoint: 'generate',
      transport: { tcp: 'a:1' },
    });
    await registerInstance(worker, {
      namespace: 'ns',
      component: 'backend',
      endpoint: 'generatex',
      transport: { tcp: 'a:1' },
    });
    await registerInstance(worker, {
      namespace: 'ns',
      component: 'prefill',
      endpoint: 'generate',
      transport: { tcp: 'a:1' },
    });
    const w = watchInstances(frontend, { namespace: 'ns', component: 'backend', endpoint: 'generate' });
    const first = await take(w, 2);
    expect(first[0]).toMatchObject({
      type: 'put',
      value: { instance_id: 0x1an, endpoint: 'generate', component: 'backend' },
    });
    expect(first[1]).toEqual({ type: 'synced' });
    await other.put('v1/instances/ns/backend/generate/ff', '{"not":"an instance"}');
    const inv = await take(w, 1);
    expect(inv[0]).toMatchObject({ type: 'invalid', key: 'v1/instances/ns/backend/generate/ff' });
    expect((inv[0] as { error: KvrError }).error.code).toBe('decode_error');
    const reg = await registerInstance(other, {
      namespace: 'ns',
      component: 'backend',
      endpoint: 'generate',
      transport: { nats_tcp: 'x.y' },
    });
    expect((await take(w, 1))[0]).toMatchObject({ type: 'put', key: reg.key, value: { instance_id: 0x2bn } });
    await worker.close();
    expect(await take(w, 1)).toEqual([
      {
        type: 'delete',
        key: 'v1/instances/ns/backend/generate/1a',
        parts: { namespace: 'ns', component: 'backend', endpoint: 'generate', instance_id: 0x1an },
      },
    ]);
    w.close();
    expect(await w.next()).toEqual({ value: undefined, done: true });
  });

  it('watchInstances with a namespace prefix narrows by component too', async () => {
    const hub = new MemDiscoveryHub();
    const d = hub.connect();
    for (const ns of ['dyn-a', 'dyn-b', 'other'])
      await registerInstance(d, {
        namespace: ns,
        component: 'backend',
        endpoint: 'generate',
        transport: { tcp: 'h:1' },
      });
    await registerInstance(d, {
      namespace: 'dyn-a',
      component: 'router',
      endpoint: 'generate',
      transport: { tcp: 'h:1' },
    });
    const w = watchInstances(d, { namespacePrefix: 'dyn-', component: 'backend' });
    const got = await take(w, 3);
    expect(got.map((c) => (c.type === 'put' ? `${c.value.namespace}/${c.value.component}` : c.type))).toEqual(
      ['dyn-a/backend', 'dyn-b/backend', 'synced'],
    );
    w.close();
  });
});

/** JSON text of a record without the encoder's validation, to feed the parser bad fields. */
function encodeInstanceLoose(v: Record<string, unknown>): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? Number(x) : x));
}

describe('event channels', () => {
  it('registers, parses and watches a publisher channel', async () => {
    const hub = new MemDiscoveryHub();
    const d = hub.connect({ leaseId: 0xabcn });
    const w = watchEventChannels(d, { namespace: 'ns', component: 'backend', endpoint: 'kv-events' });
    expect(await take(w, 1)).toEqual([{ type: 'synced' }]);
    const reg = await registerEventChannel(d, {
      namespace: 'ns',
      component: 'backend',
      topic: 'kv-events',
      transport: { zmq: 'tcp://10.0.0.5:5557' },
    });
    expect(reg.key).toBe('v1/event_channels/ns/backend/kv-events/abc');
    const [c] = await take(w, 1);
    expect(c).toEqual({ type: 'put', key: reg.key, value: reg.record });
    expect(parseEventChannel((await d.get(reg.key))!)).toEqual({
      namespace: 'ns',
      component: 'backend',
      topic: 'kv-events',
      instance_id: 0xabcn,
      transport: { zmq: 'tcp://10.0.0.5:5557' },
    });
    expect(
      fieldOf(() =>
        parseEventChannel(
          '{"namespace":"a","component":"b","topic":"t","instance_id":1,"transport":{"tcp":"x"}}',
        ),
      ),
    ).toBe('decode_error:transport');
    w.close();
  });
});

describe('model cards (§6.4)', () => {
  const input = { display_name: 'llama', kv_cache_block_size: 16, context_length: 8192 };

  it('fills the documented defaults', () => {
    const c = buildModelCard(input);
    expect(c).toMatchObject({
      display_name: 'llama',
      migration_limit: 0,
      model_type: ['chat', 'completions'],
      model_input: 'tokens',
      lora: null,
    });
    expect(c.runtime_config).toEqual({
      total_kv_blocks: null,
      max_num_batched_tokens: null,
      max_num_seqs: null,
      data_parallel_start_rank: 0,
      data_parallel_size: 1,
      enable_local_indexer: true,
      topology_domains: {},
      kv_transfer_domain: null,
      kv_transfer_enforcement: null,
      kv_transfer_preferred_weight: null,
      taints: [],
      disaggregated_endpoint: null,
      enable_eagle: false,
    });
  });

  it('checksum = SHA-256 of the canonical JSON without runtime_config', () => {
    const c = buildModelCard(input);
    const { runtime_config: _rc, mdcsum: _m, ...rest } = c;
    // Keys sorted, no spaces; defaults included.
    expect(canonicalJson(rest)).toBe(
      '{"context_length":8192,"display_name":"llama","kv_cache_block_size":16,"lora":null,"migration_limit":0,"model_input":"tokens","model_type":["chat","completions"]}',
    );
    // `printf '%s' '<the text above>' | sha256sum`
    expect(c.mdcsum).toBe('bdccd1d5a03c37da89b2d1efc07950094719cb5b1b87c21c15901b8d258cfce6');
    // Field order and runtime_config do not matter; any other field does.
    const reordered = buildModelCard({
      context_length: 8192,
      runtime_config: { total_kv_blocks: 1000, data_parallel_size: 4 },
      kv_cache_block_size: 16,
      display_name: 'llama',
    });
    expect(reordered.mdcsum).toBe(c.mdcsum);
    expect(buildModelCard({ ...input, display_name: 'llama2' }).mdcsum).not.toBe(c.mdcsum);
    expect(verifyCardChecksum(c)).toBe(true);
    expect(verifyCardChecksum({ ...c, context_length: 4096 })).toBe(false);
  });

  it('rejects bad fields with the field path', () => {
    const bad = (patch: Record<string, unknown>): string | undefined =>
      fieldOf(() => buildModelCard({ ...input, ...patch }));
    expect(bad({ kv_cache_block_size: 0 })).toBe('invalid_argument:kv_cache_block_size');
    expect(bad({ display_name: '' })).toBe('invalid_argument:display_name');
    expect(bad({ model_type: ['chat', 'speech'] })).toBe('invalid_argument:model_type[1]');
    expect(bad({ model_type: ['chat', 'chat'] })).toBe('invalid_argument:model_type');
    expect(bad({ model_input: 'audio' })).toBe('invalid_argument:model_input');
    expect(
      bad({ runtime_config: { kv_transfer_enforcement: 'preferred', kv_transfer_domain: 'rack' } }),
    ).toBe('invalid_argument:runtime_config.kv_transfer_preferred_weight');
    expect(bad({ runtime_config: { kv_transfer_enforcement: 'required' } })).toBe(
      'invalid_argument:runtime_config.kv_transfer_domain',
    );
    expect(bad({ runtime_config: { kv_transfer_preferred_weight: 1.5 } })).toBe(
      'invalid_argument:runtime_config.kv_transfer_preferred_weight',
    );
    expect(bad({ runtime_config: { data_parallel_start_rank: 0xffffffff, data_parallel_size: 2 } })).toBe(
      'invalid_argument:runtime_config.data_parallel_size',
    );
    expect(bad({ runtime_config: { topology_domains: { rack: 7 } } })).toBe(
      'invalid_argument:runtime_config.topology_domains.rack',
    );
    expect(bad({ runtime_config: { taints: ['a', ''] } })).toBe('invalid_argument:runtime_config.taints[1]');
  });

  it('parses foreign cards: extra fields kept (u64 exact), published mdcsum kept, missing one computed', () => {
    const text =
      '{"display_name":"m","kv_cache_block_size":32,"context_length":4096,"model_type":["prefill"],' +
      '"tokenizer":{"vocab_hash":18446744073709551615},"mdcsum":"abc",' +
      '"runtime_config":{"total_kv_blocks":9000,"max_num_batched_tokens":8192,"topology_domains":{"rack":"r1"},' +
      '"kv_transfer_domain":"rack","kv_transfer_enforcement":"preferred","kv_transfer_preferred_weight":0.85,"runtime_data":{"x":1}}}';
    const c: ModelDeploymentCard = parseModelCard(text);
    expect(c.tokenizer).toEqual({ vocab_hash: 18446744073709551615n });
    expect(c.mdcsum).toBe('abc');
    expect(verifyCardChecksum(c)).toBe(false);
    expect(c.runtime_config).toMatchObject({
      total_kv_blocks: 9000,
      max_num_batched_tokens: 8192,
      topology_domains: { rack: 'r1' },
      kv_transfer_enforcement: 'preferred',
      kv_transfer_preferred_weight: 0.85,
      runtime_data: { x: 1 },
    });
    const noSum = parseModelCard(text.replace('"mdcsum":"abc",', ''));
    expect(noSum.mdcsum).toBe(cardChecksum(noSum));
    expect(fieldOf(() => parseModelCard('{"display_name":"m"}'))).toBe('decode_error:kv_cache_block_size');
  });

  it('registers under v1/mdc with an optional LoRA suffix and watches by namespace prefix', async () => {
    const hub = new MemDiscoveryHub();
    const worker = hub.connect({ leaseId: 0x10n });
    const fe = hub.connect();
    const w = watchModelCards(fe, { namespacePrefix: 'prod' });
    expect(await take(w, 1)).toEqual([{ type: 'synced' }]);
    const base = await registerModelCard(worker, {
      namespace: 'prod-1',
      component: 'backend',
      endpoint: 'generate',
      card: input,
    });
    const lora = await registerModelCard(worker, {
      namespace: 'prod-1',
      component: 'backend',
      endpoint: 'generate',
      card: { ...input, display_name: 'llama-sql', lora: { name: 'sql' } },
      suffix: 'sql',
    });
    await registerModelCard(worker, {
      namespace: 'dev',
      component: 'backend',
      endpoint: 'generate',
      card: input,
    });
    expect(base.key).toBe('v1/mdc/prod-1/backend/generate/10');
    expect(lora.key).toBe('v1/mdc/prod-1/backend/generate/10/sql');
    const got = await take(w, 2);
    expect(got.map((c) => (c.type === 'put' ? [c.key, c.value.display_name] : c.type))).toEqual([
      [base.key, 'llama'],
      [lora.key, 'llama-sql'],
    ]);
    await lora.unregister();
    expect(await take(w, 1)).toEqual([
      {
        type: 'delete',
        key: lora.key,
        parts: {
          namespace: 'prod-1',
          component: 'backend',
          endpoint: 'generate',
          instance_id: 0x10n,
          suffix: 'sql',
        },
      },
    ]);
    w.close();
    await closeAll([worker, fe]);
  });
});

async function closeAll(ds: Discovery[]): Promise<void> {
  await Promise.all(ds.map((d) => d.close()));
}
