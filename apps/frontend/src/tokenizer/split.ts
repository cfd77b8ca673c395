/** Cutting a rendered prompt at special-token strings (longest match first, as tokenizers do). */
import { AddedMatcher, type PiecesSink } from '@kvrouter/tokenizer';

interface Matcher {
  /** The prefix every special shares ('' when they share none). */
  lead: string;
  /** Specials longest first (a longer one wins where two match at the same place). */
  byLength: [string, number][];
  re: RegExp;
}

const cache = new WeakMap<ReadonlyMap<string, number>, Matcher | null>();

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function matcherOf(specials: ReadonlyMap<string, number>): Matcher | null {
  let m = cache.get(specials);
  if (m === undefined) {
    const byLength = [...specials.entries()]
      .filter(([k]) => k.length > 0)
      .sort((a, b) => b[0].length - a[0].length);
    if (byLength.length === 0) m = null;
    else {
      let lead = byLength[0]![0];
      for (const [k] of byLength) while (!k.startsWith(lead)) lead = lead.slice(0, -1);
      m = { lead, byLength, re: new RegExp(byLength.map(([k]) => escape(k)).join('|'), 'g') };
    }
    cache.set(specials, m);
  }
  return m;
}

/** Ordinary text pieces (strings, never empty) and special token ids, in order. */
export function splitSpecials(text: string, specials: ReadonlyMap<string, number>): (string | number)[] {
  const m = matcherOf(specials);
  if (m === null) return text.length > 0 ? [text] : [];
  const out: (string | number)[] = [];
  let last = 0;
  if (m.lead.length > 0) {
    // Specials share a prefix (`<|` for ChatML vocabularies): indexOf jumps between candidates
    // several times faster than the alternation regex scans a 40 kB prompt.
    for (let at = text.indexOf(m.lead); at >= 0;) {
      let hit: [string, number] | null = null;
      for (const s of m.byLength)
        if (text.startsWith(s[0], at)) {
          hit = s;
          break;
        }
      if (hit === null) {
        at = text.indexOf(m.lead, at + 1);
        continue;
      }
      if (at > last) out.push(text.slice(last, at));
      out.push(hit[1]);
      last = at + hit[0].length;
      at = text.indexOf(m.lead, last);
    }
  } else {
    const re = m.re;
    re.lastIndex = 0;
    for (let r = re.exec(text); r !== null; r = re.exec(text)) {
      if (r.index > last) out.push(text.slice(last, r.index));
      out.push(specials.get(r[0])!);
      last = r.index + r[0].length;
    }
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

const matchers = new WeakMap<ReadonlyMap<string, number>, AddedMatcher>();

/**
 * `splitSpecials` of the concatenation of `pieces` without building it (text runs as ranges of
 * `pieces`' strings; a special may start in one string and end in a later one): the fast
 * tokenizer's added-token matcher with every token plain (no lstrip / rstrip / single_word), which
 * is splitSpecials' rule, leftmost match and the longest special there.
 */
export function splitSpecialsPieces(
  pieces: readonly string[],
  specials: ReadonlyMap<string, number>,
  sink: PiecesSink,
): void {
  let m = matchers.get(specials);
  if (m === undefined) {
    const tokens = [...specials].map(([content, id]) => ({
      id,
      content,
      special: true,
      singleWord: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
    }));
    m = new AddedMatcher(tokens);
    matchers.set(specials, m);
  }
  m.splitPieces(pieces, sink);
}
