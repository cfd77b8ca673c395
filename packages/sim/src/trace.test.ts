import { describe, expect, it } from 'vitest';
import { checkRows, formatTrace, parseTrace } from './trace.js';

const good = '{"timestamp": 0, "input_length": 700, "output_length": 10, "hash_ids": [1, 2]}';

describe('parseTrace', () => {
  it('reads Mooncake rows with optional session_id and delay, and created_time for timestamp', () => {
    const t = parseTrace(
      [
        good,
        '',
        '{"created_time": 1500, "input_length": 10, "output_length": 1, "hash_ids": [], "session_id": "a", "delay": 250}',
        '{"timestamp": 2000.5, "input_length": 1, "output_length": 2, "hash_ids": [0], "session_id": 17, "extra": true}',
      ].join('\r\n'),
    );
    expect(t.issues).toEqual([]);
    expect(t.lines).toBe(3);
    expect(t.rows).toEqual([
      { timestamp: 0, input_length: 700, output_length: 10, hash_ids: [1, 2], index: 0 },
      {
        timestamp: 1500,
        input_length: 10,
        output_length: 1,
        hash_ids: [],
        session_id: 'a',
        delay: 250,
        index: 2,
      },
      { timestamp: 2000.5, input_length: 1, output_length: 2, hash_ids: [0], session_id: '17', index: 3 },
    ]);
  });

  it('reports malformed rows with their 1-based line number and field, and skips them', () => {
    const t = parseTrace(
      [
        good,
        '{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []}',
        'not json',
        '{"timestamp": -1, "input_length": 5, "output_length": 1, "hash_ids": []}',
        '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1, -3]}',
        '{"timestamp": 0, "input_length": 5, "output_length": 1.5, "hash_ids": []}',
        '[1, 2]',
        '{"input_length": 5, "output_length": 1, "hash_ids": []}',
        '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [9007199254740993]}',
        '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": "1,2"}',
        '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [], "session_id": ""}',
        '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [], "delay": "soon"}',
        good,
      ].join('\n'),
    );
    expect(t.rows.map((r) => r.index)).toEqual([0, 12]);
    expect(t.issues.map((i) => [i.line, i.field])).toEqual([
      [2, 'input_length'],
      [3, 'row'],
      [4, 'timestamp'],
      [5, 'hash_ids'],
      [6, 'output_length'],
      [7, 'row'],
      [8, 'timestamp'],
      [9, 'hash_ids'],
      [10, 'hash_ids'],
      [11, 'session_id'],
      [12, 'delay'],
    ]);
    expect(t.issues[3]!.message).toContain('hash_ids[1]');
  });

  it('with strict, throws on the first malformed row naming line and field', () => {
    const text = `${good}\n${good}\n{"timestamp": 0, "input_length": 5, "hash_ids": []}\nnot json\n`;
    expect(() => parseTrace(text, { strict: true })).toThrow(/trace line 3: output_length is missing/);
    try {
      parseTrace(text, { strict: true });
    } catch (e) {
      expect((e as { code: string }).code).toBe('invalid_trace');
      expect((e as { detail: unknown }).detail).toEqual({ line: 3, field: 'output_length' });
    }
  });

  it('formatTrace writes rows that parse back to the same rows', () => {
    const rows = parseTrace(
      [
        good,
        '{"timestamp": 5, "input_length": 3, "output_length": 4, "hash_ids": [7], "session_id": "s\\"1", "delay": 12}',
      ].join('\n'),
    ).rows;
    const again = parseTrace(formatTrace(rows)).rows;
    expect(again).toEqual(rows);
    expect(formatTrace([])).toBe('');
  });

  it('checkRows applies the same rules to rows built in code', () => {
    expect(() =>
      checkRows([{ timestamp: 0, input_length: 1, output_length: 1, hash_ids: [], index: 0 }]),
    ).not.toThrow();
    expect(() =>
      checkRows([{ timestamp: 0, input_length: 1, output_length: 0, hash_ids: [], index: 0 }]),
    ).toThrow(/trace row 0: output_length must be an integer >= 1/);
  });
});
