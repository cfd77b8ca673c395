/**
 * One tokenizer and chat template per served model, from the model's card (Dynamo's model
 * deployment card names the tokenizer; its files travel content-addressed through the discovery
 * backend's blob store, see @kvrouter/runtime model-files.ts).
 *
 * For each model (the card's `display_name`, or `--model-name`):
 * 1. the card names `tokenizer.hf_tokenizer_json` (+ `prompt_formatter`, `chat_template_file`):
 *    the files are fetched once per checksum, verified, written to a local cache directory named by
 *    their checksums (`$TMPDIR/kvrouter-model-files/<key>`), and loaded as a `--model-path` would be;
 * 2. the card names `tokenizer.tiktoken` (the simulated `mock-model`'s explicit default): cl100k;
 * 3. the card names none: the frontend's `--model-path` tokenizer, else cl100k with a warning (the
 *    ids will not be a real engine's vocabulary).
 * Which one each model uses is logged once per change. Several models are served at once, each
 * with its own encoder (and prefix cache), template and tokenizer threads.
 *
 * Cards are watched here, beside the model registry, so the registry stays about routing.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  blobStoreFor,
  cardModelFiles,
  defaultFileRoot,
  watchModelCards,
  type BlobStore,
  type CardModelFiles,
  type Discovery,
  type MemDiscoveryHub,
  type ModelDeploymentCard,
  type NatsConnection,
  type TypedWatch,
} from '@kvrouter/runtime';
import type { Logger as KernelLogger } from '@kvrouter/protocols';
import { PromptEncoder } from './encoder.js';
import { loadTokenizer, type LoadedTokenizer } from './load.js';
import { TokenizerPool } from './pool.js';
import type { ChatTemplate } from './template.js';
import type { TextTokenizer, TokenizerSpec } from './types.js';

export interface ModelTokenizer {
  readonly tokenizer: TextTokenizer;
  readonly template: ChatTemplate;
  readonly encoder: PromptEncoder;
  /** Where it came from, as logged ("card <checksum>", "--model-path <dir>", "cl100k_base (default)"). */
  readonly source: string;
}

type Logger = Pick<KernelLogger, 'info' | 'warn'>;

export interface ModelTokenizersOptions {
  discovery: Discovery;
  namespace: string | null;
  namespacePrefix: string | null;
  /** `--model-name`: every card's model is served under this name. */
  modelName: string | null;
  /** The discovery backend's blob store (null: cards' files cannot be fetched; fallback). */
  blobs: BlobStore | null;
  /** The `--model-path` tokenizer (or cl100k when there is none) and whether it came from a flag. */
  fallback: { loaded: LoadedTokenizer; encoder: PromptEncoder; fromFlag: boolean; source: string };
  /** `--tokenizer` and the prefix-cache budget, for the encoders built here. */
  mode: 'default' | 'fastokens';
  cacheTokens?: number;
  /** `--tokenizer-thread-chat-chars` (null: by mode, see `PromptEncoderOptions.offloadChatChars`). */
  threadChatChars?: number | null;
  /** Tokenizer threads per model loaded from a card (0: none). */
  threads: number;
  /** Time budget of one tokenization job on a thread, ms (`--dyn-preprocess-budget-ms`). */
  budgetMs?: number;
  /** Local cache of fetched files (default `$TMPDIR/kvrouter-model-files`). */
  cacheDir?: string;
  log: Logger;
}

interface Entry {
  /** The card's files key ("" for no tokenizer, "tiktoken:<enc>" for the explicit default). */
  key: string;
  ready: Promise<ModelTokenizer>;
  /** Set once loaded. */
  value: ModelTokenizer | null;
  pool: TokenizerPool | null;
}

const filesKey = (f: CardModelFiles | null): string => {
  if (f === null) return '';
  if ('tiktoken' in f.tokenizer) return `tiktoken:${f.tokenizer.tiktoken}`;
  return [
    f.tokenizer.hf_tokenizer_json.checksum,
    f.prompt_formatter?.hf_tokenizer_config_json.checksum ?? '-',
    f.chat_template_file?.hf_chat_template.checksum ?? '-',
  ].join(',');
};

const short = (checksum: string): string => checksum.replace(/^sha256:/, '').slice(0, 12);

export class ModelTokenizers {
  private readonly models = new Map<string, Entry>();
  /** Fetches by checksum, shared by every model (the same file is fetched once). */
  private readonly fetches = new Map<string, Promise<Uint8Array>>();
  private watch: TypedWatch<ModelDeploymentCard> | null = null;
  private readonly cacheDir: string;
  private closed = false;

  constructor(private readonly o: ModelTokenizersOptions) {
    this.cacheDir = o.cacheDir ?? path.join(os.tmpdir(), 'kvrouter-model-files');
  }

