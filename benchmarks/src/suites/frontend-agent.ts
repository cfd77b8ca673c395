/**
 * `pnpm bench frontend-agent`: the agent-session phase of `pnpm bench frontend` alone (issue 14):
 * the frontend with Qwen3's tokenizer (from the engines' cards), `--tokenizer fastokens`, agent
 * sessions whose prompts grow from 20k to 150k tokens by 2k per turn (a tool call and its result
 * per turn, 32 sessions at staggered points), 50 req/s open loop. Figures: received → dispatched
 * percentiles, the server's event-loop delay, and CPU ms per request of the whole process and of its
 * main thread (the event loop) alone. Two servers in the same run: everything on the event loop
 * (`--http-body-thread-bytes 0 --tokenizer-thread-chat-chars 0`, as before issue 14's threads),
 * then the defaults (large bodies parsed on the body thread, long prompts rendered and tokenized
 * on the tokenizer thread).
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
        label: `${AGENT_RUN.label}, all on the event loop`,
        modelPath: qwen3,
        flags: ['--http-body-thread-bytes', '0', '--tokenizer-thread-chat-chars', '0'],
      },
      { ...AGENT_RUN, label: `${AGENT_RUN.label}, threads (defaults)`, modelPath: qwen3 },
    ]);
  },
};
