/**
 * ModelDeploymentCard and ModelRuntimeConfig (docs/protocol.md §6.4): validation with the documented
 * defaults, the checksum, registration under `v1/mdc/...` and a typed watcher.
 *
 * Cards written by other implementations carry more fields (tokenizer, prompt formatter, …): they
 * are kept as they are, and take part in the checksum.
 */
import { createHash } from 'node:crypto';
import { DecodeError, mdcKey, mdcPrefix, parseJson, stringifyJson } from '@kvrouter/protocols';
import type { Discovery } from './discovery/types.js';
import { scopedWatch, type Registration, type TypedWatch, type WatchScope } from './registration.js';
import {
  bool,
  decodeFail,
  describe,
  inputFail,
  int,
  intOrNull,
  obj,
  oneOf,
  str,
  strOrNull,
  type Fail,
  type Obj,
} from './validate.js';

export const MODEL_TYPES = ['chat', 'completions', 'embedding', 'prefill', 'images', 'videos'] as const;
export type ModelType = (typeof MODEL_TYPES)[number];
export const MODEL_INPUTS = ['tokens', 'text'] as const;
export type ModelInput = (typeof MODEL_INPUTS)[number];

/** What `max_num_batched_tokens: null` means where a number is needed (§6.4). */
export const DEFAULT_MAX_NUM_BATCHED_TOKENS = 10_000_000;

export interface ModelRuntimeConfig {
  total_kv_blocks: number | null;
  /** null = 10 000 000 (`effectiveMaxBatchedTokens`). */
  max_num_batched_tokens: number | null;
  max_num_seqs: number | null;
  data_parallel_start_rank: number;
  data_parallel_size: number;
  enable_local_indexer: boolean;
  topology_domains: Record<string, string>;
  kv_transfer_domain: string | null;
  kv_transfer_enforcement: 'required' | 'preferred' | null;
  kv_transfer_preferred_weight: number | null;
  taints: string[];
  /** Bootstrap host/port of a prefill worker; shape left to the disaggregation code. */
  disaggregated_endpoint: unknown;
  enable_eagle: boolean;
  [extra: string]: unknown;
}

/** The fields the router reads; a card may carry more. */
export interface ModelCardFields {
  display_name: string;
  kv_cache_block_size: number;
  context_length: number;
  migration_limit: number;
  model_type: ModelType[];
  model_input: ModelInput;
  lora: unknown;
  runtime_config: ModelRuntimeConfig;
  /** Cards of type `embedding`: the length of the vectors the worker returns (absent: not declared). */
  embedding_dim?: number;
}

export interface ModelDeploymentCard extends ModelCardFields {
  /** SHA-256 (hex) of the canonical card JSON without `runtime_config` and `mdcsum`. */
  mdcsum: string;
  [extra: string]: unknown;
}

/** A card as a worker describes itself: the documented defaults fill what it leaves out. */
export type ModelCardInput = Partial<Omit<ModelCardFields, 'runtime_config'>> &
  Pick<ModelCardFields, 'display_name' | 'kv_cache_block_size' | 'context_length'> & {
    runtime_config?: Partial<ModelRuntimeConfig>;
  } & Record<string, unknown>;

export const effectiveMaxBatchedTokens = (rc: ModelRuntimeConfig): number =>
  rc.max_num_batched_tokens ?? DEFAULT_MAX_NUM_BATCHED_TOKENS;

const U32 = 0xffffffff;

function runtimeConfigFrom(v: unknown, f: Fail): ModelRuntimeConfig {
  const o = v === undefined || v === null ? {} : obj(v, 'runtime_config', f);
  const p = (k: string): string => `runtime_config.${k}`;
  const domains: Record<string, string> = {};
  if (o.topology_domains !== undefined && o.topology_domains !== null) {
    const d = obj(o.topology_domains, p('topology_domains'), f);
    for (const [k, val] of Object.entries(d)) domains[k] = str(val, p(`topology_domains.${k}`), f);
  }
  let taints: string[] = [];
  if (o.taints !== undefined && o.taints !== null) {
    if (!Array.isArray(o.taints))
      throw f(p('taints'), `expected an array of strings, got ${describe(o.taints)}`);
    taints = o.taints.map((t, i) => str(t, p(`taints[${i}]`), f));
  }
  const start = int(o.data_parallel_start_rank ?? 0, p('data_parallel_start_rank'), f, 0, U32);
  const size = int(o.data_parallel_size ?? 1, p('data_parallel_size'), f, 1, U32);
  if (start + size - 1 > U32)
    throw f(p('data_parallel_size'), `ranks [${start}, ${start + size}) leave the u32 range`);
  const enforcement =
    o.kv_transfer_enforcement === undefined || o.kv_transfer_enforcement === null
      ? null
      : oneOf(o.kv_transfer_enforcement, p('kv_transfer_enforcement'), f, ['required', 'preferred'] as const);
  const domain = strOrNull(o.kv_transfer_domain, p('kv_transfer_domain'), f);
  let weight: number | null = null;
  if (o.kv_transfer_preferred_weight !== undefined && o.kv_transfer_preferred_weight !== null) {
    const w = o.kv_transfer_preferred_weight;
    if (typeof w !== 'number' || !(w >= 0 && w <= 1))
      throw f(p('kv_transfer_preferred_weight'), `expected a number in [0, 1], got ${describe(w)}`);
    weight = w;
  }
  if (enforcement !== null && domain === null)
    throw f(p('kv_transfer_domain'), `required when kv_transfer_enforcement is ${enforcement}`);
  if (enforcement === 'preferred' && weight === null)
    throw f(p('kv_transfer_preferred_weight'), 'required when kv_transfer_enforcement is preferred');
  return {
    ...o,
    total_kv_blocks: intOrNull(o.total_kv_blocks, p('total_kv_blocks'), f, 0),
    max_num_batched_tokens: intOrNull(o.max_num_batched_tokens, p('max_num_batched_tokens'), f, 1),
    max_num_seqs: intOrNull(o.max_num_seqs, p('max_num_seqs'), f, 1),
    data_parallel_start_rank: start,
    data_parallel_size: size,
    enable_local_indexer:
      o.enable_local_indexer === undefined
        ? true
        : bool(o.enable_local_indexer, p('enable_local_indexer'), f),
    topology_domains: domains,
    kv_transfer_domain: domain,
    kv_transfer_enforcement: enforcement,
    kv_transfer_preferred_weight: weight,
    taints,
    disaggregated_endpoint: o.disaggregated_endpoint ?? null,
    enable_eagle: o.enable_eagle === undefined ? false : bool(o.enable_eagle, p('enable_eagle'), f),
  };
}

