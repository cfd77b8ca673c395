/**
 * A registered worker whose KV events take the vLLM path (engine → ZMQ PUB in vLLM format →
 * VllmZmqIngest → publisher): the published events equal what the direct path publishes, and the
 * local indexer ends up holding exactly the engine's cached blocks. Real sockets, real clock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MemDiscoveryHub, InprocHub } from '@kvrouter/runtime';
import { InprocEventBus, kvEventsTopic } from '@kvrouter/kv-events';
import { RouterEventCodec, type RouterEvent } from '@kvrouter/protocols';
import { parseGenerateRequest, type GenerateItem } from '@kvrouter/protocols';
import { SimWorker } from './worker.js';
import { VllmRelay } from './vllm-relay.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function worker(relay: boolean): Promise<{ w: SimWorker; events: RouterEvent[] }> {
  const bus = new InprocEventBus();
  const d = new MemDiscoveryHub().connect();
  const events: RouterEvent[] = [];
  const sub = bus.plane({ publisherId: 99n }).subscribe(kvEventsTopic('ns', 'backend'));
  void (async () => {
    for await (const env of sub) events.push(RouterEventCodec.decodeMsgpack(env.payload));
  })();
  const w = await SimWorker.start({
    discovery: d,
    namespace: 'ns',
    component: 'backend',
    modelName: 'm',
    engine: { numGpuBlocks: 64, blockSize: 4, speedupRatio: 100, seed: 7 },
    requestPlane: { kind: 'inproc', hub: new InprocHub() },
    eventPlane: bus.plane({ publisherId: d.leaseId }),
    kvEventRelay: relay ? VllmRelay.factory({ kvEventsPort: 0, replayPort: 0 }) : null,
  });
  cleanups.push(
    () => sub.close(),
    () => w.stop(),
  );
  return { w, events };
}

async function run(w: SimWorker, id: string, tokens: number[], max: number): Promise<void> {
  const items: GenerateItem[] = [];
  for await (const it of w.driver.submit(
    parseGenerateRequest({ request_id: id, token_ids: tokens, stop_conditions: { max_tokens: max } }),
  ))
    items.push(it);
}

const blocksOf = (evs: RouterEvent[]) =>
  evs.flatMap((e) => {
    const d = e.event.data;
    return typeof d === 'object' && 'stored' in d
      ? d.stored.blocks.map((b) => [b.block_hash, b.tokens_hash])
      : [];
  });

describe('VllmRelay (registered worker, vLLM ZMQ event path)', () => {
  it('publishes the same blocks as the direct path and its local indexer equals the engine cache', async () => {
    const direct = await worker(false);
    const viaZmq = await worker(true);
    // 64 blocks of 4: three 30-token prompts with 6 output tokens each, the last two sharing a prefix,
    // then enough traffic to evict (Removed events).
    const prompts = [
      Array.from({ length: 30 }, (_, i) => i),
      Array.from({ length: 30 }, (_, i) => 100 + i),
      [...Array.from({ length: 20 }, (_, i) => 100 + i), ...Array.from({ length: 10 }, (_, i) => 500 + i)],
      ...Array.from({ length: 6 }, (_, k) => Array.from({ length: 36 }, (_, i) => 1000 * (k + 2) + i)),
    ];
    for (const [i, p] of prompts.entries()) {
      await run(direct.w, `r${i}`, p, 6);
      await run(viaZmq.w, `r${i}`, p, 6);
    }
    const cached = viaZmq.w.engine.cachedBlocks();
    const localBlocks = () =>
      new Set(
        viaZmq.w.publisher
          .localIndexer(0)!
          .dump()
          .flatMap((e) => blocksOf([e]).map(([h]): bigint => h)),
      );
    const end = Date.now() + 5000;
    while ([...cached].some((h) => !localBlocks().has(h)) || localBlocks().size !== cached.size) {
      if (Date.now() > end) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(localBlocks()).toEqual(cached);
    // Same engine seeds and inputs → the same block hashes and local hashes on both paths (the ZMQ
    // path recomputes tokens_hash from token_ids, so equality checks the token ids it carried).
    expect(blocksOf(viaZmq.events)).toEqual(blocksOf(direct.events));
    expect(viaZmq.events.some((e) => typeof e.event.data === 'object' && 'removed' in e.event.data)).toBe(
      true,
    );
  });
});
