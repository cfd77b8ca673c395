/** Per-request router state is bounded (issue 17): at most MAX_LIVE_REQUESTS tracked requests. */
import { describe, expect, it } from 'vitest';
import type { KvrError } from '@kvrouter/protocols';
import { MAX_LIVE_REQUESTS } from './router.js';
import { harness, toks } from './test-fixtures.js';

describe('bounded live requests', () => {
  it('tracks at most MAX_LIVE_REQUESTS requests; the next is all_workers_busy until one is freed', async () => {
    expect(MAX_LIVE_REQUESTS).toBe(65_536);
    const { router } = harness({ queueThreshold: null });
    router.addWorker({ workerId: 1 });
    const prompt = toks(1, 16);
    for (let i = 0; i < MAX_LIVE_REQUESTS; i++) await router.route({ requestId: `r${i}`, tokens: prompt });
    expect(router.liveRequestCount).toBe(MAX_LIVE_REQUESTS);
    const e = await router.route({ requestId: 'one-too-many', tokens: prompt }).catch((x: unknown) => x);
    expect((e as KvrError).code).toBe('all_workers_busy');
    expect(router.liveRequestCount).toBe(MAX_LIVE_REQUESTS);
    router.free('r0');
    expect((await router.route({ requestId: 'after-free', tokens: prompt })).booked).toBe(true);
    for (let i = 1; i < MAX_LIVE_REQUESTS; i++) router.free(`r${i}`);
    router.free('after-free');
    expect(router.liveRequestCount).toBe(0);
  });
});
