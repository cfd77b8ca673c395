/**
 * Prompt text → token ids, the two `--tokenizer` paths:
 * - `default`: the whole rendered prompt through the tokenizer (Hugging Face semantics);
 * - `fastokens`: incremental across turns. The prompt is cut where the tokenizer itself cuts first
 *   (added/special tokens, `cut` / splitSpecials); the ids of every prefix that ends right after an
 *   added token are kept in a prefix cache, so a conversation's next request tokenizes only the
 *   text after the longest cached prefix (the new messages), not the whole history.
 *
 * Why a cached prefix is exact (the reuse rule): the tokenizer splits added tokens out of the text
 * before normalizing and BPE, and encodes each piece between them on its own; nothing merges
 * across an added token. A prefix ending right after an added token therefore has the same ids
 * alone as inside any longer text whose cut has the same pieces up to there. The cache key is a
 * hash of exactly that: the sequence of cut pieces (text characters and added-token ids) up to the
 * boundary, so a longer added token that would match across the boundary in the new text gives a
 * different piece sequence and no hit. Tokenizers whose pieces are not independent (`chunkSafe`
 * false: a normalizer or `single_word` rule that looks across a cut) always take the default path.
 *
 * A chat prompt is cut and hashed as the template's pieces (`ChatTemplate.renderPieces`: the
 * messages' own strings and the template's text between them), never as one string: on this VM a
 * string over ~128 kB gets freshly mapped pages, and flattening a 150k-token prompt's 1 MB rope
 * cost several ms where cutting and hashing it cost ~1 ms. The cut runs over the pieces as over
 * their concatenation (an added token may start in one piece and end in a later one; text pieces
 * are runs of the pieces' characters) and the hash reads the same character stream, except that
 * a run that is a whole string of `MEMO_MIN_CHARS` or more (a message's text) enters as that
 * string's memoized fingerprint: a conversation's history is hashed once, not every turn. Keys
 * therefore depend on where such strings start and end (the same text split elsewhere finds other
 * keys: a miss, never wrong ids), which the template makes the same every turn. Only the text
 * after the longest cached prefix is made into strings, for BPE.
 *
 * Keys are two 32-bit hash words plus the prefix length: no entry holds prompt text, so the cache
 * pins no request strings. (The fingerprint memo does hold the long strings it fingerprinted, to
 * confirm them: bounded by as many characters as the cache holds ids, least recently used out,
 * and with the body string cache on they are the very strings that cache keeps.) Entries form a
 * trie: each holds the ids of its own segment (text since the previous boundary plus the added
 * token) and a link to the entry of the previous boundary, so conversations sharing a system
 * prompt share its entries and memory is the sum of distinct segments. Eviction is CLOCK (second
 * chance) over entries, bounded by `cacheTokens` ids; a hit marks every entry on its chain, so
 * prefixes outlive their extensions. Each entry has a name (a number never given to another entry
 * on this thread): `EncodeStats.prefix` names the entry a prompt's ids extend and the one they end
 * in, so the router can reuse the earlier turn's block hashes (packages/router hash-chains.ts).
 *
 * Either way, uncached text above `offloadChars` is tokenized in a worker thread (pool.ts: idle
 * thread or FIFO queue, a time budget per job); while every thread is held by a large prompt, a
 * normal-size text is tokenized inline instead of waiting behind it.
 */
import { refuseIfCannotFit } from '../context-bound.js';
import { KeyedChains } from '../keyed-chains.js';
import type { PiecesSink } from '@kvrouter/tokenizer';
import { splitSpecialsPieces } from './split.js';
import { UnsendableJob, type TokenizerPool } from './pool.js';
import type { ChatTemplate, RenderOptions, TemplateMessage } from './template.js';
import { DEFAULT_PREFIX_CACHE_TOKENS, type EncodeStats, type TextTokenizer } from './types.js';

