/**
 * Text generation over KServe v2 tensors, as NVIDIA Dynamo's KServe frontend maps them onto an
 * OpenAI completion: input `text_input` (BYTES, shape [1]) is the prompt, optional `streaming`
 * (alias `stream`, BOOL, shape [1]) asks for one response per delta; outputs `text_output` and
 * `finish_reason` (BYTES, one element per response). kvrouter adds request `parameters` for the
 * sampling and stop fields (Dynamo takes none): each is checked by the same validation as
 * `/v1/completions`, and a refusal names `parameters.<name>`.
 */
import { KvrError } from '@kvrouter/protocols';
import { parseCompletionRequest, type CompletionRequest } from '../openai/validate.js';
import type { InferInputTensor, InferParameter, ModelInferRequest, ModelInferResponse } from './proto.js';

/** The one model version kvrouter serves (KServe's `versions`; Dynamo reports "1" too). */
export const MODEL_VERSION = '1';

export const TEXT_INPUT = 'text_input';
export const STREAMING_INPUT = 'streaming';
export const TEXT_OUTPUT = 'text_output';
export const FINISH_REASON_OUTPUT = 'finish_reason';

type ParamKind = 'int' | 'number' | 'bool' | 'string' | 'json';
/**
 * Request parameters → the `/v1/completions` field of the same name (`stop` takes one string,
 * `vllm_xargs` a JSON object as a string).
 */
const PARAMS: Record<string, ParamKind> = {
  max_tokens: 'int',
  min_tokens: 'int',
  temperature: 'number',
  top_p: 'number',
  top_k: 'int',
  min_p: 'number',
  seed: 'int',
  presence_penalty: 'number',
  frequency_penalty: 'number',
  repetition_penalty: 'number',
  ignore_eos: 'bool',
  stop: 'string',
  vllm_xargs: 'json',
};
const SUPPORTED_PARAMETERS = Object.keys(PARAMS);

export function invalidArgument(field: string, message: string): KvrError {
  return new KvrError('invalid_request', `${field}: ${message}`, 400, { field });
}

/** A model version other than "" or "1" is not served. */
export function checkVersion(model: string, version: string): void {
  if (version !== '' && version !== MODEL_VERSION)
    throw new KvrError(
      'model_not_found',
      `model ${model} has no version ${version} (kvrouter serves version ${MODEL_VERSION})`,
      404,
      { field: 'model_version' },
    );
}

/** The `parameter_choice` values a parameter of each kind accepts. */
const SLOTS: Record<ParamKind, readonly string[]> = {
  string: ['string_param'],
  json: ['string_param'],
  bool: ['bool_param'],
  int: ['int64_param', 'uint64_param'],
  number: ['double_param', 'int64_param', 'uint64_param'],
};

function paramValue(name: string, p: InferParameter, kind: ParamKind): unknown {
  const field = `parameters.${name}`;
  const set = p.parameter_choice;
  if (!set) throw invalidArgument(field, 'no value set');
  const v = p[set];
  const slots = SLOTS[kind];
  if (!slots.includes(set)) {
    const want = slots.length === 1 ? slots[0] : `${slots.slice(0, -1).join(', ')} or ${slots.at(-1)}`;
    throw invalidArgument(field, `expected ${want}, got ${set}`);
  }
  if (kind === 'json') {
    try {
      return JSON.parse(v as string) as unknown;
    } catch (e) {
      throw invalidArgument(field, `not valid JSON (${(e as Error).message})`);
    }
  }
  return kind === 'string' ? [v] : v;
}

