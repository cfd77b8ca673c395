/**
 * The compiled chat-template renderer against (1) the Python reference renderings of the parity
 * fixtures and (2) @huggingface/jinja's interpreter on random conversations: identical text, or
 * both refuse.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Template } from '@huggingface/jinja';
import { KvrError } from '@kvrouter/protocols';
import {
  PARITY_TOKENIZERS,
  compareCase,
  parityChatTemplate,
  parityConversations,
  parityFixture,
  tokenizerPackageDir,
} from '@kvrouter/testkit/parity';
import fs from 'node:fs';
import path from 'node:path';
import {
  JinjaChatTemplate,
  specialTokensMap,
  type RenderOptions,
  type TemplateMessage,
} from '../template.js';
import { compileTemplate, Unsupported } from './compile.js';

/** The date the reference's strftime_now is pinned to. */
const FIXED_NOW = new Date(2024, 6, 26, 12, 0, 0);
const now = (): Date => FIXED_NOW;

function specials(name: (typeof PARITY_TOKENIZERS)[number]): Record<string, unknown> {
  const cfg = JSON.parse(
    fs.readFileSync(path.join(tokenizerPackageDir(name), 'tokenizer_config.json'), 'utf8'),
  ) as Record<string, unknown>;
  return specialTokensMap(cfg);
}

type Result = { text: string } | { error: string };
function render(t: JinjaChatTemplate, messages: TemplateMessage[], o: RenderOptions): Result {
  try {
    return { text: t.render(messages, o) };
  } catch (e) {
    if (!(e instanceof KvrError)) throw e;
    return { error: e.message };
  }
}