export interface PromptEncoderOptions {
  tokenizer: TextTokenizer;
  mode: 'default' | 'fastokens';
  pool?: TokenizerPool | null;
  /**
   * The chat template the pool's threads load from the same spec: a chat prompt rendered by this
   * very template may be rendered and tokenized on a thread (`encodeChat`).
   */
  template?: ChatTemplate | null;
  /**
   * Chat prompts whose messages hold at least this many characters are rendered and tokenized on
   * a pool thread (0 = never): see `encodeChat`. Unset or null: 65 536 (~16k tokens) in `default`
   * mode, 0 in `fastokens` mode (a 150k-token turn costs ~3 ms of CPU inline and about the same
   * through a thread; uncached text over `offloadChars` still goes to a thread).
   */
  offloadChatChars?: number | null;
  /**
   * Uncached characters above which a thread does the work (default 16 384, ~4k tokens). A fresh
   * 8k-token context is ~1.5 ms of BPE on an idle core and 10-25 ms on a busy one; inline, every
   * other request in flight waits that long, which is what a p99 sees.
   */
  offloadChars?: number;
  /** Token ids kept by the prefix cache (fastokens; default 16 M = 64 MB of ids; 0 = no cache). */
  cacheTokens?: number;
  /**
   * While every pool thread is busy and one of them with a large prompt, texts up to this many
   * characters are tokenized inline rather than queued behind it (default 4 x `offloadChars`,
   * ~16k tokens: tens of ms on the event loop instead of waiting out the large prompt).
   */
  inlineWhenBlockedChars?: number;
}

/** Names of prefix entries, unique on this thread for its life (`EncodeStats.prefix`). */
let nextName = 0;

interface Entry {
  /** The name of this prefix (its token sequence): never given to another entry. */
  name: number;
  key: number;
  /** Second hash word and prefix length (characters + added tokens), checked on a hit. */
  h2: number;
  len: number;
  parent: Entry | null;
  /** Ids of this entry's segment (the text since `parent`'s boundary, then the added token). */
  ids: Uint32Array;
  /** Ids of the whole prefix. */
  count: number;
  /** Hit since the eviction walk last passed it. */
  used: boolean;
}

/** Characters of the messages' text (string contents and text parts; a size estimate). */
function messageChars(messages: readonly TemplateMessage[]): number {
  let n = 0;
  for (const m of messages) {
    const c = m.content;
    if (typeof c === 'string') n += c.length;
    else if (Array.isArray(c))
      for (const p of c as { text?: unknown }[]) if (typeof p?.text === 'string') n += p.text.length;
  }
  return n;
}

/**
 * A conversation's key: FNV-1a of its first message's role and first 256 content characters, and
 * of the second message's too when the first is a system (or developer) prompt. Agent fleets send
 * one system prompt to every session: keyed on it alone, every long conversation waited for the
 * same thread while the others stood idle. Both messages are there from a conversation's first
 * turn on and never change, so every turn still reaches the thread that cached the previous one.
 */
function affinityOf(messages: readonly TemplateMessage[]): number {
  const m = messages[0];
  if (m === undefined) return 0;
  let h = hashMessage(0x811c9dc5, m);
  const next = messages[1];
  if ((m.role === 'system' || m.role === 'developer') && next !== undefined) h = hashMessage(h, next);
  return h >>> 0;
}

function hashMessage(h: number, m: TemplateMessage): number {
  const first = Array.isArray(m.content) ? (m.content[0] as { text?: unknown } | undefined)?.text : m.content;
  const c = typeof first === 'string' ? first : '';
  const key = `${m.role}\u0000${c.slice(0, 256)}`;
  for (let i = 0; i < key.length; i++) h = step1(h, key.charCodeAt(i));
  return h;
}

/**
 * FNV-1a and a multiply-rotate hash, one step each, on int32 words: the bits of the u32 hashes
 * (`>>> 0` of the result), kept signed inside the loops because V8 then keeps them in registers
 * (a u32 above 2^31 is a double there, and the loop ran ~2x slower).
 */
function step1(h: number, c: number): number {
  return Math.imul(h ^ c, 0x01000193);
}
function step2(h: number, c: number): number {
  h = Math.imul(h + c, 0x9e3779b1);
  return (h << 13) | (h >>> 19);
}

/**
 * Runs that are a whole string of at least this many characters (a message's text, as the chat
 * template hands it over) enter the prefix keys as the string's memoized fingerprint, not
 * character by character: a conversation resends its history every turn, and hashing it again
 * was most of a turn's tokenize cost (~2.6 ns per character; a 150k-token agent prompt ~1.3 ms).
 */
const MEMO_MIN_CHARS = 256;

/** A memoized fingerprint (`PromptEncoder.fingerprint`), chained with others of the same sample. */
interface Memo {
  readonly s: string;
  readonly fp: readonly [number, number];
  next: Memo | null;
}