function cardFrom(v: unknown, f: Fail): ModelCardFields & Obj {
  const o = obj(v, 'card', f);
  let types: ModelType[] = ['chat', 'completions'];
  if (o.model_type !== undefined) {
    if (!Array.isArray(o.model_type) || o.model_type.length === 0)
      throw f(
        'model_type',
        `expected a non-empty array of ${MODEL_TYPES.join('|')}, got ${describe(o.model_type)}`,
      );
    types = o.model_type.map((t, i) => oneOf(t, `model_type[${i}]`, f, MODEL_TYPES));
    if (new Set(types).size !== types.length) throw f('model_type', 'has duplicates');
  }
  return {
    ...o,
    display_name: str(o.display_name, 'display_name', f),
    kv_cache_block_size: int(o.kv_cache_block_size, 'kv_cache_block_size', f, 1, U32),
    context_length: int(o.context_length, 'context_length', f, 1, U32),
    migration_limit: int(o.migration_limit ?? 0, 'migration_limit', f, 0, U32),
    model_type: types,
    model_input:
      o.model_input === undefined ? 'tokens' : oneOf(o.model_input, 'model_input', f, MODEL_INPUTS),
    lora: o.lora ?? null,
    runtime_config: runtimeConfigFrom(o.runtime_config, f),
    ...(o.embedding_dim !== undefined && o.embedding_dim !== null
      ? { embedding_dim: int(o.embedding_dim, 'embedding_dim', f, 1, U32) }
      : {}),
  };
}

/**
 * JSON with object keys sorted (by UTF-16 code units) at every level, no whitespace, integers with
 * all digits: equal cards give equal text whatever order their fields were built in.
 */
export function canonicalJson(v: unknown): string {
  return stringifyJson(sortKeys(v));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v)) return v;
  const out: Obj = {};
  for (const k of Object.keys(v).sort()) {
    const x = (v as Obj)[k];
    if (x !== undefined) out[k] = sortKeys(x);
  }
  return out;
}

/** §6.4: SHA-256 of the canonical card JSON without `runtime_config` (and without `mdcsum` itself). */
export function cardChecksum(card: Obj): string {
  const { runtime_config: _rc, mdcsum: _sum, ...rest } = card;
  return createHash('sha256').update(canonicalJson(rest)).digest('hex');
}

/** Validates a card and fills its defaults; `mdcsum` is computed. */
export function buildModelCard(input: ModelCardInput): ModelDeploymentCard {
  const c = cardFrom(input, inputFail);
  return { ...c, mdcsum: cardChecksum(c) };
}

/**
 * Parses a card read from discovery. A card without `mdcsum` gets the computed one; a present one is
 * kept as published (the frontend compares it across a model's workers; `verifyCardChecksum` checks it).
 */
export function parseModelCard(text: string): ModelDeploymentCard {
  let v: unknown;
  try {
    v = parseJson(text);
  } catch (e) {
    throw new DecodeError(`card: ${e instanceof Error ? e.message : String(e)}`, { field: 'card' });
  }
  const c = cardFrom(v, decodeFail);
  const sum =
    c.mdcsum === undefined || c.mdcsum === null ? cardChecksum(c) : str(c.mdcsum, 'mdcsum', decodeFail);
  return { ...c, mdcsum: sum };
}

export const verifyCardChecksum = (card: ModelDeploymentCard): boolean => card.mdcsum === cardChecksum(card);

export function encodeModelCard(card: ModelDeploymentCard): string {
  return stringifyJson(card);
}

export interface RegisterModelCardOptions {
  namespace: string;
  component: string;
  endpoint: string;
  card: ModelCardInput;
  /** Key suffix after the id, e.g. a LoRA name. */
  suffix?: string;
}

/** Publishes `v1/mdc/{ns}/{component}/{endpoint}/{lease:hex}[/{suffix}]` under the process lease. */
export async function registerModelCard(
  d: Discovery,
  o: RegisterModelCardOptions,
): Promise<Registration<ModelDeploymentCard>> {
  const card = buildModelCard(o.card);
  const key = mdcKey(o.namespace, o.component, o.endpoint, d.leaseId, o.suffix);
  await d.put(key, encodeModelCard(card));
  let done = false;
  return {
    key,
    record: card,
    unregister: async () => {
      if (done) return;
      done = true;
      await d.delete(key);
    },
  };
}

/** Model cards (filtered by namespace or namespace prefix, §6.5), initial listing first. */
export function watchModelCards(d: Discovery, scope: WatchScope = {}): TypedWatch<ModelDeploymentCard> {
  return scopedWatch(d, 'mdc', mdcPrefix, scope, (_key, value) => parseModelCard(value));
}
