export * from './errors.js';
export { Channel } from './channel.js';
export * from './discovery/index.js';
