export * from './types.js';
export { MAX_BLOCKS_PER_WORKER, RadixIndexer, type RadixIndexerOptions } from './indexer.js';
export type { MatchResult } from './match.js';
export * as layout from './layout.js';
export { ApproxIndexer, type ApproxOptions } from './approximate.js';
export { SideIndexer, maxMerge, type SideOptions } from './side.js';
export { BlockTable } from './block-table.js';
export { ExtMap } from './ext-map.js';
export { SlotRegistry } from './slots.js';
