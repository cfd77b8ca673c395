/**
 * `dyn://{namespace}.{component}.{endpoint}` endpoint paths (PROTOCOL §5.7, `--endpoint`). The
 * namespace may itself contain dots (upstream allows dotted namespaces), so the last two segments
 * are the component and the endpoint.
 */
import { invalidArgument } from '../errors.js';

export interface EndpointPath {
  namespace: string;
  component: string;
  endpoint: string;
}

export interface ParseEndpointOptions {
  /** Named in the error; default `--endpoint`. */
  field?: string;
  /** Also accept the bare `namespace.component.endpoint` form (the standalone router does, as upstream). */
  allowBare?: boolean;
  /** How a malformed path fails (CLIs pass their config-error thrower); default: throw `invalidArgument`. */
  fail?: (message: string, field: string) => never;
}

const SCHEME = 'dyn://';

/** Parses an endpoint path; a malformed one fails naming `field` (`invalid_argument` unless `fail` says otherwise). */
export function parseEndpoint(uri: string, o: ParseEndpointOptions = {}): EndpointPath {
  const field = o.field ?? '--endpoint';
  const hasScheme = typeof uri === 'string' && uri.startsWith(SCHEME);
  const body =
    typeof uri !== 'string' ? null : hasScheme ? uri.slice(SCHEME.length) : o.allowBare ? uri : null;
  const parts = body === null ? [] : body.split('.');
  if (parts.length < 3 || parts.some((p) => p.length === 0 || /[/\s*>]/.test(p))) {
    const e = invalidArgument(field, `must look like ${SCHEME}namespace.component.endpoint`, uri);
    if (o.fail) o.fail(e.message, field);
    throw e;
  }
  const endpoint = parts.pop()!;
  const component = parts.pop()!;
  return { namespace: parts.join('.'), component, endpoint };
}

/** `dyn://namespace.component.endpoint`. */
export function formatEndpoint(p: EndpointPath): string {
  return `${SCHEME}${p.namespace}.${p.component}.${p.endpoint}`;
}
