/**
 * Router flags come from the one config table (`@kvrouter/config`), never from this tool: the
 * command line is split into the router's flags (resolved by `resolveConfig('router', …)` with its
 * precedence, `None`, presets and validation) and the tool's own options (parsed by commander).
 */
import {
  GROUPS,
  flagsFor,
  negationOf,
  resolveConfig,
  type FlagSpec,
  type Group,
  type ResolvedConfig,
} from '@kvrouter/config';
import { Option, type Command } from 'commander';

/** The table groups that configure routing; infrastructure (discovery, planes) means nothing here. */
const ROUTER_GROUPS: readonly Group[] = [
  'Routing',
  'Routing — further router options',
  'AIC prefill load model',
  'Fault tolerance',
  'Model discovery',
  'Deprecated',
];

export function routerSpecs(): FlagSpec[] {
  return flagsFor('router').filter((s) => s.flag !== undefined && ROUTER_GROUPS.includes(s.group));
}

/** Every CLI spelling of a router flag -> whether it consumes the next argument. */
function spellings(): Map<string, boolean> {
  const m = new Map<string, boolean>();
  for (const s of routerSpecs()) {
    const takes = s.type !== 'bool';
    for (const f of [s.flag!, ...(s.short ? [s.short] : []), ...(s.aliases ?? [])]) {
      m.set(f, takes);
      if (!takes && f.startsWith('--')) m.set(negationOf(f), false);
    }
  }
  return m;
}

export interface SplitArgs {
  router: string[];
  rest: string[];
}

/** Moves router flags (and their values) out of `argv`; everything else stays in order. */
export function splitRouterArgs(argv: readonly string[]): SplitArgs {
  const known = spellings();
  const router: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      rest.push(...argv.slice(i));
      break;
    }
    const name = a.startsWith('--') ? a.split('=', 1)[0]! : a;
    const takes = known.get(name);
    if (takes === undefined) {
      rest.push(a);
      continue;
    }
    router.push(a);
    if (takes && !a.includes('=') && i + 1 < argv.length) router.push(argv[++i]!);
  }
  return { router, rest };
}

export interface RouterResolution {
  config: ResolvedConfig<'router'>;
  warnings: readonly string[];
}

/** Resolves the router flags (CLI > environment > default) exactly as the standalone router would. */
export function resolveRouter(
  argv: readonly string[],
  env: Record<string, string | undefined>,
): RouterResolution {
  const r = resolveConfig('router', argv, env);
  return { config: r.config, warnings: r.warnings };
}

/** Adds the router flags to a command's help only (parsing goes through `splitRouterArgs`). */
export function addRouterHelp(cmd: Command): Command {
  for (const group of GROUPS) {
    for (const s of routerSpecs()) {
      if (s.group !== group) continue;
      const arg = s.type === 'bool' ? '' : s.type === 'enum' ? ' <choice>' : ` <${s.type}>`;
      const env = s.env?.length ? ` (env ${s.env.join(', ')})` : '';
      const choices = s.choices ? ` [${s.choices.join('|')}]` : '';
      const heading = `Router (${group}):`;
      cmd.addOption(new Option(`${s.flag}${arg}`, `${s.help}${choices}${env}`).helpGroup(heading));
      if (s.type === 'bool')
        cmd.addOption(new Option(negationOf(s.flag!), `Turn ${s.flag} off.`).helpGroup(heading));
    }
  }
  return cmd;
}
