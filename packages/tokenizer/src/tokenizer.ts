/**
 * An exact byte-level BPE tokenizer compiled from a Hugging Face `tokenizer.json`.
 *
 * Pipeline of `encode(text)` (Hugging Face `encode(text, add_special_tokens=False)`):
 *   1. added tokens with `normalized: false` are cut out of the raw text (added.ts);
 *   2. each remaining piece is normalized (NFC/NFD/NFKC/NFKD or none), then added tokens with
 *      `normalized: true` are cut out of it;
 *   3. pre-tokenization (pretokenize.ts / scan.ts) into words;
 *   4. each word: a cache of frequent words, the whole-word vocabulary hit when the model has
 *      `ignore_merges`, else UTF-8 bytes → byte-level ids → merges (bpe.ts).
 *
 * `compileTokenizer` throws `UnsupportedTokenizer` naming the first feature it does not implement;
 * callers fall back to a general implementation.
 */
import { AddedMatcher, type AddedToken, type PiecesSink, type SplitSink } from './added.js';
import { MergeTable, Merger } from './bpe.js';
import { byteToChar, utf8Into } from './bytelevel.js';
import { GPT2_PATTERN, preTokenizerFor, type PreTokenizer } from './pretokenize.js';
import { UnsupportedPattern } from './regex.js';

export class UnsupportedTokenizer extends Error {
  constructor(readonly reason: string) {
    super(`unsupported tokenizer.json: ${reason}`);
  }
}

type Json = Record<string, unknown>;
type NormalForm = 'NFC' | 'NFD' | 'NFKC' | 'NFKD';

export interface CompileOptions {
  /** Use the generic regex pre-tokenizer even where a hand-written scanner exists (tests). */
  noScanner?: boolean;
  /** Words of up to this many UTF-16 units are cached (default 48; 0 disables the cache). */
  cacheMaxChars?: number;
  /** Cached words before the cache is cleared (default 65 536). */
  cacheEntries?: number;
}

function fail(reason: string): never {
  throw new UnsupportedTokenizer(reason);
}

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function normalizerOf(n: unknown): NormalForm[] {
  if (n === null || n === undefined) return [];
  if (!isObj(n)) fail('normalizer is not an object');
  switch (n.type) {
    case 'NFC':
    case 'NFD':
    case 'NFKC':
    case 'NFKD':
      return [n.type];
    case 'Sequence': {
      const list = n.normalizers;
      if (!Array.isArray(list)) fail('normalizer Sequence without normalizers');
      return list.flatMap((x) => normalizerOf(x));
    }
    default:
      return fail(`normalizer ${String(n.type)}`);
  }
}

/** The Split patterns of the pre-tokenizer chain (ByteLevel last, without prefix space). */
function splitPatterns(p: unknown): string[] {
  if (!isObj(p)) fail('no pre_tokenizer');
  const steps = p.type === 'Sequence' ? p.pretokenizers : [p];
  if (!Array.isArray(steps) || steps.length === 0) fail('empty pre_tokenizer Sequence');
  const patterns: string[] = [];
  let byteLevel = false;
  for (const s of steps as unknown[]) {
    if (!isObj(s)) fail('pre_tokenizer step is not an object');
    if (byteLevel) fail('pre_tokenizer step after ByteLevel');
    if (s.type === 'Split') {
      if (s.behavior !== 'Isolated') fail(`Split behavior ${String(s.behavior)}`);
      if (s.invert === true) fail('Split invert');
      const pat = s.pattern;
      if (!isObj(pat)) fail('Split without pattern');
      if (typeof pat.Regex === 'string') patterns.push(pat.Regex);
      else if (typeof pat.String === 'string')
        patterns.push(pat.String.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'));
      else fail('Split pattern is neither Regex nor String');
    } else if (s.type === 'ByteLevel') {
      if (s.add_prefix_space === true) fail('ByteLevel add_prefix_space');
      if (s.use_regex !== false) patterns.push(GPT2_PATTERN);
      byteLevel = true;
    } else fail(`pre_tokenizer ${String(s.type)}`);
  }
  if (!byteLevel) fail('pre_tokenizer without ByteLevel');
  return patterns;
}

export function addedTokensOf(json: Json): AddedToken[] {
  const list = json.added_tokens;
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) fail('added_tokens is not an array');
  return (list as unknown[]).map((t, i) => {
    if (!isObj(t) || typeof t.id !== 'number' || typeof t.content !== 'string')
      fail(`added_tokens[${i}] needs id and content`);
    return {
      id: t.id,
      content: t.content,
      special: t.special === true,
      singleWord: t.single_word === true,
      lstrip: t.lstrip === true,
      rstrip: t.rstrip === true,
      normalized: t.normalized === true,
    };
  });
}

