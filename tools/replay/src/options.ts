/**
 * The tool's own options: engines (the mocker's flag names, engine-sim defaults), the simulation,
 * the trace and the synthetic generator. Each parser names the flag it rejects.
 */
import { checkValue, flagsFor } from '@kvrouter/config';
import {
  DEFAULT_ENGINE_CONFIG,
  reasoningFromFlag,
  type EngineConfig,
  type EngineType,
  type ReasoningConfig,
} from '@kvrouter/engine-sim';
import { KvrError, invalidArgument } from '@kvrouter/protocols';
import { DEFAULT_SIM_CONFIG, PRESETS, parseDist, type SimConfig, type SyntheticSpec } from '@kvrouter/sim';
import { Option, type Command } from 'commander';

const bad = invalidArgument;

export function intArg(flag: string, min: number, max = Number.MAX_SAFE_INTEGER) {
  return (v: string): number => {
    const n = Number(v);
    if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min || n > max)
      throw bad(flag, `must be an integer in [${min}, ${max}], got ${v}`);
    return n;
  };
}

function numArg(flag: string, min: number, open = false) {
  return (v: string): number => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < min || (open && n === min))
      throw bad(flag, `must be a number ${open ? '>' : '>='} ${min}, got ${v}`);
    return n;
  };
}

/**
 * A parser that checks the value against the mocker's row of the config table, so a bad value gets
 * exactly the mocker's message (`argument --engine-type: invalid choice: ...`).
 */
function mockerArg<T>(flag: string, convert: (v: string) => T) {
  const spec = flagsFor('mocker').find((s) => s.flag === flag);
  if (!spec) throw new Error(`the config table has no mocker flag ${flag}`);
  return (v: string): T => {
    const msg = checkValue(spec, v);
    if (msg !== undefined) throw new KvrError('invalid_argument', msg, undefined, { field: flag });
    return convert(v);
  };
}

/** engine-sim's own cap on the budget (the table's u32 allows more); named here so the error names the flag. */
const MAX_SGLANG_PREFILL_TOKENS = 1 << 30;

/** `--reasoning` as upstream spells it, with the mocker's messages (engine-sim's shared check). */
function reasoningOf(v: unknown): ReasoningConfig | null {
  return reasoningFromFlag(v, (message, flag) => {
    throw new KvrError('invalid_argument', message, undefined, { field: flag });
  });
}

