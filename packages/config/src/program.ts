import { Command, Help, Option } from 'commander';
import { defaultLabel } from './docs.js';
import { GROUPS, flagsFor, negationOf, type App, type FlagSpec } from './table.js';

export interface ProgramInfo {
  name: string;
  description: string;
}

function describe(spec: FlagSpec): string {
  const extra = [
    spec.env?.length ? `env: ${spec.env.join(', ')}` : undefined,
    `default: ${defaultLabel(spec)}`,
  ];
  if (spec.type === 'enum') extra.push(`choices: ${spec.choices!.join(', ')}`);
  const dep = spec.deprecated ? `DEPRECATED (use ${spec.deprecated}). ` : '';
  return `${dep}${spec.help} (${extra.filter(Boolean).join('; ')})`;
}

function placeholder(spec: FlagSpec): string {
  if (spec.type === 'bool') return '';
  const names: Partial<Record<FlagSpec['type'], string>> = {
    enum: 'choice',
    dir: 'path',
    urlList: 'urls',
    u16List: 'ports',
  };
  return ` <${names[spec.type] ?? spec.type}>`;
}

/**
 * A commander program whose `--help` lists every option of `app`, grouped by docs/configuration.md section,
 * with env vars and defaults, followed by the env-only variables. It exists for help and shell
 * tooling; parsing goes through `resolveConfig` (see `parseAppConfig`), whose precedence,
 * `None`, preset and validation rules commander does not implement.
 */
export function buildProgram(app: App, info: ProgramInfo): Command {
  const program = new Command(info.name).description(info.description);
  program.helpOption('-h, --help', 'Show this help and exit.');
  const specs = flagsFor(app);
  for (const group of GROUPS) {
    for (const spec of specs) {
      if (spec.group !== group || !spec.flag) continue;
      const heading = `${group}:`;
      const names = spec.short ? `${spec.short}, ${spec.flag}` : spec.flag;
      program.addOption(new Option(names + placeholder(spec), describe(spec)).helpGroup(heading));
      if (spec.type === 'bool')
        program.addOption(new Option(negationOf(spec.flag), `Turn ${spec.flag} off.`).helpGroup(heading));
    }
  }
  for (const spec of specs) {
    if (!spec.flag) continue;
    for (const alias of spec.aliases ?? []) {
      const heading = 'Obsolete aliases (same meaning, warn):';
      program.addOption(
        new Option(alias + placeholder(spec), `Obsolete: use ${spec.flag}.`).helpGroup(heading),
      );
      if (spec.type === 'bool')
        program.addOption(
          new Option(negationOf(alias), `Obsolete: use ${negationOf(spec.flag)}.`).helpGroup(heading),
        );
    }
  }
  const envOnly = specs.filter((s) => !s.flag && s.env?.length);
  if (envOnly.length > 0) {
    const lines = ['', 'Environment variables without a flag:'];
    for (const group of GROUPS) {
      const rows = envOnly.filter((s) => s.group === group);
      if (rows.length === 0) continue;
      lines.push(`  ${group}:`);
      for (const s of rows)
        lines.push(`    ${s.env!.join(', ')}  ${describe(s).replace(/ \(env: [^;]*; /, ' (')}`);
    }
    lines.push('', 'Precedence: CLI > environment > default. `None` unsets nullable options.', '');
    const tail = lines.join('\n');
    // Part of formatHelp (not addHelpText) so that helpInformation() callers see it too.
    program.configureHelp({
      formatHelp: (cmd, helper) => Help.prototype.formatHelp.call(helper, cmd, helper) + tail,
    });
  }
  return program;
}
