/**
 * `/dashboard` on the frontend's HTTP port: an open event stream is not an in-flight request (it
 * must not hold up graceful shutdown); `--dashboard off` leaves the path to the 404 of any unknown route.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { startFrontend } from '../test-helpers.js';

let fe: Frontend | null = null;
afterEach(async () => {
  await fe?.close(0);
  fe = null;
});

describe('frontend /dashboard', () => {
  it('streams snapshots without counting as an in-flight request', async () => {
    fe = await startFrontend(['--router-mode', 'kv', '--router-event-threads', '1', '--mocker-workers', '2']);
    const ac = new AbortController();
    const r = await fetch(`${fe.url}/dashboard/events`, { signal: ac.signal });
    expect(r.status).toBe(200);
    const reader = r.body!.getReader();
    let text = '';
    while (!text.includes('\n\ndata: ') && !/^data: .*\n\n/m.test(text))
      text += new TextDecoder().decode(((await reader.read()) as { value?: Uint8Array }).value);
    const frame = JSON.parse(
      text.slice(text.indexOf('data: ') + 6, text.indexOf('\n\n', text.indexOf('data: '))),
    ) as {
      app: string;
      models: { workers: unknown[] }[];
    };
    expect(frame.app).toBe('frontend');
    expect(frame.models[0].workers).toHaveLength(2);
    expect(fe.inflightRequests).toBe(0);
    ac.abort();
  });

  it('--dashboard off: 404 with the OpenAI error body', async () => {
    fe = await startFrontend(['--dashboard', 'off', '--mocker-workers', '1']);
    const r = await fetch(`${fe.url}/dashboard`);
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });
});
