/**
 * `-i` / `--interactive`: a text chat on the terminal through the same pipeline as HTTP (template,
 * tokenizer, router, workers). Each line is a user turn; the conversation is kept; `/reset` starts
 * over, `/quit` or end of input leaves.
 */
import readline from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import type { Frontend } from './frontend.js';
import type { ChatMessage } from './openai/validate.js';
import { parseChatRequest } from './openai/validate.js';

export async function runInteractive(
  fe: Frontend,
  input: Readable,
  output: Writable,
  maxTokens = 128,
): Promise<void> {
  const model = fe.registry.list()[0]?.id;
  if (!model) {
    output.write('no model is being served (no workers in discovery)\n');
    return;
  }
  output.write(`kvrouter interactive chat with ${model}. /reset clears the conversation, /quit leaves.\n`);
  const rl = readline.createInterface({ input, terminal: false });
  const history: ChatMessage[] = [];
  output.write('> ');
  for await (const line of rl) {
    const text = line.trim();
    if (text === '/quit' || text === '/exit') break;
    if (text === '/reset') {
      history.length = 0;
      output.write('(conversation cleared)\n> ');
      continue;
    }
    if (text.length === 0) {
      output.write('> ');
      continue;
    }
    history.push({ role: 'user', content: text });
    const req = parseChatRequest({ model, messages: history, max_tokens: maxTokens, stream: true });
    const ac = new AbortController();
    let reply = '';
    try {
      const c = await fe.service.start(req, { endpoint: 'chat_completions', signal: ac.signal });
      for await (const d of c.deltas) {
        reply += d.text;
        output.write(d.text);
      }
      history.push({ role: 'assistant', content: reply });
    } catch (e) {
      history.pop();
      output.write(`\n[error: ${(e as Error).message}]`);
    }
    output.write('\n> ');
  }
  rl.close();
  output.write('\n');
}
