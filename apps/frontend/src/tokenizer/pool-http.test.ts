/**
 * No head-of-line blocking through the HTTP surface (issue 17): while a huge completions prompt is
 * being tokenized on the frontend's only tokenizer thread, a normal chat request (a ~5k-token prompt,
 * above the offload threshold) is answered; the huge one then gets its own answer.
 */
import { describe, expect, it } from 'vitest';
import { eventually, startFrontend, wordText as text } from '../test-helpers.js';

const MODEL = 'mock-model';

describe('tokenizer threads behind HTTP', () => {
  it('a normal request finishes while a huge prompt is being tokenized', async () => {
    const fe = await startFrontend(['--mocker-workers', '1', '--dyn-preprocess-workers', '1'], {
      tokenizerThreads: 1,
    });
    try {
      let hugeDone = false;
      const huge = fetch(`${fe.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, prompt: text(1, 1_500_000), max_tokens: 1 }),
      }).then(async (r) => {
        hugeDone = true;
        return { status: r.status, body: await r.text() };
      });
      // The huge prompt is on the tokenizer thread before the normal request is sent.
      const pool = fe.service.encoder.pool!;
      await eventually(() => pool.busy === 1, 30_000, 'the huge prompt is being tokenized');
      const normal = await fetch(`${fe.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: 'user', content: text(2, 20_000) }],
          max_tokens: 2,
        }),
      });
      expect(normal.status).toBe(200);
      expect(hugeDone).toBe(false);
      expect(pool.busy).toBe(1);
      const h = await huge;
      // Answered either way (the exact context check after tokenizing may refuse it), never a 5xx.
      expect(h.status, h.body.slice(0, 300)).toBeLessThan(500);
    } finally {
      await fe.close(0);
    }
  });
});
