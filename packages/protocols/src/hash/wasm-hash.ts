/**
 * The WebAssembly path of block and sequence hashing. XXH3 needs 64-bit multiplies, adds and
 * shifts; wasm has them natively, where the JS path emulates each with u32 halves and doubles.
 * The module (wasm/gen-xxh3-wasm.mjs, committed compiled as base64) hashes every block of a
 * token array and, fused in the same loop, the sequence chain; this file owns its memory and
 * copies tokens in and pairs out. The JS path in blocks.ts stays the fallback (no WebAssembly,
 * a big-endian host, memory that cannot grow) and the oracle in tests.
 *
 * Memory: bytes [0, 1024) hold the module's secret and seed keys; a call places its tokens at
 * WORK, then the local hashes, then the sequence hashes. The memory only grows, so after the
 * largest prompt a steady state allocates nothing.
 */
import { invalidArgument } from '../errors.js';
import { XXH3_WASM_BASE64 } from './wasm/xxh3-wasm.generated.js';

/** Minimal typing of the WebAssembly global (the repo's lib settings do not declare it). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
}
interface Xxh3Exports {
  memory: WasmMemory;
  blocks(
    tok: number,
    n: number,
    stride: number,
    len: number,
    seedLo: number,
    seedHi: number,
    local: number,
    seq: number,
  ): void;
  chain(local: number, n: number, seq: number): void;
}

const WORK = 1024;
const PAGE = 65536;

export interface WasmHashingConfig {
  /** Use the wasm path at all (default true where WebAssembly is available). */
  enabled: boolean;
  /** Fewest blocks for which a call takes the wasm path; below it copying in and out costs more than it saves. */
  minBlocks: number;
}

/*
 * A wasm call costs ~110-140 ns more than a JS one (views, copies, the boundary crossing). Measured
 * crossovers (load ~2, 2 cores): 16-token blocks break even at ~4-5 blocks for local hashes, ~4-8
 * for sequence hashes, ~3 fused; 4-token blocks at ~6-8; 64-token blocks win from 1 block. 8 is
 * past every break-even.
 */
const config: WasmHashingConfig = { enabled: true, minBlocks: 8 };

/** Sets the wasm-path switches (tests and benchmarks compare both paths); returns the previous ones. */
export function configureWasmHashing(c: Partial<WasmHashingConfig>): WasmHashingConfig {
  const prev = { ...config };
  if (c.enabled !== undefined) config.enabled = c.enabled === true;
  if (c.minBlocks !== undefined) {
    if (!Number.isInteger(c.minBlocks) || c.minBlocks < 0)
      throw invalidArgument('minBlocks', 'must be a non-negative integer', c.minBlocks);
    config.minBlocks = c.minBlocks;
  }
  return prev;
}

/** undefined: not tried yet; null: unavailable (no WebAssembly, big-endian host, or it failed to load). */
let wasm: Xxh3Exports | null | undefined;
let mem32 = new Uint32Array(0);

function decodeBase64(s: string): Uint8Array {
  const bin = atob(s);
  const b = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
  return b;
}

function load(): Xxh3Exports | null {
  // Pairs are read through Uint32Array views of i64 results: only right on a little-endian host.
  if (new Uint8Array(new Uint32Array([1]).buffer)[0] !== 1) return null;
  const api = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
  if (api === undefined) return null;
  try {
    const inst = new api.Instance(new api.Module(decodeBase64(XXH3_WASM_BASE64)), {});
    const e = inst.exports as unknown as Xxh3Exports;
    mem32 = new Uint32Array(e.memory.buffer);
    return e;
  } catch {
    return null;
  }
}

/** True when the wasm path is loaded (loading it on first call). */
export function wasmHashingAvailable(): boolean {
  if (wasm === undefined) wasm = load();
  return wasm !== null;
}

/** Whether a call over `n` blocks should take the wasm path. */
export function useWasm(n: number): boolean {
  return config.enabled && n >= config.minBlocks && n > 0 && wasmHashingAvailable();
}

/** Makes memory hold `bytes`; false if it cannot grow (the caller then takes the JS path). */
function reserve(w: Xxh3Exports, bytes: number): boolean {
  const have = w.memory.buffer.byteLength;
  if (bytes > have) {
    const need = Math.ceil((bytes - have) / PAGE);
    try {
      // At least double, so a run of growing prompts grows memory O(log n) times.
      w.memory.grow(Math.max(need, have / PAGE));
    } catch {
      try {
        w.memory.grow(need); // near the engine's limit, doubling may fail where the exact size fits
      } catch {
        return false;
      }
    }
  }
  if (mem32.buffer !== w.memory.buffer) mem32 = new Uint32Array(w.memory.buffer);
  return true;
}

/**
 * Local hashes of `n` blocks of `width` tokens starting every `stride` tokens of `toks` (at
 * least (n-1)*stride + width tokens), XXH3 seed (seedLo, seedHi), as pairs into
 * `local[0 .. 2n)`; with `seq` also the sequence hashes into `seq[0 .. 2n)`. False, with
 * nothing written, when the wasm path cannot take the call.
 */
export function wasmBlockHashes(
  toks: Uint32Array,
  n: number,
  stride: number,
  width: number,
  seedLo: number,
  seedHi: number,
  local: Uint32Array,
  seq: Uint32Array | null,
): boolean {
  const w = wasm;
  if (w === null || w === undefined) return false;
  // The whole array is copied (a partial last block is < one block more) so that the copy needs
  // no subarray view.
  const words = toks.length;
  if (words < (n - 1) * stride + width) return false;
  const localAt = WORK + 8 * Math.ceil(words / 2);
  const seqAt = localAt + 8 * n;
  const end = seq === null ? seqAt : seqAt + 8 * n;
  if (4 * width > 0x7fffffff || end > 0xffff0000 || !reserve(w, end)) return false;
  mem32.set(toks, WORK >>> 2);
  w.blocks(WORK, n, 4 * stride, 4 * width, seedLo, seedHi, localAt, seq === null ? 0 : seqAt);
  const m = mem32;
  local.set(m.subarray(localAt >>> 2, (localAt >>> 2) + 2 * n));
  if (seq !== null) seq.set(m.subarray(seqAt >>> 2, (seqAt >>> 2) + 2 * n));
  return true;
}

/** Sequence hashes of the `n` local-hash pairs in `local` into `res[0 .. 2n)` (may alias). False when not taken. */
export function wasmSequenceHashes(local: Uint32Array, n: number, res: Uint32Array): boolean {
  const w = wasm;
  if (w === null || w === undefined) return false;
  const end = WORK + 8 * n;
  if (end > 0xffff0000 || !reserve(w, end)) return false;
  const m = mem32;
  m.set(local.length === 2 * n ? local : local.subarray(0, 2 * n), WORK >>> 2);
  w.chain(WORK, n, WORK);
  res.set(m.subarray(WORK >>> 2, (WORK >>> 2) + 2 * n));
  return true;
}
