/**
 * From the `--aic-*` flag values (the config table's keys) to a ready `AicModel`. Reading
 * `--aic-model-path` from disk is the caller's: it passes `readText`, so this package stays pure.
 */
import { KvrError } from '@kvrouter/protocols';
import { builtinModel, BUILTIN_MODEL_IDS, parseHfConfig, type ModelShape } from './models.js';
import { AicModel } from './predict.js';

/** The resolved config fields this package reads (a `ResolvedConfig` of the frontend or router fits). */
export interface AicFlags {
  aicBackend: string | null;
  aicSystem: string | null;
  aicModelPath: string | null;
  aicBackendVersion?: string | null;
  aicTpSize?: number;
  aicMoeTpSize?: number | null;
  aicMoeEpSize?: number | null;
  aicAttentionDpSize?: number | null;
}

/** The file's text, or null when there is no such file. */
export type ReadText = (path: string) => string | null;

/**
 * A local `config.json` (the path itself when it ends in `.json`, else `<path>/config.json`) wins
 * over a built-in id of the same name, as a local checkout is what the operator deploys.
 */
export function resolveAicModel(pathOrId: string, readText?: ReadText): ModelShape {
  const p = pathOrId.trim();
  const file = p.endsWith('.json') ? p : `${p.replace(/\/+$/, '')}/config.json`;
  const text = readText ? readText(file) : null;
  if (text !== null) {
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch (e) {
      throw new KvrError(
        'invalid_argument',
        `--aic-model-path: ${file} is not valid JSON (${(e as Error).message})`,
        400,
        {
          flag: '--aic-model-path',
        },
      );
    }
    return parseHfConfig(obj, p);
  }
  const b = builtinModel(p);
  if (b) return b;
  throw new KvrError(
    'invalid_argument',
    `--aic-model-path: '${p}' is neither a readable config.json (${file}) nor a built-in model id (${BUILTIN_MODEL_IDS.join(', ')})`,
    400,
    { flag: '--aic-model-path' },
  );
}

/** Builds the model; errors name the flag (docs/configuration.md messages where it has one). */
export function aicModelFromFlags(f: AicFlags, readText?: ReadText): AicModel {
  const missing = (
    [
      [f.aicBackend, '--aic-backend'],
      [f.aicSystem, '--aic-system'],
      [f.aicModelPath, '--aic-model-path'],
    ] as const
  )
    .filter(([v]) => v === null || v === undefined || v === '')
    .map(([, flag]) => flag);
  if (missing.length > 0) {
    throw new KvrError(
      'invalid_argument',
      `--router-prefill-load-model=aic requires ${missing.join(', ')}`,
      400,
      { flag: missing[0] },
    );
  }
  return new AicModel({
    backend: f.aicBackend!,
    system: f.aicSystem!,
    model: resolveAicModel(f.aicModelPath!, readText),
    backendVersion: f.aicBackendVersion ?? null,
    tpSize: f.aicTpSize ?? 1,
    moeTpSize: f.aicMoeTpSize ?? null,
    moeEpSize: f.aicMoeEpSize ?? null,
    attentionDpSize: f.aicAttentionDpSize ?? null,
  });
}

/**
 * `--aic-perf-model` of the mocker and `pnpm replay`: the engine's pass timing for a model given by
 * `--model-path` (a local config.json first, then a built-in id). Problems go to `fail(message, flag)`
 * (the caller's error type), named `--aic-perf-model` with the model path in place of `--aic-model-path`.
 */
export function aicEngineTimingFromFlag(
  t: { backend: string; system: string; model: string },
  totalKvTokens: number,
  readText: ReadText,
  fail: (message: string, flag: string) => never,
): { prefillMs(x: number): number; decodeMs(u: number): number } {
  try {
    const model = resolveAicModel(t.model, readText);
    return new AicModel({ backend: t.backend, system: t.system, model }).engineTiming(totalKvTokens);
  } catch (e) {
    const msg = (e instanceof Error ? e.message : String(e)).replace(
      /^--aic-model-path: /,
      `--model-path ${JSON.stringify(t.model)}: `,
    );
    return fail(`--aic-perf-model: ${msg}`, '--aic-perf-model');
  }
}
