/**
 * The page's "last decisions" come from the router's own decision log (`KvRouterOptions.decisionLog`:
 * the chosen worker and every candidate's cost terms as one JSON line). `decisionLogWithTap` puts
 * the dashboard beside the user's `--decision-log` on that one option:
 *
 * - while no page is open, a decision costs what it cost before (no user log: one comparison; a
 *   user log: its own sample draw);
 * - while a page is open, at most one decision per `minGapMs` (default 200 ms, so ≤ 5/s at any
 *   request rate) is logged to the tap as well, at the cost of building its line.
 */
import { parseJson } from '@kvrouter/protocols';
import type { DecisionRow } from './types.js';

/** Same shape as `@kvrouter/router`'s `DecisionLogOptions`. */
export interface DecisionLog {
  sink: (line: string) => void;
  sampleRate: number;
  random?: () => number;
}

export interface DecisionTapOptions {
  /** Rows kept (default 64). */
  capacity?: number;
  /** Least ms between two tapped decisions (default 200). */
  minGapMs?: number;
  /** ms clock (default `performance.now`). */
  now?: () => number;
}

const num = (v: unknown): number => (typeof v === 'number' ? v : typeof v === 'bigint' ? Number(v) : 0);
const id = (v: unknown): string => (typeof v === 'bigint' || typeof v === 'number' ? String(v) : '');

/** A ring of the last sampled decisions. `active` is set by the hub while a page is open. */
export class DecisionTap {
  active = false;
  private readonly rows: (DecisionRow | undefined)[];
  private next = 0;
  private size = 0;
  private last = -Infinity;
  private readonly minGapMs: number;
  private readonly now: () => number;

  constructor(o: DecisionTapOptions = {}) {
    this.rows = new Array<DecisionRow | undefined>(o.capacity ?? 64);
    this.minGapMs = o.minGapMs ?? 200;
    this.now = o.now ?? (() => performance.now());
  }

  /** True when the tap wants this decision (and counts it as taken). */
  due(): boolean {
    if (!this.active) return false;
    const t = this.now();
    if (t - this.last < this.minGapMs) return false;
    this.last = t;
    return true;
  }

  /** One decision-log line; lines that do not parse are dropped. */
  push(line: string): void {
    let o: Record<string, unknown>;
    try {
      o = parseJson(line) as Record<string, unknown>;
    } catch {
      return;
    }
    if (!o || typeof o !== 'object') return;
    const cands = Array.isArray(o.candidates) ? (o.candidates as Record<string, unknown>[]) : [];
    const row: DecisionRow = {
      ts: num(o.ts),
      model: null,
      request_id: typeof o.request_id === 'string' ? o.request_id : '',
      reason: typeof o.reason === 'string' ? o.reason : '',
      worker_id: id(o.worker_id),
      dp_rank: num(o.dp_rank),
      required_blocks: num(o.required_blocks),
      overlap_blocks: num(o.overlap_blocks),
      kv_hit_rate: num(o.kv_hit_rate),
      queued_ms: num(o.queued_ms),
      busy_filtered: num(o.busy_filtered),
      temperature: num(o.temperature),
      candidates: cands.map((c) => ({
        worker_id: id(c.worker_id),
        dp_rank: num(c.dp_rank),
        device_blocks: num(c.device_blocks),
        prefill_term: num(c.prefill_term),
        decode: num(c.decode),
        additional: num(c.additional),
        cost: num(c.cost),
      })),
    };
    this.rows[this.next] = row;
    this.next = (this.next + 1) % this.rows.length;
    if (this.size < this.rows.length) this.size++;
  }

  /** The last `n` rows, newest first. */
  recent(n: number): DecisionRow[] {
    const out: DecisionRow[] = [];
    const cap = this.rows.length;
    for (let i = 1; i <= Math.min(n, this.size); i++) out.push(this.rows[(this.next - i + cap) % cap]!);
    return out;
  }
}

/**
 * The `decisionLog` option for a router: the user's log (or none) plus the tap. The router asks
 * `random() < sampleRate` once per decision and, when true, hands the line to `sink` in the same
 * call, so the draw made in `random` says where the line goes.
 */
export function decisionLogWithTap(user: DecisionLog | null, tap: DecisionTap): DecisionLog {
  const userRate = user ? user.sampleRate : 0;
  const userRandom = user?.random ?? Math.random;
  let toUser = false;
  let toTap = false;
  return {
    sampleRate: 0.5,
    random: () => {
      toUser = userRate > 0 && userRandom() < userRate;
      toTap = tap.active && tap.due();
      return toUser || toTap ? 0 : 1;
    },
    sink: (line) => {
      if (toTap) tap.push(line);
      if (toUser) user!.sink(line);
    },
  };
}
