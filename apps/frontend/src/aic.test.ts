import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildAicPredictor, readTextFile } from './aic.js';
import { startFrontend } from './test-helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'kvr-aic-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const AIC = [
  '--router-mode',
  'kv',
  '--router-prefill-load-model',
  'aic',
  '--aic-backend',
  'vllm',
  '--aic-system',
  'h200_sxm',
];

describe('buildAicPredictor', () => {
  const flags = {
    aicBackend: 'vllm',
    aicSystem: 'h200_sxm',
    aicModelPath: 'nvidia/Llama-3.1-8B-Instruct-FP8',
  };

  it('predicts less time for a cached prefix and more for a longer prompt', () => {
    const p = buildAicPredictor(flags);
    const worker = { worker_id: 1n, dp_rank: 0 } as never;
    const t = (isl: number, prefixTokens: number) => p({ worker, isl, prefixTokens })!;
    expect(t(8192, 4096)).toBeLessThan(t(8192, 0));
    expect(t(16384, 0)).toBeGreaterThan(t(8192, 0));
  });

  it('reads a local model directory through the file system', () => {
    const m = path.join(dir, 'tiny');
    rmSync(m, { recursive: true, force: true });
    expect(() => buildAicPredictor({ ...flags, aicModelPath: m })).toThrow(
      `--aic-model-path: '${m}' is neither a readable config.json`,
    );
    writeFileSync(
      path.join(dir, 'config.json'),
      JSON.stringify({
        hidden_size: 512,
        num_hidden_layers: 2,
        num_attention_heads: 8,
        intermediate_size: 1024,
        vocab_size: 1000,
      }),
    );
    expect(() => buildAicPredictor({ ...flags, aicModelPath: dir })).not.toThrow();
    expect(readTextFile(path.join(dir, 'missing.json'))).toBeNull();
    // A directory is not a file: treated as absent, not as an I/O failure.
    expect(readTextFile(dir)).toBeNull();
  });
});

describe('frontend with --router-prefill-load-model aic', () => {
  it('starts with the predictor in every worker set router', async () => {
    const fe = await startFrontend(
      [...AIC, '--aic-model-path', 'nvidia/Llama-3.1-8B-Instruct-FP8', '--mocker-workers', '1'],
      { noHttp: true },
    );
    try {
      const sets = [...fe.registry.allSets()];
      expect(sets.length).toBeGreaterThan(0);
      // The router keeps the predictor private; its presence is what switches the §10 re-check to 100 ms.
      for (const s of sets)
        expect((s.router as unknown as { queueRecheckMs: number }).queueRecheckMs).toBe(100);
    } finally {
      await fe.close(0);
    }
  });

  it('refuses to start with an unknown system, naming the flag', async () => {
    await expect(
      startFrontend(
        [...AIC.map((a) => (a === 'h200_sxm' ? 'h300' : a)), '--aic-model-path', 'Qwen/Qwen3-32B'],
        { noHttp: true },
      ),
    ).rejects.toThrow(
      "--aic-system: unknown system 'h300' (choose from h100_sxm, h200_sxm, b200_sxm, a100_sxm, l40s)",
    );
  });
});
