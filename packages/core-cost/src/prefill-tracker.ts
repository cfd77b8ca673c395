/**
 * Prefill tracker (docs/protocol.md §9.4): one rank's FIFO of prompt work the engine has not finished,
 * and the one decay formula of the prefill load (`decayedPrefillTokens`). Pure: `now` (ms) is an
 * argument.
 */

/** One request's entry in the prefill FIFO. Owned by the caller, linked by the tracker. */
export interface PrefillNode {
  /** `initial_effective_prefill_tokens`. */
  initial: number;
  /** `expected_prefill_duration` in ms; null = no prediction (static load until first token). */
  expectedMs: number | null;
  prev: PrefillNode | null;
  next: PrefillNode | null;
  linked: boolean;
}

export const prefillNode = (initial: number, expectedMs: number | null = null): PrefillNode => ({
  initial,
  expectedMs,
  prev: null,
  next: null,
  linked: false,
});

/**
 * FIFO of prompt work not yet started by the engine. Only the oldest entry (the anchor) decays:
 * it models the engine working through its prefill queue one request at a time.
 */
export class PrefillTracker {
  private head: PrefillNode | null = null;
  private tail: PrefillNode | null = null;
  /** Σ initial over all entries. */
  sum = 0;
  count = 0;
  /** When the current head became the anchor. */
  anchoredSince = 0;

  add(node: PrefillNode, now: number): void {
    if (node.linked) return;
    node.linked = true;
    node.next = null;
    node.prev = this.tail;
    if (this.tail) this.tail.next = node;
    else {
      this.head = node;
      this.anchoredSince = now;
    }
    this.tail = node;
    this.sum += node.initial;
    this.count++;
  }

  remove(node: PrefillNode, now: number): void {
    if (!node.linked) return;
    const wasAnchor = node === this.head;
    if (node.prev) node.prev.next = node.next;
    else this.head = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.tail = node.prev;
    node.prev = node.next = null;
    node.linked = false;
    this.count--;
    // Exact reset when empty: a running float sum must not drift while idle.
    this.sum = this.count === 0 ? 0 : this.sum - node.initial;
    if (wasAnchor) this.anchoredSince = now;
  }

  get anchor(): PrefillNode | null {
    return this.head;
  }

  /** `sum − anchor.initial + remaining(anchor, now)` (`decayedPrefillTokens`). */
  activeTokens(now: number): number {
    const a = this.head;
    if (!a) return 0;
    return decayedPrefillTokens(this.sum, a.initial, a.expectedMs, now - this.anchoredSince);
  }
}

/**
 * §9.4 anchor decay, the one formula of the prefill load: every queued prompt counts in full
 * except the anchor (the oldest), which loses `initial × elapsed / expected` (rounded up) as the
 * engine works on it. `sum` = Σ initial over the FIFO (anchor included); `expectedMs` null (or NaN,
 * the flat-array encoding of null) = no prediction: the anchor counts in full until its first token.
 * Used by `PrefillTracker.activeTokens` and `RankLoads.prefillAt`.
 */
export function decayedPrefillTokens(
  sum: number,
  initial: number,
  expectedMs: number | null,
  elapsedMs: number,
): number {
  let remaining: number;
  if (expectedMs === null || expectedMs !== expectedMs) remaining = initial;
  else if (expectedMs === 0) remaining = 0;
  else remaining = Math.ceil(initial * Math.min(1, Math.max(0, 1 - elapsedMs / expectedMs)));
  return sum - initial + remaining;
}
