import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from './main.js';

const dir = mkdtempSync(join(tmpdir(), 'replay-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(
    argv,
    { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) } },
    {},
  );
  return { code, out, err };
}

const trace = join(dir, 'burst.jsonl');
const small = ['--num-workers', '2', '--num-gpu-blocks-override', '2048', '--no-progress'];
/** `replay compare` of round-robin against `config` on the small fleet. */
const vsRoundRobin = (config: string): string[] => [
  'compare',
  trace,
  ...small,
  '-c',
  'round-robin',
  '-c',
  config,
];

describe('replay CLI', () => {
  it('generates a synthetic trace as Mooncake JSONL', async () => {
    const r = await cli('generate', '--synthetic', 'burst', '--sessions', '2', '--out', trace);
    expect(r.code).toBe(0);
    const lines = readFileSync(trace, 'utf8').trim().split('\n');
    expect(lines.length).toBe(8); // 2 tasks × 4 samples
    expect(JSON.parse(lines[0]!)).toMatchObject({ input_length: 6144, output_length: 128 });
  });

  it('replays offline with router flags from the config table; same seed gives identical JSON', async () => {
    const a = join(dir, 'a.json');
    const b = join(dir, 'b.json');
    const r1 = await cli(
      trace,
      ...small,
      '--router-mode',
      'kv',
      '--event-delay-ms',
      '20',
      '--report-json',
      a,
    );
    expect(r1.code).toBe(0);
    expect(r1.out).toMatch(/policy kv · 8 requests \(8 finished/);
    expect(r1.out).toMatch(/oracle {7}pooled LRU/);
    const r2 = await cli(
      'run',
      trace,
      ...small,
      '--event-delay-ms',
      '20',
      '--router-mode=kv',
      '--report-json',
      b,
    );
    expect(r2.code).toBe(0);
    expect(readFileSync(b, 'utf8')).toBe(readFileSync(a, 'utf8'));
    const rep = JSON.parse(readFileSync(a, 'utf8')) as {
      config: { router: { routerMode: string }; eventDelayMs: number };
    };
    expect(rep.config.router.routerMode).toBe('kv');
    expect(rep.config.eventDelayMs).toBe(20);
  });

  it('reports malformed rows by line number and skips them, or aborts with --strict', async () => {
    const bad = join(dir, 'bad.jsonl');
    const good = readFileSync(trace, 'utf8').split('\n')[0]!;
    writeFileSync(
      bad,
      `${good}\n{"timestamp": 1, "input_length": "x", "output_length": 1, "hash_ids": []}\n${good}\n`,
    );
    const r = await cli(bad, ...small);
    expect(r.code).toBe(0);
    expect(r.err).toContain(`${bad}:2: input_length must be an integer >= 1, got "x" (row skipped)`);
    expect(r.out).toMatch(/2 requests \(2 finished/);
    const s = await cli(bad, ...small, '--strict');
    expect(s.code).toBe(2);
    expect(s.err).toContain('error: trace line 2: input_length must be an integer >= 1');
  });

  it('compares configurations: table of ratios and an SVG', async () => {
    const svg = join(dir, 'c.svg');
    const json = join(dir, 'c.json');
    const r = await cli(
      ...vsRoundRobin('--router-mode kv --router-predicted-ttl-secs 5'),
      '--svg',
      svg,
      '--report-json',
      json,
    );
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/config\s+TTFT mean ms\s+x base/);
    expect(r.out).toMatch(/\n--router-mode kv --router-predicted-ttl-secs 5\s+\d/);
    expect(readFileSync(svg, 'utf8')).toContain('<polyline');
    const reports = JSON.parse(readFileSync(json, 'utf8')) as { config: { label: string } }[];
    expect(reports.map((x) => x.config.label)).toEqual([
      'round-robin',
      '--router-mode kv --router-predicted-ttl-secs 5',
    ]);
  });

  it('sweeps loads relative to round-robin capacity: a table per load, the chart and JSON', async () => {
    const svg = join(dir, 's.svg');
    const md = join(dir, 's.md');
    const json = join(dir, 's.json');
    const r = await cli(
      ...vsRoundRobin('--router-mode kv --ttft-aware'),
      '--sweep',
      '0.5,1.1',
      '--svg',
      svg,
      '--sweep-md',
      md,
      '--report-json',
      json,
    );
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/round-robin capacity: [\d.]+ req\/s/);
    const table = readFileSync(md, 'utf8').trim().split('\n');
    // Header, separator, 2 loads × 2 configurations.
    expect(table).toHaveLength(6);
    expect(table[2]).toMatch(/^\| 50 % \| [\d.]+ \| round-robin \|/);
    expect(table[5]).toMatch(/^\| 110 % \| [\d.]+ \| --router-mode kv --ttft-aware \|/);
    expect(readFileSync(svg, 'utf8').match(/<polyline/g)).toHaveLength(4);
    const j = JSON.parse(readFileSync(json, 'utf8')) as { points: { load: number; reports: unknown[] }[] };
    expect(j.points.map((p) => [p.load, p.reports.length])).toEqual([
      [0.5, 2],
      [1.1, 2],
    ]);
    const bad = await cli('compare', trace, ...small, '--sweep', '0.5,-1');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--sweep: expected loads in (0, 10] separated by commas, got "0.5,-1"');
  });

  it('fails with the config message and exit code 2 on a bad router flag or option', async () => {
    const r = await cli(trace, ...small, '--router-temperature', '-2');
    expect(r.code).toBe(2);
    expect(r.err).toContain('--router-temperature must be >= 0');
    const w = await cli(trace, '--num-workers', '0');
    expect(w.code).toBe(2);
    expect(w.err).toContain('--num-workers must be an integer in [1, 4096], got 0');
    const none = await cli('--no-progress');
    expect(none.code).toBe(1);
    expect(none.err).toContain('no workload');
  });
});
