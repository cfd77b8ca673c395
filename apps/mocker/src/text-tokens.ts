/**
 * The vLLM-compatible mocker has no tokenizer, so text gets a trivial deterministic mapping, chosen so
 * that equal text always means equal tokens (prefix caching works on text prompts) and any token id
 * prints as something:
 * - text → tokens: the UTF-8 bytes of the text, one token per byte (ids 0..255);
 * - token → text: one lowercase letter, `a` + (id mod 26);
 * - chat messages → text: `<|role|>content\n` per message, then `<|assistant|>` (a ChatML-like template).
 * Requests that carry token ids (what a kvrouter worker adapter sends) bypass all of it.
 */

const utf8 = new TextEncoder();

export function textToTokens(text: string): number[] {
  return Array.from(utf8.encode(text));
}

export function tokensToText(ids: readonly number[]): string {
  let s = '';
  for (const t of ids) s += String.fromCharCode(97 + (t % 26));
  return s;
}

export interface ChatMessage {
  role: string;
  content: string;
}

export function chatToText(messages: readonly ChatMessage[]): string {
  let s = '';
  for (const m of messages) s += `<|${m.role}|>${m.content}\n`;
  return `${s}<|assistant|>`;
}