  /** Starts watching cards; resolves once the initial listing was applied (loads may still run). */
  start(): Promise<void> {
    const o = this.o;
    const scope = o.namespacePrefix
      ? { namespacePrefix: o.namespacePrefix }
      : o.namespace
        ? { namespace: o.namespace }
        : {};
    const w = (this.watch = watchModelCards(o.discovery, scope));
    return new Promise<void>((resolve) => {
      void (async () => {
        try {
          for await (const ch of w) {
            if (ch.type === 'synced') resolve();
            else if (ch.type === 'put') this.onCard(ch.value);
            else if (ch.type === 'invalid') continue;
          }
        } catch (e) {
          if (!this.closed) o.log.warn(`tokenizers: card watch failed: ${(e as Error).message}`);
        } finally {
          resolve();
        }
      })();
    });
  }

  private onCard(card: ModelDeploymentCard): void {
    const types = card.model_type;
    if (!types.includes('chat') && !types.includes('completions') && !types.includes('prefill')) return;
    const model = this.o.modelName ?? card.display_name;
    let files: CardModelFiles | null;
    try {
      files = cardModelFiles(card);
    } catch (e) {
      this.o.log.warn(`model ${model}: ignoring the card's tokenizer fields: ${(e as Error).message}`);
      files = null;
    }
    const key = filesKey(files);
    const cur = this.models.get(model);
    if (cur && (cur.key === key || key === '')) return;
    if (cur) void this.release(cur);
    const entry: Entry = {
      key,
      ready: Promise.resolve(null as unknown as ModelTokenizer),
      value: null,
      pool: null,
    };
    entry.ready = this.load(model, files, entry);
    entry.ready.then(
      (v) => (entry.value = v),
      () => undefined,
    );
    this.models.set(model, entry);
  }

  private async load(model: string, files: CardModelFiles | null, entry: Entry): Promise<ModelTokenizer> {
    const o = this.o;
    const fb = o.fallback;
    if (files === null) {
      if (fb.fromFlag) o.log.info(`model ${model}: its card names no tokenizer; using ${fb.source}`);
      else
        o.log.warn(
          `model ${model} has no tokenizer of its own (its card names none and there is no --model-path): tokenizing with ${fb.source}; a real engine of another vocabulary would receive wrong token ids`,
        );
      return {
        tokenizer: fb.loaded.tokenizer,
        template: fb.loaded.template,
        encoder: fb.encoder,
        source: fb.source,
      };
    }
    const tk = files.tokenizer;
    if ('tiktoken' in tk) {
      const enc = tk.tiktoken;
      const source = `${enc} (the card's explicit default)`;
      o.log.info(`model ${model}: tokenizer ${source}`);
      if (fb.loaded.spec.kind === 'tiktoken')
        return { tokenizer: fb.loaded.tokenizer, template: fb.loaded.template, encoder: fb.encoder, source };
      return this.build({ kind: 'tiktoken', encoding: enc }, source, entry);
    }
    try {
      const dir = await this.materialize(files);
      const f = files;
      const source = `the card's tokenizer.json ${short(tk.hf_tokenizer_json.checksum)}${
        f.chat_template_file
          ? ` + chat_template.jinja ${short(f.chat_template_file.hf_chat_template.checksum)}`
          : f.prompt_formatter
            ? ` + tokenizer_config.json ${short(f.prompt_formatter.hf_tokenizer_config_json.checksum)}`
            : ''
      }`;
      const built = this.build({ kind: 'hf', dir }, source, entry);
      o.log.info(`model ${model}: tokenizer ${built.tokenizer.name} from ${source} (cached in ${dir})`);
      return built;
    } catch (e) {
      o.log.warn(
        `model ${model}: cannot load the tokenizer its card names (${(e as Error).message}); using ${fb.source}`,
      );
      return {
        tokenizer: fb.loaded.tokenizer,
        template: fb.loaded.template,
        encoder: fb.encoder,
        source: fb.source,
      };
    }
  }

  private build(spec: TokenizerSpec, source: string, entry: Entry): ModelTokenizer {
    const loaded = loadTokenizer(spec, (line) => this.o.log.info(line));
    const pool =
      this.o.threads > 0
        ? new TokenizerPool(loaded.spec, this.o.threads, {
            budgetMs: this.o.budgetMs,
            encoder: {
              mode: this.o.mode,
              ...(this.o.cacheTokens !== undefined ? { cacheTokens: this.o.cacheTokens } : {}),
            },
          })
        : null;
    entry.pool = pool;
    const encoder = new PromptEncoder({
      tokenizer: loaded.tokenizer,
      mode: this.o.mode,
      pool,
      template: loaded.template,
      ...(this.o.cacheTokens !== undefined ? { cacheTokens: this.o.cacheTokens } : {}),
      ...(this.o.threadChatChars !== undefined ? { offloadChatChars: this.o.threadChatChars } : {}),
    });
    return { tokenizer: loaded.tokenizer, template: loaded.template, encoder, source };
  }

