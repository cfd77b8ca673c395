import { KvrError, defaultEventPlane, type DiscoveryBackendKind } from '@kvrouter/protocols';
import { displayName, flagsFor, negationOf, type App, type FlagSpec, type ResolvedConfig } from './table.js';
import { applyRoutingPresets } from './presets.js';

/** Where a resolved value came from. `derived` = set by a resolution rule (admission promotion). */
export type Source = 'cli' | 'env' | 'default' | 'preset' | 'legacy' | 'derived';

export interface Resolution<A extends App = App> {
  readonly config: ResolvedConfig<A>;
  readonly warnings: readonly string[];
  readonly sources: Readonly<Record<string, Source>>;
}

export interface ResolveOptions {
  /**
   * Filesystem check for `dir` rows that must exist (`--model-path`). The resolver is pure, so the
   * app injects it; without it that check is skipped (the cli wrapper always passes one).
   */
  isDirectory?: (path: string) => boolean;
}

/** Invalid configuration. `flag` names the option (CLI flag, else env var). Startup exits with code 2. */
export class ConfigError extends KvrError {
  readonly flag: string;
  constructor(message: string, flag: string, detail?: Record<string, unknown>) {
    super('config_error', message, 400, { flag, ...detail });
    this.name = 'ConfigError';
    this.flag = flag;
  }
}

/** Any resolved value: scalars, lists, parsed JSON (`--reasoning`). */
type Value = unknown;
type Cfg = Record<string, Value>;

// ---------------------------------------------------------------------------------------------
// Per-app CLI lookup

interface CliTarget {
  spec: FlagSpec;
  /** Bool flag form: the value it sets. undefined = takes an argument. */
  sets?: boolean;
  /** The canonical spelling when an obsolete alias was used. */
  obsoleteFor?: string;
}

const cliIndex = new Map<App, Map<string, CliTarget>>();

function cliFor(app: App): Map<string, CliTarget> {
  let m = cliIndex.get(app);
  if (m) return m;
  m = new Map();
  for (const spec of flagsFor(app)) {
    if (!spec.flag) continue;
    const bool = spec.type === 'bool';
    m.set(spec.flag, bool ? { spec, sets: true } : { spec });
    if (bool) m.set(negationOf(spec.flag), { spec, sets: false });
    if (spec.short) m.set(spec.short, bool ? { spec, sets: true } : { spec });
    for (const a of spec.aliases ?? []) {
      m.set(a, bool ? { spec, sets: true, obsoleteFor: spec.flag } : { spec, obsoleteFor: spec.flag });
      if (bool) m.set(negationOf(a), { spec, sets: false, obsoleteFor: negationOf(spec.flag) });
    }
  }
  cliIndex.set(app, m);
  return m;
}

/** Every CLI spelling an app accepts (flags, `--no-` forms, short forms, obsolete aliases). */
export function cliSpellings(app: App): string[] {
  return [...cliFor(app).keys()];
}

interface CliHit {
  raw: string | boolean;
  used: string;
}

function parseArgv(app: App, argv: readonly string[], warnings: string[]): Map<string, CliHit> {
  const index = cliFor(app);
  const hits = new Map<string, CliHit>();
  const isOption = (tok: string) => (tok.startsWith('--') && tok.length > 2) || index.has(tok);
  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i];
    const eq = tok.startsWith('--') ? tok.indexOf('=') : -1;
    const name = eq > 0 ? tok.slice(0, eq) : tok;
    const target = index.get(name);
    if (!target) throw new ConfigError(`unrecognized arguments: ${tok}`, name);
    if (target.obsoleteFor) warnings.push(`${name} is obsolete; use ${target.obsoleteFor}`);
    let raw: string | boolean;
    if (target.sets !== undefined) {
      if (eq > 0)
        throw new ConfigError(`argument ${name}: ignored explicit argument '${tok.slice(eq + 1)}'`, name);
      raw = target.sets;
    } else if (eq > 0) {
      raw = tok.slice(eq + 1);
    } else {
      const next = argv[i + 1];
      if (next === undefined || isOption(next))
        throw new ConfigError(
          `argument ${displayName(target.spec)}: expected one argument`,
          displayName(target.spec),
        );
      raw = next;
      i++;
    }
    // Last occurrence wins, which is also what makes `--x --no-x` pairs last-one-wins.
    hits.set(target.spec.key, { raw, used: name });
  }
  return hits;
}

