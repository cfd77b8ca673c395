/**
 * `parseInfer` on hand-built `ModelInferRequest`s: both tensor encodings, the request parameters and
 * every refusal with the field it names (the server test covers the same over gRPC for the common
 * cases).
 */
import { describe, expect, it } from 'vitest';
import { KvrError } from '@kvrouter/protocols';
import { inferResponse, parseInfer } from './infer.js';
import type { InferInputTensor, ModelInferRequest } from './proto.js';

const text = (s: string | Buffer, shape = [1]): InferInputTensor => ({
  name: 'text_input',
  datatype: 'BYTES',
  shape,
  contents: { bytes_contents: [typeof s === 'string' ? Buffer.from(s) : s] },
});

const req = (o: Partial<ModelInferRequest>): ModelInferRequest => ({
  model_name: 'm',
  model_version: '',
  id: '',
  parameters: {},
  inputs: [text('hi')],
  outputs: [],
  raw_input_contents: [],
  ...o,
});

/** A raw BYTES element: 4-byte little-endian length, then the bytes. */
function rawBytes(s: string): Buffer {
  const b = Buffer.from(s);
  const n = Buffer.alloc(4);
  n.writeUInt32LE(b.length);
  return Buffer.concat([n, b]);
}

function refusal(r: ModelInferRequest): { field: unknown; message: string } {
  try {
    parseInfer(r);
  } catch (e) {
    expect(e).toBeInstanceOf(KvrError);
    const k = e as KvrError;
    expect(k.status).toBe(400);
    return { field: k.detail?.field, message: k.message };
  }
  throw new Error('accepted; a refusal was expected');
}

