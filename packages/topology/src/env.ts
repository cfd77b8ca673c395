/**
 * The worker environment contract (PROTOCOL §13, docs/configuration.md "Topology-aware KV transfer"): settings
 * from `DYN_TOPOLOGY_*` / `DYN_KV_TRANSFER_*`, domains from the mount directory's files, and the
 * startup wait for the transfer domain's file. Pure: the directory listing, the clock and the sleep
 * are injected (`TopologyIo`), so the worker app supplies `node:fs` and timers.
 */
import { TopologyConfigError } from './errors.js';

export type Enforcement = 'required' | 'preferred';

export interface TopologySettings {
  enabled: boolean;
  mountPath: string;
  /** `DYN_KV_TRANSFER_DOMAIN`: the domain (file name) used for prefill → decode constraints. */
  domain: string | null;
  enforcement: Enforcement;
  /** 0..1; required when `enforcement` is `preferred`. */
  preferredWeight: number | null;
}

export const DEFAULT_TOPOLOGY_MOUNT_PATH = '/etc/dynamo/topology';
/** How long a worker waits for its transfer domain's file, and how often it looks (§13). */
export const TOPOLOGY_WAIT_MS = 30_000;
export const TOPOLOGY_POLL_MS = 1_000;

const TRUE = new Set(['true', '1', 'on', 'yes']);
const FALSE = new Set(['false', '0', 'off', 'no', '']);

/**
 * Reads the contract from an environment. Unknown `DYN_TOPOLOGY_ENABLED` values disable topology
 * with a warning (docs/configuration.md); every other problem throws `TopologyConfigError` with docs/configuration.md's message.
 */
export function parseTopologyEnv(env: Readonly<Record<string, string | undefined>>): {
  settings: TopologySettings;
  warnings: string[];
} {
  const warnings: string[] = [];
  const rawEnabled = (env.DYN_TOPOLOGY_ENABLED ?? '').trim().toLowerCase();
  let enabled = TRUE.has(rawEnabled);
  if (!enabled && !FALSE.has(rawEnabled)) {
    warnings.push(`DYN_TOPOLOGY_ENABLED: unknown value "${env.DYN_TOPOLOGY_ENABLED}"; topology disabled`);
    enabled = false;
  }
  const mountPath = env.DYN_TOPOLOGY_MOUNT_PATH?.trim() || DEFAULT_TOPOLOGY_MOUNT_PATH;
  const domain = env.DYN_KV_TRANSFER_DOMAIN?.trim() || null;
  const rawEnf = env.DYN_KV_TRANSFER_ENFORCEMENT?.trim();
  let enforcement: Enforcement = 'required';
  if (rawEnf !== undefined && rawEnf !== '') {
    if (rawEnf !== 'required' && rawEnf !== 'preferred')
      throw new TopologyConfigError(
        `DYN_KV_TRANSFER_ENFORCEMENT must be required or preferred, got "${rawEnf}"`,
        'DYN_KV_TRANSFER_ENFORCEMENT',
      );
    enforcement = rawEnf;
  }
  let preferredWeight: number | null = null;
  const rawW = env.DYN_KV_TRANSFER_PREFERRED_WEIGHT?.trim();
  if (rawW !== undefined && rawW !== '') {
    const w = Number(rawW);
    if (!Number.isFinite(w))
      throw new TopologyConfigError(
        `invalid DYN_KV_TRANSFER_PREFERRED_WEIGHT: "${rawW}" is not a finite number`,
        'DYN_KV_TRANSFER_PREFERRED_WEIGHT',
      );
    if (w < 0 || w > 1)
      throw new TopologyConfigError(
        `DYN_KV_TRANSFER_PREFERRED_WEIGHT must be between 0 and 1, got ${rawW}`,
        'DYN_KV_TRANSFER_PREFERRED_WEIGHT',
      );
    preferredWeight = w;
  }
  const settings = { enabled, mountPath, domain, enforcement, preferredWeight };
  checkTopologySettings(settings);
  return { settings, warnings };
}