export function addEngineOptions(cmd: Command): Command {
  const g = 'Engines (engine-sim, mocker flag names):';
  const d = DEFAULT_ENGINE_CONFIG;
  const opt = (flags: string, help: string, parse?: (v: string) => unknown, def?: unknown) => {
    const o = new Option(flags, help).helpGroup(g);
    if (parse) o.argParser(parse);
    if (def !== undefined) o.default(def);
    cmd.addOption(o);
  };
  opt(
    '--num-workers <n>',
    'simulated workers',
    intArg('--num-workers', 1, 4096),
    DEFAULT_SIM_CONFIG.numWorkers,
  );
  opt('--block-size <n>', 'KV block size in tokens', intArg('--block-size', 1, 1 << 16), d.blockSize);
  opt(
    '--num-gpu-blocks-override <n>',
    'KV capacity per rank in blocks',
    intArg('--num-gpu-blocks-override', 1, 1 << 28),
    d.numGpuBlocks,
  );
  opt(
    '--max-num-batched-tokens <n>',
    'token budget of one scheduler pass',
    intArg('--max-num-batched-tokens', 1, 1 << 30),
    d.maxNumBatchedTokens,
  );
  opt('--max-num-seqs <n>', 'running requests per rank', intArg('--max-num-seqs', 1, 1 << 20), d.maxNumSeqs);
  opt('--speedup-ratio <x>', 'divides every pass time', numArg('--speedup-ratio', 0, true), d.speedupRatio);
  opt(
    '--decode-speedup-ratio <x>',
    'further divides decode time',
    numArg('--decode-speedup-ratio', 0, true),
    d.decodeSpeedupRatio,
  );
  opt(
    '--data-parallel-size <n>',
    'ranks per worker',
    intArg('--data-parallel-size', 1, 1024),
    d.dataParallelSize,
  );
  opt(
    '--preemption-mode <mode>',
    'lifo | fifo',
    (v) => {
      if (v !== 'lifo' && v !== 'fifo') throw bad('--preemption-mode', `must be lifo or fifo, got ${v}`);
      return v;
    },
    d.preemptionMode,
  );
  opt('--no-enable-prefix-caching', 'turn the prefix cache (and KV events) off');
  opt('--no-enable-chunked-prefill', 'turn chunked prefill off');
  opt(
    '--engine-type <type>',
    'scheduler flavour: vllm | sglang',
    mockerArg('--engine-type', (v) => v.trim() as EngineType),
    d.engineType,
  );
  opt(
    '--sglang-max-prefill-tokens <n>',
    'sglang flavour: prefill token budget of one pass',
    mockerArg('--sglang-max-prefill-tokens', (v) => {
      const n = Number(BigInt(v.trim()));
      if (n > MAX_SGLANG_PREFILL_TOKENS)
        throw bad(
          '--sglang-max-prefill-tokens',
          `must be at most ${MAX_SGLANG_PREFILL_TOKENS} tokens, got ${n}`,
        );
      return n;
    }),
    d.sglangMaxPrefillTokens,
  );
  opt(
    '--reasoning <json>',
    'reasoning-token output, JSON {"start_thinking_token_id":N,"end_thinking_token_id":M,"thinking_ratio":R}',
    mockerArg('--reasoning', (v) => reasoningOf(JSON.parse(v))),
  );
  opt(
    '--planner-profile-data <file>',
    'pass times interpolated from profiled data (JSON of the arrays, or upstream .npz)',
    mockerArg('--planner-profile-data', (v) => v),
  );
  opt(
    '--aic-perf-model',
    'pass times from the AIC model: backend --engine-type, system --aic-system (default h200_sxm), model --model-path',
  );
  opt(
    '--model-path <path>',
    'with --aic-perf-model: model directory (its config.json), a config.json, or a built-in model id',
    mockerArg('--model-path', (v) => v),
  );
  return cmd;
}

export function addSimOptions(cmd: Command): Command {
  const g = 'Simulation:';
  const opt = (o: Option) => cmd.addOption(o.helpGroup(g));
  opt(
    new Option('--seed <n>', 'seed of the router, engines and generator')
      .argParser(intArg('--seed', 0, 0xffffffff))
      .default(0),
  );
  opt(
    new Option('--event-delay-ms <ms>', 'engine -> router delay of KV events and loads')
      .argParser(numArg('--event-delay-ms', 0))
      .default(0),
  );
  opt(
    new Option('--dispatch-delay-ms <ms>', 'router -> engine delay of a request')
      .argParser(numArg('--dispatch-delay-ms', 0))
      .default(0),
  );
  opt(
    new Option('--trace-block-size <n>', 'tokens per trace hash id (§18)')
      .argParser(intArg('--trace-block-size', 1, 1 << 20))
      .default(512),
  );
  opt(
    new Option('--arrival-speedup-ratio <x>', 'divides trace timestamps and delays')
      .argParser(numArg('--arrival-speedup-ratio', 0, true))
      .default(1),
  );
  opt(new Option('--strict', 'abort on the first malformed trace row instead of skipping it'));
  opt(new Option('--report-json <file>', 'write the JSON report here'));
  opt(new Option('--no-oracle', 'skip the oracle bounds (pooled LRU, infinite cache)'));
  opt(new Option('--no-progress', 'no progress bar'));
  return cmd;
}

