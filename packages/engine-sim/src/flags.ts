/**
 * Engine-model flags shared by the mocker and `pnpm replay` (PROTOCOL §17), so both give the same
 * messages: `--reasoning` JSON and `--planner-profile-data` files. This package is pure: the caller
 * reads files and supplies `fail(message, flag)`, which throws the caller's own error type.
 */
import type { ReasoningConfig } from './config.js';
import type { InflateRaw } from './npz.js';
import { parsePlannerProfile, parsePlannerProfileNpz, profileTiming } from './timing-profile.js';
import type { TimingModel } from './timing.js';

export type FlagFail = (message: string, flag: string) => never;

/** `--reasoning` as upstream spells it: `{"start_thinking_token_id", "end_thinking_token_id", "thinking_ratio"}`. */
export function reasoningFromFlag(v: unknown, fail: FlagFail): ReasoningConfig | null {
  if (v === null || v === undefined) return null;
  const bad = (m: string): never => fail(`--reasoning: ${m}`, '--reasoning');
  if (typeof v !== 'object' || Array.isArray(v)) bad('expected a JSON object');
  const o = v as Record<string, unknown>;
  const keys = ['start_thinking_token_id', 'end_thinking_token_id', 'thinking_ratio'];
  for (const k of Object.keys(o))
    if (!keys.includes(k)) bad(`unknown field ${k} (expected ${keys.join(', ')})`);
  const id = (k: string): number => {
    const x = o[k];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 0xffffffff)
      bad(`${k}: expected a token id (u32), got ${JSON.stringify(x)}`);
    return x as number;
  };
  const start = id('start_thinking_token_id');
  const end = id('end_thinking_token_id');
  if (start === end) bad('start_thinking_token_id and end_thinking_token_id must differ');
  const r = o.thinking_ratio;
  if (typeof r !== 'number' || !(r >= 0 && r <= 1))
    bad(`thinking_ratio: expected a number in [0, 1], got ${JSON.stringify(r)}`);
  return { startThinkingTokenId: start, endThinkingTokenId: end, thinkingRatio: r as number };
}

/** A profile file's content: text for `.json`, bytes for `.npz` (`binary`), null when unreadable. */
export type ProfileRead = (path: string, binary: boolean) => string | Uint8Array | null;

/** `--planner-profile-data PATH` → the pass-time model; every problem names the flag and the file. */
export function profileTimingFromFlag(
  path: string,
  read: ProfileRead,
  totalKvTokens: number,
  fail: FlagFail,
  inflateRaw?: InflateRaw,
): TimingModel {
  const content = read(path, /\.npz$/i.test(path));
  if (content === null)
    return fail(`--planner-profile-data ${path}: cannot read the file`, '--planner-profile-data');
  let timing: TimingModel;
  try {
    const profile =
      typeof content === 'string'
        ? parsePlannerProfile(content, path)
        : parsePlannerProfileNpz(content, path, inflateRaw);
    timing = profileTiming(profile, totalKvTokens);
  } catch (e) {
    return fail(e instanceof Error ? e.message : String(e), '--planner-profile-data');
  }
  return timing;
}
