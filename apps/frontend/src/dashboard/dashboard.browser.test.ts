/**
 * /dashboard in real Chromium (Debian's, through playwright-core) while the frontend routes a steady
 * stream of chat requests (official openai client) to its 4 embedded simulated engines: the page
 * shows every worker, redraws from the SSE stream without a reload (the frame counter and the
 * routed-request counts move), loads nothing from elsewhere and logs no console error. The
 * screenshot goes to `.test-results/dashboard/`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { launchChromium, startFrontend } from '../test-helpers.js';

const OUT = path.resolve(import.meta.dirname, '../../../../.test-results/dashboard');
const MODEL = 'mock-model';
let fe: Frontend;
let browser: Browser;

beforeAll(async () => {
  fe = await startFrontend(['--router-mode', 'kv', '--router-event-threads', '1', '--mocker-workers', '4']);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await fe?.close(0);
});

/** Polls `cond` (page state that arrives over SSE) every 100 ms; vitest's timeout bounds it. */
async function until(cond: () => Promise<boolean>): Promise<void> {
  while (!(await cond())) await new Promise((r) => setTimeout(r, 100));
}

/** Chat requests in a loop (8 conversations sharing a system prompt) until `stop.done`. */
async function load(stop: { done: boolean }, sent: { n: number }): Promise<void> {
  const client = new OpenAI({ baseURL: `${fe.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const system = 'You are a careful assistant. '.repeat(40);
  const one = async (lane: number) => {
    for (let turn = 0; !stop.done; turn++) {
      const stream = await client.chat.completions.create({
        model: MODEL,
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: `conversation ${lane % 8}: ${'tell me more. '.repeat(20 + turn)}` },
        ],
        max_tokens: 24,
        stream: true,
      });
      for await (const _ of stream) void _;
      sent.n++;
    }
  };
  await Promise.all([0, 1, 2, 3, 4, 5].map(one));
}

describe('/dashboard in Chromium under load', () => {
  it('shows every worker and updates live without console errors', async () => {
    const stop = { done: false };
    const sent = { n: 0 };
    const running = load(stop, sent);
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
      const external: string[] = [];
      await page.route('**/*', (route) => {
        const u = new URL(route.request().url());
        if (u.hostname === '127.0.0.1' || u.hostname === 'localhost') return route.continue();
        external.push(u.href);
        return route.abort();
      });
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      await page.goto(`${fe.url}/dashboard`);

      // Every worker of the model, by id.
      const ids = [...fe.registry.allSets()[0]!.workers.keys()].map(String).sort();
      expect(ids).toHaveLength(4);
      const rows = page.locator('tr[data-worker]');
      await until(async () => (await rows.count()) === ids.length);
      const shown: string[] = [];
      for (let i = 0; i < (await rows.count()); i++)
        shown.push((await rows.nth(i).getAttribute('data-worker')) ?? '');
      expect(shown.sort()).toEqual(ids);
      // Every worker's KV event cursor is shown (state · recovery phase · last event id), and the
      // workers that received requests have applied events (cursor live).
      await until(
        async () => (await page.locator('tr[data-worker] .badge', { hasText: 'live' }).count()) > 0,
      );
      const cursors = await page.locator('tr[data-worker] td:last-child').allTextContents();
      expect(cursors.every((c) => c.includes('#'))).toBe(true);

      // Live: later frames arrive on the same page (no navigation) and requests keep completing.
      const frames = async () => Number(await page.textContent('#frames'));
      await page.evaluate(() => void ((globalThis as { kvrMarker?: number }).kvrMarker = 1));
      const frame0 = await frames();
      const sent0 = sent.n;
      await until(async () => (await frames()) >= frame0 + 3);
      expect(sent.n).toBeGreaterThan(sent0);
      // The decisions table fills from the router's decision log while the page is open, and the
      // decisions/s tile shows a rate above zero.
      await until(async () => (await page.locator('tr.decision').count()) > 0);
      const rate = page.locator('.tile', { hasText: 'decisions/s' }).locator('.v');
      await until(async () => Number(await rate.textContent()) > 0);
      // Same document throughout: the marker set before the first update is still there.
      expect(await page.evaluate(() => (globalThis as { kvrMarker?: number }).kvrMarker)).toBe(1);

      mkdirSync(OUT, { recursive: true });
      const shot = await page.screenshot({ fullPage: true });
      writeFileSync(path.join(OUT, 'dashboard.png'), shot);
      expect(shot.length).toBeGreaterThan(20_000);
      expect(external).toEqual([]);
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      stop.done = true;
      await running;
    }
  });
});
