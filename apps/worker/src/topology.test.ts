import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import { WorkerConfigError } from './options.js';
import { topologyRuntimeConfig } from './topology.js';

const isDirectory = () => true;

describe('worker topology (DYN_TOPOLOGY_*)', () => {
  it('domain files become the card runtime_config topology fields', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvr-topo-'));
    writeFileSync(join(dir, 'rack'), 'r7\n');
    writeFileSync(join(dir, 'zone'), 'z1');
    const { config } = resolveConfig(
      'worker',
      [],
      { DYN_TOPOLOGY_ENABLED: 'true', DYN_TOPOLOGY_MOUNT_PATH: dir, DYN_KV_TRANSFER_DOMAIN: 'rack' },
      { isDirectory },
    );
    expect(await topologyRuntimeConfig(config)).toMatchObject({
      topology_domains: { rack: 'r7', zone: 'z1' },
      kv_transfer_domain: 'rack',
      kv_transfer_enforcement: 'required',
    });
  });

  it('disabled: nothing; a bad setting is a configuration error naming the variable', async () => {
    expect(await topologyRuntimeConfig(resolveConfig('worker', [], {}).config)).toEqual({});
    const dir = mkdtempSync(join(tmpdir(), 'kvr-topo-'));
    const { config } = resolveConfig(
      'worker',
      [],
      {
        DYN_TOPOLOGY_ENABLED: 'true',
        DYN_TOPOLOGY_MOUNT_PATH: dir,
        DYN_KV_TRANSFER_DOMAIN: 'rack',
        DYN_KV_TRANSFER_ENFORCEMENT: 'preferred',
      },
      { isDirectory },
    );
    await expect(topologyRuntimeConfig(config)).rejects.toBeInstanceOf(WorkerConfigError);
  });
});
