import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { writerEntry } from './writer-entry.js';
import { PoolIndexer } from './pool.js';
import { stored } from '../testing/index.js';

describe('writer thread entry (source runs)', () => {
  const saved = process.env.KVR_POOL_WORKER;
  afterEach(() => {
    if (saved === undefined) delete process.env.KVR_POOL_WORKER;
    else process.env.KVR_POOL_WORKER = saved;
  });

  it('bundles the writer into one plain CommonJS file and runs it without loader flags', async () => {
    delete process.env.KVR_POOL_WORKER;
    const e = writerEntry();
    expect(e.kind).toBe('bundle');
    expect(e.execArgv).toEqual([]);
    expect(e.filename.endsWith('.cjs')).toBe(true);
    expect(existsSync(fileURLToPath(e.filename))).toBe(true);
    // The same sources give the same file (content-addressed, reused across processes).
    expect(writerEntry().filename).toBe(e.filename);
    const pool = PoolIndexer.create({ threads: 1 });
    try {
      expect(pool.writerKind).toBe('bundle');
      pool.applyEvent(stored(5n, [{ ext: 1n, local: 11n }]));
      await pool.flush();
      expect(pool.findMatches([11n]).scores.get('5:0')).toBe(1);
    } finally {
      await pool.close();
    }
  });

  it('KVR_POOL_WORKER=tsx keeps the TypeScript writer under tsx', () => {
    process.env.KVR_POOL_WORKER = 'tsx';
    const e = writerEntry();
    expect(e.kind).toBe('tsx');
    expect(e.filename.endsWith('/worker.ts')).toBe(true);
    expect(e.execArgv).toContain('tsx');
  });
});
