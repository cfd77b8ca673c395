/**
 * `/busy_threshold` (docs/protocol.md §11): read or set one model's busy thresholds (POST), list all
 * (GET). Errors are `{"error": "..."}`: malformed body 422, decode threshold outside [0, 1] 400,
 * unknown model 404. A set applies to every worker set (router) of the model.
 */
import type { Request, Response } from 'express';
import type { BusyThresholds } from '@kvrouter/core-cost';
import { parseJson } from '@kvrouter/protocols';
import type { ModelRegistry } from '../models.js';

const FIELDS = [
  'active_decode_blocks_threshold',
  'active_prefill_tokens_threshold',
  'active_prefill_tokens_threshold_frac',
] as const;

function view(model: string, t: BusyThresholds) {
  return {
    model,
    active_decode_blocks_threshold: t.activeDecodeBlocks,
    active_prefill_tokens_threshold: t.activePrefillTokens,
    active_prefill_tokens_threshold_frac: t.activePrefillTokensFrac,
  };
}

const fail = (res: Response, status: number, error: string) => void res.status(status).json({ error });

export function busyThresholdGet(registry: ModelRegistry) {
  return (_req: Request, res: Response): void => {
    const thresholds = [];
    for (const [name, m] of registry.models) {
      const s = m.sets[0];
      if (s) thresholds.push(view(name, s.router.busyThresholds));
    }
    thresholds.sort((a, b) => (a.model < b.model ? -1 : 1));
    res.json({ thresholds });
  };
}

export function busyThresholdPost(registry: ModelRegistry) {
  return (req: Request, res: Response): void => {
    let body: unknown;
    try {
      body = parseJson(typeof req.body === 'string' ? req.body : '');
    } catch (e) {
      return fail(res, 422, `malformed JSON body: ${(e as Error).message}`);
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      return fail(res, 422, 'body must be a JSON object');
    const b = body as Record<string, unknown>;
    if (typeof b.model !== 'string' || b.model.length === 0)
      return fail(res, 422, 'model: required, a non-empty string');
    const set: Partial<BusyThresholds> = {};
    let any = false;
    for (const f of FIELDS) {
      if (!(f in b)) continue;
      any = true;
      const v = b[f];
      if (v !== null && (typeof v !== 'number' || !Number.isFinite(v)))
        return fail(res, 422, `${f}: must be a number or null`);
      if (f === 'active_decode_blocks_threshold') {
        if (v !== null && (v < 0 || v > 1))
          return fail(res, 400, `active_decode_blocks_threshold must be between 0.0 and 1.0, got ${v}`);
        set.activeDecodeBlocks = v;
      } else if (f === 'active_prefill_tokens_threshold') {
        if (v !== null && (v < 0 || !Number.isInteger(v)))
          return fail(res, 400, `active_prefill_tokens_threshold must be an integer >= 0, got ${v}`);
        set.activePrefillTokens = v;
      } else {
        if (v !== null && v < 0)
          return fail(res, 400, `active_prefill_tokens_threshold_frac must be >= 0, got ${v}`);
        set.activePrefillTokensFrac = v;
      }
    }
    const m = registry.models.get(b.model);
    if (!m || m.sets.length === 0) return fail(res, 404, `model ${b.model} not found`);
    let current: BusyThresholds = m.sets[0]!.router.busyThresholds;
    if (any) for (const s of m.sets) current = s.router.setBusyThresholds(set);
    res.json(view(b.model, current));
  };
}
