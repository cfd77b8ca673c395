/**
 * `--router-prefill-load-model aic`: the prefill-duration predictor (§9.4) from the `--aic-*`
 * flags. The model lives in `@kvrouter/aic-model` (pure, wrapped by `assembly/`); this file adds
 * the one piece of I/O it needs, reading `--aic-model-path`'s config.json (a built-in Hugging Face
 * id needs no file).
 */
import { readFileSync } from 'node:fs';
import type { AicFlags } from '@kvrouter/aic-model';
import type { PrefillDurationPredictor } from '@kvrouter/router';
import { aicPredictor } from './assembly/index.js';

/** The file's text, or null when nothing is there (other read errors are real errors). */
export function readTextFile(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') return null;
    throw e;
  }
}

/** Throws at startup with a message naming the offending `--aic-*` flag. */
export function buildAicPredictor(
  config: AicFlags,
  readText: (path: string) => string | null = readTextFile,
): PrefillDurationPredictor {
  return aicPredictor(config, readText);
}
