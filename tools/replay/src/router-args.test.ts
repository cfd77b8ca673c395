import { describe, expect, it } from 'vitest';
import { resolveRouter, routerSpecs, splitRouterArgs } from './router-args.js';

describe('splitRouterArgs', () => {
  it('moves router flags with their values and keeps the rest in order', () => {
    const s = splitRouterArgs([
      'trace.jsonl',
      '--router-mode',
      'kv',
      '--num-workers',
      '8',
      '--no-router-kv-events',
      '--router-predicted-ttl-secs=5',
      '--kv-overlap-score-weight', // obsolete alias, takes a value
      '2',
      '--seed',
      '3',
      '--router-queue-threshold',
      'None',
    ]);
    expect(s.router).toEqual([
      '--router-mode',
      'kv',
      '--no-router-kv-events',
      '--router-predicted-ttl-secs=5',
      '--kv-overlap-score-weight',
      '2',
      '--router-queue-threshold',
      'None',
    ]);
    expect(s.rest).toEqual(['trace.jsonl', '--num-workers', '8', '--seed', '3']);
  });

  it('leaves everything after -- alone and ignores infrastructure flags', () => {
    expect(splitRouterArgs(['--discovery-backend', 'etcd', '--', '--router-mode', 'kv'])).toEqual({
      router: [],
      rest: ['--discovery-backend', 'etcd', '--', '--router-mode', 'kv'],
    });
  });

  it('covers every routing flag of the config table', () => {
    const flags = routerSpecs().map((s) => s.flag);
    for (const f of [
      '--router-mode',
      '--router-kv-overlap-score-credit',
      '--router-predicted-ttl-secs',
      '--router-queue-policy',
      '--admission-control',
      '--kv-cache-block-size',
      '--load-aware',
    ]) {
      expect(flags).toContain(f);
    }
    expect(flags).not.toContain('--discovery-backend');
  });
});

describe('resolveRouter', () => {
  it('uses the config resolver: CLI over env, presets, validation messages', () => {
    const r = resolveRouter(['--router-mode', 'kv'], {
      DYN_ROUTER_MODE: 'random',
      DYN_ROUTER_TEMPERATURE: '0.5',
    });
    expect(r.config.routerMode).toBe('kv');
    expect(r.config.routerTemperature).toBe(0.5);
    expect(resolveRouter(['--load-aware'], {}).config.routerMode).toBe('kv');
    expect(() => resolveRouter(['--router-temperature', '-1'], {})).toThrow(
      /--router-temperature must be >= 0/,
    );
  });
});
