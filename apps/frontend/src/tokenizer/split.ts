/** Cutting a rendered prompt at special-token strings (longest match first, as tokenizers do). */

const cache = new WeakMap<ReadonlyMap<string, number>, RegExp | null>();

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function regexOf(specials: ReadonlyMap<string, number>): RegExp | null {
  let re = cache.get(specials);
  if (re === undefined) {
    const keys = [...specials.keys()].filter((k) => k.length > 0).sort((a, b) => b.length - a.length);
    re = keys.length === 0 ? null : new RegExp(keys.map(escape).join('|'), 'g');
    cache.set(specials, re);
  }
  return re;
}

/** Ordinary text pieces (strings, never empty) and special token ids, in order. */
export function splitSpecials(text: string, specials: ReadonlyMap<string, number>): (string | number)[] {
  const re = regexOf(specials);
  if (re === null) return text.length > 0 ? [text] : [];
  const out: (string | number)[] = [];
  let last = 0;
  re.lastIndex = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    out.push(specials.get(m[0])!);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
