/**
 * Test helpers: a small parser of the Prometheus text exposition, so tests read what `/metrics`
 * would serve rather than prom-client internals.
 */
import type { Registry } from 'prom-client';
import { expect } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { FrontendMetricSet } from './app.js';
import { PublisherMetrics } from './kv.js';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  help: string;
  type: string;
  samples: Sample[];
}

function parseExposition(text: string): Map<string, Family> {
  const fams = new Map<string, Family>();
  let current: Family | null = null;
  const fam = (name: string) => {
    let f = fams.get(name);
    if (!f) fams.set(name, (f = { name, help: '', type: 'untyped', samples: [] }));
    return f;
  };
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m: RegExpMatchArray | null;
    if ((m = line.match(/^# HELP (\S+) (.*)$/))) {
      current = fam(m[1]!);
      current.help = m[2]!;
    } else if ((m = line.match(/^# TYPE (\S+) (\S+)$/))) {
      current = fam(m[1]!);
      current.type = m[2]!;
    } else if (line.startsWith('#')) continue;
    else {
      const s = parseSample(line);
      if (!current || !s.name.startsWith(current.name)) throw new Error(`sample outside its family: ${line}`);
      current.samples.push(s);
    }
  }
  return fams;
}

function parseSample(line: string): Sample {
  const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$/);
  if (!m) throw new Error(`bad sample line: ${line}`);
  const labels: Record<string, string> = {};
  const body = m[2] ? m[2].slice(1, -1) : '';
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/g;
  let lm: RegExpExecArray | null;
  while ((lm = re.exec(body)))
    labels[lm[1]!] = lm[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
  const v = m[3]!;
  return { name: m[1]!, labels, value: v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v) };
}

export async function scrape(registry: Registry): Promise<Map<string, Family>> {
  return parseExposition(await registry.metrics());
}

const sameLabels = (a: Record<string, string>, b: Record<string, string>) => {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
};

/** Value of the counter/gauge sample with exactly these labels (undefined if absent). */
export function valueOf(
  fams: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  return fams.get(name)?.samples.find((s) => s.name === name && sameLabels(s.labels, labels))?.value;
}

export interface HistogramSeries {
  /** Upper bounds in exposition order (without +Inf). */
  le: number[];
  /** Cumulative counts per bound, then +Inf. */
  cumulative: number[];
  sum: number;
  count: number;
}

/** One histogram series with exactly these labels (besides `le`), or undefined. */
export function histogramOf(
  fams: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): HistogramSeries | undefined {
  const f = fams.get(name);
  if (!f) return undefined;
  const buckets = f.samples.filter((s) => {
    if (s.name !== `${name}_bucket`) return false;
    const { le: _le, ...rest } = s.labels;
    return sameLabels(rest, labels);
  });
  if (buckets.length === 0) return undefined;
  const sum = f.samples.find((s) => s.name === `${name}_sum` && sameLabels(s.labels, labels))!.value;
  const count = f.samples.find((s) => s.name === `${name}_count` && sameLabels(s.labels, labels))!.value;
  return {
    le: buckets.filter((b) => b.labels.le !== '+Inf').map((b) => Number(b.labels.le)),
    cumulative: buckets.map((b) => b.value),
    sum,
    count,
  };
}

export const TEST_ENDPOINT = { namespace: 'dynamo', component: 'backend', endpoint: 'generate' };

/** A kv-mode frontend registry (plus a publisher counter) with at least one sample in every family. */
export function populated(prefix?: string): FrontendMetricSet {
  const set = new FrontendMetricSet({ routerMode: 'kv', routerId: 12345n, prefix, now: () => 0 });
  const { frontend: f, workers, overhead, index } = set;
  const life = set.lifecycle(TEST_ENDPOINT);
  const r = life.start({ model: 'Qwen3', endpoint: 'chat_completions', requestType: 'stream' }, 0);
  r.routed({ workerId: 7n, dpRank: 0, kvHitRate: 0.5, cachedTokens: 32 }, { isl: 64 });
  r.observeKvTransferEstimate(0.01);
  r.tokens(1, 100);
  r.tokens(1, 120);
  r.end('', 200);
  const r2 = life.start({ model: 'Qwen3', endpoint: 'chat_completions', requestType: 'unary' }, 0);
  r2.disconnected(10);
  life.start({ model: 'Qwen3', endpoint: 'chat_completions', requestType: 'stream' }, 0).end('overload', 5);
  f.setModelConfig('Qwen3', {
    total_kv_blocks: 1000,
    max_num_seqs: 256,
    max_num_batched_tokens: 8192,
    context_length: 32768,
    kv_cache_block_size: 16,
    migration_limit: 3,
  });
  f.migration('Qwen3', 'new_request');
  f.migrationMaxSeqLenExceeded('Qwen3');
  f.observeStage('route', 0.0004);
  f.internalError('/v1/chat/completions');
  f.observeTokenizer('tokenize', 0.7);
  workers.setLoad(
    { worker_id: 7n, dp_rank: 0, active_decode_blocks: 12, active_prefill_tokens: 300 },
    'decode',
  );
  workers.setQueuePending('decode', 2);
  overhead!.observe({
    block_hashing: 0.01,
    seq_hashing: 0.005,
    indexer_find_matches: 0.05,
    scheduling: 0.02,
    total: 0.1,
  });
  index!.hook('ok', 'stored');
  const e = set.routerRequests.forEndpoint(TEST_ENDPOINT);
  e.remoteQueryFailed();
  e.remoteWriteFailed();
  new PublisherMetrics(set.registry).recordDropped(7n, 3);
  set.truth!.update([
    {
      model: 'qwen3',
      mode: 'degraded',
      checks: 4,
      workers: [{ workerId: 7n, drift: 0.25, loadOnly: false }],
    },
  ]);
  set.memory.register('sessions', () => ({ entries: 3, limit: 10, evicted: 1 }));
  set.memory.sync();
  return set;
}

/** The field a `KvrError` thrown by `f` names (`detail.field`); fails when `f` throws anything else or nothing. */
export const fieldOf = (f: () => unknown): unknown => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(KvrError);
    return (e as KvrError).detail?.field;
  }
  throw new Error('did not throw');
};
