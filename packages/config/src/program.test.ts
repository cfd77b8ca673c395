import { describe, expect, it } from 'vitest';
import { parseAppConfig, type CliOptions } from './cli.js';
import { renderFlagsMarkdown } from './docs.js';
import { buildProgram } from './program.js';
import { cliSpellings } from './resolve.js';
import { GROUPS, flagsFor } from './table.js';

const INFO = { name: 'kvrouter-frontend', description: 'KV-cache-aware OpenAI frontend' };

describe('buildProgram --help', () => {
  const help = buildProgram('frontend', INFO).helpInformation();
  // Commander wraps descriptions to the terminal width; compare on collapsed whitespace.
  const flat = help.replace(/\s+/g, ' ');

  it('lists every CLI spelling of the frontend (flags, --no- forms, -i, obsolete aliases)', () => {
    const spellings = cliSpellings('frontend');
    expect(spellings.length).toBeGreaterThan(90);
    // Word-bounded so that --router-ttl is not found inside --router-ttl-secs.
    const missing = spellings.filter((s) => !new RegExp(`(^|[\\s,])${s}(?=[\\s,]|$)`, 'm').test(help));
    expect(missing).toEqual([]);
  });

  it('shows env vars and defaults, and the env-only variables', () => {
    expect(flat).toMatch(/--http-port <u16> HTTP listen port .*\(env: DYN_HTTP_PORT; default: 8000\)/);
    expect(flat).toContain('env: DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT, DYN_OVERLAP_SCORE_WEIGHT');
    for (const spec of flagsFor('frontend'))
      for (const env of spec.env ?? []) expect(flat, env).toContain(env);
    expect(flat).toContain(
      'DYN_HTTP_BODY_LIMIT_MB Maximum request body in MB; larger bodies get 413. (default: 192)',
    );
  });

  it('groups options under the docs/configuration.md section headings, in order', () => {
    const headings = GROUPS.filter((g) => flagsFor('frontend').some((s) => s.group === g && s.flag)).map(
      (g) => `\n${g}:\n`,
    );
    const at = headings.map((h) => help.indexOf(h));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    // --router-mode sits under Routing, --migration-limit under Fault tolerance.
    const section = (name: string) => help.slice(help.indexOf(`\n${name}:\n`)).split('\n\n')[0];
    expect(section('Routing')).toContain('--router-mode <choice>');
    expect(section('Fault tolerance')).toContain('--migration-limit <u32>');
  });

  it('is per app: the indexer shows its own flags only', () => {
    const idx = buildProgram('indexer', { name: 'kvrouter-indexer', description: 'x' })
      .helpInformation()
      .replace(/\s+/g, ' ');
    expect(idx).toContain('--block-size <u32>');
    expect(idx).toContain('default: — (required)');
    expect(idx).not.toContain('--router-mode');
  });
});

class Exit extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

function harness(extra: Partial<CliOptions> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const files: Array<[string, string]> = [];
  const opts: CliOptions = {
    info: INFO,
    isDirectory: (p) => p === '/models/ok',
    writeFile: (p, t) => void files.push([p, t]),
    stdout: (t) => void out.push(t),
    stderr: (t) => void err.push(t),
    exit: (code) => {
      throw new Exit(code);
    },
    ...extra,
  };
  const run = (argv: string[], env: Record<string, string | undefined> = {}) => {
    try {
      return { res: parseAppConfig('frontend', argv, env, opts), code: undefined };
    } catch (e) {
      if (e instanceof Exit) return { res: undefined, code: e.code };
      throw e;
    }
  };
  return { out, err, files, run };
}

describe('parseAppConfig', () => {
  it('prints error: <message> and exits 2 on invalid configuration', () => {
    const h = harness();
    expect(h.run(['--router-temperature', '-1']).code).toBe(2);
    expect(h.err).toEqual(['error: --router-temperature must be >= 0, got -1.0\n']);
  });

  it('uses the injected directory check for --model-path', () => {
    const h = harness();
    expect(h.run(['--model-path', '/models/missing']).code).toBe(2);
    expect(h.err).toEqual(['error: model-path must be a valid directory on disk, got: /models/missing\n']);
    expect(h.run(['--model-path', '/models/ok']).res?.config.modelPath).toBe('/models/ok');
  });

  it('prints help and exits 0 on --help or -h', () => {
    const h = harness();
    expect(h.run(['--http-port', '1', '--help']).code).toBe(0);
    expect(h.out.join('')).toContain('Usage: kvrouter-frontend');
    expect(harness().run(['-h']).code).toBe(0);
  });

  it('reports warnings and writes --dump-config-to', () => {
    const warnings: string[] = [];
    const h = harness({ onWarning: (w) => void warnings.push(w) });
    const r = h.run(['--router-ttl', '30'], { DYN_DUMP_CONFIG_TO: '/tmp/cfg.json' });
    expect(r.res?.config.routerTtlSecs).toBe(30);
    expect(warnings).toEqual(['--router-ttl is obsolete; use --router-ttl-secs']);
    expect(h.files).toHaveLength(1);
    expect(h.files[0][0]).toBe('/tmp/cfg.json');
    expect(JSON.parse(h.files[0][1])).toMatchObject({ router_ttl_secs: 30, dump_config_to: '/tmp/cfg.json' });
  });

  it('default warning sink writes warning: lines to stderr', () => {
    const h = harness();
    h.run(['--kv-events']);
    expect(h.err).toEqual(['warning: --kv-events is obsolete; use --router-kv-events\n']);
  });
});

describe('renderFlagsMarkdown', () => {
  it('renders one section per group with escaped choices and derived ranges', () => {
    const md = renderFlagsMarkdown('frontend');
    expect(md).toContain('## Routing\n');
    expect(md).toContain(
      '| `--router-kv-events` / `--no-router-kv-events` (obsolete: `--kv-events`) | `DYN_ROUTER_USE_KV_EVENTS` | `true` | bool |',
    );
    expect(md).toContain(
      '`round-robin\\|random\\|kv\\|direct\\|least-loaded\\|device-aware-weighted`'.replaceAll('`', ''),
    );
    expect(md).toContain(
      '| `--router-prune-target-ratio` | `DYN_ROUTER_PRUNE_TARGET_RATIO` | `0.8` | float (0.0, 1.0] |',
    );
    expect(md).toContain(
      '| `--router-queue-threshold` | `DYN_ROUTER_QUEUE_THRESHOLD` | `16.0` | float > 0.0, or `None` |',
    );
    expect(md).toContain('`DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT` (else `DYN_OVERLAP_SCORE_WEIGHT`)');
    expect(md).not.toContain('--block-size');
  });

  it('without an app lists every row with its apps', () => {
    const md = renderFlagsMarkdown();
    expect(md).toContain('| `--block-size` | — | `— (required)` | u32 ≥ 1 | indexer |');
    expect(md).toContain('| `--block-size` | — | `64` | u32 ≥ 1 | mocker |');
  });
});