/** Cross-field rules, also applied to settings resolved elsewhere (the config table). */
export function checkTopologySettings(s: TopologySettings): void {
  if (!s.enabled) return;
  if (s.domain === null)
    throw new TopologyConfigError(
      'DYN_TOPOLOGY_ENABLED is set but DYN_KV_TRANSFER_DOMAIN is not',
      'DYN_KV_TRANSFER_DOMAIN',
    );
  if (s.enforcement === 'preferred' && s.preferredWeight === null)
    // docs/configuration.md has no message for this case; the wording follows the "enabled, no domain" one.
    throw new TopologyConfigError(
      'DYN_KV_TRANSFER_ENFORCEMENT is preferred but DYN_KV_TRANSFER_PREFERRED_WEIGHT is not set',
      'DYN_KV_TRANSFER_PREFERRED_WEIGHT',
    );
}

/** One entry of the mount directory. `content` null = unreadable (vanished between listing and reading). */
export interface TopologyDirEntry {
  name: string;
  isFile: boolean;
  content: string | null;
}

/** Each non-hidden regular file with non-empty trimmed content is one domain (name = domain, content = value). */
export function domainsFromEntries(entries: readonly TopologyDirEntry[]): Record<string, string> {
  const out: Record<string, string> = {};
  const sorted = [...entries].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of sorted) {
    if (e.name.startsWith('.') || !e.isFile || e.content === null) continue;
    const v = e.content.trim();
    if (v.length > 0) out[e.name] = v;
  }
  return out;
}

/** The runtime_config fields of the contract (§6.4). */
export interface TopologyRuntimeFields {
  topology_domains: Record<string, string>;
  kv_transfer_domain: string | null;
  kv_transfer_enforcement: Enforcement | null;
  kv_transfer_preferred_weight: number | null;
}

export function topologyRuntimeFields(
  s: TopologySettings,
  domains: Record<string, string>,
): TopologyRuntimeFields {
  return {
    topology_domains: { ...domains },
    kv_transfer_domain: s.domain,
    kv_transfer_enforcement: s.domain === null ? null : s.enforcement,
    kv_transfer_preferred_weight: s.enforcement === 'preferred' ? s.preferredWeight : null,
  };
}

export interface TopologyIo {
  /** Entries of a directory; null when it does not exist (yet). */
  readDir(path: string): readonly TopologyDirEntry[] | null;
  now(): number;
  sleep(ms: number): Promise<void>;
}

/**
 * Startup: with topology enabled, polls the mount directory until the transfer domain's file is
 * present and non-empty, then returns the runtime_config fields; after `waitMs` throws docs/configuration.md's
 * message (the worker exits). Disabled → null (publish nothing).
 */
export async function loadTopology(
  s: TopologySettings,
  io: TopologyIo,
  opts: { waitMs?: number; pollMs?: number } = {},
): Promise<TopologyRuntimeFields | null> {
  if (!s.enabled) return null;
  checkTopologySettings(s);
  const domain = s.domain!;
  const waitMs = opts.waitMs ?? TOPOLOGY_WAIT_MS;
  const pollMs = opts.pollMs ?? TOPOLOGY_POLL_MS;
  const deadline = io.now() + waitMs;
  for (;;) {
    const domains = domainsFromEntries(io.readDir(s.mountPath) ?? []);
    if (domains[domain] !== undefined) return topologyRuntimeFields(s, domains);
    if (io.now() >= deadline)
      throw new TopologyConfigError(
        `topology domain "${domain}" in ${s.mountPath} was not populated within ${Math.round(waitMs / 1000)}s`,
        'DYN_KV_TRANSFER_DOMAIN',
      );
    await io.sleep(Math.max(0, Math.min(pollMs, deadline - io.now())));
  }
}
