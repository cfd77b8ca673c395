import { describe, expect, it } from 'vitest';
import { TcpRequestClient } from '@kvrouter/runtime';
import type { GenerateItem } from '@kvrouter/protocols';
import { kvBytesFromModelConfig, resolveDisagg } from './disagg.js';
import { startMocker } from './mocker.js';
import { planFromConfig } from './options.js';
import { cfg, flagOf } from './test-config.js';

describe('disaggregation flags', () => {
  it('prefill / decode plans; agg has none and warns about --bootstrap-ports', () => {
    const p = planFromConfig(
      cfg('--disaggregation-mode', 'prefill', '--kv-transfer-bandwidth', '100', '--bootstrap-ports', '7000'),
    ).disagg;
    expect(p).toEqual({
      mode: 'prefill',
      bandwidthGBps: 100,
      kvCacheDtype: 'auto',
      kvBytesPerToken: null,
      bootstrapPorts: [7000],
    });
    expect(
      planFromConfig(cfg('--disaggregation-mode', 'decode', '--kv-bytes-per-token', '4096')).disagg
        ?.kvBytesPerToken,
    ).toBe(4096);
    const agg = planFromConfig(cfg('--bootstrap-ports', '7000'));
    expect(agg.disagg).toBeNull();
    expect(agg.warnings.join('\n')).toContain('--bootstrap-ports');
  });

  it('refuses an unknown --kv-cache-dtype and a port list that does not fit the workers, naming the flag', () => {
    expect(flagOf(cfg('--disaggregation-mode', 'prefill', '--kv-cache-dtype', 'int3'))).toBe(
      '--kv-cache-dtype',
    );
    expect(
      flagOf(cfg('--disaggregation-mode', 'prefill', '--num-workers', '3', '--bootstrap-ports', '1,2')),
    ).toBe('--bootstrap-ports');
    expect(
      flagOf(cfg('--disaggregation-mode', 'prefill', '--num-workers', '2', '--bootstrap-ports', '1,2')),
    ).toBeUndefined();
  });

  it('kv bytes per token from a Hugging Face config.json, by hand', () => {
    // Llama-3.1-8B: 32 layers · 2 · 8 KV heads · (4096 / 32 = 128) head dim · 2 bytes (bfloat16) = 131 072
    const llama = JSON.stringify({
      num_hidden_layers: 32,
      num_attention_heads: 32,
      num_key_value_heads: 8,
      hidden_size: 4096,
      torch_dtype: 'bfloat16',
    });
    expect(kvBytesFromModelConfig(llama, 'auto')).toBe(131_072);
    // fp8 KV cache: 1 byte → 65 536
    expect(kvBytesFromModelConfig(llama, 'fp8')).toBe(65_536);
    // explicit head_dim wins (Qwen3-8B: 36 · 2 · 8 · 128 · 2 = 147 456)
    expect(
      kvBytesFromModelConfig(
        JSON.stringify({
          num_hidden_layers: 36,
          num_attention_heads: 32,
          num_key_value_heads: 8,
          head_dim: 128,
          hidden_size: 4096,
        }),
        'auto',
      ),
    ).toBe(147_456);
    expect(kvBytesFromModelConfig('{"num_hidden_layers": 2}', 'auto')).toBeNull();
    expect(kvBytesFromModelConfig('not json', 'auto')).toBeNull();
  });

  it('falls back to 114 688 B/token with a warning when nothing says', () => {
    const log: string[] = [];
    const o = resolveDisagg(
      {
        mode: 'decode',
        bandwidthGBps: 64,
        kvCacheDtype: 'auto',
        kvBytesPerToken: null,
        bootstrapPorts: null,
      },
      'm',
      () => null,
      (l) => log.push(l),
    );
    expect(o.kvBytesPerToken).toBe(114_688);
    expect(log[0]).toMatch(/^warning: /);
    const o2 = resolveDisagg(
      { mode: 'decode', bandwidthGBps: 64, kvCacheDtype: 'auto', kvBytesPerToken: 7, bootstrapPorts: null },
      'm',
      () => '{}',
      () => {},
    );
    expect(o2.kvBytesPerToken).toBe(7);
  });
});

async function drain(
  client: TcpRequestClient,
  transport: Parameters<TcpRequestClient['stream']>[0],
  payload: unknown,
): Promise<GenerateItem[]> {
  const out: GenerateItem[] = [];
  for await (const item of client.stream<GenerateItem>(transport, 'generate', payload)) out.push(item);
  return out;
}

describe('mocker in prefill and decode mode (tcp request plane)', () => {
  it('prefill: card type prefill with its bootstrap endpoint, one token + transfer parameters; decode: no prefill for transferred prompts', async () => {
    const log = (): void => {};
    const common = [
      '--speedup-ratio',
      '10',
      '--block-size',
      '16',
      '--num-gpu-blocks-override',
      '1024',
      '--kv-bytes-per-token',
      '1000000',
    ];
    const pre = await startMocker(
      cfg(
        '--disaggregation-mode',
        'prefill',
        '--bootstrap-ports',
        '0',
        '--endpoint',
        'dyn://dtest.prefill.generate',
        ...common,
      ),
      { log },
    );
    const dec = await startMocker(
      cfg('--disaggregation-mode', 'decode', '--endpoint', 'dyn://dtest.backend.generate', ...common),
      { log },
    );
    const client = new TcpRequestClient();
    try {
      const pw = pre.fleet.workers[0];
      expect(pw.card.model_type).toEqual(['prefill']);
      // --bootstrap-ports 0: an OS-assigned port, really listening
      const ep = pw.card.runtime_config.disaggregated_endpoint as { host: string; port: number };
      expect(ep.host).toBe('127.0.0.1');
      expect(ep.port).toBeGreaterThan(0);
      const prompt = Array.from({ length: 40 }, (_, i) => i + 1);
      const items = await drain(client, pw.instance.transport, {
        request_id: 'p1',
        model: 'm',
        token_ids: prompt,
        stop_conditions: { max_tokens: 20 },
      });
      expect(items.flatMap((i) => i.token_ids)).toHaveLength(1);
      const params = items.at(-1)!.disaggregated_params!;
      // 40 tokens · 1e6 B = 40 MB over 64 GB/s = 0.625 ms, / speedup 10 = 0.0625 ms
      expect(params.transfer_ms).toBeCloseTo(0.0625, 9);
      expect(params.kv_bytes).toBe(40_000_000);
      expect(params.bootstrap_port).toBe(ep.port);

      const dw = dec.fleet.workers[0];
      const out = await drain(client, dw.instance.transport, {
        request_id: 'd1',
        model: 'm',
        token_ids: prompt,
        stop_conditions: { max_tokens: 5 },
        disagg: params,
      });
      expect(out.flatMap((i) => i.token_ids)).toHaveLength(5);
      expect(dw.engine.stats().prefillTokensComputed).toBe(0);
      // 40 tokens = 2 full blocks of 16, allocated as received and stored
      expect(dw.engine.stats().storedBlocks).toBeGreaterThanOrEqual(2);
    } finally {
      await client.close();
      await pre.stop();
      await dec.stop();
    }
  }, 30_000);
});
