import { describe, expect, it } from 'vitest';
import { KvrError } from '../errors.js';
import { formatEndpoint, parseEndpoint } from './endpoint.js';
import { defaultEventPlane } from './event-plane.js';

function thrown(f: () => unknown): KvrError {
  try {
    f();
  } catch (e) {
    return e as KvrError;
  }
  throw new Error('did not throw');
}

describe('parseEndpoint (dyn://)', () => {
  it('splits namespace.component.endpoint; a dotted namespace stays whole', () => {
    expect(parseEndpoint('dyn://dynamo.backend.generate')).toEqual({
      namespace: 'dynamo',
      component: 'backend',
      endpoint: 'generate',
    });
    expect(parseEndpoint('dyn://team.a.mocker.gen')).toEqual({
      namespace: 'team.a',
      component: 'mocker',
      endpoint: 'gen',
    });
    expect(parseEndpoint('x.y.b.c', { allowBare: true })).toEqual({
      namespace: 'x.y',
      component: 'b',
      endpoint: 'c',
    });
    expect(formatEndpoint({ namespace: 'team.a', component: 'mocker', endpoint: 'gen' })).toBe(
      'dyn://team.a.mocker.gen',
    );
  });

  it('refuses malformed paths with invalid_argument naming the field', () => {
    const bad = [
      'dynamo.backend.generate',
      'dyn://a.b',
      'dyn://a..c',
      'dyn://a b.c.d',
      'http://a.b.c',
      'dyn://a.b.c>',
      '',
    ];
    for (const uri of bad) {
      const e = thrown(() => parseEndpoint(uri));
      expect(e, uri).toBeInstanceOf(KvrError);
      expect(e.code).toBe('invalid_argument');
      expect(e.status).toBe(400);
      expect(e.detail).toEqual({ field: '--endpoint' });
      expect(e.message).toBe(
        `--endpoint must look like dyn://namespace.component.endpoint, got ${JSON.stringify(uri)}`,
      );
    }
    expect(thrown(() => parseEndpoint('a.b', { allowBare: true, field: 'endpoint' })).detail).toEqual({
      field: 'endpoint',
    });
    // A CLI's own config error: same message, the caller's error type.
    const fail = (message: string, flag: string): never => {
      throw new KvrError('config_error', message, 400, { flag });
    };
    const c = thrown(() => parseEndpoint('dyn://a.b', { fail }));
    expect([c.code, c.message, c.detail]).toEqual([
      'config_error',
      '--endpoint must look like dyn://namespace.component.endpoint, got "dyn://a.b"',
      { flag: '--endpoint' },
    ]);
    expect(thrown(() => parseEndpoint(42 as unknown as string)).message).toBe(
      '--endpoint must look like dyn://namespace.component.endpoint, got 42',
    );
  });
});

describe('defaultEventPlane (--event-plane auto)', () => {
  it('zmq for mem/file discovery, nats for etcd/kubernetes (docs/configuration.md)', () => {
    expect(defaultEventPlane('mem')).toBe('zmq');
    expect(defaultEventPlane('file')).toBe('zmq');
    expect(defaultEventPlane('etcd')).toBe('nats');
    expect(defaultEventPlane('kubernetes')).toBe('nats');
  });
});
