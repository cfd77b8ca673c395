/**
 * `pnpm bench frontend-agent`: the agent-session phase of `pnpm bench frontend` alone (issue 14):
 * the frontend with Qwen3's tokenizer (from the engines' cards), `--tokenizer fastokens`, agent
 * sessions whose prompts grow from 20k to 150k tokens by 2k per turn (a tool call and its result
 * per turn, 32 sessions at staggered points), 50 req/s open loop. Figures: received → dispatched
 * percentiles, the server's event-loop delay, and CPU ms per request of the whole process and of its
 * main thread (the event loop) alone. Two servers in the same run: long chats rendered and
 * tokenized on the tokenizer thread (`--tokenizer-thread-chat-chars 65536`, the default before the
 * prompt was cut and hashed as the template's pieces), then the defaults (with fastokens, every
 * chat on the event loop: ~3 ms of CPU for a 150k-token turn; uncached text over 16 384 characters
 * on a thread). Same CPU per turn either way (`pnpm bench long-prompt`); what differs is ~2-3 ms
 * per agent turn on the event loop against a second queue.
 */
import { tokenizerPackageDir } from '@kvrouter/testkit/parity';
import type { Suite } from '../harness.js';
import { AGENT_RUN, loadOptions, realTokenizerRuns } from './frontend.js';

export const suite: Suite = {
  name: 'frontend-agent',
  description: 'HTTP frontend, agent sessions 20k → 150k tokens at 50 req/s (Qwen3 tokenizer, fastokens)',
  run: (ctx) => {
    const qwen3 = tokenizerPackageDir('qwen3');
    return realTokenizerRuns(ctx, loadOptions(ctx.quick), [
      {
        ...AGENT_RUN,
        label: `${AGENT_RUN.label}, chats on the tokenizer thread`,
        modelPath: qwen3,
        flags: ['--tokenizer-thread-chat-chars', '65536'],
      },
      { ...AGENT_RUN, label: `${AGENT_RUN.label}, defaults (chats inline)`, modelPath: qwen3 },
    ]);
  },
};
