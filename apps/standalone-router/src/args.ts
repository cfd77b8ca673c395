/**
 * The one flag of the standalone router that is not in the shared config table: `--endpoint`, the
 * worker endpoint it routes for (upstream `python -m dynamo.router --endpoint ns.component.endpoint`).
 * It is taken out of argv here; the rest goes to `parseAppConfig('router', ...)`. Pure.
 */
import { KvrError, parseEndpoint } from '@kvrouter/protocols';
import type { GroupPath } from '@kvrouter/router-host';

/** `dyn://namespace.component.endpoint`: the one worker group this router serves. */
export type EndpointPath = GroupPath;

export const ENDPOINT_HELP =
  '  --endpoint <dyn://ns.component.endpoint>  (required) worker endpoint to route for; "ns.component.endpoint" also accepted;\n' +
  '                                            a dotted namespace is allowed (the last two segments are component and endpoint)\n' +
  '  (this router uses --router-mode kv unless --router-mode or DYN_ROUTER_MODE says otherwise)\n';

export class ArgsError extends KvrError {
  constructor(message: string) {
    super('config_error', message, 400, { flag: '--endpoint' });
    this.name = 'ArgsError';
  }
}

/** The kernel's `dyn://` parser; the bare `ns.component.endpoint` form is accepted too, as upstream. */
export function parseEndpointPath(uri: string): EndpointPath {
  return parseEndpoint(uri, {
    allowBare: true,
    fail: (message) => {
      throw new ArgsError(message);
    },
  });
}

/** Splits `--endpoint X` / `--endpoint=X` (last one wins) from the other arguments. */
export function splitEndpointArg(argv: readonly string[]): { endpoint: EndpointPath | null; rest: string[] } {
  const rest: string[] = [];
  let value: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--endpoint') {
      const v = argv[i + 1];
      if (v === undefined || v.startsWith('--'))
        throw new ArgsError('argument --endpoint: expected one argument');
      value = v;
      i++;
    } else if (a.startsWith('--endpoint=')) value = a.slice('--endpoint='.length);
    else rest.push(a);
  }
  return { endpoint: value === null ? null : parseEndpointPath(value), rest };
}
