/**
 * Per-GPU peak figures of the systems `--aic-system` names. Tensor-core rates are the vendors'
 * DENSE figures: NVIDIA datasheets print sparse rates with an asterisk, dense is half of those.
 * Interconnect is one direction of one GPU's link bandwidth (datasheets print bidirectional
 * totals), which is what a ring all-reduce moves per step.
 */
import { KvrError } from '@kvrouter/protocols';

export interface SystemSpec {
  id: string;
  name: string;
  /** Dense BF16/FP16 tensor-core TFLOPS. */
  bf16Tflops: number;
  /** Dense FP8 tensor-core TFLOPS; null where the GPU has no FP8 tensor cores (FP8 weights then run W8A16). */
  fp8Tflops: number | null;
  /** Memory bandwidth, GB/s. */
  memGBs: number;
  memGB: number;
  /** GPU-to-GPU bandwidth, one direction, GB/s (NVLink, or PCIe where there is none). */
  linkGBs: number;
  /** Latency of one all-reduce step across GPUs, µs. */
  linkLatencyUs: number;
  source: string;
}

const sys = (s: SystemSpec): SystemSpec => Object.freeze(s);

export const SYSTEMS: Readonly<Record<string, SystemSpec>> = Object.freeze({
  h100_sxm: sys({
    id: 'h100_sxm',
    name: 'NVIDIA H100 SXM 80GB',
    // Datasheet: BF16 1,979* / FP8 3,958* TFLOPS (*sparsity), HBM3 3.35 TB/s, NVLink 900 GB/s.
    bf16Tflops: 989.5,
    fp8Tflops: 1979,
    memGBs: 3350,
    memGB: 80,
    linkGBs: 450,
    linkLatencyUs: 8,
    source: 'https://www.nvidia.com/en-us/data-center/h100/ (H100 SXM column)',
  }),
  h200_sxm: sys({
    id: 'h200_sxm',
    name: 'NVIDIA H200 SXM 141GB',
    // Datasheet: same GH100 compute as H100 SXM; HBM3e 4.8 TB/s, NVLink 900 GB/s.
    bf16Tflops: 989.5,
    fp8Tflops: 1979,
    memGBs: 4800,
    memGB: 141,
    linkGBs: 450,
    linkLatencyUs: 8,
    source: 'https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM column)',
  }),
  b200_sxm: sys({
    id: 'b200_sxm',
    name: 'NVIDIA B200 (HGX B200)',
    // HGX B200 (8 GPUs): FP8 72 PFLOPS*, FP16/BF16 36 PFLOPS* (*sparsity) -> per GPU dense 4.5 / 2.25 PF;
    // HBM3e 8 TB/s per GPU; NVLink 5 1.8 TB/s per GPU.
    bf16Tflops: 2250,
    fp8Tflops: 4500,
    memGBs: 8000,
    memGB: 180,
    linkGBs: 900,
    linkLatencyUs: 8,
    source: 'https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200 column)',
  }),
  a100_sxm: sys({
    id: 'a100_sxm',
    name: 'NVIDIA A100 SXM 80GB',
    // Datasheet: BF16 312 TFLOPS (624*), no FP8; HBM2e 2,039 GB/s; NVLink 600 GB/s.
    bf16Tflops: 312,
    fp8Tflops: null,
    memGBs: 2039,
    memGB: 80,
    linkGBs: 300,
    linkLatencyUs: 10,
    source: 'https://www.nvidia.com/en-us/data-center/a100/ (A100 80GB SXM column)',
  }),
  l40s: sys({
    id: 'l40s',
    name: 'NVIDIA L40S 48GB',
    // Datasheet: BF16 362.05 (733*), FP8 733 (1,466*) TFLOPS; GDDR6 864 GB/s; no NVLink, PCIe Gen4 x16 64 GB/s.
    bf16Tflops: 362.05,
    fp8Tflops: 733,
    memGBs: 864,
    memGB: 48,
    linkGBs: 32,
    linkLatencyUs: 20,
    source: 'https://www.nvidia.com/en-us/data-center/l40s/',
  }),
});

export const SYSTEM_IDS: readonly string[] = Object.freeze(Object.keys(SYSTEMS));

/** `--aic-system` value -> spec; the error names the flag and the allowed values. */
export function systemSpec(id: string): SystemSpec {
  const s = Object.hasOwn(SYSTEMS, id) ? SYSTEMS[id] : undefined;
  if (!s) {
    throw new KvrError(
      'invalid_argument',
      `--aic-system: unknown system '${id}' (choose from ${SYSTEM_IDS.join(', ')})`,
      400,
      {
        flag: '--aic-system',
      },
    );
  }
  return s;
}