describe('parseInfer', () => {
  it('takes text_input and streaming from contents, and from raw_input_contents', () => {
    const a = parseInfer(
      req({
        inputs: [
          text('Hello, world'),
          { name: 'streaming', datatype: 'BOOL', shape: [1], contents: { bool_contents: [true] } },
        ],
      }),
    );
    expect([a.request.prompt, a.request.model, a.streaming, a.request.stream]).toEqual([
      'Hello, world',
      'm',
      true,
      true,
    ]);

    const b = parseInfer(
      req({
        inputs: [
          { name: 'text_input', datatype: 'BYTES', shape: [1, 1] },
          { name: 'stream', datatype: 'BOOL', shape: [1] },
        ],
        raw_input_contents: [rawBytes('żółw 🐢'), Buffer.from([1])],
      }),
    );
    expect([b.request.prompt, b.streaming]).toEqual(['żółw 🐢', true]);
    expect(parseInfer(req({})).streaming).toBe(false);
  });

  it('maps request parameters onto the completion fields', () => {
    const p = parseInfer(
      req({
        parameters: {
          max_tokens: { parameter_choice: 'int64_param', int64_param: 12 },
          min_tokens: { parameter_choice: 'uint64_param', uint64_param: 2 },
          temperature: { parameter_choice: 'double_param', double_param: 0.5 },
          top_k: { parameter_choice: 'int64_param', int64_param: 40 },
          seed: { parameter_choice: 'int64_param', int64_param: 7 },
          ignore_eos: { parameter_choice: 'bool_param', bool_param: true },
          stop: { parameter_choice: 'string_param', string_param: '\n\n' },
          vllm_xargs: { parameter_choice: 'string_param', string_param: '{"k": [1, 2]}' },
        },
      }),
    ).request;
    expect([p.maxTokens, p.minTokens, p.ignoreEos, p.stop]).toEqual([12, 2, true, ['\n\n']]);
    expect(p.sampling).toMatchObject({ temperature: 0.5, top_k: 40, seed: 7, vllm_xargs: { k: [1, 2] } });
  });

  it('refuses bad tensors naming the input', () => {
    const cases: [Partial<ModelInferRequest>, string, string][] = [
      [{ inputs: [] }, 'text_input', 'text_input: required input is missing'],
      [{ inputs: [text('a', [2])] }, 'text_input', 'text_input: shape must be [1], got [2]'],
      [
        { inputs: [{ ...text('a'), contents: { bytes_contents: [Buffer.from('a'), Buffer.from('b')] } }] },
        'text_input',
        'text_input: must hold exactly one element, got 2',
      ],
      [{ inputs: [text(Buffer.from([0xc3, 0x28]))] }, 'text_input', 'text_input: is not valid UTF-8'],
      [{ inputs: [text('a'), text('b')] }, 'inputs[1]', 'inputs[1]: input text_input given twice'],
      [
        { inputs: [text('a'), { name: 'streaming', datatype: 'INT32', shape: [1] }] },
        'streaming',
        'streaming: datatype must be BOOL, got INT32',
      ],
      [
        {
          inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1] }],
          raw_input_contents: [Buffer.from([10, 0, 0, 0, 65, 66, 67])],
        },
        'text_input',
        'text_input: raw BYTES element of 10 bytes, only 3 left',
      ],
      [
        {
          inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1] }],
          raw_input_contents: [Buffer.from([1, 0])],
        },
        'text_input',
        'text_input: raw BYTES element needs a 4-byte length prefix',
      ],
      [
        { inputs: [text('a')], raw_input_contents: [rawBytes('a')] },
        'text_input',
        'text_input: contents and raw_input_contents cannot both be used',
      ],
      [
        {
          inputs: [text('a'), { name: 'streaming', datatype: 'BOOL', shape: [1] }],
          raw_input_contents: [rawBytes('a')],
        },
        'raw_input_contents',
        'raw_input_contents: when used, it holds one entry per input (2 inputs, 1 entries)',
      ],
      [{ outputs: [{ name: 'logits' }] }, 'outputs[0]', 'outputs[0]: unknown output "logits"'],
    ];
    for (const [r, field, message] of cases) {
      const got = refusal(req(r));
      expect([got.field, got.message]).toEqual([field, expect.stringContaining(message)]);
    }
  });

  it('refuses bad parameters naming parameters.<name>, with the /v1/completions range checks', () => {
    const cases: [ModelInferRequest['parameters'], string, string][] = [
      [
        { temperature: { parameter_choice: 'double_param', double_param: 2.5 } },
        'parameters.temperature',
        'parameters.temperature: expected a number between 0 and 2, got 2.5',
      ],
      [
        { ignore_eos: { parameter_choice: 'int64_param', int64_param: 1 } },
        'parameters.ignore_eos',
        'parameters.ignore_eos: expected bool_param, got int64_param',
      ],
      [
        { top_p: { parameter_choice: 'string_param', string_param: '0.5' } },
        'parameters.top_p',
        'parameters.top_p: expected double_param, int64_param or uint64_param, got string_param',
      ],
      [
        { vllm_xargs: { parameter_choice: 'string_param', string_param: '{' } },
        'parameters.vllm_xargs',
        'parameters.vllm_xargs: not valid JSON',
      ],
      [{ max_tokens: {} }, 'parameters.max_tokens', 'parameters.max_tokens: no value set'],
      [
        {
          max_tokens: { parameter_choice: 'int64_param', int64_param: 4 },
          min_tokens: { parameter_choice: 'int64_param', int64_param: 9 },
        },
        'parameters.min_tokens',
        'parameters.min_tokens: 9 is more than max_tokens (4)',
      ],
    ];
    for (const [parameters, field, message] of cases) {
      const got = refusal(req({ parameters }));
      expect([got.field, got.message]).toEqual([field, expect.stringContaining(message)]);
    }
  });

  it('builds the response tensors, restricted to the requested outputs', () => {
    const all = inferResponse({ model: 'm', id: 'x', outputs: new Set() }, 'héllo', 'length');
    expect(
      all.outputs.map((o) => [o.name, o.datatype, o.shape, o.contents.bytes_contents![0]!.toString()]),
    ).toEqual([
      ['text_output', 'BYTES', [1], 'héllo'],
      ['finish_reason', 'BYTES', [1], 'length'],
    ]);
    expect([all.model_name, all.model_version, all.id]).toEqual(['m', '1', 'x']);
    const one = inferResponse({ model: 'm', id: '', outputs: new Set(['finish_reason']) }, 'a', '');
    expect(one.outputs.map((o) => o.name)).toEqual(['finish_reason']);
  });
});
