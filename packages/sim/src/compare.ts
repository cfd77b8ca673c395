/**
 * `replay compare` output: a text table of each configuration against the first one (the
 * baseline) and a self-contained SVG with the TTFT CDFs and the hit rates beside the oracle
 * bounds. Pure string building; the CLI writes the files.
 */
import type { Report } from './report.js';
import type { RequestColumns } from './simulation.js';

export interface CompareEntry {
  label: string;
  report: Report;
  /** TTFT of every finished request, ms. */
  ttftMs: Float64Array;
}

/** TTFT samples of the finished requests. */
export function ttftSamples(c: RequestColumns): Float64Array {
  const out: number[] = [];
  for (let k = 0; k < c.arrival.length; k++)
    if (c.status[k] === 1) out.push(c.firstToken[k]! - c.arrival[k]!);
  return Float64Array.from(out).sort();
}

const fmt = (x: number | null | undefined, digits = 1): string =>
  x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(digits);
const ratio = (x: number, base: number): string =>
  base > 0 && Number.isFinite(x) ? `${(x / base).toFixed(2)}x` : '-';
const pct = (x: number | null | undefined): string =>
  x === null || x === undefined ? '-' : `${(x * 100).toFixed(1)}%`;

/** Fixed-width table; ratios are value / baseline (the first entry), so < 1 is better for latencies. */
export function compareTable(entries: readonly CompareEntry[]): string {
  if (entries.length === 0) return '';
  const b = entries[0]!.report;
  const head = [
    'config',
    'TTFT mean ms',
    'x base',
    'TTFT p50',
    'TTFT p99',
    'ITL mean',
    'E2E mean',
    'x base',
    'hit rate',
    'x base',
    'of pooled',
    'req/s',
    'busy CV',
  ];
  const rows = entries.map(({ label, report: r }) => [
    label,
    fmt(r.ttft_ms.mean),
    ratio(r.ttft_ms.mean, b.ttft_ms.mean),
    fmt(r.ttft_ms.p50),
    fmt(r.ttft_ms.p99),
    fmt(r.itl_ms.mean, 2),
    fmt(r.e2e_ms.mean),
    ratio(r.e2e_ms.mean, b.e2e_ms.mean),
    pct(r.cache.hit_rate),
    ratio(r.cache.hit_rate, b.cache.hit_rate),
    pct(r.oracle?.fraction_of_pooled),
    fmt(r.throughput.requests_per_s, 3),
    fmt(r.load_balance?.busy_cv, 3),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const out = [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
  const o = b.oracle;
  if (o)
    out.push(
      '',
      `oracle: pooled LRU ${pct(o.pooled_lru_hit_rate)} · infinite cache ${pct(o.infinite_hit_rate)} (capacity ${o.capacity_blocks} blocks)`,
    );
  return out.join('\n') + '\n';
}

const PALETTE = [
  '#1f77b4',
  '#d62728',
  '#2ca02c',
  '#ff7f0e',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#17becf',
  '#7f7f7f',
  '#bcbd22',
];
const esc = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const n2 = (x: number): string => (Math.round(x * 100) / 100).toString();

/**
 * A log axis over the whole decades `10^d0 … 10^d1` that contain the positive values (at least one
 * decade; 1–10 when there are none), and a value's place on it (0..1; below the axis: 0).
 */
function logDecades(values: Iterable<number>): { d0: number; d1: number; at: (v: number) => number } {
  let lo = Infinity;
  let hi = 0;
  for (const v of values) {
    if (v > 0 && v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (!Number.isFinite(lo)) {
    lo = 1;
    hi = 10;
  }
  const d0 = Math.floor(Math.log10(lo));
  const d1 = Math.max(d0 + 1, Math.ceil(Math.log10(hi)));
  return { d0, d1, at: (v) => (Math.log10(Math.max(v, 10 ** d0)) - d0) / (d1 - d0) };
}

/** Two panels: TTFT CDF (log-scale ms) and hit rate per configuration with the oracle bounds. */
export function compareSvg(entries: readonly CompareEntry[], title = 'kvrouter replay compare'): string {
  const W = 1060; // room right of the hit-rate panel for the oracle labels
  const H = 450 + 18 * Math.ceil(Math.max(1, entries.length) / 3);
  const L = { x: 70, y: 60, w: 520, h: 320 };
  const R = { x: 680, y: 60, w: 250, h: 320 };
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="16">${esc(title)}</text>`,
  );
  // Left: CDFs on a log axis spanning the decades that contain the data.
  const { d0, d1, at } = logDecades(
    (function* () {
      for (const e of entries) yield* e.ttftMs;
    })(),
  );
  const xOf = (v: number): number => L.x + at(v) * L.w;
  const yOf = (p: number): number => L.y + L.h - p * L.h;
  parts.push(
    `<text x="${L.x + L.w / 2}" y="${L.y - 12}" text-anchor="middle" font-size="14">TTFT CDF</text>`,
  );
  parts.push(`<rect x="${L.x}" y="${L.y}" width="${L.w}" height="${L.h}" fill="none" stroke="#333"/>`);
  for (let d = d0; d <= d1; d++) {
    const x = n2(xOf(10 ** d));
    parts.push(`<line x1="${x}" y1="${L.y}" x2="${x}" y2="${L.y + L.h}" stroke="#ddd"/>`);
    parts.push(
      `<text x="${x}" y="${L.y + L.h + 16}" text-anchor="middle">${10 ** d >= 1 ? 10 ** d : (10 ** d).toPrecision(1)}</text>`,
    );
  }
  for (let p = 0; p <= 4; p++) {
    const y = n2(yOf(p / 4));
    parts.push(`<line x1="${L.x}" y1="${y}" x2="${L.x + L.w}" y2="${y}" stroke="#eee"/>`);
    parts.push(`<text x="${L.x - 8}" y="${y}" text-anchor="end" dominant-baseline="middle">${p / 4}</text>`);
  }
  parts.push(
    `<text x="${L.x + L.w / 2}" y="${L.y + L.h + 36}" text-anchor="middle">time to first token, ms (log scale)</text>`,
  );
  parts.push(
    `<text x="18" y="${L.y + L.h / 2}" text-anchor="middle" transform="rotate(-90 18 ${L.y + L.h / 2})">fraction of requests</text>`,
  );
  entries.forEach((e, i) => {
    const s = e.ttftMs;
    if (s.length === 0) return;
    // At most ~400 points per curve: every k-th sample plus the last.
    const step = Math.max(1, Math.floor(s.length / 400));
    const pts: string[] = [];
    for (let k = 0; k < s.length; k += step) pts.push(`${n2(xOf(s[k]!))},${n2(yOf((k + 1) / s.length))}`);
    pts.push(`${n2(xOf(s[s.length - 1]!))},${n2(yOf(1))}`);
    parts.push(
      `<polyline fill="none" stroke="${PALETTE[i % PALETTE.length]}" stroke-width="2" points="${pts.join(' ')}"/>`,
    );
  });
  // Right: hit-rate bars with the oracle lines.
  parts.push(
    `<text x="${R.x + R.w / 2}" y="${R.y - 12}" text-anchor="middle" font-size="14">prompt cache hit rate</text>`,
  );
  parts.push(`<rect x="${R.x}" y="${R.y}" width="${R.w}" height="${R.h}" fill="none" stroke="#333"/>`);
  const yr = (p: number): number => R.y + R.h - p * R.h;
  for (let p = 0; p <= 4; p++) {
    const y = n2(yr(p / 4));
    parts.push(`<line x1="${R.x}" y1="${y}" x2="${R.x + R.w}" y2="${y}" stroke="#eee"/>`);
    parts.push(
      `<text x="${R.x - 8}" y="${y}" text-anchor="end" dominant-baseline="middle">${p * 25}%</text>`,
    );
  }
  const bw = R.w / Math.max(1, entries.length);
  entries.forEach((e, i) => {
    const h = e.report.cache.hit_rate;
    const x = R.x + i * bw + bw * 0.15;
    parts.push(
      `<rect x="${n2(x)}" y="${n2(yr(h))}" width="${n2(bw * 0.7)}" height="${n2(h * R.h)}" fill="${PALETTE[i % PALETTE.length]}"/>`,
    );
    parts.push(
      `<text x="${n2(x + bw * 0.35)}" y="${n2(yr(h) - 4)}" text-anchor="middle">${(h * 100).toFixed(1)}</text>`,
    );
  });
  const o = entries[0]?.report.oracle;
  if (o) {
    // Labels sit above (pooled) and below (infinite) their lines so they never overlap.
    for (const [v, name, dash, dy] of [
      [o.pooled_lru_hit_rate, 'pooled LRU', '6 4', -6],
      [o.infinite_hit_rate, 'infinite', '2 3', 12],
    ] as const) {
      const y = yr(v);
      parts.push(
        `<line x1="${R.x}" y1="${n2(y)}" x2="${R.x + R.w}" y2="${n2(y)}" stroke="#000" stroke-dasharray="${dash}"/>`,
      );
      parts.push(
        `<text x="${R.x + R.w + 4}" y="${n2(y + dy)}" font-size="10">${name} ${(v * 100).toFixed(1)}%</text>`,
      );
    }
  }
  // Legend under both panels.
  entries.forEach((e, i) => {
    const x = L.x + (i % 3) * 300;
    const y = L.y + L.h + 56 + Math.floor(i / 3) * 18;
    parts.push(`<rect x="${x}" y="${y - 9}" width="14" height="10" fill="${PALETTE[i % PALETTE.length]}"/>`);
    parts.push(`<text x="${x + 20}" y="${y}">${esc(e.label)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}

/** One load point of `replay compare --sweep`: every configuration's report at that load. */
export interface SweepPoint {
  /** Fraction of round-robin's capacity. */
  load: number;
  offeredRps: number;
  /**
   * Mean TTFT with no queueing at the oracle's hit rate (NaN without the oracle): each request's
   * uncached share prefilled with no queue ahead of it, its passes carrying the decode step of
   * that load's concurrent decodes.
   */
  idealTtftMs: number;
  /** The same prefilled alone on an idle engine (no decode step): the first definition of the limit. */
  idealIdleTtftMs?: number;
  /** Round-robin's run at this load: share of engine time in decoding passes, mean decode step ms. */
  decodeShare?: number;
  decodeStepMs?: number;
  entries: { label: string; report: Report }[];
}

/**
 * Markdown table per sweep: load, offered req/s, then per configuration mean / p90 TTFT, hit rate
 * as % of the pooled-LRU oracle, and the mean-TTFT ratio over the baseline (`baseline` = index of
 * round-robin among the entries) beside that load point's limit (baseline mean TTFT / ideal TTFT).
 */
export function sweepTable(points: readonly SweepPoint[], baseline = 0): string {
  const idle = points.some((p) => p.idealIdleTtftMs !== undefined);
  const head =
    '| load (% of RR capacity) | offered req/s | policy | TTFT mean ms | TTFT p90 ms | hit rate | % of oracle | TTFT ratio RR/policy | limit | ratio / limit |' +
    (idle ? ' limit, idle engine | ratio / idle-engine limit |' : '');
  const out = [head, '|' + head.slice(1).replace(/[^|]+/g, '---')];
  for (const p of points) {
    const base = p.entries[baseline]?.report.ttft_ms.mean ?? NaN;
    const limit = base / p.idealTtftMs;
    const idleLimit = base / (p.idealIdleTtftMs ?? NaN);
    for (const e of p.entries) {
      const r = e.report;
      const ratioV = base / r.ttft_ms.mean;
      out.push(
        `| ${Math.round(p.load * 100)} % | ${fmt(p.offeredRps, 2)} | ${e.label} | ${fmt(r.ttft_ms.mean, 0)} | ${fmt(r.ttft_ms.p90, 0)} | ${pct(r.cache.hit_rate)} | ${pct(r.oracle?.fraction_of_pooled)} | ${fmt(ratioV, 2)} | ${fmt(limit, 2)} | ${pct(ratioV / limit)} |` +
          (idle ? ` ${fmt(idleLimit, 2)} | ${pct(ratioV / idleLimit)} |` : ''),
      );
    }
  }
  return out.join('\n') + '\n';
}

/** Two panels against offered load (% of round-robin's capacity): hit rate as % of the oracle, mean TTFT (log). */
export function sweepSvg(points: readonly SweepPoint[], title = 'kvrouter replay sweep'): string {
  const labels = points[0]?.entries.map((e) => e.label) ?? [];
  const W = 1060;
  const H = 470 + 18 * Math.ceil(Math.max(1, labels.length) / 3);
  const L = { x: 70, y: 60, w: 420, h: 320 };
  const R = { x: 590, y: 60, w: 420, h: 320 };
  const loads = points.map((p) => p.load);
  const lmin = Math.min(...loads, 1);
  const lmax = Math.max(...loads, 0);
  const span = lmax > lmin ? lmax - lmin : 1;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="16">${esc(title)}</text>`,
  ];
  const xIn = (P: typeof L, load: number): number => P.x + ((load - lmin) / span) * P.w;
  const frame = (P: typeof L, name: string, ylabel: string): void => {
    parts.push(
      `<text x="${P.x + P.w / 2}" y="${P.y - 12}" text-anchor="middle" font-size="14">${esc(name)}</text>`,
    );
    parts.push(`<rect x="${P.x}" y="${P.y}" width="${P.w}" height="${P.h}" fill="none" stroke="#333"/>`);
    for (const l of loads) {
      const x = n2(xIn(P, l));
      parts.push(`<line x1="${x}" y1="${P.y}" x2="${x}" y2="${P.y + P.h}" stroke="#eee"/>`);
      parts.push(`<text x="${x}" y="${P.y + P.h + 16}" text-anchor="middle">${Math.round(l * 100)}%</text>`);
    }
    parts.push(
      `<text x="${P.x + P.w / 2}" y="${P.y + P.h + 36}" text-anchor="middle">offered load, % of round-robin's capacity</text>`,
    );
    parts.push(
      `<text x="${P.x - 50}" y="${P.y + P.h / 2}" text-anchor="middle" transform="rotate(-90 ${P.x - 50} ${P.y + P.h / 2})">${esc(ylabel)}</text>`,
    );
  };
  // Left: hit rate as % of the pooled oracle, 0..110 %.
  frame(L, 'prompt cache hit rate, % of pooled-LRU oracle', '% of oracle');
  const yHit = (f: number): number => L.y + L.h - (Math.min(1.1, Math.max(0, f)) / 1.1) * L.h;
  for (const v of [0, 0.25, 0.5, 0.75, 0.95, 1]) {
    const y = n2(yHit(v));
    parts.push(
      `<line x1="${L.x}" y1="${y}" x2="${L.x + L.w}" y2="${y}" stroke="${v === 0.95 ? '#999' : '#eee'}"${v === 0.95 ? ' stroke-dasharray="6 4"' : ''}/>`,
    );
    parts.push(
      `<text x="${L.x - 8}" y="${y}" text-anchor="end" dominant-baseline="middle">${Math.round(v * 100)}%</text>`,
    );
  }
  // Right: mean TTFT, log scale over the decades of the data.
  const { d0, d1, at } = logDecades(points.flatMap((p) => p.entries.map((e) => e.report.ttft_ms.mean)));
  const yT = (v: number): number => R.y + R.h - at(v) * R.h;
  frame(R, 'mean time to first token', 'ms (log scale)');
  for (let d = d0; d <= d1; d++) {
    const y = n2(yT(10 ** d));
    parts.push(`<line x1="${R.x}" y1="${y}" x2="${R.x + R.w}" y2="${y}" stroke="#eee"/>`);
    parts.push(
      `<text x="${R.x - 8}" y="${y}" text-anchor="end" dominant-baseline="middle">${10 ** d}</text>`,
    );
  }
  labels.forEach((label, i) => {
    const color = PALETTE[i % PALETTE.length];
    const hit: string[] = [];
    const ttft: string[] = [];
    for (const p of points) {
      const r = p.entries[i]?.report;
      if (!r) continue;
      const f = r.oracle?.fraction_of_pooled;
      if (f !== undefined && Number.isFinite(f)) hit.push(`${n2(xIn(L, p.load))},${n2(yHit(f))}`);
      if (r.ttft_ms.mean > 0) ttft.push(`${n2(xIn(R, p.load))},${n2(yT(r.ttft_ms.mean))}`);
    }
    for (const pts of [hit, ttft]) {
      parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.join(' ')}"/>`);
      for (const pt of pts) {
        const [x, y] = pt.split(',');
        parts.push(`<circle cx="${x}" cy="${y}" r="3" fill="${color}"/>`);
      }
    }
    const x = L.x + (i % 3) * 300;
    const y = L.y + L.h + 60 + Math.floor(i / 3) * 18;
    parts.push(`<rect x="${x}" y="${y - 9}" width="14" height="10" fill="${color}"/>`);
    parts.push(`<text x="${x + 20}" y="${y}">${esc(label)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
