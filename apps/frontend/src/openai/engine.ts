/**
 * What a validated request adds to the engine's `generate` payload and to routing, beyond the
 * tokens: `stop_conditions.min_tokens`, `output_options.logprobs`, `multi_modal_data`, the
 * multimodal hashes of the blocks that hold image placeholders (PROTOCOL §2.1), and the
 * detokenizer that keeps special tokens when an output parser needs its markers.
 */
import { xxh3_64 } from '@kvrouter/protocols';
import type { MultiModalData, OutputOptions } from '@kvrouter/protocols';
import type { TextTokenizer } from '../tokenizer/types.js';
import type { InferenceRequest } from './validate.js';

/** `output_options` and `multi_modal_data` of the payload (absent when not asked for). */
export function engineFields(req: InferenceRequest): {
  output_options?: OutputOptions;
  multi_modal_data?: MultiModalData;
  lora_name?: string;
} {
  const out: { output_options?: OutputOptions; multi_modal_data?: MultiModalData; lora_name?: string } = {};
  if (req.lora) out.lora_name = req.lora.name;
  if (req.logprobs !== null) out.output_options = { logprobs: req.logprobs };
  if (req.kind === 'chat' && req.images.length > 0)
    out.multi_modal_data = { image_url: req.images.map((i) => ({ url: i.url })) };
  return out;
}

/** `stop_conditions` additions. */
export function stopExtras(req: InferenceRequest): { min_tokens?: number } {
  return req.minTokens !== null && req.minTokens > 0 ? { min_tokens: req.minTokens } : {};
}

/** Placeholders templates put where an image goes (the model's own special token first). */
const IMAGE_PLACEHOLDERS = ['<|image_pad|>', '<|image|>', '<image>'] as const;

const utf8 = new TextEncoder();

/** The multimodal hash of an image: XXH3-64 (seed 0) of its URL (a data: URL carries the bytes). */
export function imageHash(url: string): bigint {
  return xxh3_64(utf8.encode(url), 0n);
}

type RouteExtras = {
  mmHashes?: (bigint[] | undefined)[];
  loraName?: string;
  allowedWorkerIds?: readonly bigint[];
};

/**
 * What routing adds for this request: a LoRA adapter's name (block hashes seeded by it, §2.1) and
 * the workers that serve it, and the multimodal hashes (`multimodalHashes`).
 */
export function mmHashesFor(
  req: InferenceRequest,
  tokens: Uint32Array,
  blockSize: number,
  tok: TextTokenizer,
): RouteExtras {
  const mm = multimodalHashes(req, tokens, blockSize, tok);
  if (!req.lora) return mm;
  return { ...mm, loraName: req.lora.name, allowedWorkerIds: req.lora.workerIds };
}

/**
 * Per block, the hashes of the images whose placeholder starts in it (§2.1): the i-th image is the
 * i-th placeholder occurrence in the prompt's ids; images without one (a template that drops
 * them) go with the last block that holds a placeholder, else the first block.
 */
function multimodalHashes(
  req: InferenceRequest,
  tokens: Uint32Array,
  blockSize: number,
  tok: TextTokenizer,
): { mmHashes?: (bigint[] | undefined)[] } {
  if (req.kind !== 'chat' || req.images.length === 0 || blockSize <= 0) return {};
  let seq: ArrayLike<number> | null = null;
  for (const p of IMAGE_PLACEHOLDERS) {
    const id = tok.specialTokens.get(p);
    if (id !== undefined) {
      seq = [id];
      break;
    }
  }
  seq ??= tok.encodeText('<image>');
  const at: number[] = [];
  if (seq.length > 0)
    for (let i = 0; i + seq.length <= tokens.length && at.length < req.images.length; i++) {
      let ok = true;
      for (let k = 0; k < seq.length && ok; k++) ok = tokens[i + k] === seq[k];
      if (ok) {
        at.push(i);
        i += seq.length - 1;
      }
    }
  const blocks = Math.floor(tokens.length / blockSize);
  if (blocks === 0) return {};
  const mm: (bigint[] | undefined)[] = new Array<bigint[] | undefined>(blocks);
  req.images.forEach((img, i) => {
    const pos = at[i] ?? at[at.length - 1] ?? 0;
    const b = Math.min(Math.floor(pos / blockSize), blocks - 1);
    (mm[b] ??= []).push(imageHash(img.url));
  });
  return { mmHashes: mm };
}

/**
 * The tokenizer the detokenizer uses: as is (special tokens skipped), or, with
 * `skip_special_tokens: false`, one whose decode keeps special tokens' text except the stop ids
 * (an EOS at the end is not output).
 */
export function detokenizerFor(req: InferenceRequest, tok: TextTokenizer): TextTokenizer {
  if (req.skipSpecialTokens || tok.specialTokens.size === 0) return tok;
  const skip = new Set<number>(req.ignoreEos ? req.stopTokenIds : [...req.stopTokenIds, ...tok.eosTokenIds]);
  const text = new Map<number, string>();
  for (const [s, id] of tok.specialTokens) if (!skip.has(id)) text.set(id, s);
  const decode = (ids: ArrayLike<number>): string => {
    let out = '';
    let run: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      const s = text.get(id);
      if (s === undefined) {
        run.push(id);
        continue;
      }
      if (run.length > 0) out += tok.decode(run);
      run = [];
      out += s;
    }
    if (run.length > 0) out += tok.decode(run);
    return out;
  };
  return Object.assign(Object.create(tok) as TextTokenizer, { decode });
}
