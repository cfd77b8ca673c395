/**
 * Turns of one conversation tokenized one after the other (issue 14). A new session's first
 * 8k-token context takes 1.5-25 ms on the tokenizer thread; a later turn of the same conversation
 * that arrives meanwhile found nothing in the prefix cache yet and encoded the whole context
 * again. Under a backlog that multiplied the tokenizer thread's work (10x at an overloaded
 * 300 req/s) and fed the backlog. With this, such a turn waits for the earlier one, then finds its
 * prompt in the prefix cache and tokenizes only what it adds; turns that arrive one after the
 * other never wait.
 */
import type { TemplateMessage } from '../tokenizer/template.js';

/** A conversation's first message must hold this many characters for its turns to wait for each other. */
export const SINGLE_FLIGHT_CHARS = 4096;

const part = (m: TemplateMessage): string | null =>
  typeof m.content === 'string'
    ? `${m.role}\u0000${m.content.length}\u0000${m.content.slice(0, 64)}\u0000${m.content.slice(-64)}`
    : null;

/**
 * A cheap key of a chat's conversation: its first message and, when that is a system (or
 * developer) prompt, the second one too (agent fleets send one system prompt to every session),
 * each as role, length and its first and last 64 characters. Null when the first message is
 * shorter than `SINGLE_FLIGHT_CHARS` or a content is not a string. Two conversations with one key
 * only wait for each other; ids come from the tokenizer and its prefix cache, whose keys are exact.
 */
export function conversationKey(messages: readonly TemplateMessage[]): string | null {
  const first = messages[0];
  if (first === undefined || typeof first.content !== 'string') return null;
  if (first.content.length < SINGLE_FLIGHT_CHARS) return null;
  let key = part(first);
  const second = messages[1];
  if ((first.role === 'system' || first.role === 'developer') && second !== undefined) {
    const k2 = part(second);
    if (k2 === null) return null;
    key += `\u0001${k2}`;
  }
  return key;
}

/** Work per key one at a time: `run` waits until the key's previous run settled (either way). */
export class SingleFlight {
  private readonly last = new Map<string, Promise<void>>();

  async run<T>(key: string | null, f: () => Promise<T>): Promise<T> {
    if (key === null) return f();
    // This run is the key's last from now on, so a third turn arriving while the second waits
    // waits for the second, not only for the first.
    const earlier = this.last.get(key);
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    this.last.set(key, mine);
    try {
      if (earlier !== undefined) await earlier;
      return await f();
    } finally {
      release();
      if (this.last.get(key) === mine) this.last.delete(key);
    }
  }

  /** Keys with a run in progress (tests). */
  get size(): number {
    return this.last.size;
  }
}