// ---------------------------------------------------------------------------------------------
// Single-value parsing and range checks

const BOOL_TRUE = new Set(['true', '1', 'yes', 'on']);
const BOOL_FALSE = new Set(['false', '0', 'no', 'off']);
const INT_RE = /^[+-]?\d+$/;
const FLOAT_RE = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const NONFINITE_RE = /^[+-]?(inf|infinity|nan)$/i;
const TYPE_MAX: Record<string, bigint> = { u16: 65535n, u32: 4294967295n, u64: 18446744073709551615n };

function fill(template: string, flag: string, v: string, reason = ''): string {
  return template.replaceAll('{flag}', flag).replaceAll('{v}', v).replaceAll('{reason}', reason);
}

/** Python-style float text (`2.0`, `0.5`, `inf`): the messages come from a Python CLI. */
export function formatFloat(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  return Number.isInteger(x) && Math.abs(x) < 1e16 ? x.toFixed(1) : String(x);
}

function quoteChoices(choices: readonly string[]): string {
  return choices.map((c) => `'${c}'`).join(', ');
}

function outside(x: number | bigint, r: NonNullable<FlagSpec['range']>): boolean {
  const big = typeof x === 'bigint';
  if (r.min !== undefined) {
    const min = big ? BigInt(r.min) : r.min;
    if (r.minOpen ? x <= min : x < min) return true;
  }
  if (r.max !== undefined) {
    const max = big ? BigInt(r.max) : r.max;
    if (r.maxOpen ? x >= max : x > max) return true;
  }
  return false;
}

function parseInteger(spec: FlagSpec, raw: string, name: string): number | bigint {
  const s = raw.trim();
  const typeMsg = `${name} must be an integer between 0 and ${TYPE_MAX[spec.type]}, got ${s}`;
  if (!INT_RE.test(s))
    throw new ConfigError(spec.invalidMsg ? fill(spec.invalidMsg, name, s) : typeMsg, name);
  const v = BigInt(s);
  // The row's own range message is more specific than the type range, so it is checked first.
  if (spec.range && outside(v, spec.range))
    throw new ConfigError(fill(spec.range.msg, name, v.toString()), name);
  if (v < 0n || v > TYPE_MAX[spec.type]) throw new ConfigError(typeMsg, name);
  return spec.type === 'u64' ? v : Number(v);
}

function parseFloatValue(spec: FlagSpec, raw: string, name: string): number {
  const s = raw.trim();
  let x: number;
  if (FLOAT_RE.test(s)) x = Number(s);
  else if (NONFINITE_RE.test(s))
    x = s.toLowerCase().includes('nan') ? NaN : s.startsWith('-') ? -Infinity : Infinity;
  else {
    const msg = spec.invalidMsg
      ? fill(spec.invalidMsg, name, s, 'invalid float literal')
      : `argument ${name}: invalid float value: '${s}'`;
    throw new ConfigError(msg, name);
  }
  checkFloat(spec, x, name);
  return x;
}

function checkFloat(spec: FlagSpec, x: number, name: string): void {
  const r = spec.range;
  if (!Number.isFinite(x)) {
    const msg = r?.finite ? r.msg : `{flag} must be a finite number, got {v}`;
    throw new ConfigError(fill(msg, name, formatFloat(x)), name);
  }
  if (r && outside(x, r)) throw new ConfigError(fill(r.msg, name, formatFloat(x)), name);
}