/** The vocabulary, merges and decode tables of one tokenizer.json: built once, shared by pipelines. */
export interface CompiledModel {
  readonly vocabSize: number;
  readonly addedTokens: readonly AddedToken[];
  readonly normalizers: readonly NormalForm[];
  readonly patterns: readonly string[];
  readonly ignoreMerges: boolean;
  readonly vocab: Map<string, number>;
  /** Token text (valid UTF-8 tokens only) → id: whole-word hits for `ignore_merges`. */
  readonly textVocab: Map<string, number> | null;
  readonly byteIds: Int32Array;
  readonly merges: MergeTable;
  /** Decode: bytes of every id (vocabulary tokens, then added tokens' content) in one buffer. */
  readonly decBytes: Uint8Array;
  readonly decOff: Int32Array;
  readonly specialIds: Uint8Array;
}

function normalizeWith(forms: readonly NormalForm[], s: string): string {
  for (const f of forms) s = s.normalize(f);
  return s;
}

/** Checks and compiles a parsed tokenizer.json; throws `UnsupportedTokenizer` naming what it lacks. */
export function compileModel(json: unknown): CompiledModel {
  if (!isObj(json)) fail('not a JSON object');
  if (json.truncation !== null && json.truncation !== undefined) fail('truncation');
  if (json.padding !== null && json.padding !== undefined) fail('padding');
  const model = json.model;
  if (!isObj(model)) fail('no model');
  if (model.type !== 'BPE') fail(`model ${String(model.type)}`);
  if (model.dropout !== null && model.dropout !== undefined && model.dropout !== 0) fail('BPE dropout');
  if (model.byte_fallback === true) fail('BPE byte_fallback');
  if (typeof model.continuing_subword_prefix === 'string' && model.continuing_subword_prefix !== '')
    fail('BPE continuing_subword_prefix');
  if (typeof model.end_of_word_suffix === 'string' && model.end_of_word_suffix !== '')
    fail('BPE end_of_word_suffix');
  const dec = json.decoder;
  if (dec !== null && dec !== undefined && (!isObj(dec) || dec.type !== 'ByteLevel'))
    fail(`decoder ${isObj(dec) ? String(dec.type) : '?'}`);
  const normalizers = normalizerOf(json.normalizer);
  const patterns = splitPatterns(json.pre_tokenizer);
  try {
    // Fails early on a pattern JavaScript cannot express.
    preTokenizerFor(patterns, false);
  } catch (e) {
    if (e instanceof UnsupportedPattern || e instanceof SyntaxError) fail(`pattern: ${e.message}`);
    throw e;
  }
  const ignoreMerges = model.ignore_merges === true;

  const vocabObj = model.vocab;
  if (!isObj(vocabObj)) fail('BPE vocab is not an object');
  const vocab = new Map<string, number>();
  let maxId = -1;
  for (const k of Object.keys(vocabObj)) {
    const id = vocabObj[k];
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0) fail(`vocab entry ${JSON.stringify(k)}`);
    vocab.set(k, id);
    if (id > maxId) maxId = id;
  }
  const byteIds = new Int32Array(256);
  const b2c = byteToChar();
  for (let b = 0; b < 256; b++) {
    const id = vocab.get(b2c[b]!);
    if (id === undefined) fail(`byte ${b} has no vocabulary token`);
    byteIds[b] = id;
  }

  const merges = model.merges;
  if (!Array.isArray(merges)) fail('BPE merges is not an array');
  const triples = new Int32Array(merges.length * 3);
  for (let r = 0; r < merges.length; r++) {
    const m = merges[r] as unknown;
    let a: string;
    let b: string;
    if (typeof m === 'string') {
      const sp = m.indexOf(' ');
      if (sp < 0 || m.indexOf(' ', sp + 1) >= 0) fail(`merges[${r}] is not "a b"`);
      a = m.slice(0, sp);
      b = m.slice(sp + 1);
    } else if (Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string') {
      a = m[0];
      b = m[1];
    } else fail(`merges[${r}]`);
    const ia = vocab.get(a);
    const ib = vocab.get(b);
    const im = vocab.get(a + b);
    if (ia === undefined || ib === undefined || im === undefined) fail(`merges[${r}] out of vocabulary`);
    triples[3 * r] = ia;
    triples[3 * r + 1] = ib;
    triples[3 * r + 2] = im;
  }

  const addedTokens = addedTokensOf(json);
  for (const t of addedTokens) if (t.id > maxId) maxId = t.id;
  const vocabSize = maxId + 1;

  // Decode table: the bytes of each id; whole-word table for ignore_merges.
  const c2b = new Int32Array(512).fill(-1);
  b2c.forEach((c, b) => (c2b[c.charCodeAt(0)] = b));
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const enc = new TextEncoder();
  const textVocab = ignoreMerges ? new Map<string, number>() : null;
  const tokenOf = new Array<string | undefined>(vocabSize);
  for (const [k, id] of vocab) tokenOf[id] = k;
  const addedById = new Map<number, AddedToken>();
  for (const t of addedTokens) if (!addedById.has(t.id)) addedById.set(t.id, t);
  const specialIds = new Uint8Array(vocabSize);
  const decOff = new Int32Array(vocabSize + 1);
  let decBytes = new Uint8Array(vocabSize * 8);
  let total = 0;
  for (let id = 0; id < vocabSize; id++) {
    decOff[id] = total;
    const a = addedById.get(id);
    const tok = a ? a.content : tokenOf[id];
    if (a?.special) specialIds[id] = 1;
    if (tok === undefined) continue;
    if (decBytes.length < total + tok.length * 4) {
      const grown = new Uint8Array(decBytes.length * 2 + tok.length * 4);
      grown.set(decBytes.subarray(0, total));
      decBytes = grown;
    }
    const start = total;
    // The ByteLevel decoder: each character of the alphabet back to its byte; a token with any other
    // character decodes to its own UTF-8 instead.
    let i = 0;
    for (; i < tok.length; i++) {
      const c = tok.charCodeAt(i);
      const b = c < 512 ? c2b[c]! : -1;
      if (b < 0) break;
      decBytes[total++] = b;
    }
    if (i < tok.length) {
      total = start;
      const u = enc.encode(tok);
      decBytes.set(u, total);
      total += u.length;
    }
    if (textVocab && !a && total > start) {
      const bytes = decBytes.subarray(start, total);
      // Only tokens that are valid UTF-8 on their own can be a whole word.
      if (validUtf8(bytes)) {
        const text = utf8.decode(bytes);
        if (!textVocab.has(text)) textVocab.set(text, id);
      }
    }
  }
  decOff[vocabSize] = total;
  return {
    vocabSize,
    addedTokens,
    normalizers,
    patterns,
    ignoreMerges,
    vocab,
    textVocab,
    byteIds,
    merges: new MergeTable(triples),
    decBytes: decBytes.slice(0, total),
    decOff,
    specialIds,
  };
}

