import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GENERATED_MARKER } from './docs.js';
import { checkValue, cliSpellings } from './resolve.js';
import { APPS, FLAGS, flagsFor, type FlagSpec } from './table.js';

// The repository's own documents (never files outside the repository). configuration.md's tables are generated
// from the table itself (docs.test.ts checks they are current), so only its hand-written part is read here.
const DOCS = new URL('../../../docs/', import.meta.url);
const doc = (name: string) => readFileSync(new URL(name, DOCS), 'utf8');
const CONFIG_MD = doc('configuration.md').split(GENERATED_MARKER)[0];
const PROTOCOL_MD = doc('protocol.md');
const COST_MD = doc('cost-model.md');
// Fenced code blocks hold wire examples, not option names (and their ``` would unbalance the backtick scan).
const PROSE = [CONFIG_MD, PROTOCOL_MD, COST_MD].join('\n').replace(/```[\s\S]*?```/g, '');
const ROWS = FLAGS as readonly FlagSpec[];

/** `A_{X,Y}_{M,N}` -> A_X_M, A_X_N, A_Y_M, A_Y_N */
function expandBraces(s: string): string[] {
  const m = /\{([^}]*)\}/.exec(s);
  if (!m) return [s];
  return m[1]
    .split(',')
    .flatMap((alt) => expandBraces(s.slice(0, m.index) + alt + s.slice(m.index + m[0].length)));
}

