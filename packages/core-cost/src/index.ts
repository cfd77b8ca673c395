export * from './cost.js';
export * from './select.js';
export * from './sequences.js';
export * from './queue.js';
export * from './busy.js';
export * from './modes.js';
export { BlockTable, FRAC_UNITS } from './block-table.js';