/**
 * One prompt's cut (a `PiecesSink`): items in order, each an added token (`tok` = its id) or a text
 * piece (`tok` = -1) made of the runs `first[i]` .. `first[i + 1]` (or the last run) of
 * `runS[k][runA[k], runB[k])`, `len[i]` characters in all.
 */
class Cut implements PiecesSink {
  readonly tok: number[] = [];
  readonly first: number[] = [];
  readonly len: number[] = [];
  readonly runS: string[] = [];
  readonly runA: number[] = [];
  readonly runB: number[] = [];
  /** Items up to the last added token (the text after it is in no key). */
  keyed = 0;
  private open = false;

  text(s: string, a: number, b: number): void {
    if (!this.open) {
      this.tok.push(-1);
      this.first.push(this.runS.length);
      this.len.push(0);
      this.open = true;
    }
    this.runS.push(s);
    this.runA.push(a);
    this.runB.push(b);
    this.len[this.len.length - 1]! += b - a;
  }

  token(id: number): void {
    this.tok.push(id);
    this.first.push(this.runS.length);
    this.len.push(1);
    this.open = false;
    this.keyed = this.tok.length;
  }

  /** Text piece `i` as one string (a slice of one run, or the runs concatenated). */
  textOf(i: number): string {
    const a = this.first[i]!;
    const b = i + 1 < this.first.length ? this.first[i + 1]! : this.runS.length;
    let out = '';
    for (let k = a; k < b; k++) {
      const s = this.runS[k]!;
      const x = this.runA[k]!;
      const y = this.runB[k]!;
      out += x === 0 && y === s.length ? s : s.slice(x, y);
    }
    return out;
  }
}

export class PromptEncoder {
  readonly tokenizer: TextTokenizer;
  readonly mode: 'default' | 'fastokens';
  /** The tokenizer threads (null: everything inline). */
  readonly pool: TokenizerPool | null;
  private readonly offloadChars: number;
  private readonly cacheTokens: number;
  private readonly inlineWhenBlocked: number;
  private readonly template: ChatTemplate | null;
  private readonly offloadChatChars: number;
  private readonly cache = new Map<number, Entry>();
  private cachedTokens = 0;
  /** Fingerprints of long strings (`fingerprint`), by a sample of the string; at most as many characters as `cacheTokens`. */
  private readonly memo: KeyedChains<Memo>;

  constructor(o: PromptEncoderOptions) {
    this.tokenizer = o.tokenizer;
    this.mode = o.mode === 'fastokens' && o.tokenizer.chunkSafe ? 'fastokens' : 'default';
    this.pool = o.pool ?? null;
    this.offloadChars = o.offloadChars ?? 16_384;
    this.cacheTokens = o.cacheTokens ?? DEFAULT_PREFIX_CACHE_TOKENS;
    // As many characters of memoized strings as the prefix cache holds ids (~1/4 of the text those
    // ids stand for): the strings worth a fingerprint are the ones whose prefixes are cached.
    this.memo = new KeyedChains<Memo>(this.cacheTokens, 8, (e) => e.s.length);
    this.inlineWhenBlocked = o.inlineWhenBlockedChars ?? 4 * this.offloadChars;
    this.template = o.template ?? null;
    this.offloadChatChars = o.offloadChatChars ?? (this.mode === 'fastokens' ? 0 : 65_536);
  }

  /**
   * A chat prompt's token ids: `template` renders `messages`, a text that cannot fit
   * `contextLength` tokens is refused (400 naming `messages`) before tokenizing, then `encode`.
   *
   * Conversations whose messages hold `offloadChatChars` characters or more do all of that on a
   * pool thread, with the thread's own template and prompt encoder (same mode, its own prefix
   * cache). That is the default in `default` mode, where a 150k-token prompt is 13-18 ms of BPE.
   * In `fastokens` mode the default is inline: the prompt is rendered as pieces and only the new
   * turn is tokenized (~3 ms of CPU at 150k tokens, about what the thread path costs in all), and
   * a thread's FIFO queue (one thread per conversation) is the one that grew to seconds when the
   * thread got too little CPU. Every turn of one conversation goes to the same thread (affinity by its first
   * message), so the thread's cache holds its earlier turns. Ids are the same either way (same
   * template, same tokenizer, same cache rule).
   */
  async encodeChat(
    template: ChatTemplate,
    messages: readonly TemplateMessage[],
    options: RenderOptions,
    contextLength: number,
    stats?: EncodeStats,
    signal?: AbortSignal,
  ): Promise<Uint32Array> {
    if (this.pool !== null && template === this.template && this.offloadChatChars > 0) {
      const chars = messageChars(messages);
      if (chars >= this.offloadChatChars)
        try {
          return await this.pool.encodeChat(
            { messages, options, contextLength },
            chars,
            affinityOf(messages),
            stats,
            signal,
          );
        } catch (e) {
          // Not clonable: rendered here, as inline (whatever that gives).
          if (!(e instanceof UnsendableJob)) throw e;
        }
    }
    return this.encodeChatHere(template, messages, options, contextLength, stats);
  }