function parseUrl(raw: string, name: string): string {
  const s = raw.trim();
  try {
    new URL(s);
  } catch {
    throw new ConfigError(`${name}: invalid URL '${s}'`, name);
  }
  return s;
}

/** Parse and check one raw (CLI or env) value; `None` on a nullable row gives null. */
function parseValue(spec: FlagSpec, raw: string, name: string): Value {
  if (spec.nullable && raw.trim() === 'None') return null;
  switch (spec.type) {
    case 'bool':
      // Only env values reach here (CLI booleans are flag forms).
      return parseEnvBool(spec, raw, name);
    case 'u16':
    case 'u32':
    case 'u64':
      return parseInteger(spec, raw, name);
    case 'float':
      return parseFloatValue(spec, raw, name);
    case 'enum': {
      const s = raw.trim();
      if (!spec.choices!.includes(s)) {
        const msg = spec.invalidMsg
          ? fill(spec.invalidMsg, name, s)
          : `argument ${name}: invalid choice: '${s}' (choose from ${quoteChoices(spec.choices!)})`;
        throw new ConfigError(msg, name);
      }
      return s;
    }
    case 'url':
      return parseUrl(raw, name);
    case 'urlList':
      return Object.freeze(
        raw
          .split(',')
          .map((u) => u.trim())
          .filter((u) => u !== '')
          .map((u) => parseUrl(u, name)),
      );
    case 'u16List': {
      const parts = raw.split(',').map((p) => p.trim());
      const msg = `${name} must be a comma-separated list of integers between 0 and 65535, got ${raw}`;
      if (parts.some((p) => !/^\d+$/.test(p) || Number(p) > 65535)) throw new ConfigError(msg, name);
      return Object.freeze(parts.map(Number));
    }
    case 'json':
      try {
        return JSON.parse(raw) as unknown;
      } catch (e) {
        throw new ConfigError(`argument ${name}: invalid JSON value: ${(e as Error).message}`, name);
      }
    case 'path':
    case 'dir':
      if (raw.trim() === '') throw new ConfigError(`${name} must be a non-empty path`, name);
      return raw;
    case 'string':
      if (spec.pattern && !new RegExp(spec.pattern.re).test(raw))
        throw new ConfigError(fill(spec.pattern.msg, name, raw), name);
      return raw;
  }
}

function parseEnvBool(spec: FlagSpec, raw: string, envName: string, warnings?: string[]): boolean {
  const s = raw.trim().toLowerCase();
  if (BOOL_TRUE.has(s)) return true;
  if (BOOL_FALSE.has(s)) return false;
  if (spec.lenient) {
    warnings?.push(`${envName}: unknown value '${raw}', treated as false`);
    return false;
  }
  throw new ConfigError(
    `${envName}: invalid boolean '${raw}' (use true/false, 1/0, yes/no, on/off)`,
    displayName(spec),
    { env: envName },
  );
}

/**
 * Check a value against its row (type range, row range, pattern, choices). Used by the table's
 * own tests to prove every default is valid; returns the error message or undefined.
 */
