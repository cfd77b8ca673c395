export * from './ids.js';
export * from './errors.js';
export * from './hash/index.js';
export * from './events/index.js';
export * from './names.js';
export * from './nvext.js';
export * from './generate.js';
export * from './kernel/index.js';
export { renderErrorsDoc } from './error-doc.js';