function validUtf8(b: Uint8Array): boolean {
  for (let i = 0; i < b.length;) {
    const c = b[i]!;
    let n: number;
    if (c < 0x80) n = 0;
    else if (c >= 0xc2 && c < 0xe0) n = 1;
    else if (c >= 0xe0 && c < 0xf0) n = 2;
    else if (c >= 0xf0 && c < 0xf5) n = 3;
    else return false;
    for (let k = 1; k <= n; k++) if (i + k >= b.length || (b[i + k]! & 0xc0) !== 0x80) return false;
    if (n === 2) {
      const d = b[i + 1]!;
      if ((c === 0xe0 && d < 0xa0) || (c === 0xed && d >= 0xa0)) return false;
    } else if (n === 3) {
      const d = b[i + 1]!;
      if ((c === 0xf0 && d < 0x90) || (c === 0xf4 && d >= 0x90)) return false;
    }
    i += n + 1;
  }
  return true;
}

export class FastTokenizer {
  /** Ids are below this. */
  readonly vocabSize: number;
  readonly addedTokens: readonly AddedToken[];
  /** Pre-tokenizer path taken: 'regex' or a scanner name. */
  readonly preTokenizerKind: string;
  readonly normalizers: readonly NormalForm[];
  readonly ignoreMerges: boolean;
  readonly model: CompiledModel;

