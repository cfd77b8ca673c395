/**
 * Which module the pool's writer threads load. Compiled runs load `dist/pool/worker.js`. Source
 * runs (tests, `npm start` through tsx) would load `worker.ts` through tsx inside every writer
 * thread, which applied events ~1.6x slower than compiled code and took seconds to start each
 * thread on a busy machine; instead the writer's sources are bundled once with esbuild (already
 * installed with tsx) into one plain CommonJS file, content-addressed in the OS temp directory, so
 * a writer thread runs plain JavaScript with no loader hooks. tsx stays the fallback.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KvrError } from '@kvrouter/protocols';

export interface WriterEntry {
  /** URL of the module the writer threads load. */
  filename: string;
  /** Extra node flags for the writer threads. */
  execArgv: string[];
  /** How it was chosen (logged by benchmarks). */
  kind: 'dist' | 'bundle' | 'tsx';
}

let bundled: string | undefined;

interface EsbuildLike {
  buildSync(opts: Record<string, unknown>): { outputFiles?: { text: string }[] };
}

/** Bundles worker.ts (and what it imports, sources via the `source` condition) once per process. */
function bundleWriter(): string {
  if (bundled) return bundled;
  const require = createRequire(import.meta.url);
  const esbuild = require('esbuild') as EsbuildLike;
  const out = esbuild.buildSync({
    entryPoints: [fileURLToPath(new URL('./worker.ts', import.meta.url))],
    bundle: true,
    platform: 'node',
    // CommonJS: piscina loads a writer with require() first, and Node 20's require() of an ES
    // module is experimental (it aborted a process once here); a .cjs file takes the plain path.
    format: 'cjs',
    target: 'node20',
    conditions: ['source'],
    write: false,
    logLevel: 'silent',
    external: ['piscina'],
  });
  const text = out.outputFiles?.[0]?.text;
  if (!text) throw new KvrError('pool_worker_bundle', 'esbuild produced no output for the pool writer');
  const dir = join(tmpdir(), 'kvrouter-pool-writer');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `worker-${createHash('sha256').update(text).digest('hex').slice(0, 16)}.cjs`);
  if (!existsSync(file)) {
    // Write then rename: concurrent processes and threads never load a half-written file.
    const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
    writeFileSync(tmp, text);
    renameSync(tmp, file);
  }
  bundled = new URL(`file://${file}`).href;
  return bundled;
}

/**
 * `KVR_POOL_WORKER`: `dist` (compiled writer; error if missing), `tsx` (TypeScript through tsx in
 * each thread), unset (compiled when running compiled, else the esbuild bundle, else tsx).
 */
export function writerEntry(): WriterEntry {
  const source = import.meta.url.endsWith('.ts');
  const mode = process.env.KVR_POOL_WORKER;
  if (!source) return { filename: new URL('./worker.js', import.meta.url).href, execArgv: [], kind: 'dist' };
  if (mode === 'dist') {
    const dist = fileURLToPath(new URL('../../dist/pool/worker.js', import.meta.url));
    if (!existsSync(dist))
      throw new KvrError(
        'pool_worker_missing',
        `KVR_POOL_WORKER=dist but ${dist} is missing: run pnpm build`,
      );
    return { filename: new URL(`file://${dist}`).href, execArgv: [], kind: 'dist' };
  }
  const tsx: WriterEntry = {
    filename: new URL('./worker.ts', import.meta.url).href,
    execArgv: ['--import', 'tsx', '--conditions=source'],
    kind: 'tsx',
  };
  if (mode === 'tsx') return tsx;
  try {
    return { filename: bundleWriter(), execArgv: [], kind: 'bundle' };
  } catch {
    return tsx;
  }
}