  /**
   * `encodeChat` on this thread: the inline path, and what a tokenizer thread does with a chat
   * job. With fastokens and a template that renders pieces, the prompt is never one string: the
   * bound check adds the pieces' lengths and the prefix cache cuts and hashes the pieces.
   */
  async encodeChatHere(
    template: ChatTemplate,
    messages: readonly TemplateMessage[],
    options: RenderOptions,
    contextLength: number,
    stats?: EncodeStats,
  ): Promise<Uint32Array> {
    if (this.mode === 'fastokens' && template.renderPieces !== undefined) {
      const pieces = template.renderPieces(messages, options);
      let chars = 0;
      for (const p of pieces) chars += p.length;
      refuseIfCannotFit({ length: chars }, this.tokenizer, contextLength, 'messages');
      return this.encodeRendered(pieces, stats);
    }
    const text = template.render(messages, options);
    refuseIfCannotFit(text, this.tokenizer, contextLength, 'messages');
    return this.encode(text, stats);
  }

  /** Whether `chars` uncached characters go to the pool (else inline; see `inlineWhenBlockedChars`). */
  private offload(chars: number): boolean {
    const pool = this.pool;
    if (pool === null || chars <= this.offloadChars) return false;
    return chars > this.inlineWhenBlocked || pool.canStartNow(chars) || !pool.heldByLarge();
  }

  /**
   * The ids of the text `pieces` make when concatenated (a prompt rendered as pieces): fastokens
   * cuts and hashes the pieces as they are; `default` tokenizes the concatenation.
   */
  async encodeRendered(pieces: readonly string[], stats?: EncodeStats): Promise<Uint32Array> {
    if (this.mode === 'fastokens') return this.encodeCached(pieces, stats);
    let text = '';
    for (const p of pieces) text += p;
    return this.encodeWhole(text, stats);
  }

  async encode(text: string, stats?: EncodeStats): Promise<Uint32Array> {
    return this.mode === 'fastokens' ? this.encodeCached([text], stats) : this.encodeWhole(text, stats);
  }

  private async encodeWhole(text: string, stats?: EncodeStats): Promise<Uint32Array> {
    if (stats) stats.tokenizedChars = text.length;
    if (this.offload(text.length)) {
      if (stats) stats.offloaded = true;
      return (await this.pool!.encode([text], true))[0]!;
    }
    return Uint32Array.from(this.tokenizer.encode(text));
  }

  /** The cut of the pieces' text, in the order the tokenizer cuts; text pieces are encoded on their own. */
  private cut(pieces: readonly string[]): Cut {
    const t = this.tokenizer;
    const c = new Cut();
    if (t.cutPieces) t.cutPieces(pieces, c);
    else splitSpecialsPieces(pieces, t.specialTokens, c);
    return c;
  }

  private async encodePieces(pieces: string[], chars: number, stats?: EncodeStats): Promise<Uint32Array[]> {
    // A tokenizer with its own cut encodes a piece with `encode` (what its whole-text encode does
    // with it); the others with `encodeText` (no special-token recognition).
    const whole = this.tokenizer.cutPieces !== undefined;
    if (this.offload(chars)) {
      if (stats) stats.offloaded = true;
      return this.pool!.encode(pieces, whole);
    }
    return pieces.map((p) =>
      Uint32Array.from(whole ? this.tokenizer.encode(p) : this.tokenizer.encodeText(p)),
    );
  }