  private readonly textVocab: Map<string, number> | null;
  private readonly byteIds: Int32Array;
  private readonly merger: Merger;
  private readonly raw: AddedMatcher;
  private readonly norm: AddedMatcher;
  private readonly pre: PreTokenizer;
  /**
   * Word cache: a single id (>= 0), or -(offset * 64 + count) - 1 for `count` ids at `offset` in
   * `arena` (no typed array per entry: cold text inserts thousands of entries per prompt).
   */
  private readonly cache = new Map<string, number>();
  private arena = new Int32Array(4096);
  private arenaUsed = 0;
  private readonly cacheMax: number;
  /** Ids of 1-2 character ASCII words: -1 unknown, TWO_BYTES, else the one id. */
  private readonly small = new Int32Array(128 + 128 * 128).fill(-1);
  private readonly cacheEntries: number;
  private readonly decBytes: Uint8Array;
  private readonly decOff: Int32Array;
  private readonly specialIds: Uint8Array;

  // Scratch of one encode call.
  private out = new Uint32Array(1024);
  private n = 0;
  private bytes = new Uint8Array(1024);
  private ids = new Int32Array(1024);
  private readonly rawSink: SplitSink;
  private readonly normSink: SplitSink;
  private segment = '';
  private normPiece = '';
  private currentText = '';
  private readonly onPiece: (start: number, end: number) => void;

  constructor(model: CompiledModel, opts: CompileOptions = {}) {
    this.model = model;
    this.vocabSize = model.vocabSize;
    this.addedTokens = model.addedTokens;
    this.normalizers = model.normalizers;
    this.ignoreMerges = model.ignoreMerges;
    this.textVocab = model.textVocab;
    this.byteIds = model.byteIds;
    this.decBytes = model.decBytes;
    this.decOff = model.decOff;
    this.specialIds = model.specialIds;
    this.pre = preTokenizerFor(model.patterns, opts.noScanner !== true);
    this.preTokenizerKind = this.pre.kind;
    this.merger = new Merger(model.merges);
    this.raw = new AddedMatcher(model.addedTokens.filter((t) => !t.normalized));
    this.norm = new AddedMatcher(
      model.addedTokens
        .filter((t) => t.normalized)
        .map((t) => ({ ...t, content: this.normalize(t.content) })),
    );
    this.cacheMax = opts.cacheMaxChars ?? 48;
    this.cacheEntries = opts.cacheEntries ?? 65_536;
    this.onPiece = (start, end) => this.piece(this.segment, start, end);
    this.normSink = {
      text: (start, end) => this.words(this.normPiece, start, end),
      token: (id) => this.push(id),
    };
    this.rawSink = {
      text: (start, end) => this.segmentText(start, end),
      token: (id) => this.push(id),
    };
  }

  /** Words in the word cache (bounded: cleared when it reaches `wordCacheLimit`; issue 17). */
  get wordCacheEntries(): number {
    return this.cache.size;
  }

  /** The word cache's bound (`cacheEntries`, default 65,536). */
  get wordCacheLimit(): number {
    return this.cacheEntries;
  }

  /** Another pipeline (own scratch, cache and options) over the same compiled model. */
  withOptions(opts: CompileOptions): FastTokenizer {
    return new FastTokenizer(this.model, opts);
  }

