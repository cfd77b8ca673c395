export { xxh3_64, xxh3_64Into } from './xxh3.js';
export {
  BASE_SEED,
  type BlockHashOptions,
  chainHashInto,
  computeBlockAndSequenceHashes,
  computeLocalBlockHashes,
  computeSequenceHashes,
  extendBlockHashes,
  hashTokenBlock,
  localBlockHashes,
  loraSeed,
  pairsToU64s,
  sequenceHashOf,
  sequenceHashes,
  u64sToPairs,
} from './blocks.js';
export { configureWasmHashing, type WasmHashingConfig, wasmHashingAvailable } from './wasm-hash.js';
