/**
 * Synthetic workloads written as Mooncake rows: sessions × turns with a growing history, shared
 * system prompts, ISL/OSL distributions and Poisson session arrivals. Everything is in trace
 * blocks (`traceBlockSize` tokens per hash id), so the output is an ordinary trace that can be
 * saved and replayed anywhere.
 *
 * Turn k's prompt is turn k−1's prompt, the previous answer and a new user message: its hash ids
 * are the previous ids plus fresh ones, and `input_length` grows by `osl(k−1) + user(k)`. Turn 1 is
 * a shared system prompt (whole trace blocks) plus the first user message. Later turns carry
 * `delay` = think time and are released by the end of the previous turn (§18).
 */
import { invalidArgument } from '@kvrouter/protocols';
import { SimRng } from './rng.js';
import { DEFAULT_TRACE_BLOCK_SIZE } from './tokens.js';
import type { TraceRow } from './trace.js';

export type Dist =
  | { kind: 'const'; value: number }
  | { kind: 'uniform'; min: number; max: number }
  | { kind: 'normal'; mean: number; std: number; min?: number; max?: number }
  | { kind: 'lognormal'; median: number; sigma: number; min?: number; max?: number }
  | { kind: 'exp'; mean: number; min?: number; max?: number };

export interface SyntheticSpec {
  /** Sessions (tasks). */
  sessions: number;
  /** Turns per session (integer draws, at least 1). */
  turns: Dist;
  /** Distinct shared system prompts, chosen uniformly per session; 0 = none. */
  systemPrompts: number;
  /** Length of each system prompt, rounded up to whole trace blocks. */
  systemPromptTokens: number;
  /** New user tokens per turn. */
  userTokens: Dist;
  /** Output tokens per turn (`output_length`). */
  outputTokens: Dist;
  /** Session arrivals per second (Poisson). */
  sessionRate: number;
  /** Think time between a turn's end and the next turn, ms. */
  thinkTimeMs: Dist;
  /** Identical requests per task (best-of-N fan-out); needs single-turn sessions. */
  samples: number;
  traceBlockSize: number;
}

export const DEFAULT_SYNTHETIC: Readonly<SyntheticSpec> = Object.freeze<SyntheticSpec>({
  sessions: 100,
  turns: { kind: 'const', value: 1 },
  systemPrompts: 0,
  systemPromptTokens: 0,
  userTokens: { kind: 'const', value: 1024 },
  outputTokens: { kind: 'const', value: 128 },
  sessionRate: 1,
  thinkTimeMs: { kind: 'const', value: 0 },
  samples: 1,
  traceBlockSize: DEFAULT_TRACE_BLOCK_SIZE,
});

/**
 * Named workloads. `multi-turn` is the documented must-show workload (README "Must-show figures");
 * `burst` is the predict-on-route case: 16 tasks × 4 samples sharing one system prompt.
 */
export const PRESETS: Readonly<Record<string, Readonly<Partial<SyntheticSpec>>>> = Object.freeze({
  'multi-turn': {
    sessions: 1368,
    turns: { kind: 'uniform', min: 10, max: 20 },
    systemPrompts: 4,
    systemPromptTokens: 8192,
    userTokens: { kind: 'lognormal', median: 4000, sigma: 0.6, min: 256, max: 16000 },
    outputTokens: { kind: 'lognormal', median: 60, sigma: 0.5, min: 8, max: 512 },
    sessionRate: 0.38,
    thinkTimeMs: { kind: 'exp', mean: 500, min: 50, max: 5000 },
  },
  burst: {
    sessions: 16,
    turns: { kind: 'const', value: 1 },
    systemPrompts: 1,
    systemPromptTokens: 4096,
    userTokens: { kind: 'const', value: 2048 },
    outputTokens: { kind: 'const', value: 128 },
    sessionRate: 40,
    samples: 4,
  },
});

