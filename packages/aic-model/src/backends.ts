/**
 * Efficiency factors per `--aic-backend`: the fraction of a peak each kind of work reaches in a
 * prefill forward pass. They are stated assumptions, not measurements of this code (README:
 * "Efficiency factors"); `--aic-backend-version` is recorded but selects nothing, as the analytic
 * model has one set of factors per backend family.
 */
import { KvrError } from '@kvrouter/protocols';

export interface BackendSpec {
  id: string;
  /** Fraction of tensor-core peak reached by the large prefill GEMMs. */
  gemmEff: number;
  /** Fraction of BF16 peak reached by prefill attention (FlashAttention-class kernels). */
  attnEff: number;
  /** Fraction of memory bandwidth reached when streaming weights and KV. */
  memEff: number;
  /** Fraction of link bandwidth reached by NCCL-class all-reduce / all-to-all. */
  linkEff: number;
  /** Fixed cost of one prefill step: scheduling, launches, sampling of the first token, ms. */
  overheadMs: number;
  defaultVersion: string;
}

const be = (b: BackendSpec): BackendSpec => Object.freeze(b);

export const BACKENDS: Readonly<Record<string, BackendSpec>> = Object.freeze({
  vllm: be({
    id: 'vllm',
    gemmEff: 0.5,
    attnEff: 0.45,
    memEff: 0.75,
    linkEff: 0.7,
    overheadMs: 8,
    defaultVersion: '0.10',
  }),
  sglang: be({
    id: 'sglang',
    gemmEff: 0.55,
    attnEff: 0.5,
    memEff: 0.78,
    linkEff: 0.75,
    overheadMs: 6,
    defaultVersion: '0.5',
  }),
  trtllm: be({
    id: 'trtllm',
    gemmEff: 0.6,
    attnEff: 0.55,
    memEff: 0.8,
    linkEff: 0.8,
    overheadMs: 4,
    defaultVersion: '1.0',
  }),
});

export const BACKEND_IDS: readonly string[] = Object.freeze(Object.keys(BACKENDS));

/** `--aic-backend` value -> factors; the error names the flag and the allowed values. */
export function backendSpec(id: string): BackendSpec {
  const b = Object.hasOwn(BACKENDS, id) ? BACKENDS[id] : undefined;
  if (!b) {
    throw new KvrError(
      'invalid_argument',
      `--aic-backend: unknown backend '${id}' (choose from ${BACKEND_IDS.join(', ')})`,
      400,
      {
        flag: '--aic-backend',
      },
    );
  }
  return b;
}
