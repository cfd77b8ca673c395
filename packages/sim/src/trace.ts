/**
 * Mooncake-format traces (docs/protocol.md §18): one JSON object per line,
 * `{timestamp, input_length, output_length, hash_ids, session_id?, delay?}`.
 * Parsing is pure (the CLI reads the file): a malformed row is reported with its 1-based line
 * number and the field at fault, then skipped; `strict` turns the first one into an error.
 */
import { KvrError } from '@kvrouter/protocols';

export interface TraceRow {
  /** Arrival time in ms, relative (`created_time` is accepted as an alias on input). */
  timestamp: number;
  input_length: number;
  /** Becomes `max_tokens`, EOS ignored. */
  output_length: number;
  /** One id per trace block; equal ids mean equal content. Non-negative safe integers. */
  hash_ids: number[];
  /** Rows sharing it are turns of one session, issued in order. */
  session_id?: string;
  /** Think time in ms between the previous turn's end and this turn (sessions only). */
  delay?: number;
  /**
   * 0-based line index in the source (position for generated traces). Token synthesis derives the
   * request-unique overflow id from it, so skipping a bad row never changes another row's tokens.
   */
  index: number;
}

export interface TraceIssue {
  /** 1-based line number. */
  line: number;
  field: string;
  message: string;
}

export interface ParsedTrace {
  rows: TraceRow[];
  /** Malformed rows that were skipped (empty with `strict`, which throws instead). */
  issues: TraceIssue[];
  /** Non-blank lines seen. */
  lines: number;
}

export interface ParseOptions {
  /** Throw `invalid_trace` on the first malformed row instead of skipping it. */
  strict?: boolean;
}

class RowError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

function count(o: Record<string, unknown>, field: string, min: number): number {
  const v = o[field];
  if (v === undefined) throw new RowError(field, `${field} is missing`);
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw new RowError(field, `${field} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  }
  return v;
}

function millis(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
    throw new RowError(field, `${field} must be a finite number >= 0 (ms), got ${JSON.stringify(v)}`);
  }
  return v;
}

/** Validates one decoded JSON value as a row; throws RowError naming the field. */
function toRow(v: unknown, index: number): TraceRow {
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new RowError('row', 'row must be a JSON object');
  const o = v as Record<string, unknown>;
  const tsField =
    o.timestamp !== undefined ? 'timestamp' : o.created_time !== undefined ? 'created_time' : undefined;
  if (tsField === undefined) throw new RowError('timestamp', 'timestamp is missing');
  const timestamp = millis(o[tsField], tsField);
  const input_length = count(o, 'input_length', 1);
  const output_length = count(o, 'output_length', 1);
  const ids = o.hash_ids;
  if (!Array.isArray(ids))
    throw new RowError('hash_ids', `hash_ids must be an array, got ${JSON.stringify(ids)}`);
  for (let i = 0; i < ids.length; i++) {
    const h: unknown = ids[i];
    if (typeof h !== 'number' || !Number.isSafeInteger(h) || h < 0) {
      throw new RowError(
        'hash_ids',
        `hash_ids[${i}] must be an integer in [0, 2^53), got ${JSON.stringify(h)}`,
      );
    }
  }
  const row: TraceRow = { timestamp, input_length, output_length, hash_ids: ids as number[], index };
  const sid = o.session_id;
  if (sid !== undefined && sid !== null) {
    if (typeof sid === 'string' && sid !== '') row.session_id = sid;
    else if (typeof sid === 'number' && Number.isSafeInteger(sid)) row.session_id = String(sid);
    else
      throw new RowError(
        'session_id',
        `session_id must be a non-empty string or an integer, got ${JSON.stringify(sid)}`,
      );
  }
  if (o.delay !== undefined && o.delay !== null) row.delay = millis(o.delay, 'delay');
  return row;
}

/** Parses JSONL text. Blank lines are ignored; `\r\n` line ends are accepted. */
export function parseTrace(text: string, opts: ParseOptions = {}): ParsedTrace {
  const rows: TraceRow[] = [];
  const issues: TraceIssue[] = [];
  let lines = 0;
  let start = 0;
  for (let n = 0; start <= text.length; n++) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end).trim();
    start = end + 1;
    if (line === '') continue;
    lines++;
    try {
      let v: unknown;
      try {
        v = JSON.parse(line);
      } catch (e) {
        throw new RowError('row', `not valid JSON (${(e as Error).message})`);
      }
      rows.push(toRow(v, n));
    } catch (e) {
      if (!(e instanceof RowError)) throw e;
      if (opts.strict) {
        throw new KvrError('invalid_trace', `trace line ${n + 1}: ${e.message}`, 400, {
          line: n + 1,
          field: e.field,
        });
      }
      issues.push({ line: n + 1, field: e.field, message: e.message });
    }
  }
  return { rows, issues, lines };
}

/** Validates rows built in code (generator, tests) with the same rules; throws naming row and field. */
export function checkRows(rows: readonly TraceRow[]): void {
  for (let i = 0; i < rows.length; i++) {
    try {
      toRow(rows[i], rows[i]!.index);
    } catch (e) {
      if (!(e instanceof RowError)) throw e;
      throw new KvrError('invalid_trace', `trace row ${i}: ${e.message}`, 400, { row: i, field: e.field });
    }
  }
}

/** JSONL in Mooncake field order; `index` is positional and not written. */
export function formatTrace(rows: readonly TraceRow[]): string {
  const out: string[] = [];
  for (const r of rows) {
    let s = `{"timestamp":${r.timestamp},"input_length":${r.input_length},"output_length":${r.output_length},"hash_ids":[${r.hash_ids.join(',')}]`;
    if (r.session_id !== undefined) s += `,"session_id":${JSON.stringify(r.session_id)}`;
    if (r.delay !== undefined) s += `,"delay":${r.delay}`;
    out.push(s + '}');
  }
  return out.length ? out.join('\n') + '\n' : '';
}
