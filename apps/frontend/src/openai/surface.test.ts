/**
 * The frontend's own parts of the request surface, by hand: multimodal hashes land in the block of
 * their placeholder (PROTOCOL §2.1), the detokenizer keeps special tokens only when asked, parser
 * names come from the flags before the card, `parallel_tool_calls: false` keeps the first call.
 */
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import { xxh3_64 } from '@kvrouter/protocols';
import type { TextTokenizer } from '../tokenizer/types.js';
import { ChoiceOutput, parserNames } from './choices.js';
import { detokenizerFor, engineFields, imageHash, mmHashesFor, stopExtras } from './engine.js';
import { parseChatRequest } from './validate.js';

/** Ids 0..255 are bytes; 900 = `<|image|>`, 901 = `<|eos|>` (special). */
const tok: TextTokenizer = {
  name: 'bytes',
  vocabSize: 1000,
  specialTokens: new Map([
    ['<|image|>', 900],
    ['<|eos|>', 901],
  ]),
  eosTokenIds: [901],
  bosTokenIds: [],
  chunkSafe: true,
  encodeText: (t) => Array.from(Buffer.from(t)),
  encode: (t) => Array.from(Buffer.from(t)),
  decode: (ids) => Buffer.from(Array.from(ids).filter((i) => i < 256)).toString(),
};

const img = (url: string) => ({ type: 'image_url', image_url: { url } });

describe('multimodal hashes in routing', () => {
  it('each image hash goes with the block holding its placeholder', () => {
    const req = parseChatRequest({
      model: 'm',
      messages: [
        {
          role: 'user',
          content: [{ type: 'text', text: 'a' }, img('https://x/1.png'), img('data:image/png;base64,AA')],
        },
      ],
    });
    // 10 tokens, placeholders at 2 and 7, block size 4: blocks 0 and 1 (the tail block 2 is partial).
    const tokens = Uint32Array.from([1, 2, 900, 3, 4, 5, 6, 900, 7, 8]);
    const { mmHashes } = mmHashesFor(req, tokens, 4, tok) as { mmHashes: (bigint[] | undefined)[] };
    expect(mmHashes).toEqual([[imageHash('https://x/1.png')], [imageHash('data:image/png;base64,AA')]]);
    expect(imageHash('https://x/1.png')).toBe(xxh3_64(Buffer.from('https://x/1.png'), 0n));
    expect(engineFields(req)).toEqual({
      multi_modal_data: { image_url: [{ url: 'https://x/1.png' }, { url: 'data:image/png;base64,AA' }] },
    });
  });

  it('no images: nothing for the router', () => {
    const req = parseChatRequest({
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
      min_tokens: 3,
      logprobs: true,
    });
    expect(mmHashesFor(req, Uint32Array.from([1, 2, 3, 4]), 2, tok)).toEqual({});
    expect(engineFields(req)).toEqual({ output_options: { logprobs: 0 } });
    expect(stopExtras(req)).toEqual({ min_tokens: 3 });
  });
});

describe('detokenizer', () => {
  const ids = [104, 105, 900, 106, 901];
  it('skips special tokens by default', () => {
    const req = parseChatRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }] });
    expect(detokenizerFor(req, tok).decode(ids)).toBe('hij');
  });
  it('keeps them with skip_special_tokens: false, except the stop ids (EOS)', () => {
    const req = parseChatRequest({
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
      skip_special_tokens: false,
    });
    expect(detokenizerFor(req, tok).decode(ids)).toBe('hi<|image|>j');
  });
});

describe('parsers per model and parallel_tool_calls', () => {
  it('flags win over the card; unknown names are ignored', () => {
    expect(
      parserNames(
        { toolCallParser: 'mistral', reasoningParser: null },
        { tool_call_parser: 'hermes', reasoning_parser: 'qwen3' },
      ),
    ).toEqual({
      toolCallParser: 'mistral',
      reasoningParser: 'qwen3',
    });
    expect(parserNames(undefined, { tool_call_parser: 'nope' })).toEqual({
      toolCallParser: null,
      reasoningParser: null,
    });
  });

  it('parallel_tool_calls: false keeps only the first call', () => {
    const tools = [{ type: 'function', function: { name: 'f' } }];
    const req = parseChatRequest({
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
      tools,
      parallel_tool_calls: false,
    });
    let n = 0;
    const out = new ChoiceOutput(
      0,
      req,
      { toolCallParser: 'hermes', reasoningParser: null },
      String,
      '',
      () => `c${n++}`,
    );
    out.chat(
      '<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>',
      true,
    );
    expect(out.toolCalls).toEqual([{ id: 'c0', type: 'function', function: { name: 'f', arguments: '{}' } }]);
    expect(out.finishReason('stop')).toBe('tool_calls');
    expect(out.finishReason('length')).toBe('length');
  });
});

describe('--dyn-tool-call-parser / --dyn-reasoning-parser', () => {
  it('a bad value stops startup naming the flag and the choices', () => {
    expect(() => resolveConfig('frontend', ['--dyn-tool-call-parser', 'qwen'], {})).toThrow(
      "argument --dyn-tool-call-parser: invalid choice: 'qwen' (choose from 'hermes', 'llama3_json', 'mistral', 'deepseek_v3', 'deepseek_v3_1', 'harmony')",
    );
    expect(() => resolveConfig('worker', [], { DYN_REASONING_PARSER: 'r1' })).toThrow(
      "argument --dyn-reasoning-parser: invalid choice: 'r1' (choose from 'basic', 'deepseek_r1', 'qwen3', 'gpt_oss')",
    );
    const ok = resolveConfig('frontend', ['--dyn-reasoning-parser', 'qwen3'], {}).config;
    expect([ok.dynToolCallParser, ok.dynReasoningParser]).toEqual([null, 'qwen3']);
  });
});

describe('LoRA requests', () => {
  it('route with the adapter name (LoRA-seeded hashes) over the workers that have it; lora_name in the payload', () => {
    const req = parseChatRequest({ model: 'sql', messages: [{ role: 'user', content: 'x' }] });
    req.lora = { name: 'sql', workerIds: [7n] };
    expect(mmHashesFor(req, Uint32Array.from([1, 2, 3, 4]), 2, tok)).toEqual({
      loraName: 'sql',
      allowedWorkerIds: [7n],
    });
    expect(engineFields(req)).toEqual({ lora_name: 'sql' });
  });
});
