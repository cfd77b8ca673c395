/**
 * The request-plane messages of the non-generative model types (docs/protocol.md §5.7): embeddings,
 * image generation and video generation. Each is its own endpoint name on the worker's request-plane
 * server (the one its `generate` instance advertises), so a worker serves them beside `generate`
 * without another registration; the card's `model_type` (`embedding`, `images`, `videos`) says which
 * ones a frontend may send.
 */

/** Endpoint of `EmbedRequest` → one `EmbedItem`. */
export const EMBED_ENDPOINT = 'embed';
/** Endpoint of `ImagesRequest` → one `ImagesItem`. */
export const IMAGES_ENDPOINT = 'images';
/** Endpoint of `VideosRequest` → `VideosItem`s (progress, then the video). */
export const VIDEOS_ENDPOINT = 'videos';

export interface EmbedRequest {
  request_id: string;
  model: string;
  /** One token-id sequence per input (the frontend tokenizes text inputs with the model's tokenizer). */
  inputs: number[][];
}

export interface EmbedItem {
  /** One vector per input, in order, each of the card's `embedding_dim` floats. */
  embeddings: number[][];
  /** Tokens embedded (all inputs). */
  prompt_tokens: number;
}

export interface ImagesRequest {
  request_id: string;
  model: string;
  prompt: string;
  /** Images to generate. */
  n: number;
  /** `WxH` in pixels. */
  size: string;
  seed?: number | null;
}

export interface ImagesItem {
  /** PNG files, base64. */
  data: { b64_json: string }[];
}

export interface VideosRequest {
  request_id: string;
  model: string;
  prompt: string;
  /** `WxH` in pixels. */
  size: string;
  seconds: number;
  fps: number;
  seed?: number | null;
}

export interface VideosItem {
  /** 0–100; the item with `video` is the last one. */
  progress: number;
  video?: { b64_json: string; output_format: string; fps: number; frames: number };
}

/** `WxH` → [w, h] (positive integers up to `max`), or null when malformed or out of range. */
export function parseSize(s: string, max: number): [number, number] | null {
  const m = /^(\d{1,5})x(\d{1,5})$/.exec(s);
  if (!m) return null;
  const w = Number(m[1]);
  const h = Number(m[2]);
  return w >= 1 && h >= 1 && w <= max && h <= max ? [w, h] : null;
}
