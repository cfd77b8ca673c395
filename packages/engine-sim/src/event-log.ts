import { u64FromParts, type ExternalSequenceBlockHash, type LocalBlockHash } from '@kvrouter/protocols';
import type { EngineKvEvent, EngineRemoveData, EngineStoreData, EngineStoredBlock } from './types.js';

// One BigInt read through a 64-bit view costs about half of building it with shifts (events carry
// 2-3 per block); the view needs a little-endian host, otherwise fall back.
const PAIR = new Uint32Array(2);
const PAIR64 = new BigUint64Array(PAIR.buffer);
const LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
function u64(lo: number, hi: number): bigint {
  if (!LE) return u64FromParts(lo, hi);
  PAIR[0] = lo;
  PAIR[1] = hi;
  return PAIR64[0];
}

/**
 * Collects one rank's KV events in occurrence order. Consecutive stores that continue a chain (parent =
 * the previous stored block) share one Stored record and consecutive evictions share one Removed
 * record — the same merge rule as the publisher (§3.4), so fewer records and no BigInt churn. Each new
 * record takes the next raw id; ids run 1, 2, 3, … per rank without gaps.
 */
export class KvEventLog {
  private nextId = 1;
  private events: EngineKvEvent[] = [];
  private openStore: EngineStoreData | null = null;
  private openRemove: EngineRemoveData | null = null;
  private lastLo = 0;
  private lastHi = 0;

  constructor(readonly dpRank: number) {}

  /** Events since the previous drain; the next event starts a new record. */
  drain(): EngineKvEvent[] {
    const out = this.events;
    if (out.length === 0) return out;
    this.events = [];
    this.openStore = null;
    this.openRemove = null;
    return out;
  }

  get lastEventId(): number {
    return this.nextId - 1;
  }

  stored(
    hasParent: boolean,
    parentLo: number,
    parentHi: number,
    lo: number,
    hi: number,
    localLo: number,
    localHi: number,
    position: number,
    tokens?: Uint32Array,
  ): void {
    const block: EngineStoredBlock = {
      block_hash: u64(lo, hi) as ExternalSequenceBlockHash,
      tokens_hash: u64(localLo, localHi) as LocalBlockHash,
      mm_extra_info: null,
    };
    if (tokens !== undefined) block.token_ids = tokens;
    const open = this.openStore;
    if (open !== null && hasParent && parentLo === this.lastLo && parentHi === this.lastHi) {
      open.blocks.push(block);
    } else {
      const data: EngineStoreData = {
        parent_hash: hasParent ? (u64(parentLo, parentHi) as ExternalSequenceBlockHash) : null,
        start_position: position,
        blocks: [block],
      };
      this.push({ stored: data });
      this.openStore = data;
    }
    this.lastLo = lo;
    this.lastHi = hi;
  }

  removed(lo: number, hi: number): void {
    const h = u64(lo, hi) as ExternalSequenceBlockHash;
    if (this.openRemove !== null) {
      this.openRemove.block_hashes.push(h);
      return;
    }
    const data: EngineRemoveData = { block_hashes: [h] };
    this.push({ removed: data });
    this.openRemove = data;
  }

  private push(data: EngineKvEvent['data']): void {
    this.events.push({ event_id: this.nextId++, dp_rank: this.dpRank, data });
    // A record of the other kind closes the open one: merging across it would reorder events.
    if ('stored' in data) this.openRemove = null;
    else this.openStore = null;
  }
}