export function addSyntheticOptions(cmd: Command): Command {
  const g = 'Synthetic workload (instead of a trace file):';
  const opt = (o: Option) => cmd.addOption(o.helpGroup(g));
  opt(
    new Option(
      '--synthetic <preset>',
      `generate the workload; presets: ${Object.keys(PRESETS).join(', ')}, or "custom"`,
    ),
  );
  opt(new Option('--sessions <n>', 'sessions (tasks)').argParser(intArg('--sessions', 1)));
  opt(
    new Option('--session-rate <per-s>', 'Poisson session arrivals per second').argParser(
      numArg('--session-rate', 0, true),
    ),
  );
  opt(
    new Option('--duration-s <s>', 'sessions = session rate × this (instead of --sessions)').argParser(
      numArg('--duration-s', 0, true),
    ),
  );
  opt(new Option('--turns <dist>', 'turns per session, e.g. uniform:4:8'));
  opt(
    new Option('--system-prompts <n>', 'distinct shared system prompts').argParser(
      intArg('--system-prompts', 0),
    ),
  );
  opt(
    new Option('--system-prompt-tokens <n>', 'system prompt length').argParser(
      intArg('--system-prompt-tokens', 0),
    ),
  );
  opt(new Option('--user-tokens <dist>', 'new user tokens per turn, e.g. lognormal:1200:0.5:128:6000'));
  opt(new Option('--output-tokens <dist>', 'output tokens per turn'));
  opt(new Option('--think-time-ms <dist>', 'pause between a turn and the next, e.g. exp:500:50:5000'));
  opt(new Option('--samples <n>', 'identical requests per task (fan-out)').argParser(intArg('--samples', 1)));
  return cmd;
}

export interface EngineOpts {
  numWorkers: number;
  blockSize: number;
  numGpuBlocksOverride: number;
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  speedupRatio: number;
  decodeSpeedupRatio: number;
  dataParallelSize: number;
  preemptionMode: 'lifo' | 'fifo';
  enablePrefixCaching: boolean;
  enableChunkedPrefill: boolean;
  engineType: EngineType;
  sglangMaxPrefillTokens: number;
  reasoning?: ReasoningConfig | null;
  plannerProfileData?: string;
  aicPerfModel?: boolean;
  modelPath?: string;
}

export interface SimOpts {
  seed: number;
  eventDelayMs: number;
  dispatchDelayMs: number;
  traceBlockSize: number;
  arrivalSpeedupRatio: number;
  strict?: boolean;
  reportJson?: string;
  oracle: boolean;
  progress: boolean;
}

export interface SyntheticOpts {
  synthetic?: string;
  sessions?: number;
  sessionRate?: number;
  durationS?: number;
  turns?: string;
  systemPrompts?: number;
  systemPromptTokens?: number;
  userTokens?: string;
  outputTokens?: string;
  thinkTimeMs?: string;
  samples?: number;
}

export function simConfigOf(o: EngineOpts & SimOpts): SimConfig {
  const engine: Partial<Omit<EngineConfig, 'seed'>> = {
    blockSize: o.blockSize,
    numGpuBlocks: o.numGpuBlocksOverride,
    maxNumBatchedTokens: o.maxNumBatchedTokens,
    maxNumSeqs: o.maxNumSeqs,
    speedupRatio: o.speedupRatio,
    decodeSpeedupRatio: o.decodeSpeedupRatio,
    dataParallelSize: o.dataParallelSize,
    preemptionMode: o.preemptionMode,
    enablePrefixCaching: o.enablePrefixCaching,
    enableChunkedPrefill: o.enableChunkedPrefill,
    engineType: o.engineType,
    sglangMaxPrefillTokens: o.sglangMaxPrefillTokens,
    reasoning: o.reasoning ?? null,
  };
  return {
    numWorkers: o.numWorkers,
    engine,
    traceBlockSize: o.traceBlockSize,
    arrivalSpeedupRatio: o.arrivalSpeedupRatio,
    seed: o.seed,
    eventDelayMs: o.eventDelayMs,
    dispatchDelayMs: o.dispatchDelayMs,
  };
}

