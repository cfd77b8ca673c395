/**
 * GPT-2 byte-level alphabet: every byte is one printable character. Printable Latin-1 bytes map to
 * themselves; the other 68 bytes map to U+0100.. in byte order (as Hugging Face `bytes_char`).
 */
export function byteToChar(): string[] {
  const keep: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) keep.push(b);
  for (let b = 0xa1; b <= 0xac; b++) keep.push(b);
  for (let b = 0xae; b <= 0xff; b++) keep.push(b);
  const out = new Array<string>(256);
  const kept = new Set(keep);
  let n = 0;
  for (let b = 0; b < 256; b++) out[b] = String.fromCharCode(kept.has(b) ? b : 256 + n++);
  return out;
}

/**
 * UTF-8 of `s[from, to)` into `out` from index 0 (lone surrogates as U+FFFD, as TextEncoder and
 * Node's string conversion do). `out` must hold 3 bytes per UTF-16 unit. Returns the byte count.
 */
export function utf8Into(s: string, from: number, to: number, out: Uint8Array): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) out[n++] = c;
    else if (c < 0x800) {
      out[n++] = 0xc0 | (c >> 6);
      out[n++] = 0x80 | (c & 63);
    } else {
      if (c >= 0xd800 && c < 0xe000) {
        const d = i + 1 < to ? s.charCodeAt(i + 1) : 0;
        if (c < 0xdc00 && d >= 0xdc00 && d < 0xe000) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          i++;
          out[n++] = 0xf0 | (c >> 18);
          out[n++] = 0x80 | ((c >> 12) & 63);
          out[n++] = 0x80 | ((c >> 6) & 63);
          out[n++] = 0x80 | (c & 63);
          continue;
        }
        c = 0xfffd;
      }
      out[n++] = 0xe0 | (c >> 12);
      out[n++] = 0x80 | ((c >> 6) & 63);
      out[n++] = 0x80 | (c & 63);
    }
  }
  return n;
}
