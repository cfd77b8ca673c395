import { describe, expect, it } from 'vitest';
import { SimRng } from './rng.js';
import { generateSynthetic, parseDist, PRESETS, resolveSynthetic, sample } from './synthetic.js';
import { checkRows } from './trace.js';

describe('generateSynthetic', () => {
  const spec = {
    sessions: 30,
    turns: { kind: 'uniform', min: 2, max: 5 },
    systemPrompts: 3,
    systemPromptTokens: 1000, // 2 trace blocks of 512
    userTokens: { kind: 'lognormal', median: 300, sigma: 0.5, min: 10, max: 2000 },
    outputTokens: { kind: 'uniform', min: 5, max: 50 },
    sessionRate: 2,
    thinkTimeMs: { kind: 'exp', mean: 1000, min: 10, max: 5000 },
  } as const;

  it('is a pure function of (spec, seed)', () => {
    expect(generateSynthetic(spec, 3)).toEqual(generateSynthetic(spec, 3));
    expect(generateSynthetic(spec, 3)).not.toEqual(generateSynthetic(spec, 4));
  });

  it('builds sessions whose turns extend the previous prompt and answer', () => {
    const rows = generateSynthetic(spec, 1);
    checkRows(rows);
    expect(rows.map((r) => r.index)).toEqual(rows.map((_, i) => i));
    for (let i = 1; i < rows.length; i++)
      expect(rows[i]!.timestamp).toBeGreaterThanOrEqual(rows[i - 1]!.timestamp);
    const bySession = new Map<string, typeof rows>();
    for (const r of rows) {
      expect(r.session_id).toBeDefined();
      bySession.set(r.session_id!, [...(bySession.get(r.session_id!) ?? []), r]);
    }
    expect(bySession.size).toBe(30);
    const sysIds = new Set<string>();
    for (const turns of bySession.values()) {
      expect(turns.length).toBeGreaterThanOrEqual(2);
      expect(turns.length).toBeLessThanOrEqual(5);
      // Turn 1: two shared system-prompt blocks (ids 0..5, prompt p owns 2p, 2p + 1), then the user message.
      const first = turns[0]!;
      const p = first.hash_ids[0]! / 2;
      expect(Number.isInteger(p) && p >= 0 && p < 3).toBe(true);
      expect(first.hash_ids.slice(0, 2)).toEqual([2 * p, 2 * p + 1]);
      sysIds.add(first.hash_ids.slice(0, 2).join(','));
      expect(first.delay).toBeUndefined();
      for (let k = 1; k < turns.length; k++) {
        const prev = turns[k - 1]!;
        const cur = turns[k]!;
        // History grows by the previous answer plus a new user message (10..2000 tokens).
        const grown = cur.input_length - prev.input_length - prev.output_length;
        expect(grown).toBeGreaterThanOrEqual(10);
        expect(grown).toBeLessThanOrEqual(2000);
        expect(cur.hash_ids.slice(0, prev.hash_ids.length)).toEqual(prev.hash_ids);
        expect(cur.hash_ids.length).toBe(Math.ceil(cur.input_length / 512));
        expect(cur.delay).toBeGreaterThanOrEqual(10);
        expect(cur.timestamp).toBe(prev.timestamp + cur.delay!);
      }
    }
    expect(sysIds.size).toBeGreaterThan(1);
    // Session-private ids never repeat across sessions.
    const owner = new Map<number, string>();
    for (const r of rows) {
      for (const h of r.hash_ids.slice(2)) {
        const o = owner.get(h);
        if (o !== undefined) expect(o).toBe(r.session_id);
        owner.set(h, r.session_id!);
      }
    }
  });

  it('repeats a task as identical samples without sessions', () => {
    const rows = generateSynthetic({ ...PRESETS.burst, sessions: 3 }, 2);
    expect(rows.length).toBe(12);
    for (let t = 0; t < 3; t++) {
      const group = rows.slice(4 * t, 4 * t + 4);
      for (const r of group) {
        expect(r.session_id).toBeUndefined();
        expect(r.hash_ids).toEqual(group[0]!.hash_ids);
        expect(r.timestamp).toBe(group[0]!.timestamp);
      }
      // One shared 4096-token system prompt = 8 trace blocks, ids 0..7, then 2048 task tokens.
      expect(group[0]!.hash_ids.slice(0, 8)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(group[0]!.input_length).toBe(4096 + 2048);
    }
  });

  it('rejects bad specs naming the field', () => {
    expect(() => resolveSynthetic({ sessions: 0 })).toThrow(/sessions must be an integer >= 1/);
    expect(() => resolveSynthetic({ sessionRate: 0 })).toThrow(/sessionRate/);
    expect(() => resolveSynthetic({ samples: 2, turns: { kind: 'const', value: 3 } })).toThrow(/samples/);
    expect(() => resolveSynthetic({ userTokens: { kind: 'uniform', min: 5, max: 4 } })).toThrow(
      /userTokens.max/,
    );
    expect(() => resolveSynthetic({ systemPrompts: 2, systemPromptTokens: 0 })).toThrow(/systemPromptTokens/);
  });
});

describe('distributions', () => {
  it('parses the textual forms', () => {
    expect(parseDist('128')).toEqual({ kind: 'const', value: 128 });
    expect(parseDist('uniform:4:8')).toEqual({ kind: 'uniform', min: 4, max: 8 });
    expect(parseDist('lognormal:600:0.5:64:4096')).toEqual({
      kind: 'lognormal',
      median: 600,
      sigma: 0.5,
      min: 64,
      max: 4096,
    });
    expect(parseDist('exp:500')).toEqual({ kind: 'exp', mean: 500 });
    expect(() => parseDist('uniform:4', '--turns')).toThrow(/--turns cannot parse/);
    expect(() => parseDist('zipf:1', '--turns')).toThrow(/--turns has unknown distribution/);
  });

  it('samples within bounds', () => {
    const rng = new SimRng(1);
    const seen = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const u = sample({ kind: 'uniform', min: 3, max: 5 }, rng);
      seen.add(u);
      const l = sample({ kind: 'lognormal', median: 100, sigma: 2, min: 10, max: 200 }, rng);
      expect(l >= 10 && l <= 200).toBe(true);
    }
    expect([...seen].sort()).toEqual([3, 4, 5]);
    // exp(mean 100) has mean 100: the sample mean of 20 000 draws is within 3 %.
    let sum = 0;
    for (let i = 0; i < 20_000; i++) sum += sample({ kind: 'exp', mean: 100 }, rng);
    expect(Math.abs(sum / 20_000 - 100)).toBeLessThan(3);
  });
});
