/**
 * The soak's SVG: stacked time-series panels sharing one time axis (seconds), each with its own
 * y scale and legend, and the injected faults as labelled vertical lines across all panels.
 * Pure string building.
 */

export interface Series {
  label: string;
  /** [t seconds, value]; a null value breaks the line. */
  points: [number, number | null][];
}

export interface Panel {
  title: string;
  unit: string;
  series: Series[];
}

export interface Marker {
  t: number;
  label: string;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function timeSeriesSvg(title: string, panels: Panel[], markers: Marker[], tEnd: number): string {
  const W = 1000;
  const PH = 170;
  const left = 70;
  const right = 180;
  const top = 40;
  const gap = 40;
  const H = top + panels.length * (PH + gap) + 30;
  const x = (t: number) => left + ((W - left - right) * t) / Math.max(1, tEnd);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${left}" y="20" font-size="14" font-weight="bold">${esc(title)}</text>`,
  ];
  panels.forEach((p, i) => {
    const y0 = top + i * (PH + gap);
    let max = 0;
    for (const s of p.series) for (const [, v] of s.points) if (v !== null && v > max) max = v;
    max = max > 0 ? max * 1.1 : 1;
    const y = (v: number) => y0 + PH - (PH * v) / max;
    out.push(
      `<text x="${left}" y="${y0 - 6}" font-weight="bold">${esc(p.title)} (${esc(p.unit)})</text>`,
      `<rect x="${left}" y="${y0}" width="${W - left - right}" height="${PH}" fill="none" stroke="#999"/>`,
    );
    for (const f of [0, 0.5, 1])
      out.push(
        `<text x="${left - 6}" y="${y(max * f) + 4}" text-anchor="end">${+(max * f).toPrecision(3)}</text>`,
      );
    p.series.forEach((s, k) => {
      const color = COLORS[k % COLORS.length]!;
      let d = '';
      let pen = false;
      for (const [t, v] of s.points) {
        if (v === null) {
          pen = false;
          continue;
        }
        d += `${pen ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`;
        pen = true;
      }
      out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="1.5"/>`);
      out.push(
        `<rect x="${W - right + 10}" y="${y0 + 8 + 16 * k}" width="10" height="10" fill="${color}"/>`,
        `<text x="${W - right + 24}" y="${y0 + 17 + 16 * k}">${esc(s.label)}</text>`,
      );
    });
    for (const m of markers)
      out.push(
        `<line x1="${x(m.t).toFixed(1)}" x2="${x(m.t).toFixed(1)}" y1="${y0}" y2="${y0 + PH}" stroke="#888" stroke-dasharray="3,3"/>`,
      );
  });
  markers.forEach((m, k) =>
    out.push(
      `<text x="${x(m.t).toFixed(1)}" y="${top + (k % 2) * 10 - 2 + panels.length * (PH + gap) - gap + 22}" text-anchor="middle" fill="#555">${esc(m.label)}</text>`,
    ),
  );
  for (let t = 0; t <= tEnd; t += Math.max(60, Math.ceil(tEnd / 10 / 60) * 60))
    out.push(`<text x="${x(t).toFixed(1)}" y="${H - 6}" text-anchor="middle">${t}s</text>`);
  out.push('</svg>');
  return out.join('\n');
}
