import { KvrError } from '@kvrouter/protocols';
import { describe, expect, it } from 'vitest';
import { Closers } from './lifecycle.js';
import { runMain, type MainProcess, type MainSpec } from './main.js';

/** A process whose exits, output and signal handlers are recorded. */
function fakeProcess() {
  const handlers = new Map<string, () => void>();
  const p = {
    exits: [] as number[],
    out: '',
    err: '',
    on: (sig: string, f: () => void) => void handlers.set(sig, f),
    exit: (code: number) => void p.exits.push(code),
    stdout: { write: (s: string) => void (p.out += s) },
    stderr: { write: (s: string) => void (p.err += s) },
    signal: (sig: 'SIGINT' | 'SIGTERM') => handlers.get(sig)!(),
  };
  return p;
}

const tick = () => new Promise((r) => setImmediate(r));

function service(stop: () => Promise<void> = () => Promise.resolve()) {
  const calls: string[] = [];
  const spec = (proc: MainProcess): MainSpec<{ id: string }> => ({
    start: () => Promise.resolve({ id: '42' }),
    ready: (s) => ({ router_id: s.id }),
    onSignal: (sig) => void calls.push(`signal ${sig}`),
    stop: () => {
      calls.push('stop');
      return stop();
    },
    process: proc,
  });
  return { calls, spec };
}

describe('runMain', () => {
  it('prints one ready line, then stops on the first signal and exits 0', async () => {
    const p = fakeProcess();
    const { calls, spec } = service();
    expect(await runMain(spec(p))).toEqual({ id: '42' });
    expect(p.out).toBe('{"router_id":"42"}\n');
    p.signal('SIGTERM');
    await tick();
    expect(calls).toEqual(['signal SIGTERM', 'stop']);
    expect(p.exits).toEqual([0]);
  });

  it('a second signal during shutdown exits 130 at once', async () => {
    const p = fakeProcess();
    const { calls, spec } = service(() => new Promise(() => undefined)); // never finishes
    await runMain(spec(p));
    p.signal('SIGINT');
    p.signal('SIGINT');
    await tick();
    expect(calls).toEqual(['signal SIGINT', 'stop']);
    expect(p.exits).toEqual([130]);
  });

  it('startup failures: 2 for configuration errors, 1 for everything else', async () => {
    const cases: [Error, number, string][] = [
      [new KvrError('config_error', '--router-mode: bad', 400), 2, 'error: --router-mode: bad\n'],
      [
        new KvrError('not_supported', '--use-remote-indexer: no', 400),
        2,
        'error: --use-remote-indexer: no\n',
      ],
      [new KvrError('cannot_connect', 'NATS at x: refused', 503), 1, 'error: NATS at x: refused\n'],
      [new Error('boom'), 1, 'error: boom\n'],
    ];
    for (const [e, code, line] of cases) {
      const p = fakeProcess();
      const r = await runMain({ start: () => Promise.reject(e), stop: () => Promise.resolve(), process: p });
      expect(r).toBeNull();
      expect(p.exits).toEqual([code]);
      expect(p.err).toBe(line);
      expect(p.out).toBe('');
    }
  });

  it('exitCode and errorText override the defaults', async () => {
    const p = fakeProcess();
    await runMain({
      start: () => Promise.reject(new KvrError('engine_unavailable', 'no engine', 503)),
      stop: () => Promise.resolve(),
      exitCode: () => 7,
      errorText: (e) => `error: ${(e as KvrError).code}: ${(e as Error).message}`,
      process: p,
    });
    expect(p.exits).toEqual([7]);
    expect(p.err).toBe('error: engine_unavailable: no engine\n');
  });

  it('a failed shutdown exits 1 and says why', async () => {
    const p = fakeProcess();
    const { spec } = service(() => Promise.reject(new Error('lease revoke failed')));
    await runMain(spec(p));
    p.signal('SIGTERM');
    await tick();
    expect(p.exits).toEqual([1]);
    expect(p.err).toBe('shutdown failed: lease revoke failed\n');
  });

  it('run(): a returned code stops the service and exits with it; no ready line when it returns null', async () => {
    const p = fakeProcess();
    const stops: string[] = [];
    await runMain({
      start: () => Promise.resolve('svc'),
      ready: () => null,
      run: () => Promise.resolve(0),
      stop: (s) => Promise.resolve(void stops.push(s)),
      process: p,
    });
    expect(stops).toEqual(['svc']);
    expect(p.exits).toEqual([0]);
    expect(p.out).toBe('');
  });
});

describe('Closers', () => {
  it('undoes in reverse order; a failing closer does not stop the rest', async () => {
    const c = new Closers();
    const done: number[] = [];
    const errors: string[] = [];
    c.push(() => done.push(1));
    c.push(() => {
      throw new Error('two');
    });
    c.push(
      async () => void done.push(3),
      () => done.push(4),
    );
    expect(c.size).toBe(4);
    await c.close((e) => void errors.push((e as Error).message));
    expect(done).toEqual([4, 3, 1]);
    expect(errors).toEqual(['two']);
    // Each closer runs once.
    await c.close();
    expect(done).toEqual([4, 3, 1]);
  });
});
