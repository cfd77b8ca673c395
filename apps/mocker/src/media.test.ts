/**
 * The mocker's `--model-type` modes: the plan, the card they register, and the media endpoints over
 * the tcp request plane (embeddings: unit vectors of `--embedding-dim`, the same for the same ids;
 * images: PNG files; videos: progress items then an MP4-like file).
 */
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import {
  EMBED_ENDPOINT,
  IMAGES_ENDPOINT,
  VIDEOS_ENDPOINT,
  type EmbedItem,
  type ImagesItem,
  type VideosItem,
} from '@kvrouter/protocols';
import { TcpRequestClient } from '@kvrouter/runtime';
import { startMocker } from './mocker.js';
import { MockerConfigError, planFromConfig, type MockerConfig } from './options.js';
import { vllmCompatPlan } from './vllm-compat.js';

const cfg = (...argv: string[]): MockerConfig =>
  resolveConfig('mocker', ['--model-path', 'mock', '--discovery-backend', 'mem', ...argv], {}).config;

describe('mocker --model-type', () => {
  it('plans media workers; chat is the default; refuses media with disaggregation, naming the flag', () => {
    expect(planFromConfig(cfg()).media).toBeNull();
    expect(planFromConfig(cfg('--model-type', 'embedding', '--embedding-dim', '8')).media).toEqual({
      kinds: ['embedding'],
      embeddingDim: 8,
    });
    expect(() => planFromConfig(cfg('--model-type', 'images', '--disaggregation-mode', 'prefill'))).toThrow(
      MockerConfigError,
    );
    expect(() => cfg('--model-type', 'audio')).toThrow(/--model-type.*chat.*embedding.*images.*videos/s);
    expect(() => cfg('--embedding-dim', '0')).toThrow(/--embedding-dim must be in \[1, 65536\]/);
    // vLLM-compatible HTTP mode: embedding engines yes, images / videos have no vLLM API.
    expect(vllmCompatPlan(cfg('--http-ports', '0', '--model-type', 'embedding'))).not.toBeNull();
    expect(() => vllmCompatPlan(cfg('--http-ports', '0', '--model-type', 'videos'))).toThrow(
      /--model-type videos/,
    );
  });

  it('embedding mode: card model_type [embedding] with embedding_dim; deterministic unit vectors over tcp', async () => {
    const m = await startMocker(
      cfg('--model-type', 'embedding', '--embedding-dim', '16', '--endpoint', 'dyn://mt.embed.generate'),
      { log: () => {} },
    );
    const client = new TcpRequestClient();
    try {
      const w = m.fleet.workers[0]!;
      expect(w.card.model_type).toEqual(['embedding']);
      expect(w.card.embedding_dim).toBe(16);
      const r = await client.unary<EmbedItem>(w.instance.transport, EMBED_ENDPOINT, {
        request_id: 'e',
        model: 'mock',
        inputs: [[1, 2, 3], [4], [1, 2, 3]],
      });
      expect(r.prompt_tokens).toBe(3 + 1 + 3);
      expect(r.embeddings).toHaveLength(3);
      for (const v of r.embeddings) {
        expect(v).toHaveLength(16);
        expect(Math.abs(Math.hypot(...v) - 1)).toBeLessThan(1e-12);
      }
      expect(r.embeddings[2]).toEqual(r.embeddings[0]);
      expect(r.embeddings[1]).not.toEqual(r.embeddings[0]);
    } finally {
      await client.close();
      await m.stop();
    }
  });

  it('images and videos modes: a PNG per image, progress then an ftyp file', async () => {
    const img = await startMocker(cfg('--model-type', 'images', '--endpoint', 'dyn://mt.img.generate'), {
      log: () => {},
    });
    const vid = await startMocker(cfg('--model-type', 'videos', '--endpoint', 'dyn://mt.vid.generate'), {
      log: () => {},
    });
    const client = new TcpRequestClient();
    try {
      const wi = img.fleet.workers[0]!;
      expect(wi.card.model_type).toEqual(['images']);
      const r = await client.unary<ImagesItem>(wi.instance.transport, IMAGES_ENDPOINT, {
        request_id: 'i',
        model: 'mock',
        prompt: 'p',
        n: 3,
        size: '2x2',
      });
      expect(r.data).toHaveLength(3);
      for (const d of r.data) expect(Buffer.from(d.b64_json, 'base64').toString('latin1', 1, 4)).toBe('PNG');
      const wv = vid.fleet.workers[0]!;
      expect(wv.card.model_type).toEqual(['videos']);
      const items: VideosItem[] = [];
      for await (const it of client.stream<VideosItem>(wv.instance.transport, VIDEOS_ENDPOINT, {
        request_id: 'v',
        model: 'mock',
        prompt: 'p',
        size: '4x4',
        seconds: 1,
        fps: 4,
      }))
        items.push(it);
      expect(items.map((i) => i.progress)).toEqual([0, 25, 50, 75, 100]);
      const file = Buffer.from(items[4]!.video!.b64_json, 'base64');
      expect(file.toString('latin1', 4, 8)).toBe('ftyp');
      expect(items[4]!.video!.frames).toBe(4);
      expect(file.length).toBe(28 + 8 + 4 * 16);
    } finally {
      await client.close();
      await img.stop();
      await vid.stop();
    }
  });
});
