export * from './rng.js';
export * from './services.js';
export * from './procs.js';
export * from './fuzz.js';
export * from './workload.js';
