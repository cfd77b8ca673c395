/**
 * Model files that travel with the model card (Dynamo's ModelDeploymentCard `tokenizer`,
 * `prompt_formatter`, `chat_template_file`): a frontend on another machine cannot read a worker's
 * local path, so a worker uploads its `tokenizer.json`, `tokenizer_config.json` and
 * `chat_template.jinja` to a blob store, content-addressed by SHA-256, and its card names them by
 * checksum. A frontend fetches each file once, checks its checksum, and caches it by checksum.
 *
 * Card fields (the shapes of Dynamo's serde enums; checksums `sha256:<hex>` instead of blake3):
 *   "tokenizer": {"hf_tokenizer_json": {"path": "tokenizer.json", "checksum": "sha256:…"}}
 *              | {"tiktoken": "cl100k_base"}            (the simulated mock-model's explicit default)
 *   "prompt_formatter": {"hf_tokenizer_config_json": {"path": …, "checksum": …}}
 *   "chat_template_file": {"hf_chat_template": {"path": …, "checksum": …}}
 *
 * Blob stores, one per discovery backend: `mem` (in-process, shared per MemDiscoveryHub), `file`
 * (`{root}/_blobs/<hex>` next to file discovery's keys), and for etcd the NATS JetStream object
 * store (bucket `kvrouter-model-files`, object name = hex checksum) on the shared NATS connection.
 */
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Objm, type ObjectStore } from '@nats-io/obj';
import { KvrError } from '@kvrouter/protocols';
import { defaultFileRoot } from './discovery/file.js';
import { defaultMemHub, type MemDiscoveryHub } from './discovery/mem.js';
import type { NatsConnection } from './nats-connection.js';

export const MODEL_FILES_BUCKET = 'kvrouter-model-files';

export interface CheckedFile {
  /** The file's name where the worker read it (informational). */
  path: string;
  /** `sha256:<64 hex>`: the blob's address in the store. */
  checksum: string;
}

export type CardTokenizer = { hf_tokenizer_json: CheckedFile } | { tiktoken: 'cl100k_base' | 'o200k_base' };

/** The model-file fields of a card. */
export interface CardModelFiles {
  tokenizer: CardTokenizer;
  prompt_formatter?: { hf_tokenizer_config_json: CheckedFile };
  chat_template_file?: { hf_chat_template: CheckedFile };
}

export interface BlobStore {
  readonly kind: 'mem' | 'file' | 'nats';
  /** Stores the bytes; returns their checksum (`sha256:<hex>`). Idempotent. */
  put(bytes: Uint8Array): Promise<string>;
  /** The bytes of `checksum`, verified; fails with `model_file_missing` / `model_file_corrupt`. */
  get(checksum: string): Promise<Uint8Array>;
}

