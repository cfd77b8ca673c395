import { describe, expect, it } from 'vitest';
import { DecodeError, KvrError, describeValue, errorMessage, invalidArgument } from './errors.js';

describe('invalidArgument', () => {
  it('formats `<field> <reason>[, got <value>]` with status 400 and detail.field', () => {
    const e = invalidArgument('blockSize', 'must be an integer >= 1', 0);
    expect(e).toBeInstanceOf(KvrError);
    expect(e.code).toBe('invalid_argument');
    expect(e.status).toBe(400);
    expect(e.detail).toEqual({ field: 'blockSize' });
    expect(e.message).toBe('blockSize must be an integer >= 1, got 0');
    expect(invalidArgument('--endpoint', 'is required').message).toBe('--endpoint is required');
    // An explicit undefined value is shown; an absent one is not.
    expect(invalidArgument('x', 'must be set', undefined).message).toBe('x must be set, got undefined');
  });

  it('shows values the same way everywhere', () => {
    expect(describeValue('ab')).toBe('"ab"');
    expect(describeValue(5n)).toBe('5n');
    expect(describeValue(null)).toBe('null');
    expect(describeValue([1, 2])).toBe('an array');
    expect(describeValue({ a: 1 })).toBe('an object');
    expect(describeValue(new Uint32Array(3))).toBe('Uint32Array(12 bytes)');
    expect(describeValue('x'.repeat(70))).toBe(JSON.stringify(`${'x'.repeat(60)}…`));
  });
});

describe('KvrError', () => {
  it('takes its status from the code table unless given, and keeps cause', () => {
    const cause = new Error('socket hang up');
    const e = new KvrError('disconnected', 'stream closed', undefined, { worker: '1' }, { cause });
    expect(e.status).toBe(502);
    expect(e.cause).toBe(cause);
    expect(new KvrError('model_not_found', 'm').status).toBe(404);
    expect(new DecodeError('bad').status).toBe(400);
    expect(new DecodeError('bad').code).toBe('decode_error');
  });

  it('round-trips the wire form; relayed unknown codes stay verbatim with status 500 unless sent', () => {
    const w = new KvrError('all_workers_busy', 'busy').toWire();
    expect(w).toEqual({ code: 'all_workers_busy', message: 'busy', status: 503 });
    const back = KvrError.fromWire(w);
    expect([back.code, back.message, back.status]).toEqual(['all_workers_busy', 'busy', 503]);
    expect(KvrError.fromWire({ code: 'cancelled', message: 'gone' }).status).toBe(499);
    const foreign = KvrError.relay('BadRequestError', 'engine said no', 422);
    expect([foreign.code, foreign.status]).toEqual(['BadRequestError', 422]);
    expect(KvrError.relay('weird', 'x', 7).status).toBe(500);
  });

  it('errorMessage reads Error messages and stringifies the rest', () => {
    expect(errorMessage(new Error('boom'))).toBe('boom');
    expect(errorMessage('plain')).toBe('plain');
    expect(errorMessage(42)).toBe('42');
  });
});