  /** Token string (byte-level form) of a vocabulary id, or the content of an added token. */
  tokenToId(token: string): number | undefined {
    for (const t of this.addedTokens) if (t.content === token) return t.id;
    return this.model.vocab.get(token);
  }

  /** Whether the normalizer can change text (so a piece's ids depend on normalization). */
  get normalizes(): boolean {
    return this.normalizers.length > 0;
  }

  normalize(s: string): string {
    return normalizeWith(this.normalizers, s);
  }

  /** Hugging Face `encode(text, add_special_tokens=False)` ids. */
  encode(text: string): Uint32Array {
    this.n = 0;
    this.currentText = text;
    this.raw.split(text, 0, text.length, this.rawSink);
    this.currentText = '';
    return this.out.slice(0, this.n);
  }

  /** Ids of plain text: no added-token recognition (a piece between two added tokens). */
  encodeOrdinary(text: string): Uint32Array {
    this.n = 0;
    const s = this.normalize(text);
    this.words(s, 0, s.length);
    return this.out.slice(0, this.n);
  }

  /**
   * Cuts `text` at added tokens (raw pass only; the cut points `encode` starts from): pieces of
   * ordinary text and added token ids, in order.
   */
  splitAdded(text: string, sink: SplitSink): void {
    this.raw.split(text, 0, text.length, sink);
  }

  /**
   * `splitAdded` of the concatenation of `pieces` (a text rendered as many strings), without
   * building it: text runs are delivered as ranges of `pieces`' own strings, so a caller that only
   * reads them never makes one large string. Tokens with lstrip / rstrip / single_word rules look
   * around their match; with those the strings are joined first (same pieces, one string).
   */
  splitAddedPieces(pieces: readonly string[], sink: PiecesSink): void {
    if (!this.raw.rules) {
      this.raw.splitPieces(pieces, sink);
      return;
    }
    const s = pieces.length === 1 ? pieces[0]! : pieces.join('');
    this.raw.split(s, 0, s.length, {
      text: (start, end) => sink.text(s, start, end),
      token: (id) => sink.token(id),
    });
  }

  private segmentText(start: number, end: number): void {
    const t = this.currentText;
    let s = start === 0 && end === t.length ? t : t.slice(start, end);
    if (this.normalizers.length > 0) s = this.normalize(s);
    if (this.norm.size > 0) {
      this.normPiece = s;
      this.norm.split(s, 0, s.length, this.normSink);
    } else this.words(s, 0, s.length);
  }

  private words(s: string, start: number, end: number): void {
    if (start !== 0 || end !== s.length) s = s.slice(start, end);
    this.segment = s;
    this.pre.run(s, this.onPiece);
  }

  private push(id: number): void {
    if (this.n === this.out.length) this.growOut(this.n + 1);
    this.out[this.n++] = id;
  }

  private growOut(need: number): void {
    let cap = this.out.length * 2;
    while (cap < need) cap *= 2;
    const o = new Uint32Array(cap);
    o.set(this.out.subarray(0, this.n));
    this.out = o;
  }

  private piece(s: string, start: number, end: number): void {
    const len = end - start;
    if (len <= 2) {
      // One or two ASCII characters (spaces, punctuation, short words): a table, no string key.
      const c0 = s.charCodeAt(start);
      const c1 = len === 2 ? s.charCodeAt(start + 1) : 0;
      if (c0 < 128 && c1 < 128) {
        const slot = len === 1 ? c0 : 128 + c0 * 128 + c1;
        const v = this.small[slot]!;
        if (v >= 0) this.push(v);
        else if (v === TWO_BYTES) {
          this.push(this.byteIds[c0]!);
          this.push(this.byteIds[c1]!);
        } else {
          const before = this.n;
          this.encodeWord(s, start, end, null);
          // Two ASCII bytes that do not merge are their two byte tokens.
          this.small[slot] = this.n - before === 1 ? this.out[before]! : TWO_BYTES;
        }
        return;
      }
    }
    const key = s.slice(start, end);
    if (this.textVocab !== null) {
      const id = this.textVocab.get(key);
      if (id !== undefined) {
        this.push(id);
        return;
      }
    }
    if (len <= this.cacheMax) {
      const hit = this.cache.get(key);
      if (hit !== undefined) {
        if (hit >= 0) this.push(hit);
        else {
          const v = -hit - 1;
          const count = v % 64;
          const off = (v - count) / 64;
          if (this.n + count > this.out.length) this.growOut(this.n + count);
          const out = this.out;
          const arena = this.arena;
          for (let i = 0; i < count; i++) out[this.n++] = arena[off + i]!;
        }
        return;
      }
      this.encodeWord(s, start, end, key);
    } else this.encodeWord(s, start, end, null);
  }