/** Where the engines' pass times come from (the mocker's `TimingPlan`); run.ts builds the model, reading files. */
export type EngineTimingPlan =
  | { kind: 'polynomial' }
  | { kind: 'profile'; path: string }
  | { kind: 'aic'; backend: EngineType; system: string; model: string };

/** Upstream's default `--aic-system` for the mocker's AIC perf model. */
const DEFAULT_AIC_SYSTEM = 'h200_sxm';

/**
 * The mocker's rules: the two timing sources exclude each other, AIC without a system models
 * h200_sxm (warned). `aicSystem` is the router table's `--aic-system`: in a replay the same flag
 * names the hardware of the router's AIC predictor and of the engines.
 */
export function engineTimingPlanOf(
  o: Pick<EngineOpts, 'engineType' | 'plannerProfileData' | 'aicPerfModel' | 'modelPath'>,
  aicSystem: string | null,
  warnings: string[],
): EngineTimingPlan {
  if (o.aicPerfModel === true && o.plannerProfileData !== undefined) {
    throw new KvrError(
      'invalid_argument',
      '--aic-perf-model and --planner-profile-data both set pass times; choose one',
      400,
      { flag: '--aic-perf-model' },
    );
  }
  if (o.plannerProfileData !== undefined) return { kind: 'profile', path: o.plannerProfileData };
  if (o.aicPerfModel !== true) return { kind: 'polynomial' };
  // The mocker requires --model-path anyway; here it is needed only for this model.
  if (o.modelPath === undefined)
    throw new KvrError(
      'invalid_argument',
      '--aic-perf-model needs --model-path (a model directory, a config.json or a built-in model id)',
      400,
      { flag: '--model-path' },
    );
  if (aicSystem === null)
    warnings.push(`--aic-perf-model without --aic-system: modelling ${DEFAULT_AIC_SYSTEM}`);
  return { kind: 'aic', backend: o.engineType, system: aicSystem ?? DEFAULT_AIC_SYSTEM, model: o.modelPath };
}

/** The synthetic spec from a preset (or `custom` = generator defaults) plus explicit overrides. */
export function syntheticSpecOf(o: SyntheticOpts, traceBlockSize: number): Partial<SyntheticSpec> {
  const name = o.synthetic!;
  if (name !== 'custom' && !(name in PRESETS)) {
    throw bad(
      '--synthetic',
      `names no known preset: ${name} (${[...Object.keys(PRESETS), 'custom'].join(', ')})`,
    );
  }
  const spec: Partial<SyntheticSpec> = { ...(name === 'custom' ? {} : PRESETS[name]), traceBlockSize };
  if (o.sessionRate !== undefined) spec.sessionRate = o.sessionRate;
  if (o.sessions !== undefined) spec.sessions = o.sessions;
  if (o.durationS !== undefined) {
    if (o.sessions !== undefined) throw bad('--duration-s', 'cannot be combined with --sessions (give one)');
    spec.sessions = Math.max(1, Math.round((spec.sessionRate ?? 1) * o.durationS));
  }
  if (o.turns !== undefined) spec.turns = parseDist(o.turns, '--turns');
  if (o.systemPrompts !== undefined) spec.systemPrompts = o.systemPrompts;
  if (o.systemPromptTokens !== undefined) spec.systemPromptTokens = o.systemPromptTokens;
  if (o.userTokens !== undefined) spec.userTokens = parseDist(o.userTokens, '--user-tokens');
  if (o.outputTokens !== undefined) spec.outputTokens = parseDist(o.outputTokens, '--output-tokens');
  if (o.thinkTimeMs !== undefined) spec.thinkTimeMs = parseDist(o.thinkTimeMs, '--think-time-ms');
  if (o.samples !== undefined) spec.samples = o.samples;
  return spec;
}
