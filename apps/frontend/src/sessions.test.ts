/**
 * Sticky sessions end to end (docs/protocol.md §12, §5.6): etcd + nats-server, a mocker process with
 * two workers, and a frontend (in this process, kv mode) talking to them over the tcp request plane.
 * `nvext.session_control` `open` reaches the worker's `session_control` endpoint before dispatch, the
 * session's requests stay on that worker even when the cache is on the other one, `close` ends the
 * engine session after the generation, a binding that expired in the router is closed on the engine
 * at the next lookup, and the engine times out a session nobody closes. The worker side is the
 * mocker's (`packages/sim-worker/src/sessions.ts`), observed through its log lines.
 */
import { parseJson, u64ToHex } from '@kvrouter/protocols';
import { TcpRequestClient } from '@kvrouter/runtime';
import {
  eventually,
  startEtcd,
  startMocker,
  startNats,
  type Proc,
  type ServiceHandle,
} from '@kvrouter/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from './frontend.js';
import { readySet, startFrontend } from './test-helpers.js';

const NS = 'fesessions';
let etcd: ServiceHandle;
let nats: ServiceHandle;
let mocker: Proc;
let fe: Frontend;
const client = new TcpRequestClient();

beforeAll(async () => {
  [etcd, nats] = await Promise.all([startEtcd(), startNats({ jetstream: false })]);
  mocker = startMocker({ etcd: etcd.url, nats: nats.url }, NS, 2);
  fe = await startFrontend(
    [
      ...['--discovery-backend', 'etcd', '--event-plane', 'nats', '--namespace', NS],
      ...['--router-mode', 'kv', '--router-event-threads', '1'],
    ],
    { env: { ETCD_ENDPOINTS: etcd.url, NATS_SERVER: nats.url } },
  );
}, 60_000);

afterAll(async () => {
  await client.close();
  await fe?.close(0);
  await mocker?.kill();
  await Promise.all([etcd?.stop(), nats?.stop()]);
});

/** 64 token ids = 4 full blocks of the mocker's 16. */
const prompt = (base: number) => Array.from({ length: 64 }, (_, i) => base + 7 * i);

async function complete(p: number[], nvext: Record<string, unknown> = {}): Promise<bigint> {
  const r = await fetch(`${fe.url}/v1/completions`, {
    method: 'POST',
    body: JSON.stringify({
      model: 'mock-model',
      prompt: p,
      max_tokens: 2,
      nvext: { ...nvext, extra_fields: ['worker_id'] },
    }),
  });
  const text = await r.text();
  expect(r.status, text).toBe(200);
  return BigInt(
    (parseJson(text) as { nvext: { worker_id: { decode_worker_id: bigint | number } } }).nvext.worker_id
      .decode_worker_id,
  );
}

const mockerSaid = (re: RegExp, what: string) =>
  eventually(async () => re.test(mocker.stderr()), 15_000, what);

const set = () => readySet(fe, 2);

describe('session_control across the request plane', () => {
  it('open → bound requests → close reaches the worker; the binding beats the cache', async () => {
    const s = await set();
    const w = await complete(prompt(1000), {
      session_control: { session_id: 'sess-a', action: 'open', timeout: 60 },
    });
    // §5.6: the engine keeps the session timeout + 30 s longer than the router.
    await mockerSaid(
      new RegExp(`session sess-a opened on worker ${u64ToHex(w)} \\(timeout 90 s\\)`),
      'open_session on the worker',
    );

    // A prompt the other worker caches: without the session it goes there...
    let cached: number[] | null = null;
    let other = 0n;
    for (let base = 20_000; base < 30_000 && !cached; base += 1000) {
      const p = prompt(base);
      const got = await complete(p);
      if (got !== w) [cached, other] = [p, got];
    }
    expect(cached).not.toBeNull();
    await eventually(
      async () => {
        const d = await s.router.route({
          requestId: `probe-${Math.random()}`,
          tokens: Uint32Array.from(cached!),
          queryOnly: true,
        });
        return d.overlapBlocks === 4 && d.workerId === other;
      },
      15_000,
      'the other worker holding the prompt',
    );
    // ...with it, the bound worker serves it (overlap scoring skipped for the pin).
    for (let i = 0; i < 3; i++)
      expect(await complete(cached!, { session_control: { session_id: 'sess-a' } })).toBe(w);

    // close: unbound at once, close_session once the generation ended.
    expect(await complete(prompt(2000), { session_control: { session_id: 'sess-a', action: 'close' } })).toBe(
      w,
    );
    await mockerSaid(
      new RegExp(`session sess-a closed on worker ${u64ToHex(w)}`),
      'close_session on the worker',
    );
  }, 120_000);

  it('a binding that expired in the router is closed on the engine at its next lookup', async () => {
    await set();
    const w = await complete(prompt(3000), {
      session_control: { session_id: 'sess-b', action: 'open', timeout: 1 },
    });
    await mockerSaid(
      new RegExp(`session sess-b opened on worker ${u64ToHex(w)} \\(timeout 31 s\\)`),
      'open_session',
    );
    // Past the router's 1 s TTL (sliding; nothing refreshed it).
    await new Promise((r) => setTimeout(r, 1500));
    await complete(prompt(4000), { session_control: { session_id: 'sess-b' } });
    await mockerSaid(
      new RegExp(`session sess-b closed on worker ${u64ToHex(w)}`),
      'close_session of the expired binding',
    );
  }, 60_000);

  it('the engine times out a session nobody closes, and answers errors as {"error"}', async () => {
    const s = await set();
    const [id] = [...s.workers.keys()];
    const transport = s.transportOf(id!)!;
    expect(
      await client.unary(transport, 'session_control', {
        action: 'open_session',
        session_id: 'sess-c',
        timeout: 0.5,
        capacity_of_str_len: 65536,
      }),
    ).toEqual({ status: 'ok' });
    await mockerSaid(
      new RegExp(`session sess-c expired on worker ${u64ToHex(id!)} after 0.5 s`),
      'the engine-side timeout',
    );
    expect(
      await client.unary(transport, 'session_control', { action: 'close_session', session_id: 'sess-c' }),
    ).toEqual({
      error: 'close_session sess-c: no such session (never opened, closed, or expired)',
    });
    expect(
      await client.unary(transport, 'session_control', {
        action: 'open_session',
        session_id: 'x',
        timeout: -1,
      }),
    ).toEqual({
      error: 'open_session x: timeout must be a number of seconds > 0, got -1',
    });
  }, 60_000);
});