/** The elements of one input: from `contents` or from its `raw_input_contents` entry. */
function elements(
  t: InferInputTensor,
  raw: Buffer | undefined,
  kind: 'bytes' | 'bool',
  field: string,
): (Buffer | boolean)[] {
  if (raw !== undefined) {
    if (kind === 'bool') return [...raw].map((b) => b !== 0);
    // BYTES in raw form: each element is a 4-byte little-endian length, then the bytes.
    const out: Buffer[] = [];
    for (let at = 0; at < raw.length;) {
      if (raw.length - at < 4) throw invalidArgument(field, 'raw BYTES element needs a 4-byte length prefix');
      const n = raw.readUInt32LE(at);
      if (raw.length - at - 4 < n)
        throw invalidArgument(field, `raw BYTES element of ${n} bytes, only ${raw.length - at - 4} left`);
      out.push(raw.subarray(at + 4, at + 4 + n));
      at += 4 + n;
    }
    return out;
  }
  const c = t.contents;
  return (kind === 'bytes' ? c?.bytes_contents : c?.bool_contents) ?? [];
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export interface ParsedInfer {
  request: CompletionRequest;
  streaming: boolean;
  /** Requested outputs (empty = all). */
  outputs: Set<string>;
}

/**
 * A `ModelInferRequest` as the validated completion request the HTTP frontend runs. Throws a 400
 * `KvrError` (gRPC INVALID_ARGUMENT) naming the field: `inputs[i]`, `text_input`, `parameters.<name>`,
 * `outputs[i]`, `raw_input_contents`.
 */
export function parseInfer(req: ModelInferRequest): ParsedInfer {
  const raw = req.raw_input_contents ?? [];
  const inputs = req.inputs ?? [];
  if (raw.length > 0 && raw.length !== inputs.length)
    throw invalidArgument(
      'raw_input_contents',
      `when used, it holds one entry per input (${inputs.length} inputs, ${raw.length} entries)`,
    );
  let text: string | null = null;
  let streaming = false;
  const seen = new Set<string>();
  inputs.forEach((t, i) => {
    const name = t.name;
    const field = name || `inputs[${i}]`;
    if (seen.has(name)) throw invalidArgument(`inputs[${i}]`, `input ${name} given twice`);
    seen.add(name);
    if (raw.length > 0 && t.contents)
      throw invalidArgument(field, 'contents and raw_input_contents cannot both be used');
    const shape = (t.shape ?? []).map(Number);
    if (name === TEXT_INPUT) {
      if (t.datatype !== 'BYTES') throw invalidArgument(field, `datatype must be BYTES, got ${t.datatype}`);
      if (!(shape.length === 1 || shape.length === 2) || !shape.every((d) => d === 1))
        throw invalidArgument(field, `shape must be [1], got [${shape.join(', ')}]`);
      const els = elements(t, raw[i], 'bytes', field);
      if (els.length !== 1) throw invalidArgument(field, `must hold exactly one element, got ${els.length}`);
      try {
        text = utf8.decode(els[0] as Buffer);
      } catch {
        throw invalidArgument(field, 'is not valid UTF-8');
      }
    } else if (name === STREAMING_INPUT || name === 'stream') {
      if (t.datatype !== 'BOOL') throw invalidArgument(field, `datatype must be BOOL, got ${t.datatype}`);
      if (shape.length !== 1 || shape[0] !== 1)
        throw invalidArgument(field, `shape must be [1], got [${shape.join(', ')}]`);
      const els = elements(t, raw[i], 'bool', field);
      if (els.length !== 1) throw invalidArgument(field, `must hold exactly one element, got ${els.length}`);
      streaming = els[0] === true;
    } else
      throw invalidArgument(
        `inputs[${i}]`,
        `unknown input ${JSON.stringify(name)}; this model takes ${TEXT_INPUT} (BYTES) and ${STREAMING_INPUT} (BOOL, alias stream)`,
      );
  });
  if (text === null) throw invalidArgument(TEXT_INPUT, 'required input is missing');

  const body: Record<string, unknown> = { model: req.model_name, prompt: text, stream: streaming };
  for (const [name, p] of Object.entries(req.parameters ?? {})) {
    const kind = PARAMS[name];
    if (!kind)
      throw invalidArgument(
        `parameters.${name}`,
        `unknown parameter; supported: ${SUPPORTED_PARAMETERS.join(', ')}`,
      );
    body[name] = paramValue(name, p, kind);
  }
  const outputs = new Set<string>();
  (req.outputs ?? []).forEach((o, i) => {
    if (o.name !== TEXT_OUTPUT && o.name !== FINISH_REASON_OUTPUT)
      throw invalidArgument(
        `outputs[${i}]`,
        `unknown output ${JSON.stringify(o.name)}; this model produces ${TEXT_OUTPUT} and ${FINISH_REASON_OUTPUT}`,
      );
    outputs.add(o.name);
  });
  let request: CompletionRequest;
  try {
    request = parseCompletionRequest(body);
  } catch (e) {
    throw renamed(e);
  }
  return { request, streaming, outputs };
}

/** A validation error of the completion body, named as the KServe request spells the field. */
function renamed(e: unknown): unknown {
  if (!(e instanceof KvrError)) return e;
  const field = e.detail?.field;
  if (typeof field !== 'string') return e;
  const base = field.split(/[.[]/)[0]!;
  const to = base in PARAMS ? `parameters.${base}` : base === 'prompt' ? TEXT_INPUT : null;
  if (to === null) return e;
  const message = e.message.startsWith(base) ? `${to}${e.message.slice(base.length)}` : `${to}: ${e.message}`;
  return new KvrError(e.code, message, e.status, { ...e.detail, field: to });
}

/** One `ModelInferResponse`: the text (a delta, or the whole answer) and its finish reason ("" = not finished). */
export function inferResponse(
  o: { model: string; id: string; outputs: Set<string> },
  text: string,
  finishReason: string,
  parameters: ModelInferResponse['parameters'] = {},
): ModelInferResponse {
  // One BYTES element per output (one choice), as Dynamo.
  const outputs = (
    [
      [TEXT_OUTPUT, text],
      [FINISH_REASON_OUTPUT, finishReason],
    ] as const
  )
    .filter(([name]) => o.outputs.size === 0 || o.outputs.has(name))
    .map(([name, value]) => ({
      name,
      datatype: 'BYTES',
      shape: [1],
      contents: { bytes_contents: [Buffer.from(value, 'utf8')] },
    }));
  return { model_name: o.model, model_version: MODEL_VERSION, id: o.id, parameters, outputs };
}