function backticked(text: string): string[] {
  return [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
}

/** CLI spellings inside backticked spans, skipping templates such as `--aic-*-size` and `{flag}`. */
function flagsIn(text: string): string[] {
  const out: string[] = [];
  for (const span of backticked(text))
    for (const m of span.matchAll(/(?:^|[\s(])(--?[a-z][a-z0-9-]*[a-z0-9])(?![*{a-z0-9-])/g)) out.push(m[1]);
  // The resolution rules speak of boolean pairs generically as `--x` / `--no-x`.
  return out.filter((f) => f !== '--x' && f !== '--no-x');
}

function envsIn(text: string): string[] {
  return backticked(text)
    .filter((s) => /^(DYN|KVR|ETCD|NATS)_[A-Z0-9_{},]*$/.test(s))
    .flatMap(expandBraces);
}

const allSpellings = new Set(APPS.flatMap((a) => cliSpellings(a)));
const allEnvs = new Set(ROWS.flatMap((r) => r.env ?? []));

describe('table covers the documents in docs/', () => {
  it('knows every flag and env var the hand-written docs mention (configuration, protocol, cost model)', () => {
    expect(flagsIn(PROSE).length).toBeGreaterThan(80);
    // Flags of other programs: vLLM and SGLang engine options, pnpm, and `pnpm replay`'s own CLI (tools/replay).
    const foreign = new Set([
      '--kv-events-config',
      '--max-prefill-tokens',
      '--enable-streaming-session',
      '--filter',
      '--arrival-speedup-ratio',
      '--trace-block-size',
      '--report-json',
    ]);
    expect([...new Set(flagsIn(PROSE))].filter((f) => !allSpellings.has(f) && !foreign.has(f))).toEqual([]);
    expect([...new Set(envsIn(PROSE))].filter((e) => !allEnvs.has(e))).toEqual([]);
  });

  it('gives the mocker every flag of protocol.md §17', () => {
    const s17 = PROTOCOL_MD.slice(PROTOCOL_MD.indexOf('## 17.'), PROTOCOL_MD.indexOf('## 18.'));
    // Long flags only: the heading's `python -m dynamo.mocker` is upstream's command, not a flag.
    const flags = [...new Set(flagsIn(s17))].filter((f) => f.startsWith('--'));
    expect(flags.length).toBeGreaterThan(30);
    const mocker = new Set(cliSpellings('mocker'));
    expect(flags.filter((f) => !mocker.has(f))).toEqual([]);
    const mockerEnvs = new Set(flagsFor('mocker').flatMap((r) => r.env ?? []));
    expect(mockerEnvs.has('DYN_MOCKER_KV_CACHE_TRACE')).toBe(true);
  });

  it('uses the §16 bucket parameters as DYN_METRICS_* defaults', () => {
    // §16: request_duration log(1, 256, 10); input log(50, 128000, 12); output log(50, 32000, 10);
    // ttft log(0.001, 480, 18); itl log(0.001, 2, 13).
    // prettier-ignore
    const want: Record<string, number> = {
      REQUEST_DURATION_MIN: 1, REQUEST_DURATION_MAX: 256, REQUEST_DURATION_COUNT: 10,
      INPUT_SEQUENCE_MIN: 50, INPUT_SEQUENCE_MAX: 128000, INPUT_SEQUENCE_COUNT: 12,
      OUTPUT_SEQUENCE_MIN: 50, OUTPUT_SEQUENCE_MAX: 32000, OUTPUT_SEQUENCE_COUNT: 10,
      TTFT_MIN: 0.001, TTFT_MAX: 480, TTFT_COUNT: 18,
      ITL_MIN: 0.001, ITL_MAX: 2, ITL_COUNT: 13,
    };
    for (const [suffix, v] of Object.entries(want)) {
      const spec = ROWS.find((s) => s.env?.[0] === `DYN_METRICS_${suffix}`);
      expect(spec?.default, suffix).toBe(v);
    }
  });
});

describe('table invariants', () => {
  it('keys, flags and env vars are unique within each app', () => {
    for (const app of APPS) {
      const rows = flagsFor(app);
      const dup = (xs: string[]) => xs.filter((x, i) => xs.indexOf(x) !== i);
      expect(dup(rows.map((r) => r.key)), app).toEqual([]);
      expect(dup(cliSpellings(app)), app).toEqual([]);
      expect(dup(rows.flatMap((r) => [...(r.env ?? [])])), app).toEqual([]);
      // A flag spelled the same by two rows would silently shadow one of them.
      expect(
        dup(rows.flatMap((r) => [r.flag, r.short, ...(r.aliases ?? [])].filter((x) => x !== undefined))),
        app,
      ).toEqual([]);
    }
  });

  it('every row is reachable (flag or env) and used by some app', () => {
    for (const r of ROWS) {
      expect(r.flag !== undefined || (r.env?.length ?? 0) > 0, r.key).toBe(true);
      expect(r.apps.length, r.key).toBeGreaterThan(0);
      expect(r.help.length, r.key).toBeGreaterThan(5);
    }
  });

  it('every default passes its own row check; enums have choices', () => {
    for (const r of ROWS) {
      if (r.type === 'enum') expect(r.choices?.length, r.key).toBeGreaterThan(1);
      if (r.default !== null) expect(checkValue(r, r.default), r.key).toBeUndefined();
      if (r.required || r.computed) expect(r.default, r.key).toBeNull();
    }
  });

  it('checkValue rejects values outside the row range (the invariant above can fail)', () => {
    const credit = ROWS.find((r) => r.key === 'routerKvOverlapScoreCredit')!;
    // docs/configuration.md: credit outside 0..1 -> "... must be between 0.0 and 1.0, got {v}"; 1.5 formats as 1.5.
    expect(checkValue(credit, 1.5)).toBe(
      '--router-kv-overlap-score-credit must be between 0.0 and 1.0, got 1.5',
    );
    const mode = ROWS.find((r) => r.key === 'routerMode')!;
    expect(checkValue(mode, 'fastest')).toMatch(/invalid choice: 'fastest'/);
  });

  it('the four thresholds with None = disabled are nullable', () => {
    for (const k of [
      'activeDecodeBlocksThreshold',
      'activePrefillTokensThreshold',
      'activePrefillTokensThresholdFrac',
      'routerQueueThreshold',
    ])
      expect(ROWS.find((r) => r.key === k)?.nullable, k).toBe(true);
  });
});
