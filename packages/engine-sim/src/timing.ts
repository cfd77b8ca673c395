/**
 * Pass timing (docs/protocol.md §17 step 3). A model is pluggable so profiler-data interpolation or an AIC
 * predictor can replace the polynomials without the scheduler knowing.
 */
export interface TimingModel {
  /** ms to compute `x` > 0 new prompt tokens in one pass. */
  prefillMs(x: number): number;
  /** ms of one decode step at KV occupancy `u` = active / total (0..1). */
  decodeMs(u: number): number;
  /** When present, used instead of `decodeMs` with the whole decode batch's shape (profile tables need it). */
  decodeStepMs?(s: DecodeShape): number;
}

/** The decode part of a pass, for models that depend on more than KV occupancy. */
export interface DecodeShape {
  /** Active KV / total KV (0..1), as for `decodeMs`. */
  kvUsage: number;
  /** Requests decoding one token in the pass. */
  batch: number;
  /** Sum of their context lengths (tokens already in the sequence), upstream's "active KV tokens". */
  contextTokens: number;
}

export const POLYNOMIAL_TIMING: TimingModel = {
  prefillMs: (x) => 4.209989e-7 * x * x + 1.518344e-2 * x + 16.50142,
  decodeMs: (u) => Math.max(1, -25.74 * u * u + 54.01 * u + 5.74),
};

/**
 * Whole pass: prefill part only when prompt tokens were computed, decode part only when some request
 * decoded (`decode.batch` > 0), divided by the decode speedup; the decode part is `decodeStepMs(decode)`
 * when the model has it, else `decodeMs(decode.kvUsage)`.
 */
export function passDurationMs(
  model: TimingModel,
  prefillTokens: number,
  decode: DecodeShape,
  speedupRatio: number,
  decodeSpeedupRatio: number,
): number {
  let t = 0;
  if (prefillTokens > 0) t += model.prefillMs(prefillTokens);
  if (decode.batch > 0)
    t +=
      (model.decodeStepMs ? model.decodeStepMs(decode) : model.decodeMs(decode.kvUsage)) / decodeSpeedupRatio;
  return t / speedupRatio;
}