export function checkValue(spec: FlagSpec, value: unknown): string | undefined {
  if (value === null)
    return spec.nullable || spec.default === null ? undefined : `${displayName(spec)} cannot be unset`;
  const raw =
    typeof value === 'bigint' ||
    typeof value === 'number' ||
    typeof value === 'string' ||
    typeof value === 'boolean'
      ? String(value)
      : Array.isArray(value)
        ? value.join(',')
        : JSON.stringify(value);
  try {
    if (spec.type === 'float' && typeof value === 'number') checkFloat(spec, value, displayName(spec));
    else if (spec.type === 'bool') {
      if (typeof value !== 'boolean') return 'not a boolean';
    } else parseValue(spec, raw, displayName(spec));
  } catch (e) {
    return (e as Error).message;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Resolution steps after the per-option pass

/** PROTOCOL §8.5. Scale and tier weights are deliberately not in this list (the preset keeps them). */
const LOAD_AWARE_PRESET: ReadonlyArray<readonly [string, Value]> = [
  ['routerMode', 'kv'],
  ['routerKvOverlapScoreCredit', 0],
  ['routerKvEvents', false],
  ['routerDurableKvEvents', false],
  ['routerAssumeKvReuse', false],
  ['routerTrackActiveBlocks', true],
  ['routerTrackPrefillTokens', true],
  ['useRemoteIndexer', false],
  ['sharedCacheType', 'none'],
  ['routerPredictedTtlSecs', null],
];

const BUSY_THRESHOLDS = [
  'activeDecodeBlocksThreshold',
  'activePrefillTokensThreshold',
  'activePrefillTokensThresholdFrac',
] as const;

const explicit = (s: Source | undefined) => s === 'cli' || s === 'env';

function fmt(v: Value): string {
  if (v === null) return 'None';
  if (typeof v === 'number') return formatFloat(v);
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function applyLoadAware(
  cfg: Cfg,
  sources: Record<string, Source>,
  byKey: Map<string, FlagSpec>,
  warnings: string[],
) {
  for (const [key, forced] of LOAD_AWARE_PRESET) {
    if (!(key in cfg)) continue;
    const before = cfg[key];
    if (explicit(sources[key]) && before !== forced) {
      const name = displayName(byKey.get(key)!);
      if (key === 'routerMode') warnings.push(`--load-aware: ${name}=${fmt(before)} overridden to kv`);
      else if (key === 'routerPredictedTtlSecs')
        warnings.push(`--load-aware: ${name} cleared (side index off)`);
      else warnings.push(`--load-aware: ${name}=${fmt(before)} overridden to ${fmt(forced)}`);
    }
    cfg[key] = forced;
    sources[key] = 'preset';
  }
}

/**
 * PROTOCOL §8.4 legacy `overlap_score_weight`: w != 0 -> prefill_load_scale = w (credit unchanged);
 * w = 0 -> scale 0 and credit 0. Exported so the per-request JSON field maps the same way.
 */
export function mapLegacyOverlapWeight(w: number): { prefillLoadScale: number; overlapScoreCredit?: number } {
  // A legacy 0 meant "ignore prefix overlap entirely", which in the new model is also credit 0.
  return w === 0 ? { prefillLoadScale: 0, overlapScoreCredit: 0 } : { prefillLoadScale: w };
}

function applyLegacyWeight(cfg: Cfg, sources: Record<string, Source>, warnings: string[]) {
  const w = cfg.routerKvOverlapScoreWeight as number | null | undefined;
  if (w === null || w === undefined) return;
  const mapped = mapLegacyOverlapWeight(w);
  const targets: Array<[string, string, number | undefined]> = [
    ['routerPrefillLoadScale', '--router-prefill-load-scale', mapped.prefillLoadScale],
    ['routerKvOverlapScoreCredit', '--router-kv-overlap-score-credit', mapped.overlapScoreCredit],
  ];
  for (const [key, flag, v] of targets) {
    if (v === undefined) continue;
    if (explicit(sources[key]) && cfg[key] !== v)
      warnings.push(`--router-kv-overlap-score-weight ${formatFloat(w)} overrides ${flag}=${fmt(cfg[key])}`);
    cfg[key] = v;
    sources[key] = 'legacy';
  }
}

function promoteAdmission(
  cfg: Cfg,
  sources: Record<string, Source>,
  byKey: Map<string, FlagSpec>,
  warnings: string[],
) {
  if (cfg.admissionControl !== 'none') return;
  const given = BUSY_THRESHOLDS.filter((k) => explicit(sources[k]) && cfg[k] !== null);
  if (given.length === 0) return;
  cfg.admissionControl = 'token-capacity';
  sources.admissionControl = 'derived';
  const names = given.map((k) => displayName(byKey.get(k)!)).join(', ');
  warnings.push(`--admission-control promoted from none to token-capacity (${names} set explicitly)`);
}

function computeDefaults(cfg: Cfg, env: Record<string, string | undefined>) {
  if ('eventPlane' in cfg && cfg.eventPlane === null)
    cfg.eventPlane = defaultEventPlane(cfg.discoveryBackend as DiscoveryBackendKind);
  if ('sharedCacheMultiplier' in cfg && cfg.sharedCacheMultiplier === null)
    cfg.sharedCacheMultiplier = cfg.sharedCacheType === 'none' ? 0 : 0.5;
  if ('fileKv' in cfg && cfg.fileKv === null) {
    // Same lookup order as os.tmpdir(), which a pure package cannot call.
    const tmp = (env.TMPDIR || env.TMP || env.TEMP || '/tmp').replace(/(.)\/+$/, '$1');
    cfg.fileKv = `${tmp}/dynamo_store_kv`;
  }
}

function fail(message: string, flag: string): never {
  throw new ConfigError(message, flag);
}

/** Cross-field rules of docs/configuration.md "Validation", in its order. Rows absent for the app are skipped. */
function validateCrossField(cfg: Cfg, opts: ResolveOptions, specs: readonly FlagSpec[]) {
  const has = (k: string) => k in cfg;
  if (has('routerPrefillLoadModel') && cfg.routerPrefillLoadModel === 'aic') {
    const lm = '--router-prefill-load-model';
    if (cfg.routerMode !== 'kv') fail(`${lm}=aic requires --router-mode=kv`, lm);
    const missing = (
      [
        ['aicBackend', '--aic-backend'],
        ['aicSystem', '--aic-system'],
        ['aicModelPath', '--aic-model-path'],
      ] as const
    )
      .filter(([k]) => cfg[k] === null)
      .map(([, f]) => f);
    if (missing.length > 0) fail(`${lm}=aic requires ${missing.join(', ')}`, missing[0]);
    if (cfg.routerTrackPrefillTokens === false) fail(`${lm}=aic requires --router-track-prefill-tokens`, lm);
    if (cfg.dynChatProcessor === 'vllm') fail(`${lm}=aic currently requires --dyn-chat-processor=dynamo`, lm);
  }
  if (has('aicMoeTpSize')) {
    const moe = [cfg.aicMoeTpSize, cfg.aicMoeEpSize, cfg.aicAttentionDpSize] as Array<number | null>;
    if (moe.some((v) => v !== null)) {
      const [mtp, mep, adp] = moe.map((v) => v ?? 1);
      const tp = cfg.aicTpSize as number;
      if (tp * adp !== mtp * mep)
        fail(
          `AIC MoE parallelism requires aic_tp_size * aic_attention_dp_size == aic_moe_tp_size * aic_moe_ep_size (got ${tp} * ${adp} != ${mtp} * ${mep})`,
          '--aic-moe-tp-size',
        );
    }
  }
  if (has('routerPredictedTtlSecs') && cfg.routerPredictedTtlSecs !== null && cfg.routerKvEvents === false)
    fail(
      '--router-predicted-ttl-secs requires KV events; it cannot be combined with --no-router-kv-events',
      '--router-predicted-ttl-secs',
    );
  if (has('serveIndexer') && cfg.serveIndexer === true) {
    if (cfg.useRemoteIndexer === true)
      fail('--serve-indexer and --use-remote-indexer are mutually exclusive', '--serve-indexer');
    if (cfg.routerMode !== 'kv') fail('--serve-indexer requires --router-mode=kv', '--serve-indexer');
    if (cfg.routerKvOverlapScoreCredit === 0)
      fail(
        '--serve-indexer requires overlap scoring (--router-kv-overlap-score-credit > 0)',
        '--serve-indexer',
      );
  }
  if (has('tlsCertPath') && (cfg.tlsCertPath === null) !== (cfg.tlsKeyPath === null))
    fail(
      '--tls-cert-path and --tls-key-path must be provided together',
      cfg.tlsCertPath === null ? '--tls-cert-path' : '--tls-key-path',
    );
  if (
    has('routerTrackOutputBlocks') &&
    cfg.routerTrackOutputBlocks === true &&
    cfg.routerTrackActiveBlocks === false
  )
    fail(
      '--router-track-output-blocks requires --router-track-active-blocks',
      '--router-track-output-blocks',
    );
  if (has('routerDurableKvEvents') && cfg.routerDurableKvEvents === true && cfg.eventPlane === 'zmq')
    fail('--router-durable-kv-events requires --event-plane=nats', '--router-durable-kv-events');
  if (has('sharedCacheType') && cfg.sharedCacheType === 'hicache')
    fail('--shared-cache-type hicache is not supported by kvrouter', '--shared-cache-type');
  if (opts.isDirectory) {
    for (const spec of specs) {
      const v = cfg[spec.key];
      if (spec.existsMsg && typeof v === 'string' && !opts.isDirectory(v))
        fail(fill(spec.existsMsg, displayName(spec), v), displayName(spec));
    }
  }
  // Histogram overrides: a MIN above its MAX would generate an empty or inverted bucket list.
  for (const h of ['RequestDuration', 'InputSequence', 'OutputSequence', 'Ttft', 'Itl']) {
    const lo = cfg[`metrics${h}Min`] as number | undefined;
    const hi = cfg[`metrics${h}Max`] as number | undefined;
    if (lo !== undefined && hi !== undefined && lo >= hi) {
      const env = (s: string) => specs.find((f) => f.key === `metrics${h}${s}`)!.env![0];
      fail(
        `${env('Min')} must be less than ${env('Max')}, got ${formatFloat(lo)} >= ${formatFloat(hi)}`,
        env('Min'),
      );
    }
  }
  if (has('topologyEnabled') && cfg.topologyEnabled === true && cfg.kvTransferDomain === null)
    fail('DYN_TOPOLOGY_ENABLED is set but DYN_KV_TRANSFER_DOMAIN is not', 'DYN_KV_TRANSFER_DOMAIN');
}

function lateWarnings(cfg: Cfg, sources: Record<string, Source>, warnings: string[]) {
  if ('routerDurableKvEvents' in cfg && cfg.routerDurableKvEvents !== true) {
    for (const [k, f] of [
      ['routerResetStates', '--router-reset-states'],
      ['routerSnapshotThreshold', '--router-snapshot-threshold'],
    ] as const)
      if (explicit(sources[k]))
        warnings.push(`${f} has no effect without --router-durable-kv-events (ignored)`);
  }
  if ('kserveGrpcServer' in cfg && cfg.kserveGrpcServer !== true)
    for (const [k, f] of [
      ['kserveGrpcPort', '--kserve-grpc-port'],
      ['grpcMetricsPort', '--grpc-metrics-port'],
    ] as const)
      if (explicit(sources[k])) warnings.push(`${f} has no effect without --kserve-grpc-server (ignored)`);
  // Durable KV events feed an event-driven index: a router that keeps none ignores them (the same
  // index choice as the router's, docs/cost-model.md §8 / protocol.md §7.4).
  if ('routerMode' in cfg && cfg.routerDurableKvEvents === true) {
    const why =
      cfg.routerMode !== 'kv'
        ? `--router-mode ${String(cfg.routerMode)} keeps no index (only kv mode reads KV events)`
        : cfg.routerKvOverlapScoreCredit === 0
          ? 'with --router-kv-overlap-score-credit 0 the router keeps no index'
          : cfg.useRemoteIndexer === true
            ? 'with --use-remote-indexer this router keeps no index (the serving router reads the events)'
            : cfg.routerKvEvents === false
              ? 'with --no-router-kv-events the index predicts from its own decisions and reads no KV events'
              : null;
    if (why) warnings.push(`--router-durable-kv-events has no effect: ${why}`);
  }
  for (const k of ['kvCacheBlockSize', 'blockSize'])
    if (cfg[k] === 1)
      warnings.push('KV block size 1: every token is a block; index and event volume will be very high');
}

// ---------------------------------------------------------------------------------------------

/**
 * Resolve an app's configuration: CLI > env > default per option, then the `--load-aware`
 * preset, the legacy overlap-weight mapping, admission-control promotion and validation
 * (docs/configuration.md "Resolution rules"). Pure: argv and env are arguments, the result is frozen.
 * Throws ConfigError (first problem found) with docs/configuration.md's exact message.
 */
export function resolveConfig<A extends App>(
  app: A,
  argv: readonly string[],
  env: Record<string, string | undefined>,
  opts: ResolveOptions = {},
): Resolution<A> {
  const specs = flagsFor(app);
  const warnings: string[] = [];
  const sources: Record<string, Source> = {};
  const cfg: Cfg = {};
  const byKey = new Map(specs.map((s) => [s.key, s]));
  const cli = parseArgv(app, argv, warnings);

  for (const spec of specs) {
    const name = displayName(spec);
    const hit = cli.get(spec.key);
    if (hit) {
      cfg[spec.key] = typeof hit.raw === 'boolean' ? hit.raw : parseValue(spec, hit.raw, name);
      sources[spec.key] = 'cli';
      continue;
    }
    const envName = spec.env?.find((e) => env[e] !== undefined && env[e] !== '');
    if (envName) {
      const raw = env[envName]!;
      cfg[spec.key] =
        spec.type === 'bool' ? parseEnvBool(spec, raw, envName, warnings) : parseValue(spec, raw, name);
      sources[spec.key] = 'env';
      continue;
    }
    cfg[spec.key] = spec.default;
    sources[spec.key] = 'default';
  }

  const missing = specs.filter((s) => s.required && cfg[s.key] === null).map(displayName);
  if (missing.length > 0) fail(`the following arguments are required: ${missing.join(', ')}`, missing[0]);

  for (const spec of specs)
    if (spec.deprecated && explicit(sources[spec.key]))
      warnings.push(`${displayName(spec)} is deprecated; use ${spec.deprecated}`);

  if (cfg.loadAware === true) applyLoadAware(cfg, sources, byKey, warnings);
  applyRoutingPresets(cfg, sources);
  applyLegacyWeight(cfg, sources, warnings);
  promoteAdmission(cfg, sources, byKey, warnings);
  computeDefaults(cfg, env);
  validateCrossField(cfg, opts, specs);
  lateWarnings(cfg, sources, warnings);

  return {
    config: Object.freeze(cfg) as ResolvedConfig<A>,
    warnings: Object.freeze(warnings),
    sources: Object.freeze(sources),
  };
}

/**
 * The busy thresholds that apply (§11): with admission control `none` they are cleared. The
 * resolved config keeps the values as given so that `--dump-config-to` shows them.
 */
export function effectiveBusyThresholds(
  config: Pick<
    ResolvedConfig<'router'>,
    | 'admissionControl'
    | 'activeDecodeBlocksThreshold'
    | 'activePrefillTokensThreshold'
    | 'activePrefillTokensThresholdFrac'
  >,
): {
  activeDecodeBlocksThreshold: number | null;
  activePrefillTokensThreshold: bigint | null;
  activePrefillTokensThresholdFrac: number | null;
} {
  const on = config.admissionControl === 'token-capacity';
  return {
    activeDecodeBlocksThreshold: on ? config.activeDecodeBlocksThreshold : null,
    activePrefillTokensThreshold: on ? config.activePrefillTokensThreshold : null,
    activePrefillTokensThresholdFrac: on ? config.activePrefillTokensThresholdFrac : null,
  };
}
