/**
 * Each format with expected outputs written by hand, unary and streamed: whole text, one character
 * at a time (every marker split across pieces) and fixed 3- and 7-character pieces must all give
 * the same content, reasoning and calls; the first delta of each call carries id, type and name,
 * later ones only argument text.
 */
import { describe, expect, it } from 'vitest';
import {
  createOutputParser,
  mergeToolCalls,
  parseWhole,
  promptOpensThinking,
  type OutputParserOptions,
  type ParsedMessage,
  type ToolCallDelta,
} from './index.js';
import { INCOMPLETE, INVALID, scanValue } from './scan.js';

function opts(o: Partial<OutputParserOptions>): () => OutputParserOptions {
  return () => {
    let n = 0;
    return {
      toolCallParser: null,
      reasoningParser: null,
      toolChoice: 'auto',
      promptOpensThinking: false,
      newId: () => `call_${n++}`,
      ...o,
    };
  };
}

interface Streamed extends ParsedMessage {
  deltas: ToolCallDelta[];
}

function streamed(mk: () => OutputParserOptions, text: string, size: number): Streamed {
  const p = createOutputParser(mk())!;
  let content = '';
  let reasoning = '';
  const deltas: ToolCallDelta[] = [];
  const take = (o: { content: string; reasoning: string; toolCalls: ToolCallDelta[] }) => {
    content += o.content;
    reasoning += o.reasoning;
    deltas.push(...o.toolCalls);
  };
  for (let i = 0; i < text.length; i += size) take(p.push(text.slice(i, i + size)));
  take(p.finish());
  const toolCalls = mergeToolCalls(deltas);
  return {
    content: toolCalls.length > 0 && content.trim() === '' ? null : content,
    reasoning: reasoning.length > 0 ? reasoning : null,
    toolCalls,
    deltas,
  };
}

/** Unary and every chunking agree with `want`; returns the char-by-char deltas. */
function check(mk: () => OutputParserOptions, text: string, want: ParsedMessage): ToolCallDelta[] {
  expect(parseWhole(createOutputParser(mk())!, text)).toEqual(want);
  let deltas: ToolCallDelta[] = [];
  for (const size of [1, 3, 7, 1000]) {
    const s = streamed(mk, text, size);
    expect(
      { content: s.content, reasoning: s.reasoning, toolCalls: s.toolCalls },
      `pieces of ${size}`,
    ).toEqual(want);
    for (const d of s.deltas) {
      // id/type/name together on a call's first delta, never later.
      if (d.id !== undefined) expect(d.type === 'function' && d.function.name !== undefined).toBe(true);
      else expect(d.type === undefined && d.function.name === undefined).toBe(true);
    }
    if (size === 1) deltas = s.deltas;
  }
  return deltas;
}

const call = (i: number, name: string, args: string) => ({
  id: `call_${i}`,
  type: 'function' as const,
  function: { name, arguments: args },
});

describe('hermes (<tool_call>)', () => {
  const mk = opts({ toolCallParser: 'hermes' });

  it('one call after text; arguments stream in pieces', () => {
    const d = check(
      mk,
      'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>',
      {
        content: 'Let me check.',
        reasoning: null,
        toolCalls: [call(0, 'get_weather', '{"city": "Paris", "unit": "c"}')],
      },
    );
    // Streamed one character at a time: the arguments arrive in many deltas.
    expect(d.filter((x) => x.index === 0 && x.id === undefined).length).toBeGreaterThan(10);
  });

  it('two calls, no content (null), whitespace between them dropped', () => {
    check(
      mk,
      '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"arguments": {"x": [1, {"y": "}"}]}, "name": "b"}\n</tool_call>',
      {
        content: null,
        reasoning: null,
        toolCalls: [call(0, 'a', '{}'), call(1, 'b', '{"x": [1, {"y": "}"}]}')],
      },
    );
  });

  it('plain text with a look-alike marker stays content', () => {
    check(mk, 'use <tool> or <tool_call_x and 1 < 2', {
      content: 'use <tool> or <tool_call_x and 1 < 2',
      reasoning: null,
      toolCalls: [],
    });
  });

  it('a tool_call block that is not JSON is content', () => {
    check(mk, 'a<tool_call>not json</tool_call>b', {
      content: 'a<tool_call>not json</tool_call>b',
      reasoning: null,
      toolCalls: [],
    });
  });

  it('arguments given as a JSON string are decoded', () => {
    check(mk, '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>', {
      content: null,
      reasoning: null,
      toolCalls: [call(0, 'f', '{"a": 1}')],
    });
  });

  it('tool_choice none: nothing is parsed', () => {
    const none = opts({ toolCallParser: 'hermes', toolChoice: 'none' });
    expect(createOutputParser(none())).toBeNull();
  });
});