  /** BPE of one word (no whole-word hit); remembered under `key` unless null. */
  private encodeWord(s: string, start: number, end: number, key: string | null): void {
    const len = end - start;
    if (this.textVocab !== null && key === null) {
      const id = this.textVocab.get(s.slice(start, end));
      if (id !== undefined) {
        this.push(id);
        return;
      }
    }
    if (this.bytes.length < len * 3) {
      this.bytes = new Uint8Array(len * 3 * 2);
      this.ids = new Int32Array(len * 3 * 2);
    }
    const nb = utf8Into(s, start, end, this.bytes);
    const ids = this.ids;
    const bytes = this.bytes;
    const byteIds = this.byteIds;
    for (let i = 0; i < nb; i++) ids[i] = byteIds[bytes[i]!]!;
    const m = this.merger.merge(ids, nb);
    if (this.n + m > this.out.length) this.growOut(this.n + m);
    for (let i = 0; i < m; i++) this.out[this.n++] = ids[i]!;
    if (key !== null && m < 64) {
      if (this.cache.size >= this.cacheEntries) {
        this.cache.clear();
        this.arenaUsed = 0;
      }
      let v = ids[0]!;
      if (m > 1) {
        if (this.arenaUsed + m > this.arena.length) {
          const grown = new Int32Array(this.arena.length * 2);
          grown.set(this.arena.subarray(0, this.arenaUsed));
          this.arena = grown;
        }
        this.arena.set(ids.subarray(0, m), this.arenaUsed);
        v = -(this.arenaUsed * 64 + m) - 1;
        this.arenaUsed += m;
      }
      // Keys of 13+ characters may be views of the whole text in V8: store an own copy.
      this.cache.set(len >= 13 ? ownCopy(key) : key, v);
    }
  }

  /**
   * Text of `ids` (Hugging Face `decode`): added tokens as their content, special ones skipped
   * when `skipSpecial`; unknown ids are dropped; invalid UTF-8 becomes U+FFFD.
   */
  decode(ids: ArrayLike<number>, skipSpecial = true): string {
    return new TextDecoder('utf-8', { ignoreBOM: true }).decode(this.decodeBytes(ids, skipSpecial));
  }

  decodeBytes(ids: ArrayLike<number>, skipSpecial = true): Uint8Array {
    let total = 0;
    const off = this.decOff;
    const vs = this.vocabSize;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (id < 0 || id >= vs || (skipSpecial && this.specialIds[id] === 1)) continue;
      total += off[id + 1]! - off[id]!;
    }
    const out = new Uint8Array(total);
    let o = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (id < 0 || id >= vs || (skipSpecial && this.specialIds[id] === 1)) continue;
      const a = off[id]!;
      const b = off[id + 1]!;
      out.set(this.decBytes.subarray(a, b), o);
      o += b - a;
    }
    return out;
  }

  isSpecial(id: number): boolean {
    return this.specialIds[id] === 1;
  }
}

const TWO_BYTES = -2;

function ownCopy(s: string): string {
  return ` ${s}`.slice(1);
}

/** Compiles a parsed tokenizer.json; throws `UnsupportedTokenizer` with the reason. */
export function compileTokenizer(json: unknown, opts?: CompileOptions): FastTokenizer {
  return new FastTokenizer(compileModel(json), opts);
}
