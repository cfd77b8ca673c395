/**
 * Under a loader that passes `--conditions import` to Node (vitest does), express's router gets
 * `require('is-promise')` resolved to the package's ES module, and Node's require(esm) returns the
 * module namespace instead of the function, so every async handler fails. The CommonJS cache
 * entry for that file is pointed at the function itself before express loads. Without such a
 * condition (production, tsx) this is a no-op.
 */
import { createRequire } from 'node:module';

const fromExpress = createRequire(createRequire(import.meta.url).resolve('express'));
const fromRouter = createRequire(fromExpress.resolve('router'));
const file = fromRouter.resolve('is-promise');
const loaded: unknown = fromRouter('is-promise');
if (typeof loaded !== 'function') {
  const fn = (loaded as { default?: unknown }).default;
  if (typeof fn === 'function') {
    const cache = fromRouter.cache as Record<string, { exports: unknown }>;
    cache[file] = { ...(cache[file] ?? {}), exports: fn } as { exports: unknown };
  }
}
