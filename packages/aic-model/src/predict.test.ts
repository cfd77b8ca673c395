import { describe, expect, it } from 'vitest';
import { BACKEND_IDS } from './backends.js';
import { builtinModel, BUILTIN_MODEL_IDS, parseHfConfig, type ModelShape } from './models.js';
import { AicModel, weightBytesPerGpu } from './predict.js';
import { SYSTEM_IDS, SYSTEMS } from './systems.js';

const model = (id: string): ModelShape => builtinModel(id)!;

// A small dense model so every term can be worked by hand.
const TINY = parseHfConfig(
  {
    hidden_size: 1024,
    num_hidden_layers: 2,
    num_attention_heads: 8,
    num_key_value_heads: 8,
    head_dim: 128,
    intermediate_size: 4096,
    vocab_size: 1000,
    torch_dtype: 'bfloat16',
  },
  'tiny',
);

describe('AicModel roofline, worked by hand', () => {
  // h100_sxm + trtllm: gemm rate 989.5e12·0.6 = 593.7e9 FLOP/ms, attention rate 989.5e12·0.55 =
  // 544.225e9 FLOP/ms, memory 3350e9·0.8 = 2.68e9 B/ms, link 450e9·0.8 = 360e6 B/ms, 8 µs, overhead 4 ms.
  // attnParams = 1024·8·128·2 + 1024·8·128·2 = 4 194 304; mlpParams = 3·1024·4096 = 12 582 912.
  const m = new AicModel({ backend: 'trtllm', system: 'h100_sxm', model: TINY });

  it('isl 1000, no prefix', () => {
    // attention projections: 2·1000·4 194 304 = 8.388608e9 FLOP / 593.7e9 = 0.0141294 ms
    //   (bytes 8 388 608 / 2.68e9 = 0.00313 ms, lower, so compute-bound)
    // MLP: 2·1000·12 582 912 = 2.5165824e10 / 593.7e9 = 0.0423881 ms; 2 layers: 2·0.0565175 = 0.113035
    // LM head: bytes 1024·1000·2 = 2 048 000 / 2.68e9 = 0.000764 ms (FLOPs 2.048e6 -> 3.4e-6 ms)
    // attention core: pairs 1000·1001/2 = 500 500, ·(4·8·128 = 4096) = 2.050048e9 / 544.225e9 =
    //   0.0037669 ms (KV bytes 1000·2048·2 = 4.096e6 / 2.68e9 = 0.00153 lower); 2 layers: 0.0075338
    // total = 4 + 0.113035 + 0.000764 + 0.0075338 = 4.121333
    const b = m.breakdown({ isl: 1000 });
    expect(b.gemmMs).toBeCloseTo(0.113799, 5);
    expect(b.attnMs).toBeCloseTo(0.0075338, 6);
    expect(b.commMs).toBe(0);
    expect(b.totalMs).toBeCloseTo(4.121333, 5);
  });

  it('isl 1000 with 600 cached: 400 new tokens attend to 600 + their causal prefix', () => {
    // projections 2·400·4 194 304 / 593.7e9 = 0.00565175; MLP 2·400·12 582 912 / 593.7e9 = 0.01695525
    // 2 layers: 0.0452140; + LM head 0.000764 = 0.045978
    // pairs 400·600 + 400·401/2 = 320 200, ·4096 = 1.3115392e9 / 544.225e9 = 0.00240992
    //   (KV read+write 1000·2048·2 B = 0.00153 ms, lower); 2 layers: 0.00481984
    // total = 4 + 0.045978 + 0.00481984 = 4.050798
    const b = m.breakdown({ isl: 1000, prefix: 600 });
    expect(b.gemmMs).toBeCloseTo(0.045978, 5);
    expect(b.attnMs).toBeCloseTo(0.00481984, 6);
    expect(b.totalMs).toBeCloseTo(4.050798, 5);
  });

  it('TP 2 adds two ring all-reduces per layer', () => {
    // activations 1000·1024·2 = 2 048 000 B; ring moves 2·(2−1)/2 of them = 2 048 000 B / 360e6 =
    // 0.0056889 ms + 0.008 ms latency = 0.0136889; 2 per layer · 2 layers = 0.0547556 ms
    const b = new AicModel({ backend: 'trtllm', system: 'h100_sxm', model: TINY, tpSize: 2 }).breakdown({
      isl: 1000,
    });
    expect(b.commMs).toBeCloseTo(0.0547556, 6);
  });

  it('batch multiplies the token work', () => {
    // compute-bound throughout: 2 identical requests cost twice the non-overhead time, up to the
    // memory-bound LM head (same weights read once) — compare the attention core alone.
    const one = m.breakdown({ isl: 1000 });
    const two = m.breakdown({ isl: 1000, batch: 2 });
    expect(two.attnMs).toBeCloseTo(2 * one.attnMs, 9);
  });
});

