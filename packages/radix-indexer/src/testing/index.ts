export { runIndexerConformance, applyOp, type IndexerFactory } from './conformance.js';
export { ReferenceIndex, refChain, refSequence } from './reference.js';
export { Workload, stored, removed, cleared, type Op } from './gen.js';
