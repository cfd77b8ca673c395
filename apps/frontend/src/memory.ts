/**
 * Bounded memory (issue 17): the frontend's caches and tables, each with its limit, reported as
 * `dynamo_frontend_table_{entries,limit,evicted_total}{table}` (docs/memory.md is the inventory).
 * Read at every `/metrics` scrape; nothing here runs per request.
 */
import { MAX_MODEL_LABELS, type FrontendMetricSet } from '@kvrouter/metrics';
import { MAX_BLOCKS_PER_WORKER, RadixIndexer } from '@kvrouter/radix-indexer';
import type { FastTokenizer } from '@kvrouter/tokenizer';
import { MAX_LIVE_REQUESTS, MAX_PARKED_REQUESTS, MAX_SESSION_BINDINGS } from '@kvrouter/router';
import type { StringCache } from './http/json-bytes.js';
import type { ModelRegistry } from './models.js';
import type { PromptEncoder } from './tokenizer/encoder.js';
import type { ModelTokenizers } from './tokenizer/per-model.js';

/** The `table` label values (fixed; docs/memory.md). */
export const TABLES = Object.freeze({
  index: 'kv_index_blocks',
  sessions: 'router_session_bindings',
  parked: 'router_parked_requests',
  live: 'router_live_requests',
  hashChains: 'router_hash_chain_bytes',
  prefixCache: 'tokenizer_prefix_cache_tokens',
  fingerprints: 'tokenizer_fingerprint_chars',
  wordCache: 'tokenizer_word_cache_entries',
  modelLabels: 'metric_model_labels',
  responses: 'responses_store',
  bodyStrings: 'http_body_string_cache_bytes',
});

export interface MemoryTablesOptions {
  metrics: FrontendMetricSet;
  registry: ModelRegistry;
  encoder: PromptEncoder;
  tokenizers: ModelTokenizers | null;
  /** `--http-body-string-cache-mb` (null when 0). */
  bodyStrings: StringCache | null;
}

export function registerMemoryTables(o: MemoryTablesOptions): void {
  const m = o.metrics.memory;
  const routers = () => o.registry.allSets().map((s) => s.router);
  m.register(TABLES.index, () => {
    let entries = 0;
    let ranks = 0;
    let evicted = 0;
    for (const s of o.registry.allSets()) {
      const ix = s.indexer;
      if (!ix) continue;
      for (const v of ix.treeSizes().values()) {
        entries += v;
        ranks++;
      }
      if (ix instanceof RadixIndexer) evicted += ix.overflowedBlocks;
    }
    return { entries, limit: ranks * MAX_BLOCKS_PER_WORKER, evicted };
  });
  m.register(TABLES.sessions, () => {
    const rs = routers();
    return {
      entries: rs.reduce((n, r) => n + r.sessionCount, 0),
      limit: rs.length * MAX_SESSION_BINDINGS,
      evicted: rs.reduce((n, r) => n + r.sessionsEvicted, 0),
    };
  });
  m.register(TABLES.parked, () => {
    const rs = routers();
    return {
      entries: rs.reduce((n, r) => n + r.queueDepth, 0),
      limit: rs.length * MAX_PARKED_REQUESTS,
    };
  });
  m.register(TABLES.live, () => {
    const rs = routers();
    return {
      entries: rs.reduce((n, r) => n + r.liveRequestCount + r.queueDepth, 0),
      limit: rs.length * MAX_LIVE_REQUESTS,
    };
  });
  // Earlier turns' block hashes (each router's `HashChains`, bounded in bytes).
  m.register(TABLES.hashChains, () => {
    const cs = routers().map((r) => r.hashChains);
    return {
      entries: cs.reduce((n, c) => n + c.held, 0),
      limit: cs.reduce((n, c) => n + c.limit, 0),
      evicted: cs.reduce((n, c) => n + c.evicted, 0),
    };
  });
  m.register(TABLES.prefixCache, () => {
    const encs = o.tokenizers ? o.tokenizers.encoders() : [o.encoder];
    // Each encoder's own cache and those of its tokenizer threads (long chat prompts, same bound each).
    return {
      entries: encs.reduce((n, e) => n + e.cacheTokensHeld + e.threadCacheTokensHeld, 0),
      limit: encs.reduce((n, e) => n + e.cacheTokenLimit + e.threadCacheTokenLimit, 0),
    };
  });
  // Fingerprints of long message strings (the prefix cache's keys), on the event loop's encoders.
  m.register(TABLES.fingerprints, () => {
    const encs = o.tokenizers ? o.tokenizers.encoders() : [o.encoder];
    return {
      entries: encs.reduce((n, e) => n + e.fingerprintCharsHeld, 0),
      limit: encs.reduce((n, e) => n + e.fingerprintCharLimit, 0),
    };
  });
  // The exact tokenizer's word cache on the event loop (pool threads hold their own, same bound).
  m.register(TABLES.wordCache, () => {
    let entries = 0;
    let limit = 0;
    for (const e of o.tokenizers ? o.tokenizers.encoders() : [o.encoder]) {
      const fast = (e.tokenizer as { fast?: FastTokenizer }).fast;
      if (!fast) continue;
      entries += fast.wordCacheEntries;
      limit += fast.wordCacheLimit;
    }
    return limit === 0 ? null : { entries, limit };
  });
  // The `model` label values of the frontend request families (client-supplied names count under
  // `__unknown__` unless served; MAX_MODEL_LABELS per lifecycle as a backstop).
  m.register(TABLES.modelLabels, () => {
    let entries = 0;
    for (const _ of o.metrics.frontend.inflightRequests.all()) entries++;
    return { entries, limit: MAX_MODEL_LABELS };
  });
  const strings = o.bodyStrings;
  if (strings !== null)
    m.register(TABLES.bodyStrings, () => ({
      entries: strings.held,
      limit: strings.limitBytes,
      evicted: strings.evicted,
    }));
}
