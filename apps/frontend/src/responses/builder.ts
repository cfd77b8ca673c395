/**
 * Chat deltas (after the model's output parser) → Responses output items and their stream events.
 * Items open in the order the model produces them: a `reasoning` item (reasoning text), a `message`
 * item (output text; whitespace alone never opens one), a `function_call` item per tool call. Each
 * item is closed (its `*.done` events, `response.output_item.done`) when the next one opens or the
 * generation ends. Unary responses use the same builder and ignore the events.
 */
import type { ChatDelta } from '../openai/choices.js';

type Obj = Record<string, unknown>;

interface OpenMessage {
  kind: 'message';
  item: Obj & { id: string };
  text: string;
}
interface OpenReasoning {
  kind: 'reasoning';
  item: Obj & { id: string };
  text: string;
}
interface OpenCall {
  kind: 'function_call';
  index: number;
  item: Obj & { id: string; arguments: string };
}
type Open = OpenMessage | OpenReasoning | OpenCall;

export class ResponseBuilder {
  private seq = 0;
  readonly output: Obj[] = [];
  private cur: Open | null = null;
  /** Whitespace that arrived while no message is open: sent once real text follows. */
  private pendingWs = '';
  /** Output text, reasoning text and calls of the whole response (for the stored conversation). */
  text = '';
  reasoning = '';
  readonly calls: { call_id: string; name: string; arguments: string }[] = [];

  constructor(private readonly newId: (prefix: string) => string) {}

  private ev(type: string, body: Obj): Obj {
    return { type, sequence_number: this.seq++, ...body };
  }

  /** `response.created` and `response.in_progress` for the in-progress response object. */
  start(response: Obj): Obj[] {
    return [this.ev('response.created', { response }), this.ev('response.in_progress', { response })];
  }

  /** The events of one chat delta. */
  delta(d: ChatDelta): Obj[] {
    const out: Obj[] = [];
    if (d.reasoning_content) this.reasoningText(d.reasoning_content, out);
    if (d.content) this.contentText(d.content, out);
    for (const c of d.tool_calls ?? [])
      this.callDelta(c.index, c.id, c.function.name, c.function.arguments, out);
    return out;
  }

  /** Closes the open item; the output is then complete. */
  finish(): Obj[] {
    const out: Obj[] = [];
    this.close(out);
    return out;
  }

  /** Final event: `response.completed` (or `response.incomplete` when cut by max_output_tokens). */
  end(response: Obj): Obj {
    return this.ev(response.status === 'incomplete' ? 'response.incomplete' : 'response.completed', {
      response,
    });
  }

  /** An `error` event for a failure after the stream started. */
  error(code: string, message: string, param: string | null): Obj {
    return this.ev('error', { code, message, param });
  }

  private index(): number {
    return this.output.length - 1;
  }

  private open(o: Open, out: Obj[]): void {
    this.cur = o;
    this.output.push(o.item);
    out.push(this.ev('response.output_item.added', { output_index: this.index(), item: { ...o.item } }));
  }

  private reasoningText(t: string, out: Obj[]): void {
    if (this.cur?.kind !== 'reasoning') {
      this.close(out);
      const item = {
        id: this.newId('rs_'),
        type: 'reasoning',
        summary: [],
        content: [] as Obj[],
        status: 'in_progress',
      };
      this.open({ kind: 'reasoning', item, text: '' }, out);
      out.push(
        this.ev('response.content_part.added', {
          item_id: item.id,
          output_index: this.index(),
          content_index: 0,
          part: { type: 'reasoning_text', text: '' },
        }),
      );
    }
    const r = this.cur as OpenReasoning;
    r.text += t;
    this.reasoning += t;
    out.push(
      this.ev('response.reasoning_text.delta', {
        item_id: r.item.id,
        output_index: this.index(),
        content_index: 0,
        delta: t,
      }),
    );
  }

  private contentText(t: string, out: Obj[]): void {
    if (this.cur?.kind !== 'message') {
      if ((this.pendingWs + t).trim() === '') {
        this.pendingWs += t;
        return;
      }
      t = this.pendingWs + t;
      this.pendingWs = '';
      this.close(out);
      const item = {
        id: this.newId('msg_'),
        type: 'message',
        role: 'assistant',
        status: 'in_progress',
        content: [] as Obj[],
      };
      this.open({ kind: 'message', item, text: '' }, out);
      out.push(
        this.ev('response.content_part.added', {
          item_id: item.id,
          output_index: this.index(),
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [] },
        }),
      );
    }
    const m = this.cur as OpenMessage;
    m.text += t;
    this.text += t;
    out.push(
      this.ev('response.output_text.delta', {
        item_id: m.item.id,
        output_index: this.index(),
        content_index: 0,
        delta: t,
        logprobs: [],
      }),
    );
  }

  private callDelta(
    index: number,
    id: string | undefined,
    name: string | undefined,
    args: string,
    out: Obj[],
  ) {
    if (this.cur?.kind !== 'function_call' || this.cur.index !== index) {
      this.close(out);
      const item = {
        id: this.newId('fc_'),
        type: 'function_call',
        status: 'in_progress',
        call_id: id ?? this.newId('call_'),
        name: name ?? '',
        arguments: '',
      };
      this.open({ kind: 'function_call', index, item }, out);
    }
    const c = this.cur as OpenCall;
    if (args.length === 0) return;
    c.item.arguments += args;
    out.push(
      this.ev('response.function_call_arguments.delta', {
        item_id: c.item.id,
        output_index: this.index(),
        delta: args,
      }),
    );
  }

  private close(out: Obj[]): void {
    const o = this.cur;
    if (!o) return;
    this.cur = null;
    const i = this.index();
    const id = o.item.id;
    if (o.kind === 'message') {
      const part = { type: 'output_text', text: o.text, annotations: [], logprobs: [] };
      out.push(
        this.ev('response.output_text.done', {
          item_id: id,
          output_index: i,
          content_index: 0,
          text: o.text,
          logprobs: [],
        }),
      );
      out.push(
        this.ev('response.content_part.done', { item_id: id, output_index: i, content_index: 0, part }),
      );
      o.item.content = [part];
    } else if (o.kind === 'reasoning') {
      const part = { type: 'reasoning_text', text: o.text };
      out.push(
        this.ev('response.reasoning_text.done', {
          item_id: id,
          output_index: i,
          content_index: 0,
          text: o.text,
        }),
      );
      out.push(
        this.ev('response.content_part.done', { item_id: id, output_index: i, content_index: 0, part }),
      );
      o.item.content = [part];
    } else {
      const it = o.item;
      out.push(
        this.ev('response.function_call_arguments.done', {
          item_id: id,
          output_index: i,
          name: it.name,
          arguments: it.arguments,
        }),
      );
      this.calls.push({ call_id: it.call_id as string, name: it.name as string, arguments: it.arguments });
    }
    o.item.status = 'completed';
    out.push(this.ev('response.output_item.done', { output_index: i, item: { ...o.item } }));
  }
}
