/**
 * etcd3 reads int64 fields (lease ids, revisions) through protobufjs, which needs long.js to keep
 * them exact. protobufjs finds it with `require('long')`, and under a loader that resolves the
 * `import` condition for require (vitest does) that yields the ESM namespace, which it rejects:
 * it then silently falls back to `number` and lease ids lose their low digits. `dcodeIO.Long` is
 * the global protobufjs checks first; setting it before etcd3 loads makes the lookup loader-proof.
 */
import Long from 'long';

const g = globalThis as { dcodeIO?: { Long?: unknown } };
if (!g.dcodeIO?.Long) g.dcodeIO = { ...g.dcodeIO, Long };
