import { PoolIndexer } from './pool.js';
import { runIndexerConformance } from '../testing/index.js';

for (const threads of [1, 2, 4]) {
  runIndexerConformance(`PoolIndexer (${threads} writer threads)`, () =>
    PoolIndexer.create({ threads, initialCapacity: 64, maxSlots: 32 }),
  );
}
