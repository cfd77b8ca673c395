import { describe, expect, it } from 'vitest';
import { TopologyConfigError } from './errors.js';
import {
  domainsFromEntries,
  loadTopology,
  parseTopologyEnv,
  type TopologyDirEntry,
  type TopologyIo,
} from './env.js';

const msg = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(TopologyConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a TopologyConfigError');
};

describe('worker env contract', () => {
  it('defaults: disabled, /etc/dynamo/topology, required', () => {
    const { settings, warnings } = parseTopologyEnv({});
    expect(settings).toEqual({
      enabled: false,
      mountPath: '/etc/dynamo/topology',
      domain: null,
      enforcement: 'required',
      preferredWeight: null,
    });
    expect(warnings).toEqual([]);
  });

  it('true/1/on/yes enable; unknown values warn and disable', () => {
    for (const v of ['true', '1', 'on', 'yes', 'YES'])
      expect(
        parseTopologyEnv({ DYN_TOPOLOGY_ENABLED: v, DYN_KV_TRANSFER_DOMAIN: 'zone' }).settings.enabled,
      ).toBe(true);
    const r = parseTopologyEnv({ DYN_TOPOLOGY_ENABLED: 'maybe' });
    expect(r.settings.enabled).toBe(false);
    expect(r.warnings[0]).toContain('maybe');
  });

  it("docs/configuration.md's worker-side messages", () => {
    expect(msg(() => parseTopologyEnv({ DYN_TOPOLOGY_ENABLED: 'true' }))).toBe(
      'DYN_TOPOLOGY_ENABLED is set but DYN_KV_TRANSFER_DOMAIN is not',
    );
    expect(msg(() => parseTopologyEnv({ DYN_KV_TRANSFER_ENFORCEMENT: 'soft' }))).toBe(
      'DYN_KV_TRANSFER_ENFORCEMENT must be required or preferred, got "soft"',
    );
    expect(msg(() => parseTopologyEnv({ DYN_KV_TRANSFER_PREFERRED_WEIGHT: 'abc' }))).toMatch(
      /^invalid DYN_KV_TRANSFER_PREFERRED_WEIGHT: /,
    );
    expect(msg(() => parseTopologyEnv({ DYN_KV_TRANSFER_PREFERRED_WEIGHT: '1.5' }))).toBe(
      'DYN_KV_TRANSFER_PREFERRED_WEIGHT must be between 0 and 1, got 1.5',
    );
    expect(
      msg(() =>
        parseTopologyEnv({
          DYN_TOPOLOGY_ENABLED: '1',
          DYN_KV_TRANSFER_DOMAIN: 'zone',
          DYN_KV_TRANSFER_ENFORCEMENT: 'preferred',
        }),
      ),
    ).toMatch(/DYN_KV_TRANSFER_PREFERRED_WEIGHT is not set/);
  });

  it('domain files: hidden, non-files and empty (after trim) are ignored', () => {
    const entries: TopologyDirEntry[] = [
      { name: 'zone', isFile: true, content: 'us-east-1a\n' },
      { name: '.hidden', isFile: true, content: 'x' },
      { name: 'rack', isFile: true, content: '  \n' },
      { name: 'sub', isFile: false, content: null },
      { name: 'gone', isFile: true, content: null },
      { name: 'row', isFile: true, content: ' r7 ' },
    ];
    expect(domainsFromEntries(entries)).toEqual({ row: 'r7', zone: 'us-east-1a' });
  });
});

/** A directory whose zone file appears at `appearAt` ms on a virtual clock. */
function fakeIo(appearAt: number | null): TopologyIo & { t: number; reads: number } {
  const io = {
    t: 0,
    reads: 0,
    readDir(): TopologyDirEntry[] {
      io.reads++;
      return appearAt !== null && io.t >= appearAt ? [{ name: 'zone', isFile: true, content: 'z1' }] : [];
    },
    now: () => io.t,
    sleep: (ms: number) => {
      io.t += ms;
      return Promise.resolve();
    },
  };
  return io;
}

describe('loadTopology (startup wait)', () => {
  const s = {
    enabled: true,
    mountPath: '/m',
    domain: 'zone',
    enforcement: 'preferred' as const,
    preferredWeight: 0.85,
  };

  it('polls every second until the transfer-domain file is populated', async () => {
    const io = fakeIo(2500);
    const f = await loadTopology(s, io);
    // reads at t = 0, 1000, 2000, 3000 → the fourth sees the file
    expect(io.reads).toBe(4);
    expect(f).toEqual({
      topology_domains: { zone: 'z1' },
      kv_transfer_domain: 'zone',
      kv_transfer_enforcement: 'preferred',
      kv_transfer_preferred_weight: 0.85,
    });
  });

  it('gives up after 30 s with the docs/configuration.md message', async () => {
    const io = fakeIo(null);
    await expect(loadTopology(s, io)).rejects.toThrow(
      'topology domain "zone" in /m was not populated within 30s',
    );
    // reads at 0, 1000, …, 30000
    expect(io.reads).toBe(31);
    expect(io.t).toBe(30_000);
  });

  it('disabled → null without reading', async () => {
    const io = fakeIo(0);
    expect(await loadTopology({ ...s, enabled: false }, io)).toBeNull();
    expect(io.reads).toBe(0);
  });
});
