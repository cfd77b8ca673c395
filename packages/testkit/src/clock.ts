/** A manual clock for tests: `now()` in ms, advanced explicitly. */
export class FakeClock {
  constructor(private t = 0) {}
  now = (): number => this.t;
  advance(ms: number): number {
    this.t += ms;
    return this.t;
  }
  set(ms: number): void {
    this.t = ms;
  }
}
