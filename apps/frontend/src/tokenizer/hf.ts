/**
 * `--model-path`: a Hugging Face `tokenizer.json` (tokenizers.js implements its normalizers,
 * pre-tokenizers, models and decoders) plus `tokenizer_config.json` for the special tokens and the
 * chat template.
 */
import fs from 'node:fs';
import path from 'node:path';
import * as hfTokenizers from '@huggingface/tokenizers';
import { KvrError } from '@kvrouter/protocols';
import type { TextTokenizer } from './types.js';

type Json = Record<string, unknown>;

/** The part of tokenizers.js used here (its .d.ts files use extensionless imports NodeNext cannot follow). */
interface HfTokenizerApi {
  encode(text: string, opts: { add_special_tokens: boolean }): { ids: number[] };
  decode(ids: number[], opts: { skip_special_tokens: boolean }): string;
  get_vocab(withAddedTokens: boolean): Map<string, number>;
  token_to_id(token: string): number | undefined;
}
const Tokenizer = (
  hfTokenizers as unknown as { Tokenizer: new (tokenizerJson: object, config: object) => HfTokenizerApi }
).Tokenizer;

function readJson(file: string, required: boolean): Json | null {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if (!required && (e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new KvrError('tokenizer_load_failed', `cannot read ${file}: ${(e as Error).message}`, 500, {
      field: 'model-path',
    });
  }
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not a JSON object');
    return v as Json;
  } catch (e) {
    throw new KvrError('tokenizer_load_failed', `${file}: invalid JSON (${(e as Error).message})`, 500, {
      field: 'model-path',
    });
  }
}

/** `"<s>"` or `{"content": "<s>", ...}` (AddedToken form) → the text. */
function tokenText(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as Json).content === 'string')
    return (v as Json).content as string;
  return null;
}

export interface HfModelFiles {
  tokenizerJson: Json;
  config: Json;
  /** The chat template text (tokenizer_config.json `chat_template`, or `chat_template.jinja`), if any. */
  chatTemplate: string | null;
}

export function readHfModel(dir: string): HfModelFiles {
  const tokenizerJson = readJson(path.join(dir, 'tokenizer.json'), true)!;
  const config = readJson(path.join(dir, 'tokenizer_config.json'), false) ?? {};
  let chatTemplate: string | null = null;
  const ct = config.chat_template;
  if (typeof ct === 'string') chatTemplate = ct;
  else if (Array.isArray(ct)) {
    // Named templates: the one called "default" (as transformers picks it).
    const named = ct as { name?: unknown; template?: unknown }[];
    const d = named.find((t) => t.name === 'default') ?? named[0];
    if (d && typeof d.template === 'string') chatTemplate = d.template;
  }
  if (chatTemplate === null) {
    try {
      chatTemplate = fs.readFileSync(path.join(dir, 'chat_template.jinja'), 'utf8');
    } catch {
      chatTemplate = null;
    }
  }
  return { tokenizerJson, config, chatTemplate };
}

/** BOS/EOS of tokenizer_config.json: texts and ids (BOS ids only when `add_bos_token` is true). */
export function cardTokenIds(
  files: HfModelFiles,
  specials: ReadonlyMap<string, number>,
  tokenToId: (t: string) => number | null | undefined,
): { bosToken: string | null; eosToken: string | null; bosTokenIds: number[]; eosTokenIds: number[] } {
  const bosToken = tokenText(files.config.bos_token);
  const eosToken = tokenText(files.config.eos_token);
  const idOf = (t: string | null): number | undefined =>
    t === null ? undefined : (specials.get(t) ?? tokenToId(t) ?? undefined);
  const eos = idOf(eosToken);
  const bos = idOf(bosToken);
  const addBos = bos !== undefined && files.config.add_bos_token === true;
  return {
    bosToken,
    eosToken,
    bosTokenIds: addBos ? [bos] : [],
    eosTokenIds: eos === undefined ? [] : [eos],
  };
}

export class HfTokenizer implements TextTokenizer {
  readonly name: string;
  readonly vocabSize: number;
  readonly specialTokens: ReadonlyMap<string, number>;
  readonly eosTokenIds: readonly number[];
  readonly bosTokenIds: readonly number[];
  readonly chunkSafe: boolean;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  private readonly tok: HfTokenizerApi;
  private readonly specialIds: Set<number>;

  constructor(files: HfModelFiles, name: string) {
    this.name = name;
    try {
      this.tok = new Tokenizer(files.tokenizerJson, files.config);
    } catch (e) {
      throw new KvrError('tokenizer_load_failed', `tokenizer.json: ${(e as Error).message}`, 500, {
        field: 'model-path',
      });
    }
    const specials = new Map<string, number>();
    const added = (files.tokenizerJson.added_tokens ?? []) as { id?: unknown; content?: unknown }[];
    let maxId = 0;
    for (const t of added)
      if (typeof t.content === 'string' && typeof t.id === 'number') {
        specials.set(t.content, t.id);
        maxId = Math.max(maxId, t.id);
      }
    for (const id of this.tok.get_vocab(true).values()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;
    this.specialTokens = specials;
    this.specialIds = new Set(specials.values());
    const card = cardTokenIds(files, specials, (t) => this.tok.token_to_id(t));
    this.bosToken = card.bosToken;
    this.eosToken = card.eosToken;
    this.bosTokenIds = card.bosTokenIds;
    this.eosTokenIds = card.eosTokenIds;
    const pre = files.tokenizerJson.pre_tokenizer as Json | null | undefined;
    const norm = files.tokenizerJson.normalizer as Json | null | undefined;
    // Byte-level BPE without a normalizer encodes each piece between specials independently.
    this.chunkSafe = (norm === null || norm === undefined) && pre?.type === 'ByteLevel';
  }

  encodeText(text: string): number[] {
    return text.length === 0 ? [] : this.tok.encode(text, { add_special_tokens: false }).ids;
  }

  encode(text: string): number[] {
    return text.length === 0 ? [] : this.tok.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: ArrayLike<number>): string {
    const keep: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (id < this.vocabSize && !this.specialIds.has(id)) keep.push(id);
    }
    // tokenizers.js rejects an empty list (and every id may have been a special token).
    return keep.length === 0 ? '' : this.tok.decode(keep, { skip_special_tokens: true });
  }
}
