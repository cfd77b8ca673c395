import { describe, expect, it } from 'vitest';
import { profileTimingFromFlag, reasoningFromFlag, type FlagFail } from './flags.js';

class FlagError extends Error {
  constructor(
    message: string,
    readonly flag: string,
  ) {
    super(message);
  }
}
const fail: FlagFail = (m, flag) => {
  throw new FlagError(m, flag);
};

describe('reasoningFromFlag', () => {
  it('maps upstream field names and passes absent values through', () => {
    expect(
      reasoningFromFlag({ start_thinking_token_id: 7, end_thinking_token_id: 8, thinking_ratio: 0.25 }, fail),
    ).toEqual({
      startThinkingTokenId: 7,
      endThinkingTokenId: 8,
      thinkingRatio: 0.25,
    });
    expect(reasoningFromFlag(null, fail)).toBeNull();
    expect(reasoningFromFlag(undefined, fail)).toBeNull();
  });

  it.each([
    [[1], /expected a JSON object/],
    [{ start_thinking_token_id: 1, end_thinking_token_id: 2, thinking_ratio: 0.5, x: 1 }, /unknown field x/],
    [
      { start_thinking_token_id: -1, end_thinking_token_id: 2, thinking_ratio: 0.5 },
      /start_thinking_token_id: expected a token id/,
    ],
    [{ start_thinking_token_id: 3, end_thinking_token_id: 3, thinking_ratio: 0.5 }, /must differ/],
    [
      { start_thinking_token_id: 1, end_thinking_token_id: 2, thinking_ratio: 1.5 },
      /thinking_ratio: expected a number in \[0, 1\]/,
    ],
  ])('refuses %j through the caller’s fail, naming --reasoning', (v, msg) => {
    let err: unknown;
    try {
      reasoningFromFlag(v, fail);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FlagError);
    expect((err as FlagError).flag).toBe('--reasoning');
    expect((err as FlagError).message).toMatch(/^--reasoning: /);
    expect((err as FlagError).message).toMatch(msg);
  });
});

describe('profileTimingFromFlag', () => {
  it('reads JSON text for a .json path and bytes for a .npz path', () => {
    const asked: [string, boolean][] = [];
    const read = (p: string, binary: boolean): string | null => {
      asked.push([p, binary]);
      return null;
    };
    expect(() => profileTimingFromFlag('/a/p.json', read, 1000, fail)).toThrow(
      '--planner-profile-data /a/p.json: cannot read the file',
    );
    expect(() => profileTimingFromFlag('/a/p.NPZ', read, 1000, fail)).toThrow(FlagError);
    expect(asked).toEqual([
      ['/a/p.json', false],
      ['/a/p.NPZ', true],
    ]);
  });

  it('a parse problem becomes the caller’s error naming the flag', () => {
    let err: unknown;
    try {
      profileTimingFromFlag('/p.json', () => '{"prefill_isl": [2, 1]}', 1000, fail);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FlagError);
    expect((err as FlagError).flag).toBe('--planner-profile-data');
  });
});
