/**
 * The simulator's only randomness: a seeded mulberry32 stream (testkit is a devDependency only, so
 * the package carries its own). Every consumer gets its own stream from `SimRng.stream(seed, salt)`, so adding draws in
 * one place (say the router's tie-breaks) never shifts another's (the workload generator).
 */
export class SimRng {
  private s: number;

  constructor(seed: number) {
    this.s = seed >>> 0 || 0x9e3779b9;
  }

  u32(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.u32() / 4294967296;
  }

  /** Uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** Exponential with the given mean. `1 - u` keeps the log argument in (0, 1]. */
  exp(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }

  /** Standard normal (Box-Muller, one value per call so the draw count per sample is fixed at 2). */
  normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Stream `salt` of `seed` (e.g. 1 = workload, 2 = router): independent of draws made on other streams. */
  static stream(seed: number, salt: number): SimRng {
    let h = Math.imul((seed >>> 0) ^ Math.imul(salt + 1, 0x85ebca6b), 0xc2b2ae35) >>> 0;
    h = Math.imul(h ^ (h >>> 13), 0x27d4eb2d) >>> 0;
    return new SimRng(h ^ (h >>> 16));
  }
}
