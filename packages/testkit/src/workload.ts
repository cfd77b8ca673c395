/**
 * Benchmark and soak workloads: multi-turn chat sessions whose prompts are about `promptTokens` long. Each
 * session opens with its own long context; each turn appends a short user question and the
 * previous answer, the way chat clients resend the whole conversation. Deterministic (seeded).
 *
 * Text comes from a 130-word vocabulary (one cl100k token per word), or with `corpus` from
 * varied real-world text (prose in several languages, code, JSON: paragraphs of
 * packages/testkit/fixtures/corpus/mixed.txt), cut at seeded offsets; token counts are then
 * estimated at `charsPerToken` characters per token.
 */
import { Rng } from './rng.js';
const WORDS = (
  'the of and to in is was that for on are with as his they be at one have this from or had by hot word but what some we ' +
  'can out other were all there when up use your how said an each she which do their time if will way about many then them ' +
  'write would like so these her long make thing see him two has look more day could go come did number sound no most people ' +
  'my over know water than call first who may down side been now find any new work part take get place made live where after'
).split(' ');

/** About `tokens` cl100k tokens of text (common English words are one token each, with their space). */
function words(rng: Rng, tokens: number): string {
  const out: string[] = [];
  for (let i = 0; i < tokens; i++) out.push(WORDS[rng.u32() % WORDS.length]!);
  return out.join(' ');
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

export interface ChatTurn {
  session: number;
  messages: ChatMessage[];
}

export interface SessionWorkloadOptions {
  sessions: number;
  /** Target prompt length in tokens (default 8192). */
  promptTokens?: number;
  /** Tokens of each new user question (default 64). */
  questionTokens?: number;
  /** Tokens of each assistant answer resent in the history (default 32). */
  answerTokens?: number;
  /** Turns before a session starts over with a fresh context (default 8). */
  turns?: number;
  seed?: number;
  /** Real-world text to cut the contexts, questions and answers from (default: the word list). */
  corpus?: string | null;
  /** Characters per token of the corpus for the target tokenizer (default 3.6). */
  charsPerToken?: number;
}

/** An endless, deterministic sequence of turns, sessions interleaved round robin. */
export class SessionWorkload {
  private readonly rng: Rng;
  private readonly state: {
    context: string;
    history: ChatTurn['messages'];
    turn: number;
    generation: number;
  }[] = [];
  private next = 0;
  private readonly o: Required<SessionWorkloadOptions>;

  constructor(o: SessionWorkloadOptions) {
    this.o = {
      promptTokens: 8192,
      questionTokens: 64,
      answerTokens: 32,
      turns: 8,
      seed: 1,
      corpus: null,
      charsPerToken: 3.6,
      ...o,
    };
    this.rng = new Rng(this.o.seed);
    for (let s = 0; s < this.o.sessions; s++) this.state.push(this.fresh(s, 0));
  }

  private fresh(s: number, generation: number) {
    const o = this.o;
    const historyTokens = o.turns * (o.questionTokens + o.answerTokens);
    const context = `session ${s}.${generation}: ${this.text(Math.max(16, o.promptTokens - historyTokens))}`;
    return { context, history: [] as ChatTurn['messages'], turn: 0, generation };
  }

  /** About `tokens` tokens: words, or a corpus slice starting at a seeded offset (wrapping around). */
  text(tokens: number): string {
    const c = this.o.corpus;
    if (!c) return words(this.rng, tokens);
    const n = Math.min(c.length, Math.round(tokens * this.o.charsPerToken));
    const at = this.rng.u32() % c.length;
    return at + n <= c.length ? c.slice(at, at + n) : c.slice(at) + c.slice(0, at + n - c.length);
  }

  take(): ChatTurn {
    const s = this.next;
    this.next = (this.next + 1) % this.o.sessions;
    let st = this.state[s]!;
    if (st.turn >= this.o.turns) st = this.state[s] = this.fresh(s, st.generation + 1);
    if (st.turn > 0) st.history.push({ role: 'assistant', content: this.text(this.o.answerTokens) });
    st.history.push({ role: 'user', content: this.text(this.o.questionTokens) });
    st.turn++;
    return { session: s, messages: [{ role: 'system', content: st.context }, ...st.history] };
  }
}

export interface AgentWorkloadOptions {
  sessions: number;
  /** Prompt tokens of a session's first turn (default 20 000). */
  fromTokens?: number;
  /** A session starts over once its prompt passes this (default 150 000). */
  toTokens?: number;
  /** Tokens each turn adds: a tool call and its result (default 2 000). */
  stepTokens?: number;
  seed?: number;
  corpus?: string | null;
  charsPerToken?: number;
}

/**
 * Agent sessions (coding agents, tool loops): each opens with a ~`fromTokens` system prompt and
 * task, and every turn appends the assistant's tool call and the tool's result (~`stepTokens`),
 * until the prompt passes `toTokens` and the session starts over. Sessions start at staggered
 * points of that growth, so from the first request on, prompts are spread over the whole range.
 * Sessions are interleaved round robin. Deterministic (seeded).
 */
export class AgentWorkload {
  private readonly text: SessionWorkload;
  private readonly o: Required<Omit<AgentWorkloadOptions, 'corpus' | 'charsPerToken'>>;
  private readonly state: { messages: ChatMessage[]; tokens: number; generation: number; calls: number }[] =
    [];
  private next = 0;

  constructor(o: AgentWorkloadOptions) {
    this.o = { fromTokens: 20_000, toTokens: 150_000, stepTokens: 2_000, seed: 1, ...o };
    this.text = new SessionWorkload({
      sessions: 0,
      seed: this.o.seed,
      corpus: o.corpus ?? null,
      ...(o.charsPerToken ? { charsPerToken: o.charsPerToken } : {}),
    });
    const span = Math.max(1, Math.floor((this.o.toTokens - this.o.fromTokens) / this.o.stepTokens));
    for (let s = 0; s < o.sessions; s++) {
      const st = this.fresh(s, 0);
      for (let k = Math.floor((s * span) / Math.max(1, o.sessions)); k > 0; k--) this.grow(st);
      this.state.push(st);
    }
  }

  private fresh(s: number, generation: number) {
    const half = Math.round(this.o.fromTokens / 2);
    return {
      messages: [
        { role: 'system', content: `agent ${s}.${generation}: ${this.text.text(half)}` },
        { role: 'user', content: this.text.text(half) },
      ] as ChatMessage[],
      tokens: this.o.fromTokens,
      generation,
      calls: 0,
    };
  }

  private grow(st: AgentWorkload['state'][number]): void {
    const id = `call_${st.generation}_${st.calls++}`;
    st.messages.push({
      role: 'assistant',
      content: '',
      tool_calls: [
        {
          id,
          type: 'function',
          function: { name: 'read_file', arguments: JSON.stringify({ path: `src/file_${st.calls}.ts` }) },
        },
      ],
    });
    st.messages.push({ role: 'tool', tool_call_id: id, content: this.text.text(this.o.stepTokens - 50) });
    st.tokens += this.o.stepTokens;
  }

  take(): ChatTurn {
    const s = this.next;
    this.next = (this.next + 1) % this.state.length;
    let st = this.state[s]!;
    if (st.tokens >= this.o.toTokens) st = this.state[s] = this.fresh(s, st.generation + 1);
    else this.grow(st);
    return { session: s, messages: [...st.messages] };
  }
}
