/**
 * The `router` suite's workload with the index the product runs by default: the concurrent pool
 * with 2 writer threads (`--router-event-threads 2`), read from shared memory on the main thread.
 */
import { PoolIndexer } from '@kvrouter/radix-indexer/pool';
import { routerSuite } from './router.js';

export const suite = routerSuite(
  (workers) => PoolIndexer.create({ threads: 2, maxSlots: Math.max(64, workers), initialCapacity: 1 << 18 }),
  'router-pool',
  'PoolIndexer, 2 writer threads',
);
