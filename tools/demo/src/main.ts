/**
 * The start job until the frontend lands: a small, real demo of the index. Four simulated
 * workers store chat prompts (as KV events with their own external hashes); new prompts are
 * hashed into 16-token blocks and matched against the index, showing which worker holds the
 * longest cached prefix.
 */
import {
  computeLocalBlockHashes,
  computeSequenceHashes,
  pairsToU64s,
  type RouterEvent,
} from '@kvrouter/protocols';
import { RadixIndexer } from '@kvrouter/radix-indexer';

const BS = 16;
const encoder = new TextEncoder();
const tokenize = (text: string) => Uint32Array.from(encoder.encode(text));

const system = 'You are a helpful assistant. Answer briefly and cite sources when you can. ';
const conversations = [
  system + 'User: what is a KV cache? Assistant: it stores attention keys and values per token.',
  system + 'User: explain prefix caching in vLLM in one paragraph please.',
  'Translate to French: the quick brown fox jumps over the lazy dog, twice, slowly.',
  system + 'User: what is a KV cache? Assistant: it stores attention keys and values. User: and eviction?',
];

const ix = new RadixIndexer();
let ext = 1n;
conversations.forEach((text, w) => {
  const local = pairsToU64s(computeLocalBlockHashes(tokenize(text), BS));
  const blocks = local.map((h) => ({ block_hash: ext++, tokens_hash: h, mm_extra_info: null }));
  ix.applyEvent({
    worker_id: BigInt(w + 1),
    storage_tier: 'device',
    event: {
      event_id: 1n,
      dp_rank: 0,
      data: { stored: { parent_hash: null, start_position: null, blocks } },
    },
  } as unknown as RouterEvent);
  console.log(`worker ${w + 1} cached ${blocks.length} blocks: "${text.slice(0, 60)}..."`);
});

const queries = [
  system +
    'User: what is a KV cache? Assistant: it stores attention keys and values. User: and eviction? Assistant:',
  system + 'User: explain prefix caching in vLLM in one paragraph please. Then in two.',
  'Something entirely new that no worker has seen before, long enough to fill a block or two.',
];
for (const q of queries) {
  const seq = computeSequenceHashes(computeLocalBlockHashes(tokenize(q), BS));
  const r = ix.findMatchesBySeq(seq);
  const ranked = [...r.scores].sort((a, b) => b[1] - a[1]);
  const best = ranked[0];
  console.log(
    `\nquery "${q.slice(0, 70)}..." (${seq.length / 2} blocks)\n  ` +
      (best
        ? ranked.map(([k, s]) => `worker ${k.split(':')[0]}: ${s} blocks cached`).join(', ') +
          ` -> route to worker ${best[0].split(':')[0]}`
        : 'no worker holds any prefix -> route by load'),
  );
}
console.log(
  '\nThis demo ran the real index; `npm start` serves the same routing behind the OpenAI-compatible frontend.',
);
