export { PoolIndexer, createKvIndexer, type PoolOptions } from './pool.js';
