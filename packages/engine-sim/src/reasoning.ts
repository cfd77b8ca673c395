import type { ReasoningConfig } from './config.js';

/**
 * `--reasoning`: each request's output opens with a reasoning span of
 * `k = floor(thinking_ratio · max_tokens)` tokens, `<think> … </think>` included: output position 0
 * is the start marker, position k − 1 the end marker, everything else is drawn as usual. Spans
 * shorter than 2 cannot hold both markers, so such requests get none (k = 0). Drawn tokens that
 * happen to equal a marker id are moved off it, so a client that splits on the markers sees exactly
 * one span. The output length is unchanged: reasoning tokens count against `max_tokens`, as they do
 * in a real reasoning model.
 */
export class ReasoningTokens {
  constructor(
    private readonly cfg: Readonly<ReasoningConfig>,
    private readonly vocabSize: number,
  ) {}

  /** Reasoning tokens (markers included) in an output of `maxTokens`. */
  spanOf(maxTokens: number): number {
    const k = Math.floor(this.cfg.thinkingRatio * maxTokens);
    return k >= 2 ? k : 0;
  }

  /** The token at output index `i` (0-based) given the freshly drawn one. */
  next(drawn: number, i: number, maxTokens: number): number {
    const k = this.spanOf(maxTokens);
    const { startThinkingTokenId: s, endThinkingTokenId: e } = this.cfg;
    if (k > 0) {
      if (i === 0) return s;
      if (i === k - 1) return e;
    }
    let t = drawn;
    // Drawn ids lie in [1, V − 1]; stepping within that range leaves the markers in at most two steps.
    for (let n = 0; n < 2 && (t === s || t === e); n++) t = (t % (this.vocabSize - 1)) + 1;
    return t;
  }
}
