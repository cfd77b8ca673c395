import { describe, expect, it } from 'vitest';
import { KvrError } from './errors.js';
import {
  activeSequencesSubject,
  durableConsumerName,
  eventChannelKey,
  eventChannelsPrefix,
  instanceKey,
  instancesPrefix,
  jetStreamName,
  jetStreamPublishSubject,
  jetStreamSubjects,
  kvEventsSubject,
  kvMetricsSubject,
  mdcKey,
  mdcPrefix,
  parseDiscoveryKey,
  parseWorkerKvIndexerQueryEndpoint,
  radixBucketName,
  slugify,
  workerKvIndexerQueryEndpoint,
} from './names.js';

const ID = 7587872800778374919n; // = 0x694d8a1c2b3e4f07 (§6.3)

describe('subjects (§5.1)', () => {
  it('builds the three event-plane subjects', () => {
    expect(kvEventsSubject('dynamo', 'backend')).toBe('namespace.dynamo.component.backend.kv-events');
    expect(activeSequencesSubject('dynamo', 'backend')).toBe(
      'namespace.dynamo.component.backend.active_sequences_events',
    );
    expect(kvMetricsSubject('dynamo')).toBe('namespace.dynamo.kv_metrics');
  });

  it('names the per-rank local indexer endpoint and parses it back', () => {
    expect(workerKvIndexerQueryEndpoint(0)).toBe('worker_kv_indexer_query_dp0');
    expect(workerKvIndexerQueryEndpoint(12)).toBe('worker_kv_indexer_query_dp12');
    expect(parseWorkerKvIndexerQueryEndpoint('worker_kv_indexer_query_dp12')).toBe(12);
    expect(parseWorkerKvIndexerQueryEndpoint('worker_kv_indexer_query_dp012')).toBeNull();
    expect(parseWorkerKvIndexerQueryEndpoint('generate')).toBeNull();
    expect(() => workerKvIndexerQueryEndpoint(-1)).toThrow(KvrError);
  });
});

describe('discovery keys (§6.1)', () => {
  it('matches the §6.3 example key', () => {
    expect(instanceKey('dynamo', 'backend', 'generate', ID)).toBe(
      'v1/instances/dynamo/backend/generate/694d8a1c2b3e4f07',
    );
  });

  it('writes ids in lowercase hex without padding', () => {
    expect(instanceKey('ns', 'c', 'e', 255n)).toBe('v1/instances/ns/c/e/ff');
    expect(mdcKey('ns', 'c', 'e', 2n ** 64n - 1n)).toBe('v1/mdc/ns/c/e/ffffffffffffffff');
    expect(mdcKey('ns', 'c', 'e', 1n, 'my-lora')).toBe('v1/mdc/ns/c/e/1/my-lora');
    expect(eventChannelKey('dynamo', 'backend', 'kv-events', ID)).toBe(
      'v1/event_channels/dynamo/backend/kv-events/694d8a1c2b3e4f07',
    );
  });

  it('builds watch prefixes that end at a level boundary', () => {
    expect(instancesPrefix()).toBe('v1/instances/');
    expect(instancesPrefix('dynamo', 'backend', 'generate')).toBe('v1/instances/dynamo/backend/generate/');
    expect(mdcPrefix('dynamo')).toBe('v1/mdc/dynamo/');
    expect(eventChannelsPrefix('dynamo', 'backend')).toBe('v1/event_channels/dynamo/backend/');
  });

  it('parses keys back, mdc suffixes included', () => {
    expect(parseDiscoveryKey('v1/instances/dynamo/backend/generate/694d8a1c2b3e4f07')).toEqual({
      kind: 'instances',
      namespace: 'dynamo',
      component: 'backend',
      endpoint: 'generate',
      instance_id: ID,
    });
    expect(parseDiscoveryKey('v1/mdc/ns/c/e/ff/lora/a')).toMatchObject({
      kind: 'mdc',
      instance_id: 255n,
      suffix: 'lora/a',
    });
    for (const bad of [
      'v1/instances/ns/c/e',
      'v1/instances/ns/c/e/XYZ',
      'v1/instances/ns/c/e/ff/extra',
      'v2/instances/a/b/c/1',
      'v1/other/a/b/c/1',
      'v1/mdc/ns/c/e/1/',
    ])
      expect(parseDiscoveryKey(bad)).toBeNull();
  });

  it('refuses segments that would shift levels, and ids outside u64', () => {
    expect(() => instanceKey('a/b', 'c', 'e', 1n)).toThrow(/namespace must not contain/);
    expect(() => instanceKey('a', '', 'e', 1n)).toThrow(/component must be a non-empty string/);
    expect(() => kvEventsSubject('a', 'b*')).toThrow(KvrError);
    expect(() => instanceKey('a', 'c', 'e', -1n)).toThrow(/instance_id must be a u64/);
    expect(() => instanceKey('a', 'c', 'e', 2n ** 64n)).toThrow(/instance_id must be a u64/);
  });
});

describe('JetStream names (§5.3)', () => {
  it('slugifies: lowercase, outside [a-z0-9_-] -> _, then _ -> -', () => {
    expect(slugify('namespace.dynamo.component.backend.kv-events')).toBe(
      'namespace-dynamo-component-backend-kv-events',
    );
    expect(slugify('My_NS.Comp/x y:é')).toBe('my-ns-comp-x-y--');
  });

  it('derives stream, subjects, bucket and consumer names', () => {
    const stream = jetStreamName('dynamo', 'backend');
    expect(stream).toBe('namespace-dynamo-component-backend-kv-events');
    expect(jetStreamSubjects(stream)).toBe('namespace-dynamo-component-backend-kv-events.*');
    expect(jetStreamPublishSubject(stream)).toBe('namespace-dynamo-component-backend-kv-events.kv-events');
    // slugify("namespace.dynamo.component.backend-radix-bucket")
    expect(radixBucketName('dynamo', 'backend')).toBe('namespace-dynamo-component-backend-radix-bucket');
    expect(durableConsumerName(ID)).toBe('694d8a1c2b3e4f07');
  });
});
