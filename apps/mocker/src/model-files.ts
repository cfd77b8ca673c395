/**
 * The mocker's card names its tokenizer (issue 16): with `--model-path` a directory holding a
 * Hugging Face `tokenizer.json` (+ `tokenizer_config.json`, `chat_template.jinja`), the files are
 * uploaded to the discovery backend's blob store (mem / file / the NATS object store for etcd) and
 * the card carries them by checksum, so a frontend on another host tokenizes with them. Any other
 * `--model-path` (a model name such as the default `mock-model`) is the simulated model, whose
 * tokenizer is cl100k, said explicitly in the card.
 */
import { statSync } from 'node:fs';
import {
  blobStoreFor,
  defaultFileRoot,
  defaultMemHub,
  publishModelFiles,
  readModelDir,
  type NatsConnection,
} from '@kvrouter/runtime';

export interface ModelFilesContext {
  modelPath: string | null;
  discoveryBackend: 'mem' | 'file' | 'etcd' | 'kubernetes';
  fileKv: string | null;
  nc: NatsConnection | null;
  log: (line: string) => void;
}

/** Card fields naming the model's tokenizer (see the module comment). */
export async function modelFileCardFields(c: ModelFilesContext): Promise<Record<string, unknown>> {
  const p = c.modelPath;
  if (p === null || statSync(p, { throwIfNoEntry: false })?.isDirectory() !== true)
    return { tokenizer: { tiktoken: 'cl100k_base' } };
  const files = await readModelDir(p);
  const store = await blobStoreFor({
    backend: c.discoveryBackend,
    hub: defaultMemHub(),
    fileRoot: c.fileKv ?? defaultFileRoot(),
    nc: c.nc,
  });
  if (store === null) {
    c.log(
      `warning: --model-path ${p}: discovery ${c.discoveryBackend} has no blob store here${c.discoveryBackend === 'etcd' ? ' (no NATS connection: use --event-plane nats or --request-plane nats)' : ''}; the card names no tokenizer and frontends use their own`,
    );
    return {};
  }
  const fields = await publishModelFiles(store, files);
  const hf = 'hf_tokenizer_json' in fields.tokenizer ? fields.tokenizer.hf_tokenizer_json.checksum : '';
  c.log(`model files of ${p} published to the ${store.kind} blob store (tokenizer.json ${hf})`);
  return fields as unknown as Record<string, unknown>;
}
