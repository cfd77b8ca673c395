/**
 * The in-memory store behind `previous_response_id`: at most `size` responses (the least recently
 * stored or used goes first), each for at most `ttlSecs` after it was stored. Per response it keeps
 * the conversation the next turn continues (this turn's input plus its output as chat messages;
 * instructions are not carried over, as OpenAI's API does) and the response object.
 */
import type { ChatBodyMessage } from './translate.js';

export interface StoredResponse {
  /** Input and output of the whole chain up to and including this response, as chat messages. */
  conversation: ChatBodyMessage[];
  response: Record<string, unknown>;
}

interface Entry {
  value: StoredResponse;
  expiresAt: number;
}

export class ResponseStore {
  private readonly map = new Map<string, Entry>();

  constructor(
    /** `--responses-store-size` (0 = nothing is kept). */
    readonly size: number,
    /** `--responses-store-ttl-secs`. */
    readonly ttlSecs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get count(): number {
    return this.map.size;
  }

  put(id: string, value: StoredResponse): void {
    if (this.size === 0) return;
    this.map.delete(id);
    this.map.set(id, { value, expiresAt: this.now() + this.ttlSecs * 1000 });
    this.evictExpired();
    while (this.map.size > this.size) this.map.delete(this.map.keys().next().value!);
  }

  /** The stored response, or null when unknown, expired or evicted; a hit counts as a use (LRU). */
  get(id: string): StoredResponse | null {
    const e = this.map.get(id);
    if (!e) return null;
    if (e.expiresAt <= this.now()) {
      this.map.delete(id);
      return null;
    }
    this.map.delete(id);
    this.map.set(id, e);
    return e.value;
  }

  /**
   * Drops expired entries from the least recently used end, stopping at the first live one (O(1)
   * amortised per put). An expired entry behind it is dropped when it is read or pushed out by size.
   */
  private evictExpired(): void {
    const t = this.now();
    for (const [k, e] of this.map) {
      if (e.expiresAt > t) break;
      this.map.delete(k);
    }
  }
}
