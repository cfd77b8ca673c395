/**
 * A one-line progress bar on stderr, redrawn in place at most every `intervalMs` of wall time.
 * Off when stderr is not a terminal (logs and CI get the final summary only).
 */

export interface ProgressState {
  done: number;
  total: number;
  /** Simulated (offline) or elapsed trace (online) time, ms. */
  traceMs: number;
  wallMs: number;
  label?: string;
}

const clock = (ms: number): string => {
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
};

/** The bar text for a state, `width` cells wide (pure: tested as a string). */
export function renderProgress(p: ProgressState, width = 30): string {
  const f = p.total > 0 ? Math.min(1, p.done / p.total) : 0;
  const full = Math.round(f * width);
  const bar = '#'.repeat(full) + '-'.repeat(width - full);
  const rate = p.wallMs > 0 ? ` · ${(p.traceMs / p.wallMs).toFixed(0)}x real time` : '';
  const label = p.label ? `${p.label} ` : '';
  return `${label}[${bar}] ${(f * 100).toFixed(0).padStart(3)}% ${p.done}/${p.total} req · trace ${clock(p.traceMs)} · wall ${(p.wallMs / 1000).toFixed(1)} s${rate}`;
}

export interface ProgressSink {
  isTTY?: boolean;
  columns?: number;
  write(s: string): unknown;
}

export class ProgressBar {
  private last = -Infinity;
  private shown = false;
  private readonly t0: number;

  constructor(
    private readonly out: ProgressSink,
    private readonly enabled: boolean,
    private readonly now: () => number = () => performance.now(),
    private readonly intervalMs = 100,
    private readonly label?: string,
  ) {
    this.t0 = now();
  }

  update(done: number, total: number, traceMs: number, force = false): void {
    if (!this.enabled) return;
    const t = this.now();
    if (!force && t - this.last < this.intervalMs) return;
    this.last = t;
    const line = renderProgress({ done, total, traceMs, wallMs: t - this.t0, label: this.label });
    const cols = this.out.columns ?? 120;
    this.out.write(`\r${line.length >= cols ? line.slice(0, cols - 1) : line}\x1b[K`);
    this.shown = true;
  }

  /** Leaves the cursor on a fresh line. */
  finish(): void {
    if (this.shown) this.out.write('\n');
    this.shown = false;
  }
}
