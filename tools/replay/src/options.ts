/**
 * The tool's own options: engines (the mocker's flag names, engine-sim defaults), the simulation,
 * the trace and the synthetic generator. Each parser names the flag it rejects.
 */
import { DEFAULT_ENGINE_CONFIG, type EngineConfig } from '@kvrouter/engine-sim';
import { KvrError } from '@kvrouter/protocols';
import { DEFAULT_SIM_CONFIG, PRESETS, parseDist, type SimConfig, type SyntheticSpec } from '@kvrouter/sim';
import { Option, type Command } from 'commander';

const bad = (flag: string, msg: string): KvrError => new KvrError('invalid_argument', `${flag}: ${msg}`, 400, { flag });

export function intArg(flag: string, min: number, max = Number.MAX_SAFE_INTEGER) {
  return (v: string): number => {
    const n = Number(v);
    if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min || n > max) throw bad(flag, `expected an integer in [${min}, ${max}], got ${v}`);
    return n;
  };
}

export function numArg(flag: string, min: number, open = false) {
  return (v: string): number => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < min || (open && n === min)) throw bad(flag, `expected a number ${open ? '>' : '>='} ${min}, got ${v}`);
    return n;
  };
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
  opt('--num-workers <n>', 'simulated workers', intArg('--num-workers', 1, 4096), DEFAULT_SIM_CONFIG.numWorkers);
  opt('--block-size <n>', 'KV block size in tokens', intArg('--block-size', 1, 1 << 16), d.blockSize);
  opt('--num-gpu-blocks-override <n>', 'KV capacity per rank in blocks', intArg('--num-gpu-blocks-override', 1, 1 << 28), d.numGpuBlocks);
  opt('--max-num-batched-tokens <n>', 'token budget of one scheduler pass', intArg('--max-num-batched-tokens', 1, 1 << 30), d.maxNumBatchedTokens);
  opt('--max-num-seqs <n>', 'running requests per rank', intArg('--max-num-seqs', 1, 1 << 20), d.maxNumSeqs);
  opt('--speedup-ratio <x>', 'divides every pass time', numArg('--speedup-ratio', 0, true), d.speedupRatio);
  opt('--decode-speedup-ratio <x>', 'further divides decode time', numArg('--decode-speedup-ratio', 0, true), d.decodeSpeedupRatio);
  opt('--data-parallel-size <n>', 'ranks per worker', intArg('--data-parallel-size', 1, 1024), d.dataParallelSize);
  opt('--preemption-mode <mode>', 'lifo | fifo', (v) => {
    if (v !== 'lifo' && v !== 'fifo') throw bad('--preemption-mode', `expected lifo or fifo, got ${v}`);
    return v;
  }, d.preemptionMode);
  opt('--no-enable-prefix-caching', 'turn the prefix cache (and KV events) off');
  opt('--no-enable-chunked-prefill', 'turn chunked prefill off');
  return cmd;
}

export function addSimOptions(cmd: Command): Command {
  const g = 'Simulation:';
  const opt = (o: Option) => cmd.addOption(o.helpGroup(g));
  opt(new Option('--seed <n>', 'seed of the router, engines and generator').argParser(intArg('--seed', 0, 0xffffffff)).default(0));
  opt(new Option('--event-delay-ms <ms>', 'engine -> router delay of KV events and loads').argParser(numArg('--event-delay-ms', 0)).default(0));
  opt(new Option('--dispatch-delay-ms <ms>', 'router -> engine delay of a request').argParser(numArg('--dispatch-delay-ms', 0)).default(0));
  opt(new Option('--trace-block-size <n>', 'tokens per trace hash id (§18)').argParser(intArg('--trace-block-size', 1, 1 << 20)).default(512));
  opt(new Option('--arrival-speedup-ratio <x>', 'divides trace timestamps and delays').argParser(numArg('--arrival-speedup-ratio', 0, true)).default(1));
  opt(new Option('--strict', 'abort on the first malformed trace row instead of skipping it'));
  opt(new Option('--report-json <file>', 'write the JSON report here'));
  opt(new Option('--no-oracle', 'skip the oracle bounds (pooled LRU, infinite cache)'));
  opt(new Option('--no-progress', 'no progress bar'));
  return cmd;
}

export function addSyntheticOptions(cmd: Command): Command {
  const g = 'Synthetic workload (instead of a trace file):';
  const opt = (o: Option) => cmd.addOption(o.helpGroup(g));
  opt(new Option('--synthetic <preset>', `generate the workload; presets: ${Object.keys(PRESETS).join(', ')}, or "custom"`));
  opt(new Option('--sessions <n>', 'sessions (tasks)').argParser(intArg('--sessions', 1)));
  opt(new Option('--session-rate <per-s>', 'Poisson session arrivals per second').argParser(numArg('--session-rate', 0, true)));
  opt(new Option('--duration-s <s>', 'sessions = session rate × this (instead of --sessions)').argParser(numArg('--duration-s', 0, true)));
  opt(new Option('--turns <dist>', 'turns per session, e.g. uniform:4:8'));
  opt(new Option('--system-prompts <n>', 'distinct shared system prompts').argParser(intArg('--system-prompts', 0)));
  opt(new Option('--system-prompt-tokens <n>', 'system prompt length').argParser(intArg('--system-prompt-tokens', 0)));
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

/** The synthetic spec from a preset (or `custom` = generator defaults) plus explicit overrides. */
export function syntheticSpecOf(o: SyntheticOpts, traceBlockSize: number): Partial<SyntheticSpec> {
  const name = o.synthetic!;
  if (name !== 'custom' && !(name in PRESETS)) {
    throw bad('--synthetic', `unknown preset ${name} (${[...Object.keys(PRESETS), 'custom'].join(', ')})`);
  }
  const spec: Partial<SyntheticSpec> = { ...(name === 'custom' ? {} : PRESETS[name]), traceBlockSize };
  if (o.sessionRate !== undefined) spec.sessionRate = o.sessionRate;
  if (o.sessions !== undefined) spec.sessions = o.sessions;
  if (o.durationS !== undefined) {
    if (o.sessions !== undefined) throw bad('--duration-s', 'give either --sessions or --duration-s');
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