describe('engineTiming (engine-sim TimingModel shape)', () => {
  const m = new AicModel({ backend: 'trtllm', system: 'h100_sxm', model: TINY });
  const t = m.engineTiming(1000);

  it('prefill is the batch-1 no-prefix prediction', () => {
    expect(t.prefillMs(1000)).toBe(m.prefillMs(1000));
  });

  it('decode streams every weight once plus the occupied KV', () => {
    // weights per GPU: (2·4 194 304 + 2·12 582 912)·2 B = 67 108 864 B, + embedding and LM head
    // 2·1000·1024·2 = 4 096 000 B -> 71 204 864 B / 2.68e9 B/ms = 0.0265690 ms; + 4 ms overhead.
    expect(t.decodeMs(0)).toBeCloseTo(4.026569, 5);
    // full cache: 1000 tokens · 2048 elements · 2 B · 2 layers = 8 192 000 B / 2.68e9 = 0.0030567 ms
    expect(t.decodeMs(1)).toBeCloseTo(4.0296257, 6);
    expect(t.decodeMs(0.5)).toBeGreaterThan(t.decodeMs(0.25));
    expect(() => m.engineTiming(0)).toThrow('totalKvTokens must be an integer >= 1, got 0');
  });
});

describe('monotonicity', () => {
  const isls = [1, 16, 128, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072];
  // Every built-in model on every system and backend where its weights fit at some TP size.
  const cases: AicModel[] = [];
  for (const id of BUILTIN_MODEL_IDS) {
    for (const system of SYSTEM_IDS) {
      for (const backend of BACKEND_IDS) {
        const m = model(id);
        const tp = [1, 2, 4, 8].find(
          (t) => m.numHeads % t === 0 && weightBytesPerGpu(m, t, t) / 1e9 <= SYSTEMS[system]!.memGB,
        );
        if (tp !== undefined) cases.push(new AicModel({ backend, system, model: m, tpSize: tp }));
      }
    }
  }

  it('covers every built-in model', () => {
    expect(new Set(cases.map((c) => c.model.id)).size).toBe(BUILTIN_MODEL_IDS.length);
  });

  it('strictly increases with prompt length (no cache)', () => {
    for (const c of cases) {
      for (let i = 1; i < isls.length; i++) {
        expect(
          c.prefillMs(isls[i]!),
          `${c.model.id} ${c.system.id} ${c.backend.id} ${isls[i]}`,
        ).toBeGreaterThan(c.prefillMs(isls[i - 1]!));
      }
    }
  });

  it('strictly decreases as more of the prompt is cached', () => {
    const isl = 16384;
    for (const c of cases) {
      let prev = Infinity;
      for (const prefix of [0, 1024, 4096, 8192, 12288, 16000, 16383]) {
        const t = c.prefillMs(isl, prefix);
        expect(t, `${c.model.id} ${c.system.id} ${c.backend.id} prefix ${prefix}`).toBeLessThan(prev);
        prev = t;
      }
    }
  });

  it('a cached prefix costs more than no history at all (its KV is still attended to)', () => {
    for (const c of cases) expect(c.prefillMs(8192, 4096)).toBeGreaterThan(c.prefillMs(4096, 0));
  });

  it('faster systems are faster: b200 < h200 <= h100 < a100 for the same work', () => {
    const t = (s: string) =>
      new AicModel({
        backend: 'vllm',
        system: s,
        model: model('meta-llama/Llama-3.1-8B-Instruct'),
      }).prefillMs(8192);
    expect(t('b200_sxm')).toBeLessThan(t('h200_sxm'));
    expect(t('h200_sxm')).toBeLessThanOrEqual(t('h100_sxm'));
    expect(t('h100_sxm')).toBeLessThan(t('a100_sxm'));
  });
});

describe('sane magnitudes against published TTFT at concurrency 1 (within 2x)', () => {
  // TTFT includes request handling and the first decode step, so prefill alone should sit near or
  // a little under it. Sources in README "Checked against published figures".
  const within2x = (pred: number, measured: number) => {
    expect(pred / measured).toBeGreaterThan(0.5);
    expect(pred / measured).toBeLessThan(2);
  };

  it('NIM 1.8.0 Llama-3.3-70B FP8 TP2 on 2x H100: ISL 5000 -> 406.77 ms, ISL 500 -> 47.77 ms', () => {
    const m = new AicModel({
      backend: 'trtllm',
      system: 'h100_sxm',
      model: model('nvidia/Llama-3.3-70B-Instruct-FP8'),
      tpSize: 2,
    });
    within2x(m.prefillMs(5000), 406.77);
    within2x(m.prefillMs(500), 47.77);
  });

  it('NIM Llama-3.1 8B (Safety Guard) BF16 on A100 80GB SXM: ISL 500 -> 48.3 ms', () => {
    const m = new AicModel({
      backend: 'vllm',
      system: 'a100_sxm',
      model: model('meta-llama/Llama-3.1-8B-Instruct'),
    });
    within2x(m.prefillMs(500), 48.3);
  });
});