/** Templates exercising what the real ones do not (loop variables, macros, namespace, filters...). */
const EXTRA_TEMPLATES: Record<string, string> = {
  parts:
    "{% for message in messages %}<{{ message.role }}>{% if message.content is string %}{{ message.content }}{% else %}{% for part in message.content %}{% if part.type == 'text' %}{{ part.text }}{% elif part.type == 'image_url' %}<img>{% endif %}{% endfor %}{% endif %}{% endfor %}{% if documents %}{% for d in documents %}[{{ loop.index }}:{{ d.title }}]{{ d.text }}{% endfor %}{% endif %}",
  simple:
    '{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}',
  loops:
    "{% for m in messages if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}:{{ loop.index0 }},{{ loop.revindex }},{{ loop.revindex0 }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{{ m.role|upper }}={{ m.content|string|length }};{% if m.role == 'tool' %}{% continue %}{% endif %}{% if loop.index > 5 %}{% break %}{% endif %}!{% else %}empty{% endfor %}" +
    '{% for k, v in {"b": 1, "a": [1, 2], "c": none}.items() %}{{ k }}={{ v|tojson }}|{% endfor %}' +
    '{% for k in {"x": 1, "y": 2} %}{{ k }}{% endfor %}{% for x in [] %}no{% else %}yes{% endfor %}',
  namespace_macro:
    "{% set ns = namespace(found=false, n=0, last='') %}{% macro show(m, prefix='> ') %}{{ prefix }}{{ m.role }}{% if m.content is string %}:{{ m.content|trim }}{% endif %}{% endmacro %}" +
    "{% for m in messages %}{% set ns.n = ns.n + 1 %}{% if m.role == 'assistant' %}{% set ns.found = true %}{% set ns.last = m.content %}{% endif %}{{ show(m) }}{{ show(m, prefix='# ') }}\n{% endfor %}" +
    '{{ ns.found }} {{ ns.n }} {{ ns.last is none }} {{ ns|tojson }}',
  filters:
    "{% set first = messages[0] if messages else none %}{{ messages|length }} {{ (messages|first).role if messages else '-' }} {{ (messages|last).role if messages else '-' }}" +
    "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|join(',') }}" +
    "{{ messages|map(attribute='tool_calls')|selectattr('0', 'defined')|list|length if false else '' }}" +
    "{{ tools|tojson(indent=2) }}{{ tools|tojson(separators=(',', ':'), sort_keys=true) }}{{ tools|tojson(ensure_ascii=true) }}" +
    "{% for m in messages %}{{ m.content|default('D') if m.content is not none else 'N' }}{{ m.name|default('anon') }}{% if m.tool_calls is defined and m.tool_calls %}{% for tc in m.tool_calls %}{{ tc.function.name }}({{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments|tojson }}){% endfor %}{% endif %}{% endfor %}" +
    "{{ 'a,b,,c'.split(',')|join('|') }} {{ '  x y  '.split()|length }} {{ 'Hello World'.lower() }} {{ 'hello world'.title() }} {{ 'abc'[::-1] }} {{ [1, 2, 3, 4][1:3]|tojson }} {{ 'abcdef'[-2:] }}" +
    "{{ 'x'.startswith(('a', 'x')) }} {{ 'xyz'.endswith('z') }} {{ ' s '.strip() }}|{{ ' s '.lstrip() }}|{{ ' s '.rstrip() }} {{ 'aXa'.replace('a', 'b') }} {{ 'aaa'|replace('a', 'c') }}" +
    "{{ '42'|int + 1 }} {{ 'x' ~ 1 ~ true }} {{ [1] + [2] }} {{ 7 // 2 }} {{ 7 % 3 }} {{ -3 }} {{ 2 * 3 - 1 }} {{ 'a' in 'cat' }} {{ 'role' in messages[0] if messages else '' }} {{ 3 in [1, 2, 3] }} {{ 'q' not in ['a'] }}" +
    "{{ {'b': 2, 'a': 1}|dictsort|tojson }} {{ {'k': 'v'}.get('k') }} {{ {'k': 'v'}.get('z', 'd') }} {{ {'k': 'v'}.get('z') }} {{ {'a': 1}|items|list }} {{ 'abc'|capitalize }} {{ 'line1\nline2'|indent(2) }}" +
    "{{ none is none }} {{ 1 is number }} {{ 'x' is string }} {{ {} is mapping }} {{ [] is sequence }} {{ [] is iterable }} {{ true is boolean }} {{ undefined_var is undefined }} {{ 2 is even }} {{ 3 is odd }}" +
    "{{ range(3)|list }} {{ range(1, 7, 2)|join(',') }} {{ strftime_now('%Y-%m-%d') }} {{ (messages|length > 2) and 'many' or 'few' }} {{ not messages }} {{ add_generation_prompt }}" +
    '{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set block %}x{{ a }}y{% endset %}{{ block }}',
  raises:
    "{% for m in messages %}{% if m.role not in ['system', 'user', 'assistant', 'tool'] %}{{ raise_exception('bad role ' + m.role) }}{% endif %}{{ m.role }}{% endfor %}{{ messages[0].content + 1 if messages and messages[0].content is number else '' }}",
};

describe('compiled chat templates: the parity fixtures (reference: Python transformers)', () => {
  it.each(PARITY_TOKENIZERS)('%s renders every conversation exactly through the compiled path', (name) => {
    const t = new JinjaChatTemplate(parityChatTemplate(name).text, specials(name), { now });
    expect(t.compiledFallback).toBeNull();
    const convs = new Map(parityConversations().map((c) => [c.id, c]));
    const fixture = parityFixture(name);
    const mismatches: string[] = [];
    let rendered = 0;
    for (const c of fixture.cases) {
      const conv = convs.get(c.id)!;
      const before = t.renders.compiled;
      const r = render(t, conv.messages as unknown as TemplateMessage[], {
        addGenerationPrompt: conv.add_generation_prompt ?? false,
        continueFinalMessage: conv.continue_final_message ?? false,
        ...(conv.tools ? { tools: conv.tools } : {}),
        ...(conv.documents ? { documents: conv.documents } : {}),
        ...(conv.chat_template_kwargs ? { kwargs: conv.chat_template_kwargs } : {}),
      });
      const text = 'text' in r ? r.text : null;
      if (text !== null) {
        rendered++;
        // a rendered text came from the compiled renderer, not from the interpreter fallback
        if (t.renders.compiled !== before + 1) mismatches.push(`${c.id}: rendered by the interpreter`);
      }
      const diff = compareCase(c, text, null);
      if (diff && !diff.startsWith('ids')) mismatches.push(`${c.id}: ${diff}`);
    }
    expect(rendered).toBeGreaterThanOrEqual(40);
    expect(mismatches).toEqual([]);
  });
});

