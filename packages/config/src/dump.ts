/**
 * `--dump-config-to` content (docs/configuration.md): the resolved configuration as pretty JSON
 * under Dynamo's field names — the snake_case names Dynamo's config objects carry and print
 * (`FrontendConfig`, `RouterConfigBase`, `KvRouterConfigBase`: argparse `dest`s), not kvrouter's
 * camelCase keys. A flag's field is its name without `--`, dashes as underscores
 * (`--router-mode` → `router_mode`), except where Dynamo's `dest` differs (`DYNAMO_FIELDS`);
 * an environment-only row's field is its key in snake_case (`httpBodyLimitMb` → `http_body_limit_mb`).
 * u64 values are written as exact digits. Writing the file is the app's job (this package does no I/O).
 */
import { FLAGS, type App, type FlagSpec, type ResolvedConfig } from './table.js';

/** Rows whose Dynamo field name is not their flag's snake_case (Dynamo's argparse `dest`). */
const DYNAMO_FIELDS: Readonly<Record<string, string>> = {
  routerKvOverlapScoreCredit: 'overlap_score_credit',
  routerKvOverlapScoreCreditDecay: 'overlap_score_credit_decay',
  routerKvOverlapScoreWeight: 'overlap_score_weight',
  routerPrefillLoadScale: 'prefill_load_scale',
  routerDecodeActiveRequestWeight: 'decode_active_request_weight',
  routerHostCacheHitWeight: 'host_cache_hit_weight',
  routerDiskCacheHitWeight: 'disk_cache_hit_weight',
  routerKvEvents: 'use_kv_events',
  routerMinInitialWorkers: 'min_initial_workers',
  routerDurableKvEvents: 'durable_kv_events',
  dynChatProcessor: 'chat_processor',
  dynDebugPerf: 'debug_perf',
  dynPreprocessWorkers: 'preprocess_workers',
  tokenizer: 'tokenizer_backend',
};

const snake = (s: string): string => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

const specByKey = new Map<string, FlagSpec>();
for (const f of FLAGS as readonly FlagSpec[]) if (!specByKey.has(f.key)) specByKey.set(f.key, f);

/** The name `key` is dumped under (Dynamo's field name). */
export function dumpFieldName(key: string): string {
  const named = DYNAMO_FIELDS[key];
  if (named) return named;
  const flag = specByKey.get(key)?.flag;
  return flag ? flag.slice(2).replace(/-/g, '_') : snake(key);
}

function jsonOf(v: unknown, indent: string): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'null';
  if (typeof v === 'string' || typeof v === 'boolean') return JSON.stringify(v);
  const inner = indent + '  ';
  if (Array.isArray(v)) {
    if (v.length === 0) return '[]';
    return `[\n${v.map((x) => inner + jsonOf(x, inner)).join(',\n')}\n${indent}]`;
  }
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length === 0) return '{}';
  return `{\n${entries.map(([k, x]) => `${inner}${JSON.stringify(k)}: ${jsonOf(x, inner)}`).join(',\n')}\n${indent}}`;
}

/** The `--dump-config-to` text: every resolved value under its Dynamo field name, in table order. */
export function dumpConfigJson(config: ResolvedConfig<App> | Readonly<Record<string, unknown>>): string {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config)) out[dumpFieldName(k)] = v;
  return jsonOf(out, '') + '\n';
}