describe('qwen3 / deepseek_r1 reasoning (<think>)', () => {
  it('qwen3: <think> written by the model', () => {
    check(opts({ reasoningParser: 'qwen3' }), '<think>\nThe user greets.\n</think>\n\nHello!', {
      content: 'Hello!',
      reasoning: '\nThe user greets.\n',
      toolCalls: [],
    });
  });

  it('qwen3 without a think block: all content', () => {
    check(opts({ reasoningParser: 'qwen3' }), 'Just an answer </think> here', {
      content: 'Just an answer </think> here',
      reasoning: null,
      toolCalls: [],
    });
  });

  it('qwen3 when the prompt opened <think> (enable_thinking): starts inside', () => {
    expect(promptOpensThinking('<|im_start|>assistant\n<think>\n')).toBe(true);
    expect(promptOpensThinking('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(false);
    check(opts({ reasoningParser: 'qwen3', promptOpensThinking: true }), 'hmm, 2+2=4</think>\n\n4', {
      content: '4',
      reasoning: 'hmm, 2+2=4',
      toolCalls: [],
    });
  });

  it('deepseek_r1 starts inside even without <think>; unterminated = all reasoning', () => {
    check(opts({ reasoningParser: 'deepseek_r1' }), 'thinking...</think>The answer.', {
      content: 'The answer.',
      reasoning: 'thinking...',
      toolCalls: [],
    });
    check(opts({ reasoningParser: 'deepseek_r1' }), '<think>cut off by max_tok', {
      content: '',
      reasoning: 'cut off by max_tok',
      toolCalls: [],
    });
  });

  it('reasoning then a hermes call (Qwen3 with tools)', () => {
    check(
      opts({ reasoningParser: 'qwen3', toolCallParser: 'hermes' }),
      '<think>\nNeed weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>',
      {
        content: null,
        reasoning: '\nNeed weather.\n',
        toolCalls: [call(0, 'get_weather', '{"city": "Tokyo"}')],
      },
    );
  });
});

describe('llama3_json', () => {
  const mk = opts({ toolCallParser: 'llama3_json' });

  it('bare JSON with parameters', () => {
    check(mk, '{"name": "get_weather", "parameters": {"city": "Berlin"}}', {
      content: null,
      reasoning: null,
      toolCalls: [call(0, 'get_weather', '{"city": "Berlin"}')],
    });
  });

  it('after <|python_tag|>, two calls separated by ;', () => {
    check(
      mk,
      '<|python_tag|>{"name": "a", "parameters": {"q": 1}}; {"name": "b", "parameters": {"r": "s;t"}}',
      { content: null, reasoning: null, toolCalls: [call(0, 'a', '{"q": 1}'), call(1, 'b', '{"r": "s;t"}')] },
    );
  });

  it('an answer that merely starts with JSON (no name) is content', () => {
    check(mk, '{"answer": 42} is the result', {
      content: '{"answer": 42} is the result',
      reasoning: null,
      toolCalls: [],
    });
  });

  it('text first: no call detection', () => {
    check(mk, 'Sure: {"name": "a", "parameters": {}}', {
      content: 'Sure: {"name": "a", "parameters": {}}',
      reasoning: null,
      toolCalls: [],
    });
  });
});

describe('mistral ([TOOL_CALLS])', () => {
  const mk = opts({ toolCallParser: 'mistral' });

  it('JSON array form', () => {
    check(
      mk,
      '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "neg", "arguments": {"x": -3.5e2}}]',
      {
        content: null,
        reasoning: null,
        toolCalls: [call(0, 'add', '{"a": 1, "b": 2}'), call(1, 'neg', '{"x": -3.5e2}')],
      },
    );
  });

  it('v11 form name[ARGS]{…}, twice, after text', () => {
    check(mk, 'Calling.[TOOL_CALLS]add[ARGS]{"a": 1}[TOOL_CALLS]mul[ARGS]{"b": [2, 3]}', {
      content: 'Calling.',
      reasoning: null,
      toolCalls: [call(0, 'add', '{"a": 1}'), call(1, 'mul', '{"b": [2, 3]}')],
    });
  });
});

describe('deepseek_v3 / deepseek_v3_1', () => {
  it('V3 with ```json fences, two calls', () => {
    check(
      opts({ toolCallParser: 'deepseek_v3' }),
      'Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"location": "Tokyo"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{"tz": "JST"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
      {
        content: 'Checking.',
        reasoning: null,
        toolCalls: [call(0, 'get_weather', '{"location": "Tokyo"}'), call(1, 'get_time', '{"tz": "JST"}')],
      },
    );
  });

  it('V3.1 form', () => {
    check(
      opts({ toolCallParser: 'deepseek_v3_1' }),
      '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"location": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
      { content: null, reasoning: null, toolCalls: [call(0, 'get_weather', '{"location": "Paris"}')] },
    );
  });
});

describe('gpt-oss harmony (gpt_oss reasoning + harmony calls)', () => {
  const mk = opts({ toolCallParser: 'harmony', reasoningParser: 'gpt_oss' });

  it('analysis then final', () => {
    check(
      mk,
      '<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hi there!<|return|>',
      { content: 'Hi there!', reasoning: 'User says hi.', toolCalls: [] },
    );
  });

  it('analysis then a call in the commentary channel', () => {
    check(
      mk,
      '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location": "SF"}<|call|>',
      {
        content: null,
        reasoning: 'Need the weather.',
        toolCalls: [call(0, 'get_weather', '{"location": "SF"}')],
      },
    );
  });

  it('recipient before the channel', () => {
    check(mk, ' to=functions.lookup<|channel|>commentary json<|message|>{"q": "x"}<|call|>', {
      content: null,
      reasoning: null,
      toolCalls: [call(0, 'lookup', '{"q": "x"}')],
    });
  });

  it('text without harmony markers is content', () => {
    check(mk, 'plain words', { content: 'plain words', reasoning: null, toolCalls: [] });
  });
});

describe('tool_choice required / named', () => {
  it('required: a guided JSON array of {name, parameters}', () => {
    check(
      opts({ toolChoice: 'required' }),
      '[{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {}}]',
      { content: null, reasoning: null, toolCalls: [call(0, 'a', '{"x": 1}'), call(1, 'b', '{}')] },
    );
  });

  it('named: the whole answer is the arguments', () => {
    check(opts({ toolChoice: { name: 'get_weather' }, toolCallParser: 'hermes' }), '{"city": "Rome"}', {
      content: null,
      reasoning: null,
      toolCalls: [call(0, 'get_weather', '{"city": "Rome"}')],
    });
  });
});

describe('scanValue', () => {
  it('ends, incomplete and invalid values', () => {
    expect(scanValue('{"a": "}"} x', 0)).toBe(10);
    expect(scanValue('[1, 2', 0)).toBe(INCOMPLETE);
    expect(scanValue('12', 0)).toBe(INCOMPLETE);
    expect(scanValue('12,', 0)).toBe(2);
    expect(scanValue('{]', 0)).toBe(INVALID);
    expect(scanValue('"a\\"b" ', 0)).toBe(6);
  });
});