const text = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.constantFrom(
    '',
    ' ',
    '\n',
    '<think>\nhm\n</think>\n\nok',
    'a</think>b',
    '{"x": 1}',
    'Ünïcødé ✓ 日本',
    '  pad  ',
  ),
  fc.string({ minLength: 200, maxLength: 2000 }),
);
const toolCall = fc.record({
  id: fc.constantFrom('call_1', 'call_2'),
  type: fc.constant('function'),
  function: fc.record({
    name: fc.constantFrom('get_weather', 'search'),
    arguments: fc.oneof(
      fc.constantFrom('{"city": "Paris"}', '{}'),
      fc.dictionary(fc.constantFrom('city', 'q', 'n'), fc.oneof(fc.string({ maxLength: 8 }), fc.integer())),
    ),
  }),
});
/** OpenAI content parts (joined for templates that use contents as strings; iterated by `parts`). */
const parts = fc.array(
  fc.oneof(
    fc.record({ type: fc.constant('text'), text }),
    fc.constant({ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }),
  ),
  { minLength: 1, maxLength: 3 },
);
const message = fc.oneof(
  fc.record({ role: fc.constantFrom('system', 'developer'), content: text }),
  fc.record({ role: fc.constant('user'), content: fc.oneof(text, fc.constant(null), parts) }),
  fc.record(
    {
      role: fc.constant('assistant'),
      content: fc.oneof(text, fc.constant(null)),
      reasoning_content: text,
      tool_calls: fc.array(toolCall, { minLength: 1, maxLength: 3 }),
    },
    { requiredKeys: ['role', 'content'] },
  ),
  fc.record(
    {
      role: fc.constant('tool'),
      content: text,
      tool_call_id: fc.constant('call_1'),
      name: fc.constant('search'),
    },
    { requiredKeys: ['role', 'content'] },
  ),
  fc.record({ role: fc.constantFrom('ipython', 'weird'), content: text }),
);
const tool = fc.record({
  type: fc.constant('function'),
  function: fc.record({
    name: fc.constantFrom('get_weather', 'search'),
    description: text,
    parameters: fc.constant({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
  }),
});
const request = fc.record(
  {
    messages: fc.array(message, { maxLength: 8 }),
    tools: fc.array(tool, { maxLength: 2 }),
    addGenerationPrompt: fc.boolean(),
    continueFinalMessage: fc.boolean(),
    documents: fc.array(fc.record({ title: fc.string({ maxLength: 8 }), text }), { maxLength: 2 }),
    kwargs: fc.record(
      { enable_thinking: fc.boolean(), reasoning_effort: fc.constantFrom('low', 'high') },
      { requiredKeys: [] },
    ),
  },
  { requiredKeys: ['messages', 'addGenerationPrompt'] },
);

const templates: [string, string, Record<string, unknown>][] = [
  ...PARITY_TOKENIZERS.map(
    (n) => [n, parityChatTemplate(n).text, specials(n)] as [string, string, Record<string, unknown>],
  ),
  ...Object.entries(EXTRA_TEMPLATES).map(
    ([n, src]) =>
      [n, src, { bos_token: '<s>', eos_token: '</s>' }] as [string, string, Record<string, unknown>],
  ),
];

describe('compiled chat templates: random conversations (reference: the interpreter)', () => {
  it.each(templates)('%s: the same text or the same refusal as the interpreter', (name, src, sp) => {
    const compiled = new JinjaChatTemplate(src, sp, { now });
    const interpreted = new JinjaChatTemplate(src, sp, { now, renderer: 'interpreter' });
    expect(compiled.compiledFallback).toBeNull();
    let errors = 0;
    fc.assert(
      fc.property(request, (r) => {
        const o: RenderOptions = {
          addGenerationPrompt: r.addGenerationPrompt,
          ...(r.continueFinalMessage ? { continueFinalMessage: true } : {}),
          ...(r.documents && r.documents.length > 0 ? { documents: r.documents } : {}),
          ...(r.tools && r.tools.length > 0 ? { tools: r.tools } : {}),
          ...(r.kwargs ? { kwargs: r.kwargs } : {}),
        };
        const msgs = r.messages as TemplateMessage[];
        const want = render(interpreted, msgs, o);
        const before = compiled.renders.compiled;
        const got = render(compiled, msgs, o);
        expect(got).toEqual(want);
        // a rendered text came from the compiled renderer, not from the interpreter fallback
        if ('text' in got) expect(compiled.renders.compiled).toBe(before + 1);
        else errors++;
      }),
      { numRuns: 150, seed: 16 },
    );
    // every conversation the template renders went through the compiled renderer (a refusal is
    // re-rendered by the interpreter, for its exact message)
    expect(compiled.renders.interpreted).toBeLessThanOrEqual(errors);
    expect(compiled.renders.compiled).toBeGreaterThan(10);
  });

  it('edge cases: where the compiled renderer answers, it answers as the interpreter', () => {
    // [template, what the interpreter renders (null: it throws)]: worked out from its source
    const cases: [string, string | null][] = [
      ['{{ (1, 2)|tojson }}', null], // TupleValue has no JSON form in 0.5.11
      ['{% for a in (1, 2) %}{{ a }}{% endfor %}', '12'],
      ["{{ 'x'.startswith(('a', 'x')) }}", 'true'],
      ['{% set a, b = (1, 2) %}{{ a }}{{ b }}', '12'],
      ['{% for a, b in [(1, 2)] %}{{ a }}{% endfor %}', null], // tuples do not unpack in loops
      ['{% for x in [1,2,3,4] %}{{ x }}{% if x == 2 %}{% continue %}{% endif %}-{% endfor %}', '1-3-4-'],
      ['{% for x in [1,2,3] %}a{% break %}b{% else %}E{% endfor %}', 'E'], // output of a broken iteration is dropped
      ['{% for x in [1,2] %}{% continue %}{% else %}E{% endfor %}', 'E'],
      ['{% for x in [1,2] %}{% set y = x %}{% endfor %}{{ y }}', ''],
      [
        '{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.length }}{{ loop.previtem }}{% endfor %}',
        '1/22/22',
      ],
      [
        '{% macro m(a, b=2, c=a) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(1, c=5) }}{{ m(b=4, a=0) }}',
        '121131125040',
      ],
      [
        '{% macro m() %}{{ v }}{% endmacro %}{% set v = 1 %}{{ m() }}{% for v in [5] %}{{ m() }}{% endfor %}',
        '15',
      ],
      ['{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}', null],
      [
        '{% set ns = namespace(a=1) %}{% for x in [1,2] %}{% set ns.a = ns.a + x %}{% endfor %}{{ ns.a }}{{ ns|tojson }}',
        '4{"a": 4}',
      ],
      ['{% set x %}a{{ 1 }}b{% endset %}{{ x }}{{ x|length }}', 'a1b3'],
      [
        "{{ {'a': 1, 'b': [1, {'d': none}]}|tojson(indent=2) }}",
        '{\n  "a": 1,\n  "b": [\n    1,\n    {\n      "d": null\n    }\n  ]\n}',
      ],
      ["{{ {'b': 1, 'a': 2}|tojson(separators=(',', ':'), sort_keys=true) }}", '{"a":2,"b":1}'],
      ["{{ 'é'|tojson(ensure_ascii=true) }}", '"\\u00e9"'],
      ['{{ 10 // 3 }}{{ -7 // 2 }}{{ 7 % -3 }}', '3-41'],
      ['{{ "abc"[5] }}{{ [1][3] }}{{ "abc"[1:10:2] }}{{ [1,2,3][::-1] }}', 'b[3, 2, 1]'],
      ["{{ {'B': 1, 'a': 2}|dictsort|tojson }}", '[["a", 2], ["B", 1]]'],
      ["{{ [{'a': 0}, {'a': 2}, {'b': 1}]|selectattr('a')|list|length }}", '1'],
      ["{{ [{'a': {'b': 1}}, {}]|map(attribute='a.b', default='D')|join(',') }}", '1,D'],
      ['{{ "x"|int(5) }}{{ "12abc"|int }}{{ true|int }}', '5121'],
      ["{{ none|default('d') }}{{ none|default('d', true) }}{{ undefined_name|default('u') }}", 'du'],
      ["{{ 'a' in {'a': 1} }}{{ 'b' not in 'abc' }}{{ 3 in [1, 2] }}", 'truefalsefalse'],
      ["{{ 'A' < 'b' }}", null],
      ['{{ [1, 2] == [1, 2] }}', 'false'], // compares the inner arrays by reference; the compiled renderer gives up
      ['{{ -true }}{{ not [] }}{{ 1 if [] else 2 }}', '-1true2'],
      // Chains of + and ~ (strings go out as pieces of their own; any other operand folds in order).
      ["{{ 'a' + 'b' ~ 'c' + 'd' }}{{ '' + 'e' }}", 'abcde'],
      ["{{ 'a' + 1 + 2 }}|{{ 1 + 2 + 'a' }}|{{ 1 + 2 + 3 }}", 'a12|3a|6'],
      ['{{ [1] + [2] + [3] }}', '[1, 2, 3]'],
      [
        '{{ raise_exception.call }}{{ raise_exception is mapping }}{{ raise_exception is callable }}',
        'falsetrue',
      ],
    ];
    const globals = {
      raise_exception: (m: unknown) => {
        throw new Error(String(m));
      },
      true: true,
      false: false,
      none: null,
    };
    const mismatches: string[] = [];
    let answered = 0;
    for (const [src, expected] of cases) {
      let interp: string | null;
      try {
        interp = new Template(src).render({});
      } catch {
        interp = null;
      }
      expect(interp, src).toBe(expected);
      let got: string | null;
      try {
        got = compileTemplate(new Template(src).parsed).render(globals);
      } catch {
        continue; // gave up: the interpreter renders this request
      }
      answered++;
      if (got !== interp) mismatches.push(`${src}: ${JSON.stringify(got)} vs ${JSON.stringify(interp)}`);
    }
    expect(mismatches).toEqual([]);
    // every case the interpreter renders, except container equality (the compiled renderer gives up)
    expect(answered).toBe(cases.filter(([, e]) => e !== null).length - 1);
  });

  it("a `{{ a + b + c }}` of strings renders as those strings, the message's text as the very string it was given", () => {
    const src =
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>' + '\\n' }}{% endfor %}";
    const content = `long text ${'x'.repeat(300)} end`;
    const pieces = compileTemplate(new Template(src).parsed).renderPieces({
      messages: [{ role: 'user', content }],
    });
    expect(pieces).toEqual(['<|im_start|>', 'user', '\n', content, '<|im_end|>', '\n']);
    expect(pieces[3]).toBe(content);
    expect(pieces.join('')).toBe(new Template(src).render({ messages: [{ role: 'user', content }] }));
  });

  it('constructs the compiler does not mirror are refused at compile time', () => {
    for (const src of [
      '{{ 1.5 }}',
      '{{ 4 / 2 }}',
      '{{ x|unknownfilter }}',
      '{% filter upper %}x{% endfilter %}',
      '{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}x{% endcall %}',
      '{{ x is divisibleby }}',
    ])
      expect(() => compileTemplate(new Template(src).parsed), src).toThrow(Unsupported);
  });
});
