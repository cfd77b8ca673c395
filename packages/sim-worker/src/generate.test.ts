import { describe, expect, it } from 'vitest';
import type { KvrError } from '@kvrouter/protocols';
import { parseGenerateRequest } from '@kvrouter/protocols';
import { RequestStream } from './request-stream.js';

const ok = { request_id: 'r1', model: 'm', token_ids: [1, 2, 3] };

function fieldOf(payload: unknown): string | undefined {
  try {
    parseGenerateRequest(payload);
  } catch (e) {
    return (e as KvrError).detail?.field as string | undefined;
  }
  return undefined;
}

describe('parseGenerateRequest (§5.7 payload)', () => {
  it('reads a full payload; absent optional fields get their defaults', () => {
    const p = parseGenerateRequest({
      ...ok,
      dp_rank: 1,
      stop_conditions: { max_tokens: 16, stop_token_ids: [7, 9], ignore_eos: false },
      sampling_options: { temperature: 0.5 },
      priority: 2,
    });
    expect(p.requestId).toBe('r1');
    expect(Array.from(p.tokenIds)).toEqual([1, 2, 3]);
    expect(p.dpRank).toBe(1);
    expect(p.maxTokens).toBe(16);
    expect([...(p.stopTokenIds ?? [])]).toEqual([7, 9]);
    const d = parseGenerateRequest(ok);
    expect(d.dpRank).toBe(0);
    expect(d.maxTokens).toBeNull();
    expect(d.stopTokenIds).toBeNull();
  });

  it('ignore_eos drops the stop tokens', () => {
    const p = parseGenerateRequest({ ...ok, stop_conditions: { stop_token_ids: [7], ignore_eos: true } });
    expect(p.stopTokenIds).toBeNull();
  });

  it('accepts u32 token arrays as Uint32Array, little-endian bytes, and 64-bit msgpack ints', () => {
    expect(Array.from(parseGenerateRequest({ ...ok, token_ids: new Uint32Array([5, 6]) }).tokenIds)).toEqual([
      5, 6,
    ]);
    // 0x01020304 little-endian is 04 03 02 01; at an odd offset inside a larger buffer.
    const buf = new Uint8Array([0xff, 4, 3, 2, 1, 0xff, 0xff, 0xff, 0xff]).subarray(1);
    expect(Array.from(parseGenerateRequest({ ...ok, token_ids: buf }).tokenIds)).toEqual([
      0x01020304, 0xffffffff,
    ]);
    const p = parseGenerateRequest({ ...ok, dp_rank: 3n, stop_conditions: { max_tokens: 4n } });
    expect(p.dpRank).toBe(3);
    expect(p.maxTokens).toBe(4);
  });

  it('names the offending field', () => {
    expect(fieldOf(null)).toBe('payload');
    expect(fieldOf([1])).toBe('payload');
    expect(fieldOf({ ...ok, request_id: '' })).toBe('request_id');
    expect(fieldOf({ ...ok, request_id: 5 })).toBe('request_id');
    expect(fieldOf({ ...ok, model: 3 })).toBe('model');
    expect(fieldOf({ ...ok, token_ids: [] })).toBe('token_ids');
    expect(fieldOf({ ...ok, token_ids: 'abc' })).toBe('token_ids');
    expect(fieldOf({ ...ok, token_ids: [1, -1] })).toBe('token_ids[1]');
    expect(fieldOf({ ...ok, token_ids: [1, 2 ** 32] })).toBe('token_ids[1]');
    expect(fieldOf({ ...ok, token_ids: [1.5] })).toBe('token_ids[0]');
    expect(fieldOf({ ...ok, token_ids: new Uint8Array(3) })).toBe('token_ids');
    expect(fieldOf({ ...ok, dp_rank: -1 })).toBe('dp_rank');
    expect(fieldOf({ ...ok, stop_conditions: 4 })).toBe('stop_conditions');
    expect(fieldOf({ ...ok, stop_conditions: { max_tokens: 0 } })).toBe('stop_conditions.max_tokens');
    expect(fieldOf({ ...ok, stop_conditions: { ignore_eos: 'yes' } })).toBe('stop_conditions.ignore_eos');
    expect(fieldOf({ ...ok, stop_conditions: { stop_token_ids: 3 } })).toBe('stop_conditions.stop_token_ids');
    expect(fieldOf({ ...ok, stop_conditions: { stop_token_ids: [1, 'x'] } })).toBe(
      'stop_conditions.stop_token_ids[1]',
    );
    expect(fieldOf({ ...ok, sampling_options: [] })).toBe('sampling_options');
    expect(fieldOf({ ...ok, priority: 'high' })).toBe('priority');
    expect(fieldOf({ ...ok, disagg: { prefill: true } })).toBe('disagg');
  });

  it('disaggregated requests are refused as not supported', () => {
    expect(() => parseGenerateRequest({ ...ok, disagg: {} })).toThrow(
      expect.objectContaining({ code: 'not_supported' }),
    );
  });
});

describe('RequestStream', () => {
  it('coalesces tokens pushed before the consumer asks, keeps the first cached_tokens and the finish reason', async () => {
    const s = new RequestStream('r', () => undefined);
    s.push([1], undefined, 64);
    s.push([2]);
    expect(await s.next()).toEqual({ value: { token_ids: [1, 2], cached_tokens: 64 }, done: false });
    const pending = s.next();
    s.push([3], 'length');
    expect(await pending).toEqual({ value: { token_ids: [3], finish_reason: 'length' }, done: false });
    expect(await s.next()).toEqual({ value: undefined, done: true });
  });

  it('an error comes after the tokens pushed before it', async () => {
    const s = new RequestStream('r', () => undefined);
    s.push([1]);
    s.fail(Object.assign(new Error('x'), { code: 'engine_shutdown' }) as unknown as KvrError);
    expect(await s.next()).toEqual({ value: { token_ids: [1] }, done: false });
    await expect(s.next()).rejects.toMatchObject({ code: 'engine_shutdown' });
    expect(await s.next()).toEqual({ value: undefined, done: true });
  });

  it('abort ends a pending next() at once and reports the early close once', async () => {
    const ac = new AbortController();
    let closed = 0;
    const s = new RequestStream('r', () => closed++, ac.signal);
    const pending = s.next();
    ac.abort();
    expect(await pending).toEqual({ value: undefined, done: true });
    await s.return();
    expect(closed).toBe(1);
  });

  it('return() after the last item does not report an early close', async () => {
    let closed = 0;
    const s = new RequestStream('r', () => closed++);
    s.push([1], 'stop');
    await s.next();
    await s.return();
    expect(closed).toBe(0);
  });
});
