/**
 * The /docs page in real Chromium (Debian's, driven by playwright-core): Swagger UI renders the
 * routes from /openapi.json with assets served by the frontend itself (no CDN: the browser runs
 * with background networking off and every non-loopback request is refused and recorded). Playwright
 * gives the browser a fresh temporary profile.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { launchChromium, startFrontend } from '../test-helpers.js';

let fe: Frontend;
let browser: Browser;

beforeAll(async () => {
  fe = await startFrontend(['--router-mode', 'kv', '--router-event-threads', '1']);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await fe?.close(0);
});

describe('/docs in Chromium', () => {
  it('renders every documented route from local assets only', async () => {
    const page = await browser.newPage();
    const external: string[] = [];
    await page.route('**/*', (route) => {
      const u = new URL(route.request().url());
      if (u.hostname === '127.0.0.1' || u.hostname === 'localhost') return route.continue();
      external.push(u.href);
      return route.abort();
    });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${fe.url}/docs`);
    // Swagger UI lists each operation as a block with its method and path.
    await page.waitForSelector('.opblock-summary-path', { timeout: 20_000 });
    const blocks = page.locator('.opblock-summary-path');
    const paths: string[] = [];
    for (let i = 0; i < (await blocks.count()); i++)
      paths.push((await blocks.nth(i).getAttribute('data-path')) ?? '');
    expect(paths).toEqual(
      expect.arrayContaining(['/v1/chat/completions', '/v1/completions', '/v1/models', '/busy_threshold']),
    );
    const shot = await page.screenshot({ fullPage: false });
    expect(shot.length).toBeGreaterThan(10_000); // a rendered page, not a blank one
    expect(external).toEqual([]);
    expect(errors).toEqual([]);
    await page.close();
  });
});
