import { describe, expect, it } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import { parseEndpoint } from '@kvrouter/protocols';
import { WorkerConfigError, planFromConfig } from './options.js';

const plan = (...argv: string[]) => planFromConfig(resolveConfig('worker', argv, {}).config);

function errorOf(f: () => unknown): WorkerConfigError {
  try {
    f();
  } catch (e) {
    if (e instanceof WorkerConfigError) return e;
    throw e;
  }
  throw new Error('no error');
}

describe('worker options', () => {
  it('defaults: vLLM on :8000, block size 16, dyn://dynamo.backend.generate, no KV events (warned)', () => {
    const p = plan();
    expect(p).toMatchObject({
      engineUrl: 'http://127.0.0.1:8000',
      blockSize: 16,
      namespace: 'dynamo',
      component: 'backend',
      endpoint: 'generate',
      modelName: null,
      dataParallelSize: 1,
      kvEventEndpoints: [],
      replayEndpoints: [],
      requestPlane: 'tcp',
      eventPlane: 'zmq',
    });
    expect(p.warnings.some((w) => w.startsWith('no --kv-events-endpoint'))).toBe(true);
  });

  it('rank r reads the engine ports + r (vLLM offsets its KV event port by dp rank)', () => {
    const p = plan(
      '--data-parallel-size',
      '3',
      '--kv-events-endpoint',
      'tcp://10.0.0.5:5557',
      '--kv-events-replay-endpoint',
      'tcp://10.0.0.5:5600',
    );
    expect(p.kvEventEndpoints).toEqual(['tcp://10.0.0.5:5557', 'tcp://10.0.0.5:5558', 'tcp://10.0.0.5:5559']);
    expect(p.replayEndpoints).toEqual(['tcp://10.0.0.5:5600', 'tcp://10.0.0.5:5601', 'tcp://10.0.0.5:5602']);
  });

  it('etcd discovery picks the nats event plane; a dotted namespace is allowed', () => {
    expect(plan('--discovery-backend', 'etcd').eventPlane).toBe('nats');
    expect(parseEndpoint('dyn://team.a.backend.generate')).toEqual({
      namespace: 'team.a',
      component: 'backend',
      endpoint: 'generate',
    });
  });

  it('ZMQ broker mode: the URL wins over discovery; a bad URL is a configuration error', () => {
    const env = (e: Record<string, string>) =>
      planFromConfig(resolveConfig('worker', [], e).config).zmqBroker;
    expect(env({})).toBeNull();
    expect(env({ DYN_ZMQ_BROKER_ENABLED: 'true' })).toBe('discovery');
    expect(
      env({
        DYN_ZMQ_BROKER_ENABLED: 'true',
        DYN_ZMQ_BROKER_URL: 'xsub=tcp://b:5555;tcp://c:5555 , xpub=tcp://b:5556',
      }),
    ).toEqual({
      xsub: ['tcp://b:5555', 'tcp://c:5555'],
      xpub: ['tcp://b:5556'],
    });
    const e = errorOf(() => env({ DYN_ZMQ_BROKER_URL: 'tcp://b:5555' }));
    expect(e.detail).toEqual({ flag: 'DYN_ZMQ_BROKER_URL' });
    expect(e.message).toMatch(/xsub=<urls> , xpub=<urls>/);
  });

  it('refusals name the flag', () => {
    expect(errorOf(() => plan('--kv-events-replay-endpoint', 'tcp://h:5600')).detail).toEqual({
      flag: '--kv-events-replay-endpoint',
    });
    // 65535 + 1 rank beyond it does not fit.
    expect(
      errorOf(() => plan('--data-parallel-size', '2', '--kv-events-endpoint', 'tcp://h:65535')).message,
    ).toBe('--kv-events-endpoint must be tcp://host:port with room for 2 rank port(s), got tcp://h:65535');
    expect(errorOf(() => plan('--endpoint', 'dyn://backend.generate')).detail).toEqual({
      flag: '--endpoint',
    });
    expect(() => resolveConfig('worker', ['--kv-events-endpoint', 'localhost:5557'], {})).toThrow(
      '--kv-events-endpoint must look like tcp://host:port, got localhost:5557',
    );
  });
});

describe('--model-type', () => {
  it('chat by default; embedding for a pooling model; anything else is refused naming the values', () => {
    expect(plan().modelType).toBe('chat');
    expect(plan('--model-type', 'embedding').modelType).toBe('embedding');
    expect(() => plan('--model-type', 'images')).toThrow(/--model-type.*chat.*embedding/s);
  });
});
