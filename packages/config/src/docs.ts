import { formatFloat } from './resolve.js';
import { FLAGS, GROUPS, flagsFor, negationOf, type App, type FlagSpec } from './table.js';

const INT_TYPES = new Set(['u16', 'u32', 'u64']);

/** Default as shown in help and docs. */
export function defaultLabel(spec: FlagSpec): string {
  if (spec.defaultText) return spec.defaultText;
  const d = spec.default;
  if (d === null) return spec.required ? '— (required)' : '—';
  if (Array.isArray(d)) return d.length === 0 ? '—' : d.join(',');
  if (typeof d === 'number') return INT_TYPES.has(spec.type) ? String(d) : formatFloat(d);
  return String(d);
}

function bound(n: number, integer: boolean): string {
  return integer ? String(n) : formatFloat(n);
}

/** Type and range as in docs/configuration.md's "Type / range" column, derived from the row. */
export function typeLabel(spec: FlagSpec): string {
  if (spec.type === 'enum') return spec.choices!.join('|');
  const names: Record<string, string> = {
    urlList: 'comma-separated URLs',
    u16List: 'comma-separated u16',
    dir: 'directory',
    url: 'URL',
  };
  let s = names[spec.type] ?? spec.type;
  const r = spec.range;
  const integer = INT_TYPES.has(spec.type);
  if (r) {
    const lo = r.min !== undefined ? bound(r.min, integer) : undefined;
    const hi = r.max !== undefined ? bound(r.max, integer) : undefined;
    if (lo !== undefined && hi !== undefined)
      s +=
        r.minOpen || r.maxOpen
          ? ` ${r.minOpen ? '(' : '['}${lo}, ${hi}${r.maxOpen ? ')' : ']'}`
          : ` ${lo}..${hi}`;
    else if (lo !== undefined) s += r.minOpen ? ` > ${lo}` : ` ≥ ${lo}`;
    else if (hi !== undefined) s += r.maxOpen ? ` < ${hi}` : ` ≤ ${hi}`;
  }
  if (spec.pattern && spec.type === 'string') s += ` matching \`${spec.pattern.re}\``;
  if (spec.nullable) s += ', or `None`';
  return s;
}

/** Every CLI spelling of a row, canonical first: `--x`, `--no-x`, `-i`. */
export function flagForms(spec: FlagSpec): string[] {
  if (!spec.flag) return [];
  const out = [spec.flag];
  if (spec.type === 'bool') out.push(negationOf(spec.flag));
  if (spec.short) out.push(spec.short);
  return out;
}

const cell = (s: string) => s.replaceAll('|', '\\|');
const code = (s: string) => `\`${s}\``;

/** One `##` section per group (a table row per option); with `app`, that app's options only. */
export function renderFlagTables(app?: App): string {
  const rows: readonly FlagSpec[] = app ? flagsFor(app) : FLAGS;
  const out: string[] = [];
  for (const group of GROUPS) {
    const inGroup = rows.filter((r) => r.group === group);
    if (inGroup.length === 0) continue;
    out.push(`## ${group}`, '');
    out.push(`| Flag | Env var | Default | Type / range |${app ? '' : ' Apps |'} Meaning |`);
    out.push(`|---|---|---|---|${app ? '' : '---|'}---|`);
    for (const r of inGroup) {
      const forms = flagForms(r).map(code);
      const aliases = (r.aliases ?? []).map(code);
      const flag = forms.length
        ? forms.join(' / ') + (aliases.length ? ` (obsolete: ${aliases.join(', ')})` : '')
        : '—';
      const env = r.env?.length ? r.env.map(code).join(' (else ') + (r.env.length > 1 ? ')' : '') : '—';
      const meaning = r.deprecated ? `**Deprecated** (use ${r.deprecated}). ${r.help}` : r.help;
      const apps = app ? '' : ` ${r.apps.join(', ')} |`;
      out.push(
        `| ${cell(flag)} | ${cell(env)} | ${cell(code(defaultLabel(r)))} | ${cell(typeLabel(r))} |${apps} ${cell(meaning)} |`,
      );
    }
    out.push('');
  }
  return out.join('\n');
}

/** Markdown reference generated from the table: a title, then {@link renderFlagTables}. */
export function renderFlagsMarkdown(app?: App): string {
  return [
    `# kvrouter${app ? ` ${app}` : ''} — flags and environment variables`,
    '',
    'Generated from `packages/config/src/table.ts`; precedence CLI > env > default.',
    '',
    renderFlagTables(app),
  ].join('\n');
}

/** The line in `docs/configuration.md` after which everything is generated. */
export const GENERATED_MARKER =
  '<!-- Everything below is generated from packages/config/src/table.ts by `pnpm docs:gen`; do not edit it by hand. -->';

/**
 * `docs/configuration.md` from its current text: the hand-written part up to {@link GENERATED_MARKER} is kept,
 * the reference tables after it are generated (every row, with the apps that take it).
 */
export function renderConfigurationDoc(current: string): string {
  const at = current.indexOf(GENERATED_MARKER);
  if (at < 0) throw new Error(`docs/configuration.md has no generated-part marker line: ${GENERATED_MARKER}`);
  return `${current.slice(0, at)}${GENERATED_MARKER}\n\n${renderFlagTables()}`;
}
