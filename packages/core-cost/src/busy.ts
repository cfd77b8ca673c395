/**
 * Busy predicates and admission control (docs/protocol.md §11). A rank is busy on prefill pressure or
 * while its decode latch is set; a worker is busy only when all its ranks are.
 */
import { KvrError } from '@kvrouter/protocols';
import { invalid } from './validate.js';

export const ADMISSION_CONTROL_MODES = ['none', 'token-capacity'] as const;
export type AdmissionControl = (typeof ADMISSION_CONTROL_MODES)[number];

/** Each threshold is optional; null = that check is skipped. */
export interface BusyThresholds {
  /** Fraction 0..1 of `total_kv_blocks` (`--active-decode-blocks-threshold`). */
  activeDecodeBlocks: number | null;
  /** Absolute tokens (`--active-prefill-tokens-threshold`). */
  activePrefillTokens: number | null;
  /** Multiple of `max_num_batched_tokens` (`--active-prefill-tokens-threshold-frac`). */
  activePrefillTokensFrac: number | null;
}

export const DEFAULT_BUSY_THRESHOLDS: Readonly<BusyThresholds> = Object.freeze({
  activeDecodeBlocks: 1.0,
  activePrefillTokens: 10_000_000,
  activePrefillTokensFrac: 64.0,
});

export const NO_BUSY_THRESHOLDS: Readonly<BusyThresholds> = Object.freeze({
  activeDecodeBlocks: null,
  activePrefillTokens: null,
  activePrefillTokensFrac: null,
});

/** Range checks with the docs/configuration.md messages (status 400, `detail.field` = the flag). */
export function validateBusyThresholds(t: BusyThresholds): BusyThresholds {
  const d = t.activeDecodeBlocks;
  if (d !== null && !(typeof d === 'number' && d >= 0 && d <= 1))
    throw invalid('--active-decode-blocks-threshold', 'must be between 0.0 and 1.0', d);
  for (const [flag, v] of [
    ['--active-prefill-tokens-threshold', t.activePrefillTokens],
    ['--active-prefill-tokens-threshold-frac', t.activePrefillTokensFrac],
  ] as const) {
    if (v !== null && !(typeof v === 'number' && v >= 0 && Number.isFinite(v)))
      throw invalid(flag, 'must be >= 0', v);
  }
  return t;
}

/** `none` clears every threshold; `token-capacity` applies them. */
export function effectiveBusyThresholds(mode: AdmissionControl, t: BusyThresholds): BusyThresholds {
  if (!ADMISSION_CONTROL_MODES.includes(mode))
    throw new KvrError(
      'invalid_argument',
      `--admission-control must be one of ('token-capacity', 'none'), got '${String(mode)}'`,
      400,
      { field: '--admission-control' },
    );
  return mode === 'none' ? NO_BUSY_THRESHOLDS : t;
}

/**
 * §11 promotion: mode `none` with any threshold explicitly given (CLI or env) as a value other than
 * None becomes `token-capacity`; the caller logs when `promoted`.
 */
export function promoteAdmissionControl(
  mode: AdmissionControl,
  explicitNonNullThresholdGiven: boolean,
): { mode: AdmissionControl; promoted: boolean } {
  return mode === 'none' && explicitNonNullThresholdGiven
    ? { mode: 'token-capacity', promoted: true }
    : { mode, promoted: false };
}

export interface RankCapacity {
  /** From the runtime config; null = unknown, decode check skipped. */
  totalKvBlocks: number | null;
  maxNumBatchedTokens: number;
}

/** One `ActiveLoad` (§5.5) as numbers; null/absent fields keep the previous value. */
export interface LoadSignals {
  active_decode_blocks?: number | null;
  active_prefill_tokens?: number | null;
  kv_used_blocks?: number | null;
}

/**
 * The decode latch. Router-published `active_decode_blocks` and worker-published `kv_used_blocks`
 * arrive separately; the latch keeps the latest of each, sets when either is over
 * `t × total_kv_blocks`, and clears only once both are back at or under. So a fresh low reading
 * of one signal cannot clear a latch the other still holds.
 */
export class DecodeLatch {
  set = false;
  lastDecodeBlocks: number | null = null;
  lastKvUsedBlocks: number | null = null;

  observe(decodeBlocks: number | null | undefined, kvUsedBlocks: number | null | undefined): void {
    if (decodeBlocks != null) checkCount('active_decode_blocks', decodeBlocks);
    if (kvUsedBlocks != null) checkCount('kv_used_blocks', kvUsedBlocks);
    if (decodeBlocks != null) this.lastDecodeBlocks = decodeBlocks;
    if (kvUsedBlocks != null) this.lastKvUsedBlocks = kvUsedBlocks;
  }

  /** Updates and returns the latch; false (check skipped) without a threshold or a block total. */
  evaluate(threshold: number | null, totalKvBlocks: number | null): boolean {
    if (threshold === null || totalKvBlocks === null) return false;
    const limit = threshold * totalKvBlocks;
    const d = this.lastDecodeBlocks;
    const k = this.lastKvUsedBlocks;
    this.set = (d !== null && d > limit) || (k !== null && k > limit);
    return this.set;
  }
}

function checkCount(field: string, v: number): number {
  if (typeof v !== 'number' || !(v >= 0)) throw invalid(field, 'must be a number >= 0', v);
  return v;
}

/** Latest load signals of one rank and its busy verdict. */
export class RankBusyState {
  activePrefillTokens: number | null = null;
  readonly latch = new DecodeLatch();

  observe(s: LoadSignals): void {
    const p = s.active_prefill_tokens;
    if (p != null) checkCount('active_prefill_tokens', p);
    // Both latch signals are checked inside before either is stored.
    this.latch.observe(s.active_decode_blocks, s.kv_used_blocks);
    if (p != null) this.activePrefillTokens = p;
  }

  /** Busy iff prefill > a, or prefill > f × max_num_batched_tokens, or the decode latch is set. */
  isBusy(t: BusyThresholds, cap: RankCapacity): boolean {
    const latched = this.latch.evaluate(t.activeDecodeBlocks, cap.totalKvBlocks);
    const p = this.activePrefillTokens;
    if (p !== null) {
      if (t.activePrefillTokens !== null && p > t.activePrefillTokens) return true;
      if (t.activePrefillTokensFrac !== null && p > t.activePrefillTokensFrac * cap.maxNumBatchedTokens)
        return true;
    }
    return latched;
  }
}

/** A worker is busy only if it has ranks and all of them are busy. */
export function isWorkerBusy(rankBusy: ArrayLike<boolean>): boolean {
  if (rankBusy.length === 0) return false;
  for (let i = 0; i < rankBusy.length; i++) if (!rankBusy[i]) return false;
  return true;
}