  private fetch(checksum: string): Promise<Uint8Array> {
    let f = this.fetches.get(checksum);
    if (!f) {
      const blobs = this.o.blobs;
      f = blobs
        ? blobs.get(checksum)
        : Promise.reject(new Error('this frontend has no blob store for its discovery backend'));
      // A failed fetch is tried again by the next card that names the file.
      f.catch(() => this.fetches.delete(checksum));
      this.fetches.set(checksum, f);
    }
    return f;
  }

  /** The card's files in a local directory named by their checksums (written once). */
  private async materialize(f: CardModelFiles): Promise<string> {
    const key = createHash('sha256').update(filesKey(f)).digest('hex').slice(0, 32);
    const dir = path.join(this.cacheDir, key);
    if (fs.existsSync(path.join(dir, '.complete'))) return dir;
    const want: [string, string][] = [];
    if ('hf_tokenizer_json' in f.tokenizer)
      want.push(['tokenizer.json', f.tokenizer.hf_tokenizer_json.checksum]);
    if (f.prompt_formatter)
      want.push(['tokenizer_config.json', f.prompt_formatter.hf_tokenizer_config_json.checksum]);
    if (f.chat_template_file)
      want.push(['chat_template.jinja', f.chat_template_file.hf_chat_template.checksum]);
    const bytes = await Promise.all(want.map(([, c]) => this.fetch(c)));
    const tmp = `${dir}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    await fs.promises.mkdir(tmp, { recursive: true });
    for (let i = 0; i < want.length; i++) await fs.promises.writeFile(path.join(tmp, want[i]![0]), bytes[i]!);
    await fs.promises.writeFile(path.join(tmp, '.complete'), '');
    try {
      await fs.promises.rename(tmp, dir);
    } catch {
      // Another process (or model) wrote the same files first.
      await fs.promises.rm(tmp, { recursive: true, force: true });
    }
    return dir;
  }

  /** The model's tokenizer (waits while its files are fetched); the fallback for unknown models. */
  async for(model: string): Promise<ModelTokenizer> {
    const e = this.models.get(model);
    if (!e) return this.fallbackTokenizer();
    return e.ready;
  }

  /** Every loaded encoder, the fallback's included, once each (bounded-memory metrics, issue 17). */
  encoders(): PromptEncoder[] {
    const out = new Set<PromptEncoder>([this.o.fallback.encoder]);
    for (const e of this.models.values()) if (e.value) out.add(e.value.encoder);
    return [...out];
  }

  /** The model's tokenizer if loaded (no waiting), else the fallback. */
  peek(model: string): ModelTokenizer {
    return this.models.get(model)?.value ?? this.fallbackTokenizer();
  }

  private fallbackTokenizer(): ModelTokenizer {
    const fb = this.o.fallback;
    return {
      tokenizer: fb.loaded.tokenizer,
      template: fb.loaded.template,
      encoder: fb.encoder,
      source: fb.source,
    };
  }

  private async release(e: Entry): Promise<void> {
    await e.ready.catch(() => undefined);
    await e.pool?.close();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.watch?.close();
    await Promise.all([...this.models.values()].map((e) => this.release(e)));
    this.models.clear();
  }
}

export interface StartModelTokenizersOptions extends Omit<ModelTokenizersOptions, 'blobs'> {
  backend: 'mem' | 'file' | 'etcd' | 'kubernetes';
  memHub?: MemDiscoveryHub;
  fileRoot?: string | null;
  /** The process's shared NATS connection (etcd: the object store lives there). */
  nc?: NatsConnection | null;
}

/** The blob store of the discovery backend, then the card watch; resolves once the initial cards were seen. */
export async function startModelTokenizers(o: StartModelTokenizersOptions): Promise<ModelTokenizers> {
  let blobs: BlobStore | null = null;
  try {
    blobs = await blobStoreFor({
      backend: o.backend,
      ...(o.memHub ? { hub: o.memHub } : {}),
      ...(o.backend === 'file' ? { fileRoot: o.fileRoot ?? defaultFileRoot() } : {}),
      nc: o.nc ?? null,
    });
  } catch (e) {
    o.log.warn(
      `tokenizers: no blob store for model files (${(e as Error).message}); cards' tokenizers cannot be fetched`,
    );
  }
  if (blobs === null && o.backend !== 'mem')
    o.log.info(
      `tokenizers: discovery ${o.backend} without ${o.backend === 'etcd' ? 'a NATS connection' : 'a blob store'}: models use --model-path or cl100k_base`,
    );
  const t = new ModelTokenizers({ ...o, blobs });
  await t.start();
  return t;
}
