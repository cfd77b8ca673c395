/**
 * Router queue (docs/protocol.md §10): the park rule, the fcfs / lcfs / wspt keys and a max-heap with
 * removal by id. Time is an argument (`now` in ms).
 */
import { KvrError } from '@kvrouter/protocols';
import { finite, finiteNonNeg, invalid, nonNegInt } from './validate.js';

export const QUEUE_POLICIES = ['fcfs', 'wspt', 'lcfs'] as const;
export type QueuePolicy = (typeof QUEUE_POLICIES)[number];

/** Card default when a worker does not report `max_num_batched_tokens`. */
export const DEFAULT_MAX_NUM_BATCHED_TOKENS = 10_000_000;
/** `--router-queue-threshold` default. */
export const DEFAULT_QUEUE_THRESHOLD = 16;

/** `max(agent_hints.priority, 0)`, falling back to the deprecated `latency_sensitivity`. */
export function priorityJump(
  hints: { priority?: number | null; latency_sensitivity?: number | null } | null | undefined,
): number {
  const p = hints?.priority ?? hints?.latency_sensitivity ?? 0;
  if (!Number.isFinite(p)) throw invalid('agent_hints.priority', 'must be a finite number', p);
  return Math.max(p, 0);
}

export interface QueueKeyInput {
  priorityJump: number;
  /** Seconds since the queue was created. */
  arrivalOffsetSec: number;
  isl: number;
  /** Best `cached_tokens` over the eligible ranks (or the pinned rank's). */
  cachedTokens: number;
}

/** Larger = served first. */
export function queueKey(policy: QueuePolicy, k: QueueKeyInput): number {
  switch (policy) {
    case 'fcfs':
      return k.priorityJump - k.arrivalOffsetSec;
    case 'lcfs':
      return k.priorityJump + k.arrivalOffsetSec;
    case 'wspt':
      return (1 + k.priorityJump) / Math.max(1, k.isl - k.cachedTokens);
  }
}

/**
 * §10 park rule: true iff there is at least one eligible rank and every one has
 * `active_prefill_tokens > threshold × max_num_batched_tokens`. `threshold` null = queue disabled.
 * `maxBatchedTokens` is per rank or one value for all.
 */
export function shouldPark(
  eligibleRankPrefillTokens: ArrayLike<number>,
  maxBatchedTokens: ArrayLike<number> | number,
  threshold: number | null,
): boolean {
  if (threshold === null) return false;
  if (!(threshold > 0) || !Number.isFinite(threshold))
    throw invalid('threshold', 'must be greater than 0 (null disables queueing)', threshold);
  const n = eligibleRankPrefillTokens.length;
  if (n === 0) return false;
  const single = typeof maxBatchedTokens === 'number';
  if (!single && maxBatchedTokens.length !== n)
    throw invalid('maxBatchedTokens', `must have one entry per rank (${n})`, maxBatchedTokens.length);
  for (let i = 0; i < n; i++) {
    const mbt = single ? maxBatchedTokens : maxBatchedTokens[i];
    if (!(eligibleRankPrefillTokens[i] > threshold * mbt)) return false;
  }
  return true;
}

export interface QueuePushInput {
  /** Request id; unique within the queue. */
  id: string;
  /** Arrival time in ms. */
  now: number;
  /** From `priorityJump(agent_hints)`; default 0. */
  priorityJump?: number;
  /** Needed by wspt. */
  isl?: number;
  cachedTokens?: number;
  /** `agent_hints.strict_priority` (u32); used only when the queue enables strict priority. */
  strictPriority?: number | null;
}

interface Node<T> {
  id: string;
  strict: number;
  key: number;
  arrival: number;
  seq: number;
  value: T;
  at: number;
}

export interface RouterQueueOptions {
  /** (N) optional outer key `(strict_priority, policy_key)`. */
  strictPriority?: boolean;
}

/** Max-heap of parked requests. Ties: earlier arrival first, then push order. */
export class RouterQueue<T> {
  readonly policy: QueuePolicy;
  readonly createdAtMs: number;
  readonly strictPriority: boolean;
  private heap: Node<T>[] = [];
  private byId = new Map<string, Node<T>>();
  private seq = 0;

