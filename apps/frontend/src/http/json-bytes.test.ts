/**
 * `parseJsonBytes` on hand-made cases, with the values worked out from RFC 8259 and `JSON.parse`'s
 * documented behaviour (escapes, surrogates, numbers, duplicate and `__proto__` keys, byte-order
 * mark, invalid UTF-8 as the WHATWG decoder replaces it), the inputs it must leave to the
 * whole-text path (`BAIL`), a real agent body of the bench's corpus (132 messages, 584 kB of
 * mixed-script text), and `joinChunks`.
 */
import { parseJson } from '@kvrouter/protocols';
import { CORPUS_DIR } from '@kvrouter/tokenizer/testing';
import { describe, expect, it } from 'vitest';
import { agentTurns, corpusText } from '../bench/agent.js';
import { parseBodyBytes, utf8Text } from './body-thread.js';
import { BAIL, joinChunks, parseJsonBytes } from './json-bytes.js';
import { sameJson } from './test-json.js';

const p = (s: string | number[]) =>
  parseJsonBytes(typeof s === 'string' ? Buffer.from(s, 'utf8') : Buffer.from(s));

describe('parseJsonBytes: values', () => {
  it('decodes escapes as RFC 8259 says, surrogate pairs joined and lone surrogates kept', () => {
    expect(p('"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t"')).toBe('a"b\\c/d\b\f\n\r\t');
    expect(p('"\\u0041\\u00e9\\u4E16"')).toBe('Aé世');
    expect(p('"\\ud83d\\ude00"')).toBe('😀');
    expect(p('"\\uD83D\\uDE00"')).toBe('\u{1F600}');
    expect(p('"\\ud800"')).toBe('\ud800');
    expect(p('"\\udc00\\ud800x"')).toBe('\udc00\ud800x');
    // A string ending in an escaped backslash, then an escaped quote right before the end.
    expect(p('["\\\\", "\\""]')).toEqual(['\\', '"']);
    expect(p('"\\\\\\""')).toBe('\\"');
    expect(p('"\\u0000"')).toBe('\u0000');
  });

  it('decodes raw UTF-8 of every length', () => {
    expect(p('"é世😀"')).toBe('é世😀');
    expect(p('{"ключ":"значение","键":"值"}')).toEqual({ ключ: 'значение', 键: '值' });
    expect(p('"\u2028\u2029"')).toBe('\u2028\u2029');
  });

  it('replaces invalid UTF-8 with U+FFFD exactly as decoding the whole body does', () => {
    // 0xff is never valid: one U+FFFD; E4 B8 is a cut 3-byte sequence: one U+FFFD (maximal subpart).
    expect(p([0x22, 0x61, 0xff, 0x62, 0x22])).toBe('a\ufffdb');
    expect(p([0x22, 0xe4, 0xb8, 0x22])).toBe('\ufffd');
    // A cut sequence right before the closing quote of a key.
    expect(p([0x7b, 0x22, 0xf0, 0x9f, 0x98, 0x22, 0x3a, 0x31, 0x7d])).toEqual({ '\ufffd': 1 });
    // C0 80 (overlong NUL) is two invalid bytes: two U+FFFD.
    expect(p([0x22, 0xc0, 0x80, 0x22])).toBe('\ufffd\ufffd');
  });

  it('gives numbers as JSON.parse does, integers of 16+ digits outside ±(2^53−1) as bigints', () => {
    expect(Object.is(p('-0'), -0)).toBe(true);
    expect(Object.is(p('-0.0'), -0)).toBe(true);
    expect(p('[0, 1, -1, 10, 1.5, 1e2, 1E+2, 25e-1, 0.1]')).toEqual([0, 1, -1, 10, 1.5, 100, 100, 2.5, 0.1]);
    expect(p('1e400')).toBe(Infinity);
    expect(p('-1e400')).toBe(-Infinity);
    expect(p('1e-400')).toBe(0);
    expect(p('123456789012345')).toBe(123456789012345);
    expect(p('1234567890123456')).toBe(1234567890123456);
    expect(p('9007199254740991')).toBe(9007199254740991);
    expect(p('-9007199254740991')).toBe(-9007199254740991);
    expect(p('9007199254740992')).toBe(9007199254740992n);
    expect(p('-9007199254740993')).toBe(-9007199254740993n);
    expect(p('18446744073709551615')).toBe(18446744073709551615n);
    // Not integers: doubles, however many digits.
    expect(p('18446744073709551615.0')).toBe(18446744073709552000);
    expect(p('1234567890123456789e0')).toBe(1234567890123456800);
    expect(p('0.1000000000000000055511151231257827')).toBe(0.1);
    expect(p('4.9e-324')).toBe(5e-324);
  });

  it('keeps the last of duplicate keys at the first one’s position, and __proto__ as an own property', () => {
    const o = p('{"a":1,"b":2,"a":3}') as Record<string, number>;
    expect(Object.keys(o)).toEqual(['a', 'b']);
    expect(o.a).toBe(3);
    const q = p('{"__proto__":{"polluted":1},"x":2}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(q)).toBe(Object.prototype);
    expect(Object.keys(q)).toEqual(['__proto__', 'x']);
    expect(Object.getOwnPropertyDescriptor(q, '__proto__')!.value).toEqual({ polluted: 1 });
    expect((q as { polluted?: unknown }).polluted).toBeUndefined();
    sameJson(p('{"__proto__":1,"__proto__":2}'), JSON.parse('{"__proto__":1,"__proto__":2}'));
  });

  it('takes JSON whitespace and a leading byte-order mark, nothing else', () => {
    expect(p(' \t\r\n{ "a" : [ 1 , true , false , null ] } \n')).toEqual({ a: [1, true, false, null] });
    expect(p([0xef, 0xbb, 0xbf, 0x5b, 0x5d])).toEqual([]);
    expect(p('\u00a0[]')).toBe(BAIL);
    expect(p('\ufeff\ufeff[]')).toBe(BAIL);
  });

  it('nests 512 containers, and leaves deeper ones to the whole-text path', () => {
    const d512 = `${'['.repeat(511)}{"a":1}${']'.repeat(511)}`;
    let v = p(d512);
    for (let i = 0; i < 511; i++) v = (v as unknown[])[0];
    expect(v).toEqual({ a: 1 });
    expect(p(`${'['.repeat(513)}${']'.repeat(513)}`)).toBe(BAIL);
  });

  it('parseBodyBytes: a body nested past the limit gets the whole-text path’s value (JSON.parse takes 40 000)', () => {
    const depth = 40_000;
    let v = parseBodyBytes(Buffer.from(`{"m":${'['.repeat(depth)}7${']'.repeat(depth)}}`));
    v = (v as { m: unknown }).m;
    let n = 0;
    while (Array.isArray(v)) {
      v = v[0];
      n++;
    }
    expect([n, v]).toEqual([depth, 7]);
  });
});

describe('parseJsonBytes: what it leaves to the whole-text path', () => {
  const invalid = [
    '',
    ' ',
    '{',
    '{"a":1,}',
    '[1,]',
    '[1 2]',
    '{"a" 1}',
    '{a:1}',
    "{'a':1}",
    'tru',
    'nul',
    'falsy',
    'truex',
    '01',
    '-',
    '1.',
    '.5',
    '1e',
    '1e+',
    '+1',
    'NaN',
    'Infinity',
    '"abc',
    '"\\x"',
    '"\\u12"',
    '"\\u12G4"',
    '"\\',
    '"a\tb"',
    '"a\u001fb"',
    '"a\nb"',
    '"\\n\u0001"',
    '{} x',
    '[] []',
    '[é]',
  ];
  it.each(invalid)('%j', (text) => {
    expect(p(text)).toBe(BAIL);
    expect(() => parseJson(utf8Text(Buffer.from(text)))).toThrow();
  });

  it('gives the 400 of the whole-text path for them (parseBodyBytes)', () => {
    // The lossless reader's message: the offset of the ']' that follows the comma.
    const b = Buffer.from('{"model": "m", "messages": [1,]}');
    expect(() => parseBodyBytes(b)).toThrow(
      "request body is not valid JSON: json: unexpected character (']' at offset 30)",
    );
  });
});

describe('parseJsonBytes: a real agent body', () => {
  it('parses the last turn of the bench’s agent session (584 kB, mixed scripts, tool calls) as parseJson does', () => {
    const turns = agentTurns(corpusText(CORPUS_DIR, 0x2545f491), {
      fromTokens: 20_000,
      toTokens: 150_000,
      stepTokens: 2_000,
    });
    const messages = turns[turns.length - 1]!;
    const b = Buffer.from(JSON.stringify({ model: 'm', messages, max_tokens: 64, stream: true }));
    expect(b.length).toBeGreaterThan(500_000);
    // Non-ASCII text and escapes (newlines, quotes in code) are both in it.
    expect(b.some((x) => x >= 0x80)).toBe(true);
    expect(b.includes('\\n')).toBe(true);
    const got = parseJsonBytes(b);
    expect(got).not.toBe(BAIL);
    sameJson(got, parseJson(b.toString('utf8')));
    // And against the messages it was made from.
    expect((got as { messages: unknown }).messages).toEqual(messages);
    // The same bytes in 64 KiB chunks, as a socket delivers them.
    const chunks: Buffer[] = [];
    for (let i = 0; i < b.length; i += 65_536) chunks.push(b.subarray(i, i + 65_536));
    sameJson(parseJsonBytes(joinChunks(chunks, b.length)), got);
  });
});

describe('joinChunks', () => {
  it('returns one chunk as it is, and the bytes of several in order', () => {
    const a = Buffer.from('abc');
    expect(joinChunks([a], 3)).toBe(a);
    expect(joinChunks([Buffer.from('{"a"'), Buffer.from(':'), Buffer.from('1}')], 7).toString()).toBe(
      '{"a":1}',
    );
    // Reused: a shorter body after a longer one is exactly its own bytes.
    expect(joinChunks([Buffer.from('[1'), Buffer.from(']')], 3).toString()).toBe('[1]');
  });

  it('gives bodies past the reused buffer’s bound their own buffer', () => {
    const big = [Buffer.alloc(3 << 20, 0x20), Buffer.alloc(2 << 20, 0x20)];
    const j = joinChunks(big, 5 << 20);
    expect(j.length).toBe(5 << 20);
    const small = joinChunks([Buffer.from('x'), Buffer.from('y')], 2);
    expect(j.buffer).not.toBe(small.buffer);
  });
});
