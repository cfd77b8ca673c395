/**
 * Issue 17: metric label values that come from clients are bounded. Made-up and huge `model`
 * names count under one `__unknown__` label, so they cannot grow `/metrics`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { startFrontend } from '../test-helpers.js';

let fe: Frontend;
const MODEL = 'mock-model';

beforeAll(async () => {
  fe = await startFrontend(['--router-mode', 'round-robin']);
});
afterAll(async () => {
  await fe.close(0);
});

async function post(body: object): Promise<{ status: number; text: string }> {
  const r = await fetch(`${fe.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, text: await r.text() };
}

/** Every `model="…"` label value in an exposition. */
function modelLabels(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/[{,]model="((?:[^"\\]|\\.)*)"/g)) out.add(m[1]!);
  return out;
}

function counterValue(text: string, line: string): number {
  const hit = text.split('\n').find((l) => l.startsWith(line + ' '));
  return hit === undefined ? 0 : Number(hit.slice(line.length + 1));
}

describe('client-supplied model names in /metrics', () => {
  it('2,000 made-up names and one 1 MB name count under __unknown__ and /metrics still answers 200', async () => {
    expect(
      (await post({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })).status,
    ).toBe(200);
    const before = await (await fetch(`${fe.url}/metrics`)).text();
    expect(modelLabels(before)).toEqual(new Set([MODEL]));

    const names = Array.from({ length: 2000 }, (_, i) => `made-up-model-${i}-${'x'.repeat(i % 50)}`);
    for (let i = 0; i < names.length; i += 100) {
      const statuses = await Promise.all(
        names
          .slice(i, i + 100)
          .map(async (model) => (await post({ model, messages: [{ role: 'user', content: 'hi' }] })).status),
      );
      expect(statuses.every((s) => s === 404)).toBe(true);
    }
    const huge = 'M'.repeat(1024 * 1024);
    const notFound = await post({ model: huge, messages: [{ role: 'user', content: 'hi' }] });
    expect(notFound.status).toBe(404);
    // The error body echoes a bounded prefix, not the megabyte.
    expect(notFound.text.length).toBeLessThan(1024);
    expect(notFound.text).toContain('(1048576 characters)');
    // An invalid body naming a huge model: counted before the model is looked up.
    const invalid = await post({ model: huge, messages: 'not a list' });
    expect(invalid.status).toBe(400);
    // An invalid body naming a served model keeps its own label.
    expect((await post({ model: MODEL, messages: 'not a list' })).status).toBe(400);

    const r = await fetch(`${fe.url}/metrics`);
    expect(r.status).toBe(200);
    const after = await r.text();
    expect(modelLabels(after)).toEqual(new Set([MODEL, '__unknown__']));
    expect(after).not.toContain('made-up-model');
    expect(after).not.toContain('MMMM');
    const total = (model: string, errorType: string) =>
      counterValue(
        after,
        `dynamo_frontend_requests_total{model="${model}",endpoint="chat_completions",request_type="unary",status="error",error_type="${errorType}"}`,
      );
    // 2,000 made-up names + the 1 MB one: 2,001 not-found requests on one series.
    expect(total('__unknown__', 'not_found')).toBe(2001);
    expect(total('__unknown__', 'validation')).toBe(1);
    expect(total(MODEL, 'validation')).toBe(1);
    // Only the __unknown__ series were added: every line of the exposition is short.
    expect(Math.max(...after.split('\n').map((l) => l.length))).toBeLessThan(1000);
  });
});