function checkDist(field: string, d: Dist, min: number): void {
  const num = (k: string, v: unknown, lo = -Infinity): void => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < lo)
      throw invalidArgument(`${field}.${k}`, `must be a finite number >= ${lo}, got ${String(v)}`);
  };
  if (!d || typeof d !== 'object') throw invalidArgument(field, 'must be a distribution');
  switch (d.kind) {
    case 'const':
      num('value', d.value, min);
      break;
    case 'uniform':
      num('min', d.min, min);
      num('max', d.max, d.min);
      break;
    case 'normal':
      num('mean', d.mean);
      num('std', d.std, 0);
      break;
    case 'lognormal':
      num('median', d.median, 0);
      num('sigma', d.sigma, 0);
      break;
    case 'exp':
      num('mean', d.mean, 0);
      break;
    default:
      throw invalidArgument(field, `has unknown kind ${JSON.stringify((d as { kind: unknown }).kind)}`);
  }
  if ('min' in d && d.kind !== 'uniform' && d.min !== undefined) num('min', d.min, min);
  if ('max' in d && d.kind !== 'uniform' && d.max !== undefined) num('max', d.max, d.min ?? min);
}

/** One integer draw; always 2 uniforms per draw so streams stay aligned across kinds. */
export function sample(d: Dist, rng: SimRng, floor = 0): number {
  const u = rng.next();
  const v = rng.next();
  let x: number;
  switch (d.kind) {
    case 'const':
      x = d.value;
      break;
    case 'uniform':
      x = d.min + u * (d.max - d.min + 1);
      x = Math.min(Math.floor(x), d.max);
      break;
    case 'normal':
      x = d.mean + d.std * Math.sqrt(-2 * Math.log(1 - u)) * Math.cos(2 * Math.PI * v);
      break;
    case 'lognormal':
      x = d.median * Math.exp(d.sigma * Math.sqrt(-2 * Math.log(1 - u)) * Math.cos(2 * Math.PI * v));
      break;
    case 'exp':
      x = -Math.log(1 - u) * d.mean;
      break;
  }
  if (d.kind !== 'const' && d.kind !== 'uniform') {
    if (d.min !== undefined) x = Math.max(d.min, x);
    if (d.max !== undefined) x = Math.min(d.max, x);
  }
  return Math.max(floor, Math.round(x));
}

/** `const:N`, `uniform:A:B`, `normal:MEAN:STD[:MIN:MAX]`, `lognormal:MEDIAN:SIGMA[:MIN:MAX]`, `exp:MEAN[:MIN:MAX]`, or a bare number. */
export function parseDist(text: string, field = 'distribution'): Dist {
  const parts = text.trim().split(':');
  const nums = parts.slice(1).map(Number);
  const need = (k: number, opt = 0): void => {
    if (nums.length < k || nums.length > k + opt || nums.some((x) => !Number.isFinite(x))) {
      throw invalidArgument(
        field,
        `cannot parse ${JSON.stringify(text)} (expected ${parts[0]} with ${k}${opt ? `..${k + opt}` : ''} numbers)`,
      );
    }
  };
  let d: Dist;
  const kind = parts[0]!;
  if (parts.length === 1 && kind !== '' && Number.isFinite(Number(kind))) {
    d = { kind: 'const', value: Number(kind) };
  } else if (kind === 'const') {
    need(1);
    d = { kind, value: nums[0]! };
  } else if (kind === 'uniform') {
    need(2);
    d = { kind, min: nums[0]!, max: nums[1]! };
  } else if (kind === 'normal') {
    need(2, 2);
    d = { kind, mean: nums[0]!, std: nums[1]!, min: nums[2], max: nums[3] };
  } else if (kind === 'lognormal') {
    need(2, 2);
    d = { kind, median: nums[0]!, sigma: nums[1]!, min: nums[2], max: nums[3] };
  } else if (kind === 'exp') {
    need(1, 2);
    d = { kind, mean: nums[0]!, min: nums[1], max: nums[2] };
  } else {
    throw invalidArgument(
      field,
      `has unknown distribution ${JSON.stringify(text)} (const, uniform, normal, lognormal, exp)`,
    );
  }
  if (d.kind !== 'const' && d.kind !== 'uniform') {
    if (d.min === undefined) delete d.min;
    if (d.max === undefined) delete d.max;
  }
  checkDist(field, d, -Infinity);
  return d;
}

