/**
 * In-process event plane: publishers and subscribers of one `InprocEventBus` exchange envelope
 * bytes synchronously, through the same encode/decode path as the network transports (so a test
 * on this plane exercises the codecs too). Delivery is in publish order per subject.
 */
import { EnvelopeBuilder } from './envelope-seq.js';
import { EnvelopeQueue } from './subscription.js';
import type { EventPlane, EventSubscription, EventTopic, PlaneOptions, SubscribeOptions } from './types.js';

export class InprocEventBus {
  private readonly subs = new Map<string, Set<EnvelopeQueue>>();

  /** A plane (one publishing process) on this bus. */
  plane(opts: PlaneOptions): InprocEventPlane {
    return new InprocEventPlane(this, opts);
  }

  /** Delivers raw bytes as if a publisher had sent them (fault-injection tests). */
  deliver(subject: string, bytes: Uint8Array): void {
    const set = this.subs.get(subject);
    if (!set) return;
    for (const q of set) q.pushBytes(bytes);
  }

  /** @internal */
  add(subject: string, q: EnvelopeQueue): void {
    let set = this.subs.get(subject);
    if (!set) this.subs.set(subject, (set = new Set()));
    set.add(q);
  }

  /** @internal */
  remove(subject: string, q: EnvelopeQueue): void {
    const set = this.subs.get(subject);
    if (!set) return;
    set.delete(q);
    if (set.size === 0) this.subs.delete(subject);
  }
}

export class InprocEventPlane implements EventPlane {
  readonly kind = 'inproc' as const;
  private readonly env: EnvelopeBuilder;
  private readonly mine = new Set<EnvelopeQueue>();
  private closed = false;

  constructor(
    private readonly bus: InprocEventBus,
    opts: PlaneOptions,
  ) {
    this.env = new EnvelopeBuilder(opts);
  }

  get publisherId(): bigint {
    return this.env.publisherId;
  }

  publish(topic: EventTopic, payload: Uint8Array): void {
    if (this.closed) return;
    this.bus.deliver(topic.subject, this.env.encode(topic.subject, payload));
  }

  flush(): Promise<void> {
    return Promise.resolve();
  }

  subscribe(topic: EventTopic, opts: SubscribeOptions = {}): EventSubscription {
    const subject = topic.subject;
    const q: EnvelopeQueue = new EnvelopeQueue(opts, () => {
      this.bus.remove(subject, q);
      this.mine.delete(q);
    });
    if (this.closed) q.close();
    else {
      this.bus.add(subject, q);
      this.mine.add(q);
    }
    return q;
  }

  close(): Promise<void> {
    this.closed = true;
    for (const q of [...this.mine]) q.close();
    return Promise.resolve();
  }
}