describe('validation', () => {
  const m8 = model('meta-llama/Llama-3.1-8B-Instruct');
  const moe = model('Qwen/Qwen3-30B-A3B');

  it('unknown backend and system name the flag and the allowed values', () => {
    expect(() => new AicModel({ backend: 'tgi', system: 'h100_sxm', model: m8 })).toThrow(
      "--aic-backend: unknown backend 'tgi' (choose from vllm, sglang, trtllm)",
    );
    expect(() => new AicModel({ backend: 'vllm', system: 'h100', model: m8 })).toThrow(
      "--aic-system: unknown system 'h100' (choose from h100_sxm, h200_sxm, b200_sxm, a100_sxm, l40s)",
    );
  });

  it('sizes below 1 use the docs/configuration.md message', () => {
    expect(() => new AicModel({ backend: 'vllm', system: 'h100_sxm', model: m8, tpSize: 0 })).toThrow(
      '--aic-tp-size must be >= 1, got 0',
    );
    expect(() => new AicModel({ backend: 'vllm', system: 'h100_sxm', model: moe, moeEpSize: 0 })).toThrow(
      '--aic-moe-ep-size must be >= 1, got 0',
    );
  });

  it('MoE constraint tp·adp == moe_tp·moe_ep, unset ones counting as 1', () => {
    expect(
      () => new AicModel({ backend: 'sglang', system: 'h200_sxm', model: moe, tpSize: 4, moeEpSize: 2 }),
    ).toThrow(
      'AIC MoE parallelism requires aic_tp_size * aic_attention_dp_size == aic_moe_tp_size * aic_moe_ep_size (got 4 * 1 != 1 * 2)',
    );
    // 4·2 = 2·4 holds.
    const ok = new AicModel({
      backend: 'sglang',
      system: 'h200_sxm',
      model: moe,
      tpSize: 4,
      attentionDpSize: 2,
      moeTpSize: 2,
      moeEpSize: 4,
    });
    expect([ok.moeTp, ok.moeEp, ok.attentionDp]).toEqual([2, 4, 2]);
    // Nothing set: TP-only MoE (Kimi style), moe_tp = tp.
    const tpOnly = new AicModel({ backend: 'sglang', system: 'h200_sxm', model: moe, tpSize: 4 });
    expect([tpOnly.moeTp, tpOnly.moeEp, tpOnly.attentionDp]).toEqual([4, 1, 1]);
  });

  it('TP must divide the heads; EP must divide the experts; weights must fit', () => {
    expect(() => new AicModel({ backend: 'vllm', system: 'h100_sxm', model: m8, tpSize: 3 })).toThrow(
      "--aic-tp-size 3 must divide meta-llama/Llama-3.1-8B-Instruct's num_attention_heads (32)",
    );
    // 2·3 = 2·3 satisfies the constraint, but 128 experts do not split over 3 ranks.
    expect(
      () =>
        new AicModel({
          backend: 'vllm',
          system: 'h100_sxm',
          model: moe,
          tpSize: 2,
          attentionDpSize: 3,
          moeTpSize: 2,
          moeEpSize: 3,
        }),
    ).toThrow("--aic-moe-ep-size 3 must divide Qwen/Qwen3-30B-A3B's number of experts (128)");
    // 70B BF16: 80 layers·856M + embeddings ≈ 141 GB > 80 GB.
    expect(
      () =>
        new AicModel({
          backend: 'vllm',
          system: 'a100_sxm',
          model: model('meta-llama/Llama-3.1-70B-Instruct'),
        }),
    ).toThrow(/needs 141\.\d GB of weights per GPU at --aic-tp-size 1, more than the 80 GB of a100_sxm/);
  });

  it('query checks name the field', () => {
    const m = new AicModel({ backend: 'vllm', system: 'h100_sxm', model: m8 });
    expect(() => m.prefillMs(100, 101)).toThrow('prefix (101) must not exceed isl (100)');
    expect(() => m.prefillMs(-1)).toThrow('isl must be an integer >= 0, got -1');
    expect(() => m.prefillMs(100, 0, 0)).toThrow('batch must be an integer >= 1, got 0');
    expect(m.prefillMs(0)).toBe(0);
  });

  it('the router predictor clamps the prefix to the prompt and is batch 1', () => {
    const m = new AicModel({ backend: 'vllm', system: 'h100_sxm', model: m8 });
    const p = m.predictor();
    expect(p({ isl: 4096, prefixTokens: 1024 })).toBe(m.prefillMs(4096, 1024));
    expect(p({ isl: 100, prefixTokens: 500 })).toBe(m.prefillMs(100, 100));
  });
});
