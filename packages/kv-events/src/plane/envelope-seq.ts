import { encodeEnvelope, type EventEnvelope } from '@kvrouter/protocols';
import { checkU64 } from '../errors.js';
import type { PlaneOptions } from './types.js';

/**
 * Builds the envelopes of one publishing process: `sequence` counts 1, 2, 3, … per subject, so a
 * consumer of one subject sees its own contiguous sequence (§5.2 "counts per publisher").
 */
export class EnvelopeBuilder {
  readonly publisherId: bigint;
  private readonly now: () => number;
  private readonly seq = new Map<string, bigint>();

  constructor(opts: PlaneOptions) {
    this.publisherId = checkU64(opts.publisherId, 'publisherId');
    this.now = opts.now ?? Date.now;
  }

  next(subject: string, payload: Uint8Array): EventEnvelope {
    const s = (this.seq.get(subject) ?? 0n) + 1n;
    this.seq.set(subject, s);
    return {
      publisher_id: this.publisherId,
      sequence: s,
      published_at: Math.max(0, Math.floor(this.now())),
      topic: subject,
      payload,
    };
  }

  encode(subject: string, payload: Uint8Array): Uint8Array {
    return encodeEnvelope(this.next(subject, payload));
  }
}
