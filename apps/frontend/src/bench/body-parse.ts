/**
 * Where a large chat body is parsed (issue 14): the CPU of reading one agent request's body, from
 * its 64 KiB socket chunks to the parsed object, three ways. `whole text`: the chunks joined, decoded
 * into one string and parsed (`parseJson`), as the frontend did before (the decoded string of a
 * mixed-script body passes V8's ~128 kB large-object size). `bytes inline`: what the frontend does
 * by default (`bodyOf` + `parseBody`: the bytes parsed value by value, http/json-bytes.ts). `body
 * thread`: `--http-body-thread-bytes 65536` (the same parser on the body thread, the parsed object
 * sent back by structured clone). Per body and way: event-loop ms (active time of this thread's
 * loop) and process CPU ms (every thread), medians over the runs; each window ends with a 5 ms
 * pause (background GC of the body inside it), measured alone as `pause alone`. Bodies: the bench's agent session
 * at ~150k, ~75k and ~20k tokens, and an 8k-token chat (below 64 KiB: the text path in every way).
 * Run by benchmarks/src/suites/body-parse.ts:
 *
 *   node --conditions=source --import tsx apps/frontend/src/bench/body-parse.ts <corpus dir> [quick]
 *
 * Prints one JSON line.
 */
import { parseJson } from '@kvrouter/protocols';
import { BYTES_PARSE_MIN, bodyOf, utf8Text } from '../http/body-thread.js';
import { parseBody } from '../http/util.js';
import { agentTurns, chatTurns, corpusText } from './agent.js';

const [corpusDir, quickArg] = process.argv.slice(2);
if (!corpusDir) throw new Error('usage: body-parse.ts <corpus dir> [quick]');
const RUNS = quickArg === 'quick' ? 10 : 60;

const turns = agentTurns(corpusText(corpusDir, 0x2545f491), {
  fromTokens: 20_000,
  toTokens: 150_000,
  stepTokens: 2_000,
});
const chats = chatTurns(corpusText(corpusDir, 0x1234567), 4, 8000);
const chat = chats.reduce((a, t) => (t.conv.length > a.conv.length ? t : a)).conv;
const body = (messages: unknown) =>
  Buffer.from(JSON.stringify({ model: 'm', messages, max_tokens: 64, stream: true }));
const bodies: Record<string, Buffer> = {
  'agent 150k tokens': body(turns[turns.length - 1]),
  'agent 75k tokens': body(turns[Math.floor(turns.length / 2)]),
  'agent 20k tokens': body(turns[0]),
  'chat 8k tokens': body(chat),
};

/** The body as a socket delivers it: 64 KiB chunks, each its own buffer. */
const chunked = (b: Buffer): Buffer[] => {
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += 65_536) out.push(Buffer.from(b.subarray(i, i + 65_536)));
  return out;
};

const WAYS: Record<string, (chunks: Buffer[], size: number) => unknown> = {
  'whole text': (chunks, size) => parseJson(utf8Text(Buffer.concat(chunks, size))),
  'bytes inline': (chunks, size) => parseBody(bodyOf(chunks, size, 0)),
  'body thread': async (chunks, size) => parseBody(await bodyOf(chunks, size, BYTES_PARSE_MIN)),
  // The 5 ms pause alone (every window ends with it): what the other rows include besides the body.
  'pause alone': () => undefined,
};
const pause = () => new Promise((r) => setTimeout(r, 5));

const med = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1]!;
const out: Record<string, Record<string, unknown>> = {};
for (const [name, b] of Object.entries(bodies)) {
  const chunks = chunked(b);
  const row: Record<string, unknown> = { bytes: b.length };
  // Interleaved, so that load changes during the run touch every way alike; one warm-up round.
  const loop: Record<string, number[]> = {};
  const cpu: Record<string, number[]> = {};
  for (let r = -1; r < RUNS; r++)
    for (const [way, fn] of Object.entries(WAYS)) {
      const e0 = performance.eventLoopUtilization();
      const c0 = process.cpuUsage();
      await fn(chunks, b.length);
      // Lets the loop go idle and background GC work of this body finish inside the window.
      await pause();
      const c = process.cpuUsage(c0);
      const l = performance.eventLoopUtilization(e0).active;
      if (r < 0) continue;
      (loop[way] ??= []).push(l);
      (cpu[way] ??= []).push((c.user + c.system) / 1000);
    }
  for (const way of Object.keys(WAYS))
    row[way] = { loopMs: +med(loop[way]!).toFixed(3), cpuMs: +med(cpu[way]!).toFixed(3) };
  out[name] = row;
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