  constructor(policy: QueuePolicy, createdAtMs: number, opts: RouterQueueOptions = {}) {
    if (!QUEUE_POLICIES.includes(policy))
      throw invalid('policy', `must be one of ${QUEUE_POLICIES.join(', ')}`, policy);
    this.policy = policy;
    this.createdAtMs = finite('createdAtMs', createdAtMs);
    this.strictPriority = opts.strictPriority ?? false;
  }

  get size(): number {
    return this.heap.length;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** Computes the entry's key at arrival and inserts it. A duplicate id is an error (400). */
  push(input: QueuePushInput, value: T): void {
    const now = finite('now', input.now);
    const pj = finiteNonNeg('priorityJump', input.priorityJump ?? 0);
    const isl = nonNegInt('isl', input.isl ?? 0);
    const cached = finiteNonNeg('cachedTokens', input.cachedTokens ?? 0);
    const strict =
      this.strictPriority && input.strictPriority != null
        ? nonNegInt('strictPriority', input.strictPriority)
        : 0;
    if (typeof input.id !== 'string') throw invalid('id', 'must be a string', input.id);
    if (this.byId.has(input.id))
      throw new KvrError('duplicate_request', `request ${input.id} is already queued`, 400, { field: 'id' });
    const arrivalOffsetSec = (now - this.createdAtMs) / 1000;
    const node: Node<T> = {
      id: input.id,
      strict,
      key: queueKey(this.policy, { priorityJump: pj, arrivalOffsetSec, isl, cachedTokens: cached }),
      arrival: now,
      seq: this.seq++,
      value,
      at: this.heap.length,
    };
    this.heap.push(node);
    this.byId.set(node.id, node);
    this.up(node.at);
  }

  peek(): T | undefined {
    return this.heap[0]?.value;
  }

  peekId(): string | undefined {
    return this.heap[0]?.id;
  }

  pop(): T | undefined {
    const top = this.heap[0];
    if (!top) return undefined;
    this.removeAt(0);
    return top.value;
  }

  /** Removes a queued request (e.g. its client disconnected); undefined if not queued. */
  remove(id: string): T | undefined {
    const node = this.byId.get(id);
    if (!node) return undefined;
    this.removeAt(node.at);
    return node.value;
  }

  /** Entries in pop order (copy; O(n log n)). */
  toArray(): T[] {
    return [...this.heap].sort((a, b) => (higher(a, b) ? -1 : 1)).map((n) => n.value);
  }

  private removeAt(i: number): void {
    const h = this.heap;
    const node = h[i];
    this.byId.delete(node.id);
    const last = h.pop()!;
    if (i < h.length) {
      h[i] = last;
      last.at = i;
      this.down(i);
      this.up(last.at);
    }
  }

  private up(i: number): void {
    const h = this.heap;
    const node = h[i];
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!higher(node, h[p])) break;
      h[i] = h[p]!;
      h[i].at = i;
      i = p;
    }
    h[i] = node;
    node.at = i;
  }

  private down(i: number): void {
    const h = this.heap;
    const n = h.length;
    const node = h[i];
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && higher(h[r], h[l]) ? r : l;
      if (!higher(h[c], node)) break;
      h[i] = h[c]!;
      h[i].at = i;
      i = c;
    }
    h[i] = node;
    node.at = i;
  }
}

function higher<T>(a: Node<T>, b: Node<T>): boolean {
  if (a.strict !== b.strict) return a.strict > b.strict;
  if (a.key !== b.key) return a.key > b.key;
  if (a.arrival !== b.arrival) return a.arrival < b.arrival;
  return a.seq < b.seq;
}

/**
 * §10 `update()`: admit from the head while the head is no longer parked; stops at the first
 * head that still is (head-of-line blocking is accepted). Returns how many were admitted.
 */
export function drainQueue<T>(
  queue: RouterQueue<T>,
  isParked: (v: T) => boolean,
  admit: (v: T) => void,
): number {
  let admitted = 0;
  for (;;) {
    if (queue.size === 0) return admitted;
    const head = queue.peek() as T;
    if (isParked(head)) return admitted;
    queue.pop();
    admit(head);
    admitted++;
  }
}