  private async encodeCached(pieces: readonly string[], stats?: EncodeStats): Promise<Uint32Array> {
    const cut = this.cut(pieces);
    const { tok, first, len: lens, runS, runA, runB } = cut;
    const n = tok.length;
    // Hash words and length of the prefix ending after each added token (the boundaries).
    const bIdx: number[] = [];
    const bKey: number[] = [];
    const bH2: number[] = [];
    const bLen: number[] = [];
    let h1 = 0x811c9dc5;
    let h2 = 0x2545f491;
    let len = 0;
    for (let i = 0; i < cut.keyed; i++) {
      const id = tok[i]!;
      if (id < 0) {
        // The piece's length, then two UTF-16 units per step (a pair may span two runs). Every
        // piece starts with a header word (a length < 2^31, or an added token's id with the top bit
        // set) that says how many words follow, so equal streams mean equal piece sequences.
        const m = lens[i]!;
        h1 = step1(h1, m);
        h2 = step2(h2, m);
        const end = i + 1 < n ? first[i + 1]! : runS.length;
        let carry = -1;
        for (let r = first[i]!; r < end; r++) {
          const p = runS[r]!;
          let k = runA[r]!;
          const b = runB[r]!;
          if (k === 0 && b === p.length && b >= MEMO_MIN_CHARS) {
            // A whole long string (a message's text): its memoized fingerprint stands for its
            // characters (the odd character before it first, as a word of its own).
            const f = this.fingerprint(p);
            if (carry >= 0) {
              h1 = step1(h1, carry);
              h2 = step2(h2, carry);
              carry = -1;
            }
            h1 = step1(h1, f[0]);
            h2 = step2(h2, f[1]);
            continue;
          }
          if (carry >= 0) {
            const c = carry | (p.charCodeAt(k) << 16);
            h1 = step1(h1, c);
            h2 = step2(h2, c);
            k++;
            carry = -1;
          }
          for (; k + 1 < b; k += 2) {
            const c = p.charCodeAt(k) | (p.charCodeAt(k + 1) << 16);
            h1 = step1(h1, c);
            h2 = step2(h2, c);
          }
          if (k < b) carry = p.charCodeAt(k);
        }
        if (carry >= 0) {
          h1 = step1(h1, carry);
          h2 = step2(h2, carry);
        }
        len += m;
      } else {
        // An added token: its header word is its id with the top bit set.
        h1 = step1(h1, id | 0x80000000);
        h2 = step2(h2, id | 0x80000000);
        len += 1;
        bIdx.push(i);
        // 52-bit key: h1 and the top 20 bits of h2 (as u32).
        bKey.push((h1 >>> 0) * 0x100000 + (h2 >>> 12));
        bH2.push(h2 >>> 0);
        bLen.push(len);
      }
    }
    // The longest cached prefix.
    let hit: Entry | null = null;
    let hitB = -1;
    for (let b = bIdx.length - 1; b >= 0 && this.cacheTokens > 0; b--) {
      const e = this.cache.get(bKey[b]!);
      if (e !== undefined && e.h2 === bH2[b] && e.len === bLen[b]) {
        hit = e;
        hitB = b;
        break;
      }
    }
    const from = hitB >= 0 ? bIdx[hitB]! + 1 : 0;
    // Encode the text pieces after the hit (the only text made into strings).
    const miss: string[] = [];
    let missChars = 0;
    for (let i = from; i < n; i++)
      if (tok[i]! < 0) {
        miss.push(cut.textOf(i));
        missChars += lens[i]!;
      }
    if (stats) {
      stats.tokenizedChars = missChars;
      stats.cachedTokens = hit?.count ?? 0;
    }
    const encoded = miss.length > 0 ? await this.encodePieces(miss, missChars, stats) : [];
    let total = hit?.count ?? 0;
    for (let i = from, m = 0; i < n; i++) total += tok[i]! >= 0 ? 1 : encoded[m++]!.length;
    const out = new Uint32Array(total);
    // The cached prefix, from its last segment back (marking the chain as used).
    for (let e = hit; e !== null; e = e.parent) {
      out.set(e.ids, e.count - e.ids.length);
      e.used = true;
    }
    // The rest, remembering a new entry at every boundary after the hit.
    let o = hit?.count ?? 0;
    let segStart = o;
    let parent = hit;
    let b = hitB + 1;
    for (let i = from, m = 0; i < n; i++) {
      const p = tok[i]!;
      if (p >= 0) {
        out[o++] = p;
        if (this.cacheTokens > 0 && b < bIdx.length && bIdx[b] === i) {
          parent = this.remember(bKey[b]!, bH2[b]!, bLen[b]!, parent, out.slice(segStart, o), o);
          segStart = o;
          b++;
        }
      } else {
        const ids = encoded[m++]!;
        out.set(ids, o);
        o += ids.length;
      }
    }
    if (stats && (hit !== null || parent !== null))
      stats.prefix = {
        reused: hit?.name ?? -1,
        reusedTokens: hit?.count ?? 0,
        leaf: parent?.name ?? -1,
        leafTokens: parent?.count ?? 0,
      };
    return out;
  }

