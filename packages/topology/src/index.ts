export * from './errors.js';
export * from './taints.js';
export * from './constraints.js';
export * from './env.js';
export * from './derive.js';
export * from './diagnostics.js';
