/**
 * Generated-token source (§17 step 4: "a seeded generator", implementation choice): xorshift32, one
 * stream per dp rank, ids in [1, vocabSize − 1] so 0 (often a pad id) never appears.
 */
export class TokenRng {
  private s: number;

  constructor(
    seed: number,
    stream: number,
    private readonly vocabSize: number,
  ) {
    // Mix so neighbouring seeds/ranks give unrelated streams; xorshift must never start at 0.
    let s = Math.imul((seed ^ Math.imul(stream + 1, 0x9e3779b9)) >>> 0, 0x85ebca6b) ^ 0x5bd1e995;
    s ^= s >>> 15;
    this.s = s >>> 0 || 0x9e3779b9;
  }

  nextToken(): number {
    let x = this.s;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.s = x >>> 0;
    return 1 + (this.s % (this.vocabSize - 1));
  }
}