export const sha256Checksum = (bytes: Uint8Array): string =>
  `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

function hexOf(checksum: string): string {
  const m = /^sha256:([0-9a-f]{64})$/.exec(checksum);
  if (!m)
    throw new KvrError(
      'invalid_argument',
      `checksum: expected sha256:<64 hex digits>, got "${checksum}"`,
      400,
      {
        field: 'checksum',
      },
    );
  return m[1]!;
}

function verified(checksum: string, bytes: Uint8Array | null, where: string): Uint8Array {
  if (bytes === null)
    throw new KvrError(
      'model_file_missing',
      `model file ${checksum} is not in the ${where} blob store`,
      503,
      {
        field: 'checksum',
      },
    );
  const got = sha256Checksum(bytes);
  if (got !== checksum)
    throw new KvrError(
      'model_file_corrupt',
      `model file ${checksum} from the ${where} blob store hashes to ${got}`,
      502,
      {
        field: 'checksum',
      },
    );
  return bytes;
}

/** In-process blobs (mem discovery: every worker is in this process). */
export class MemBlobStore implements BlobStore {
  readonly kind = 'mem';
  private readonly blobs = new Map<string, Uint8Array>();
  put(bytes: Uint8Array): Promise<string> {
    const c = sha256Checksum(bytes);
    if (!this.blobs.has(c)) this.blobs.set(c, Uint8Array.from(bytes));
    return Promise.resolve(c);
  }
  get(checksum: string): Promise<Uint8Array> {
    return Promise.resolve().then(() => {
      hexOf(checksum);
      return verified(checksum, this.blobs.get(checksum) ?? null, 'mem');
    });
  }
}

const memStores = new WeakMap<MemDiscoveryHub, MemBlobStore>();
/** The blob store that goes with a mem discovery hub (one per hub). */
export function memBlobStore(hub: MemDiscoveryHub): MemBlobStore {
  let s = memStores.get(hub);
  if (!s) memStores.set(hub, (s = new MemBlobStore()));
  return s;
}

/** `{root}/_blobs/<hex>` (file discovery's root: processes on one host or a shared volume). */
export class FileBlobStore implements BlobStore {
  readonly kind = 'file';
  private readonly dir: string;
  constructor(root: string) {
    this.dir = join(root, '_blobs');
  }
  async put(bytes: Uint8Array): Promise<string> {
    const c = sha256Checksum(bytes);
    const file = join(this.dir, hexOf(c));
    await mkdir(this.dir, { recursive: true });
    // Written aside and renamed: a reader never sees half a file.
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    await writeFile(tmp, bytes);
    await rename(tmp, file);
    return c;
  }
  async get(checksum: string): Promise<Uint8Array> {
    let bytes: Uint8Array | null = null;
    try {
      bytes = await readFile(join(this.dir, hexOf(checksum)));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    return verified(checksum, bytes, 'file');
  }
}

/** The NATS JetStream object store (etcd discovery; Dynamo ships card files the same way). */
export class NatsBlobStore implements BlobStore {
  readonly kind = 'nats';
  private constructor(private readonly os: ObjectStore) {}

  /** Opens (creating if needed) the bucket; needs a JetStream-enabled server. */
  static async open(nc: NatsConnection, bucket: string = MODEL_FILES_BUCKET): Promise<NatsBlobStore> {
    try {
      return new NatsBlobStore(await new Objm(nc).create(bucket));
    } catch (e) {
      throw new KvrError(
        'cannot_connect',
        `NATS object store ${bucket}: ${(e as Error).message} (model files need JetStream: nats-server -js)`,
        503,
        { field: 'NATS_SERVER' },
      );
    }
  }

  async put(bytes: Uint8Array): Promise<string> {
    const c = sha256Checksum(bytes);
    const name = hexOf(c);
    if ((await this.os.info(name)) === null) await this.os.putBlob({ name }, bytes);
    return c;
  }

  async get(checksum: string): Promise<Uint8Array> {
    return verified(checksum, await this.os.getBlob(hexOf(checksum)), 'NATS');
  }
}

export interface BlobStoreFor {
  backend: 'mem' | 'file' | 'etcd' | 'kubernetes';
  hub?: MemDiscoveryHub;
  fileRoot?: string;
  /** etcd: the process's shared NATS connection (null: no store). */
  nc?: NatsConnection | null;
}

/** The blob store of a discovery backend, or null when it has none (etcd without NATS, kubernetes). */
export async function blobStoreFor(o: BlobStoreFor): Promise<BlobStore | null> {
  switch (o.backend) {
    case 'mem':
      return o.hub ? memBlobStore(o.hub) : null;
    case 'file':
      return o.fileRoot ? new FileBlobStore(o.fileRoot) : null;
    case 'etcd':
      return o.nc ? NatsBlobStore.open(o.nc) : null;
    default:
      return null;
  }
}

/** The files of a Hugging Face model directory a card can carry (read by the caller). */
export interface ModelDirFiles {
  /** `tokenizer.json` (required). */
  tokenizerJson: Uint8Array;
  tokenizerConfigJson?: Uint8Array | null;
  chatTemplate?: Uint8Array | null;
}

/** Uploads a model's files and returns the card fields that name them. */
export async function publishModelFiles(store: BlobStore, f: ModelDirFiles): Promise<CardModelFiles> {
  const out: CardModelFiles = {
    tokenizer: { hf_tokenizer_json: { path: 'tokenizer.json', checksum: await store.put(f.tokenizerJson) } },
  };
  if (f.tokenizerConfigJson)
    out.prompt_formatter = {
      hf_tokenizer_config_json: {
        path: 'tokenizer_config.json',
        checksum: await store.put(f.tokenizerConfigJson),
      },
    };
  if (f.chatTemplate)
    out.chat_template_file = {
      hf_chat_template: { path: 'chat_template.jinja', checksum: await store.put(f.chatTemplate) },
    };
  return out;
}

/** Reads `tokenizer.json` (+ `tokenizer_config.json`, `chat_template.jinja` when present) from a directory. */
export async function readModelDir(dir: string): Promise<ModelDirFiles> {
  const opt = async (name: string): Promise<Uint8Array | null> => {
    try {
      return await readFile(join(dir, name));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
  };
  const tokenizerJson = await opt('tokenizer.json');
  if (!tokenizerJson)
    throw new KvrError('invalid_argument', `--model-path ${dir}: no tokenizer.json`, 400, {
      field: 'model-path',
    });
  return {
    tokenizerJson,
    tokenizerConfigJson: await opt('tokenizer_config.json'),
    chatTemplate: await opt('chat_template.jinja'),
  };
}

function checked(v: unknown, field: string): CheckedFile {
  const o = v as Partial<CheckedFile> | null;
  if (!o || typeof o !== 'object' || typeof o.path !== 'string' || typeof o.checksum !== 'string')
    throw new KvrError('invalid_argument', `${field}: expected {path, checksum}`, 400, { field });
  hexOf(o.checksum);
  return { path: o.path, checksum: o.checksum };
}

/**
 * The model-file fields of a card (any card: extra fields are kept by `parseModelCard`); null when
 * the card names no tokenizer. Malformed fields fail naming the field.
 */
export function cardModelFiles(card: Record<string, unknown>): CardModelFiles | null {
  const t = card.tokenizer as Record<string, unknown> | null | undefined;
  if (t === undefined || t === null) return null;
  let tokenizer: CardTokenizer;
  if (typeof t === 'object' && 'hf_tokenizer_json' in t)
    tokenizer = { hf_tokenizer_json: checked(t.hf_tokenizer_json, 'tokenizer.hf_tokenizer_json') };
  else if (typeof t === 'object' && (t.tiktoken === 'cl100k_base' || t.tiktoken === 'o200k_base'))
    tokenizer = { tiktoken: t.tiktoken };
  else
    throw new KvrError(
      'invalid_argument',
      'tokenizer: expected {"hf_tokenizer_json": {path, checksum}} or {"tiktoken": "cl100k_base" | "o200k_base"}',
      400,
      { field: 'tokenizer' },
    );
  const out: CardModelFiles = { tokenizer };
  const pf = card.prompt_formatter as Record<string, unknown> | null | undefined;
  if (pf && typeof pf === 'object' && 'hf_tokenizer_config_json' in pf)
    out.prompt_formatter = {
      hf_tokenizer_config_json: checked(
        pf.hf_tokenizer_config_json,
        'prompt_formatter.hf_tokenizer_config_json',
      ),
    };
  const ct = card.chat_template_file as Record<string, unknown> | null | undefined;
  if (ct && typeof ct === 'object' && 'hf_chat_template' in ct)
    out.chat_template_file = {
      hf_chat_template: checked(ct.hf_chat_template, 'chat_template_file.hf_chat_template'),
    };
  return out;
}

export interface ModelPathCardOptions {
  /** `--model-path`: a directory with a Hugging Face tokenizer.json, a model name, or null. */
  modelPath: string | null;
  discoveryBackend: 'mem' | 'file' | 'etcd' | 'kubernetes';
  /** mem: the hub (default the process-wide one). */
  hub?: MemDiscoveryHub;
  /** file: the discovery root (default `DYN_FILE_KV`). */
  fileKv?: string | null;
  /** etcd: the process's NATS connection. */
  nc?: NatsConnection | null;
  /** What a card says when `modelPath` is not a directory (the mocker: cl100k, its simulated vocabulary). */
  otherwise: Record<string, unknown>;
  log: (line: string) => void;
}

/**
 * The card fields naming a worker's tokenizer: with `--model-path` a model directory, its files are
 * published to the discovery backend's blob store and named by checksum; otherwise `otherwise`.
 */
export async function cardFieldsForModelPath(o: ModelPathCardOptions): Promise<Record<string, unknown>> {
  const p = o.modelPath;
  if (p === null || statSync(p, { throwIfNoEntry: false })?.isDirectory() !== true) return o.otherwise;
  const files = await readModelDir(p);
  const store = await blobStoreFor({
    backend: o.discoveryBackend,
    hub: o.hub ?? defaultMemHub(),
    fileRoot: o.fileKv ?? defaultFileRoot(),
    nc: o.nc ?? null,
  });
  if (store === null) {
    o.log(
      `warning: --model-path ${p}: discovery ${o.discoveryBackend} has no blob store here${
        o.discoveryBackend === 'etcd'
          ? ' (no NATS connection: use --event-plane nats or --request-plane nats)'
          : ''
      }; the card names no tokenizer and frontends use their own`,
    );
    return {};
  }
  const fields = await publishModelFiles(store, files);
  const hf = 'hf_tokenizer_json' in fields.tokenizer ? fields.tokenizer.hf_tokenizer_json.checksum : '';
  o.log(`model files of ${p} published to the ${store.kind} blob store (tokenizer.json ${hf})`);
  return fields as unknown as Record<string, unknown>;
}