export function resolveSynthetic(partial: Partial<SyntheticSpec> = {}): SyntheticSpec {
  const s: SyntheticSpec = { ...DEFAULT_SYNTHETIC, ...partial };
  const int = (field: keyof SyntheticSpec, lo: number): void => {
    const v = s[field];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < lo)
      throw invalidArgument(field, `must be an integer >= ${lo}, got ${JSON.stringify(v)}`);
  };
  int('sessions', 1);
  int('systemPrompts', 0);
  int('systemPromptTokens', 0);
  int('samples', 1);
  int('traceBlockSize', 1);
  if (!(s.sessionRate > 0) || !Number.isFinite(s.sessionRate))
    throw invalidArgument('sessionRate', `must be a finite number > 0, got ${s.sessionRate}`);
  checkDist('turns', s.turns, 1);
  checkDist('userTokens', s.userTokens, 1);
  checkDist('outputTokens', s.outputTokens, 1);
  checkDist('thinkTimeMs', s.thinkTimeMs, 0);
  if (s.samples > 1 && !(s.turns.kind === 'const' && s.turns.value === 1)) {
    throw invalidArgument('samples', 'above 1 needs single-turn sessions (turns const:1)');
  }
  if (s.systemPrompts > 0 && s.systemPromptTokens === 0)
    throw invalidArgument('systemPromptTokens', 'must be > 0 when systemPrompts > 0');
  return s;
}

/**
 * Generates the rows, ordered by timestamp (ties: session order). Hash ids: system prompts take
 * 0.., sessions draw fresh ids after them, so ids never collide across sessions.
 */
export function generateSynthetic(partial: Partial<SyntheticSpec>, seed: number): TraceRow[] {
  const s = resolveSynthetic(partial);
  const rng = SimRng.stream(seed, 1);
  const tbs = s.traceBlockSize;
  const sysBlocks = Math.ceil(s.systemPromptTokens / tbs);
  let nextId = s.systemPrompts * sysBlocks;
  const rows: Omit<TraceRow, 'index'>[] = [];
  let t = 0;
  for (let sess = 0; sess < s.sessions; sess++) {
    t += rng.exp(1000 / s.sessionRate);
    const sys = s.systemPrompts > 0 ? rng.int(0, s.systemPrompts - 1) : -1;
    const turns = sample(s.turns, rng, 1);
    const ids: number[] = [];
    if (sys >= 0) for (let b = 0; b < sysBlocks; b++) ids.push(sys * sysBlocks + b);
    let len = ids.length * tbs;
    let ts = Math.round(t);
    let prevOsl = 0;
    for (let k = 0; k < turns; k++) {
      len += prevOsl + sample(s.userTokens, rng, 1);
      while (ids.length * tbs < len) ids.push(nextId++);
      const osl = sample(s.outputTokens, rng, 1);
      const think = k > 0 ? sample(s.thinkTimeMs, rng, 0) : 0;
      ts += think;
      for (let j = 0; j < s.samples; j++) {
        const row: Omit<TraceRow, 'index'> = {
          timestamp: ts,
          input_length: len,
          output_length: osl,
          hash_ids: ids.slice(),
        };
        if (turns > 1) {
          row.session_id = `s${sess}`;
          if (k > 0) row.delay = think;
        }
        rows.push(row);
      }
      prevOsl = osl;
    }
  }
  // Stable sort by timestamp keeps each session's turns in order (their timestamps increase).
  const order = rows.map((_, i) => i).sort((a, b) => rows[a]!.timestamp - rows[b]!.timestamp || a - b);
  return order.map((i, index) => ({ ...rows[i]!, index }));
}