  /**
   * The fingerprint of a whole string: the two hashes of its characters from fixed seeds, then its
   * length. Memoized per string, found by a sample of it (its length and 16 characters spread over
   * it) and confirmed by `===` (the same object when the body string cache handed it over, else one
   * native compare). Not a Map keyed by the string: V8 hashes a string of more than 16,383
   * characters by its length alone, and the chat bench's system prompts, all of one length, made
   * that one long chain of compares. Least recently used out past `cacheTokens` characters.
   */
  private fingerprint(s: string): readonly [number, number] {
    const memo = this.memo;
    const n = s.length;
    let key = step1(0x811c9dc5, n);
    for (let i = 0; i < 16; i++) key = step1(key, s.charCodeAt(((i * 2 + 1) * n) >>> 5));
    for (let e = memo.first(key); e !== null; e = e.next)
      if (e.s === s) {
        memo.touch(key);
        return e.fp;
      }
    let h1 = 0x6a09e667;
    let h2 = 0x3c6ef372;
    let k = 0;
    for (; k + 1 < n; k += 2) {
      const c = s.charCodeAt(k) | (s.charCodeAt(k + 1) << 16);
      h1 = step1(h1, c);
      h2 = step2(h2, c);
    }
    if (k < n) {
      h1 = step1(h1, s.charCodeAt(k));
      h2 = step2(h2, s.charCodeAt(k));
    }
    const fp: [number, number] = [step1(h1, n), step2(h2, n)];
    // At most 8 strings per sample (strings alike but for a few characters): the oldest go.
    memo.add(key, { s, fp, next: null });
    return fp;
  }

  private remember(
    key: number,
    h2: number,
    len: number,
    parent: Entry | null,
    ids: Uint32Array,
    count: number,
  ): Entry {
    const old = this.cache.get(key);
    if (old !== undefined) {
      // Same key: the same prefix (or a hash collision: the newer prefix wins).
      this.cachedTokens -= old.ids.length;
      this.cache.delete(key);
    }
    const e: Entry = { name: nextName++, key, h2, len, parent, ids, count, used: false };
    this.cache.set(key, e);
    this.cachedTokens += ids.length;
    if (this.cachedTokens > this.cacheTokens) this.evict();
    return e;
  }

  /** Oldest first; a used entry is cleared and moved to the back instead (second chance). */
  private evict(): void {
    for (const e of this.cache.values()) {
      if (this.cachedTokens <= this.cacheTokens) break;
      this.cache.delete(e.key);
      if (e.used) {
        e.used = false;
        this.cache.set(e.key, e);
      } else this.cachedTokens -= e.ids.length;
    }
  }

  /** Prefix entries held. */
  get cacheEntries(): number {
    return this.cache.size;
  }

  /** The bound of `cacheTokensHeld` (`--tokenizer-prefix-cache-tokens`). */
  get cacheTokenLimit(): number {
    return this.cacheTokens;
  }

  /** Ids held by the prefix entries. */
  get cacheTokensHeld(): number {
    return this.cachedTokens;
  }

  /** Characters of the strings whose fingerprints are memoized, and their bound (the id bound). */
  get fingerprintCharsHeld(): number {
    return this.memo.held;
  }

  get fingerprintCharLimit(): number {
    return this.memo.limit;
  }

  /** Ids held by the prefix caches of its pool's threads (`encodeChat` jobs), and their bound. */
  get threadCacheTokensHeld(): number {
    return this.pool?.cacheTokensHeld ?? 0;
  }

  get threadCacheTokenLimit(): number {
    return this.pool?.cacheTokenLimit ?? 0;
  }
}
