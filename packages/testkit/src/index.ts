export * from './rng.js';
export * from './clock.js';
export * from './services.js';
export * from './procs.js';
