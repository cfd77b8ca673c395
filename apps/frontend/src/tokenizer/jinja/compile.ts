/**
 * A compiler from @huggingface/jinja's parsed template (`new Template(src).parsed`) to JS closures
 * over plain JS values (strings, numbers, booleans, arrays, objects, null/undefined): the same
 * output as the library's `Interpreter` without its per-node RuntimeValue allocations.
 *
 * Exactness rules (the interpreter, @huggingface/jinja 0.5.11, is the specification):
 * - a construct this compiler does not mirror (unknown node, filter, test, operator, float
 *   literal, `caller`/`kwargs`/`varargs`, call/filter blocks, spreads) throws `Unsupported` at
 *   COMPILE time: the caller then renders that template with the interpreter;
 * - at run time every operation implements exactly the type combinations on which the
 *   interpreter succeeds and throws on every other one (`Bail`); the caller re-renders such a
 *   request with the interpreter, which then yields its own output or its own error. A thrown
 *   render therefore never needs to match the interpreter's message, only a successful one.
 * - value mapping: number → IntegerValue when `Number.isInteger`, else FloatValue (arithmetic
 *   that could produce an integral float bails); arrays made by tuple literals are tagged
 *   (TupleValue); `namespace()` is a `Ns` (a Map, as NamespaceValue); template functions are `Fn`.
 */

/** A template construct the compiler does not mirror (the template falls back to the interpreter). */
export class Unsupported extends Error {}
/** A run-time case outside what the compiler mirrors exactly (the request falls back). */
class Bail extends Error {}

const bail = (what: string): never => {
  throw new Bail(what);
};

type Kw = Map<string, unknown> | null;
/** A callable value (FunctionValue): a macro, a global, a bound builtin. */
class Fn {
  constructor(readonly call: (args: unknown[], kw: Kw, scope: Scope) => unknown) {}
}
/** `namespace(...)` (NamespaceValue). */
class Ns {
  constructor(readonly v: Map<string, unknown>) {}
}
const TUPLES = new WeakSet<unknown[]>();

class Scope {
  readonly v = new Map<string, unknown>();
  constructor(readonly p: Scope | null) {}
  get(name: string): unknown {
    if (this.v.has(name)) return this.v.get(name);
    for (let s = this.p; s; s = s.p) if (s.v.has(name)) return s.v.get(name);
    return undefined;
  }
}

/** A node of @huggingface/jinja's AST (the fields the compiler reads). */
interface N {
  readonly type: string;
  readonly value?: unknown;
  readonly body?: N[];
  readonly alternate?: N[];
  readonly defaultBlock?: N[];
  readonly test?: N;
  readonly iterable?: N;
  readonly loopvar?: N;
  readonly assignee?: N;
  readonly name?: N;
  readonly args?: N[];
  readonly key?: N;
  readonly object?: N;
  readonly property?: N;
  readonly computed?: boolean;
  readonly callee?: N;
  readonly operator?: N;
  readonly left?: N;
  readonly right?: N;
  readonly argument?: N;
  readonly operand?: N;
  readonly filter?: N;
  readonly negate?: boolean;
  readonly lhs?: N;
  readonly condition?: N;
  readonly trueExpr?: N;
  readonly falseExpr?: N;
  readonly start?: N;
  readonly stop?: N;
  readonly step?: N;
}
type Expr = (s: Scope) => unknown;
/** A statement: appends its output to `o` (pieces in order, never empty strings). */
type Stmt = (s: Scope, o: string[]) => void;
const NOOP: Stmt = () => undefined;
/** A statement's output as one string (a `{% set %}` block's value, a macro's result). */
const textOf =
  (body: Stmt): Expr =>
  (s) => {
    const o: string[] = [];
    body(s, o);
    return o.length === 1 ? o[0]! : o.join('');
  };

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Ns) && !(v instanceof Fn);
const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);
/** An attribute container (ObjectValue or NamespaceValue). */
const isContainer = (v: unknown): boolean => isObj(v) || v instanceof Ns;
const isTuple = (v: unknown): boolean => Array.isArray(v) && TUPLES.has(v);

/** Python truthiness as the interpreter's `__bool__`. */
function truthy(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Ns || v instanceof Fn) return true;
  if (typeof v === 'object' && v !== null) {
    for (const k in v) if (Object.hasOwn(v, k)) return true;
    return false;
  }
  return !!v;
}

/** The interpreter's `toJSON`. */
function toJSON(
  input: unknown,
  o: {
    indent?: number | null;
    ensureAscii?: boolean;
    separators?: [string, string] | null;
    sortKeys?: boolean;
  },
  depth: number,
  undefToNull: boolean,
): string {
  const indent = o.indent ?? null;
  let itemSep: string, keySep: string;
  if (o.separators) [itemSep, keySep] = o.separators;
  else if (indent) {
    itemSep = ',';
    keySep = ': ';
  } else {
    itemSep = ', ';
    keySep = ': ';
  }
  if (input === null) return 'null';
  if (input === undefined) return undefToNull ? 'null' : 'undefined';
  switch (typeof input) {
    case 'number':
    case 'boolean':
      return JSON.stringify(input);
    case 'string': {
      const r = JSON.stringify(input);
      return o.ensureAscii ? asciiSafe(r) : r;
    }
  }
  if (input instanceof Fn || isTuple(input)) return bail('toJSON of a function or tuple');
  const indentValue = indent ? ' '.repeat(indent) : '';
  const basePadding = '\n' + indentValue.repeat(depth);
  const childrenPadding = basePadding + indentValue;
  if (Array.isArray(input)) {
    const core = input.map((x) => toJSON(x, o, depth + 1, undefToNull));
    return indent && core.length > 0
      ? `[${childrenPadding}${core.join(`${itemSep}${childrenPadding}`)}${basePadding}]`
      : `[${core.join(itemSep)}]`;
  }
  let entries: [string, unknown][] =
    input instanceof Ns ? Array.from(input.v.entries()) : Object.entries(input as object);
  if (o.sortKeys) entries = entries.sort(([a], [b]) => a.localeCompare(b));
  const core = entries.map(([key, value]) => {
    let keyStr = JSON.stringify(key);
    if (o.ensureAscii) keyStr = asciiSafe(keyStr);
    const v = `${keyStr}${keySep}${toJSON(value, o, depth + 1, undefToNull)}`;
    return indent ? `${childrenPadding}${v}` : v;
  });
  return indent && core.length > 0 ? `{${core.join(itemSep)}${basePadding}}` : `{${core.join(itemSep)}}`;
}
const asciiSafe = (s: string): string =>
  s.replace(/[\x7f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));

/** `RuntimeValue.toString()` as the output of `{{ }}` uses it (null/undefined are skipped before). */
function str(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return v;
    case 'number':
      return String(v); // integers, and non-integral floats (never an integral float: see rules)
    case 'boolean':
      return v ? 'true' : 'false';
  }
  return toJSON(v, {}, 0, false);
}
const out = (v: unknown): string => (v === null || v === undefined ? '' : str(v));

/** The interpreter's `slice`. */
function slice<T>(array: T[], start: number | undefined, stop: number | undefined, step = 1): T[] {
  const direction = Math.sign(step);
  if (direction >= 0) {
    start = (start ??= 0) < 0 ? Math.max(array.length + start, 0) : Math.min(start, array.length);
    stop = (stop ??= array.length) < 0 ? Math.max(array.length + stop, 0) : Math.min(stop, array.length);
  } else {
    start =
      (start ??= array.length - 1) < 0
        ? Math.max(array.length + start, -1)
        : Math.min(start, array.length - 1);
    stop = (stop ??= -1) < -1 ? Math.max(array.length + stop, -1) : Math.min(stop, array.length - 1);
  }
  const result: T[] = [];
  for (let i = start; direction * i < direction * stop; i += step) result.push(array[i]!);
  return result;
}

function replaceAll(s: string, oldv: string, newv: string, count: number | null): string {
  if (count === 0) return s;
  let remaining = count == null || count < 0 ? Infinity : count;
  const pattern =
    oldv.length === 0
      ? new RegExp('(?=)', 'gu')
      : new RegExp(oldv.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'gu');
  return s.replaceAll(pattern, (m) => {
    if (remaining > 0) {
      --remaining;
      return newv;
    }
    return m;
  });
}

/** compareRuntimeValues for what dictsort compares (string keys; numbers). */
function compare(a: unknown, b: unknown, caseSensitive: boolean): number {
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'string' && typeof b === 'string') {
    if (!caseSensitive) {
      a = a.toLowerCase();
      b = b.toLowerCase();
    }
    return (a as string) < (b as string) ? -1 : (a as string) > (b as string) ? 1 : 0;
  }
  return bail('compare');
}

const entriesOf = (o: Record<string, unknown>): unknown[][] => Object.entries(o);

/** A builtin member (`.upper`, `.items`, `.length`, ...) of a value; undefined when it has none. */
function member(obj: unknown, name: string): unknown {
  if (typeof obj === 'string') {
    if (name === 'length') return obj.length;
    return STRING_METHODS.has(name) ? new Fn((a, kw) => callMethod(obj, name, a, kw)) : undefined;
  }
  if (Array.isArray(obj)) return name === 'length' ? obj.length : undefined;
  if (obj instanceof Ns) return obj.v.has(name) ? obj.v.get(name) : undefined;
  if (isObj(obj)) {
    if (Object.hasOwn(obj, name)) return obj[name];
    return OBJECT_METHODS.has(name) ? new Fn((a, kw) => callMethod(obj, name, a, kw)) : undefined;
  }
  return undefined;
}

const STRING_METHODS = new Set([
  'upper',
  'lower',
  'strip',
  'title',
  'capitalize',
  'rstrip',
  'lstrip',
  'startswith',
  'endswith',
  'split',
  'replace',
]);
const OBJECT_METHODS = new Set(['get', 'items', 'keys', 'values', 'dictsort']);

/** `obj.name(args)` without allocating a bound function. */
function callMethod(obj: unknown, name: string, args: unknown[], kw: Kw): unknown {
  if (typeof obj === 'string' && STRING_METHODS.has(name)) {
    if (kw) return bail('keyword arguments to a string method');
    switch (name) {
      case 'upper':
        return obj.toUpperCase();
      case 'lower':
        return obj.toLowerCase();
      case 'strip':
        return obj.trim();
      case 'title':
        return obj.replace(/\b\w/g, (c) => c.toUpperCase());
      case 'capitalize':
        return obj.charAt(0).toUpperCase() + obj.slice(1);
      case 'rstrip':
        return obj.trimEnd();
      case 'lstrip':
        return obj.trimStart();
      case 'startswith':
      case 'endswith': {
        if (args.length === 0) return bail(name);
        const p = args[0];
        const test = (x: string): boolean => (name === 'startswith' ? obj.startsWith(x) : obj.endsWith(x));
        if (typeof p === 'string') return test(p);
        if (Array.isArray(p)) {
          for (const item of p) {
            if (typeof item !== 'string') return bail(name);
            if (test(item)) return true;
          }
          return false;
        }
        return bail(name);
      }
      case 'split': {
        const sep = args.length > 0 ? args[0] : null;
        if (!(typeof sep === 'string' || sep === null)) return bail('split sep');
        const maxsplit = args.length > 1 ? args[1] : -1;
        if (!isInt(maxsplit)) return bail('split maxsplit');
        let result: string[] = [];
        if (sep === null) {
          const text = obj.trimStart();
          for (const { 0: match, index } of text.matchAll(/\S+/g)) {
            if (maxsplit !== -1 && result.length >= maxsplit && index !== undefined) {
              result.push(match + text.slice(index + match.length));
              break;
            }
            result.push(match);
          }
        } else {
          if (sep === '') return bail('empty separator');
          result = obj.split(sep);
          if (maxsplit !== -1 && result.length > maxsplit) result.push(result.splice(maxsplit).join(sep));
        }
        return result;
      }
      case 'replace': {
        if (args.length < 2) return bail('replace');
        const [o, n] = args;
        if (typeof o !== 'string' || typeof n !== 'string') return bail('replace');
        const count = args.length > 2 ? args[2] : null;
        if (!(isInt(count) || count === null)) return bail('replace count');
        return replaceAll(obj, o, n, count);
      }
    }
  }
  if (isObj(obj) && !Object.hasOwn(obj, name) && OBJECT_METHODS.has(name)) {
    if (kw) return bail('keyword arguments to a dict method');
    switch (name) {
      case 'get': {
        const key = args[0];
        if (typeof key !== 'string') return bail('get key');
        return Object.hasOwn(obj, key) ? obj[key] : args.length > 1 ? args[1] : null;
      }
      case 'items':
        return entriesOf(obj);
      case 'keys':
        return Object.keys(obj);
      case 'values':
        return Object.values(obj);
      case 'dictsort':
        if (args.length > 0) return bail('dictsort arguments');
        return entriesOf(obj).sort((a, b) => compare(a[0], b[0], false));
    }
  }
  const f = member(obj, name);
  if (!(f instanceof Fn)) return bail('call of a non-function');
  return f.call(args, kw, ROOT_DUMMY);
}
const ROOT_DUMMY = new Scope(null);

/**
 * A left-leaning chain of `+` / `~` (`((a + b) ~ c) + d`): its operands in order and the operators
 * between them; null for anything else.
 */
function concatChain(n: N): { leaves: N[]; ops: string[] } | null {
  const isConcat = (x: N) =>
    x.type === 'BinaryExpression' && (x.operator!.value === '+' || x.operator!.value === '~');
  if (!isConcat(n)) return null;
  const leaves: N[] = [];
  const ops: string[] = [];
  let x = n;
  while (isConcat(x)) {
    leaves.push(x.right!);
    ops.push(x.operator!.value as string);
    x = x.left!;
  }
  leaves.push(x);
  return { leaves: leaves.reverse(), ops: ops.reverse() };
}

/** `evaluateBinaryExpression` for the operators other than and/or. */
function binary(op: string, l: unknown, r: unknown): unknown {
  switch (op) {
    case '==':
    case '!=': {
      const lo = typeof l === 'object' && l !== null;
      const ro = typeof r === 'object' && r !== null;
      if (l instanceof Fn || r instanceof Fn) return bail('== on functions');
      if ((lo && !(r === null || r === undefined)) || (ro && !(l === null || l === undefined)))
        return bail('== on containers');
      return op === '==' ? l == r : l != r;
    }
  }
  if (l === undefined || r === undefined) {
    if (r === undefined && (op === 'in' || op === 'not in')) return op === 'not in';
    return bail('operation on undefined');
  }
  if (l === null || r === null) return bail('operation on null');
  if (op === '~') {
    if (typeof l === 'object' || typeof r === 'object') return bail('~ on containers');
    return String(l as string | number | boolean) + String(r as string | number | boolean);
  }
  if (typeof l === 'number' && typeof r === 'number') {
    switch (op) {
      case '+':
      case '-':
      case '*':
      case '//':
      case '%': {
        if (!Number.isInteger(l) || !Number.isInteger(r)) return bail('float arithmetic');
        const res =
          op === '+'
            ? l + r
            : op === '-'
              ? l - r
              : op === '*'
                ? l * r
                : op === '//'
                  ? Math.floor(l / r)
                  : l % r;
        return Number.isInteger(res) ? res : bail('non-integral integer result');
      }
      case '<':
        return l < r;
      case '>':
        return l > r;
      case '>=':
        return l >= r;
      case '<=':
        return l <= r;
    }
  } else if (Array.isArray(l) && Array.isArray(r)) {
    if (op === '+') return l.concat(r);
  } else if (Array.isArray(r)) {
    if (op === 'in' || op === 'not in') {
      if (typeof l === 'object' || l instanceof Fn) return bail('in with a container');
      let found = false;
      for (const x of r)
        if (x === l) {
          found = true;
          break;
        }
      return op === 'in' ? found : !found;
    }
  }
  if (typeof l === 'string' || typeof r === 'string') {
    if (op === '+') {
      if (typeof l === 'object' || typeof r === 'object' || l instanceof Fn || r instanceof Fn)
        return bail('+ with a container');
      return String(l as string | number | boolean) + String(r as string | number | boolean);
    }
  }
  if (typeof l === 'string' && typeof r === 'string') {
    if (op === 'in') return r.includes(l);
    if (op === 'not in') return !r.includes(l);
  }
  if (typeof l === 'string' && isObj(r)) {
    if (op === 'in') return Object.hasOwn(r, l);
    if (op === 'not in') return !Object.hasOwn(r, l);
  }
  return bail(`operator ${op}`);
}

const TESTS: Record<string, (v: unknown) => boolean> = {
  boolean: (v) => typeof v === 'boolean',
  callable: (v) => v instanceof Fn,
  odd: (v) => (isInt(v) ? v % 2 !== 0 : bail('odd')),
  even: (v) => (isInt(v) ? v % 2 === 0 : bail('even')),
  false: (v) => v === false,
  true: (v) => v === true,
  none: (v) => v === null,
  string: (v) => typeof v === 'string',
  number: (v) => typeof v === 'number',
  integer: (v) => isInt(v),
  iterable: (v) => (Array.isArray(v) && !isTuple(v)) || typeof v === 'string',
  mapping: (v) => isObj(v),
  sequence: (v) => Array.isArray(v) || isObj(v) || typeof v === 'string',
  lower: (v) => typeof v === 'string' && v === v.toLowerCase(),
  upper: (v) => typeof v === 'string' && v === v.toUpperCase(),
  defined: (v) => v !== undefined,
  undefined: (v) => v === undefined,
};
/** Tests as selectattr's second argument (they also get the third). */
const TESTS2: Record<string, (a: unknown, b: unknown) => boolean> = {
  ...TESTS,
  equalto: (a, b) => (b === undefined || typeof b !== 'string' ? bail('equalto') : a === b),
  eq: (a, b) => (b === undefined || typeof b !== 'string' ? bail('eq') : a === b),
};

/** getAttributeValue. */
function attribute(item: unknown, path: string): unknown {
  let value = item;
  for (const part of path.split('.')) {
    if (isContainer(value)) {
      value =
        value instanceof Ns
          ? value.v.has(part)
            ? value.v.get(part)
            : undefined
          : Object.hasOwn(value as object, part)
            ? (value as Record<string, unknown>)[part]
            : undefined;
    } else if (Array.isArray(value)) {
      const index = parseInt(part, 10);
      if (!isNaN(index) && index >= 0 && index < value.length) value = value[index];
      else return undefined;
    } else return undefined;
  }
  return value;
}

const IDENT_FILTERS = new Set([
  'safe',
  'tojson',
  'list',
  'first',
  'last',
  'length',
  'reverse',
  'join',
  'string',
  'upper',
  'lower',
  'title',
  'capitalize',
  'trim',
  'indent',
  'int',
  'abs',
  'items',
  'keys',
  'values',
  'dictsort',
  'bool',
]);
const CALL_FILTERS = new Set([
  'tojson',
  'join',
  'int',
  'default',
  'selectattr',
  'rejectattr',
  'map',
  'indent',
  'replace',
]);

/** `applyFilter` with an Identifier filter. */
function identFilter(name: string, v: unknown): unknown {
  if (name === 'safe') return v;
  if (name === 'tojson') return toJSON(v, {}, 0, true);
  if (Array.isArray(v)) {
    switch (name) {
      case 'list':
        return v;
      // on an empty array the interpreter yields a raw JS undefined and then fails
      case 'first':
        return v.length > 0 ? v[0] : bail('first of empty');
      case 'last':
        return v.length > 0 ? v[v.length - 1] : bail('last of empty');
      case 'length':
        return v.length;
      case 'reverse':
        return v.slice().reverse();
      case 'join':
        for (const x of v) if (typeof x === 'object' && x !== null) return bail('join of containers');
        if (v.some((x) => x instanceof Fn)) return bail('join of functions');
        return v.join('');
      case 'string':
        return toJSON(v, {}, 0, false);
    }
    return bail(`array filter ${name}`);
  }
  if (typeof v === 'string') {
    switch (name) {
      case 'length':
        return v.length;
      case 'upper':
      case 'lower':
      case 'title':
      case 'capitalize':
        return callMethod(v, name, [], null);
      case 'trim':
        return v.trim();
      case 'indent':
        return v
          .split('\n')
          .map((x, i) => (i === 0 || x.length === 0 ? x : '    ' + x))
          .join('\n');
      case 'join':
      case 'string':
        return v;
      case 'int': {
        const n = parseInt(v, 10);
        return isNaN(n) ? 0 : n;
      }
    }
    return bail(`string filter ${name}`);
  }
  if (typeof v === 'number') {
    switch (name) {
      case 'abs':
        return Math.abs(v);
      case 'int':
        return Math.floor(v);
      case 'string':
        return String(v);
    }
    return bail(`number filter ${name}`);
  }
  if (isObj(v)) {
    switch (name) {
      case 'items':
        return entriesOf(v);
      case 'length':
        return Object.keys(v).length;
      case 'keys':
      case 'values':
      case 'dictsort':
        return callMethod(v, name, [], null);
    }
    return bail(`object filter ${name}`);
  }
  if (typeof v === 'boolean') {
    switch (name) {
      case 'bool':
        return v;
      case 'int':
        return v ? 1 : 0;
      case 'string':
        return v ? 'true' : 'false';
    }
  }
  return bail(`filter ${name}`);
}

interface Ctl {
  /** 0: run; 1: break; 2: continue. */
  c: number;
}

export interface CompiledTemplate {
  /** Renders with `vars` as the global variables (plain JS values; functions become callables). */
  render(vars: Record<string, unknown>): string;
  /**
   * The same output as the strings each `{{ }}` and text block produced, in order (their
   * concatenation is `render`'s text): a long prompt is never built as one string.
   */
  renderPieces(vars: Record<string, unknown>): string[];
}

/** Compiles a parsed template; throws `Unsupported` naming the first construct it does not mirror. */
export function compileTemplate(program: unknown): CompiledTemplate {
  const ctl: Ctl = { c: 0 };
  const cx = new Compiler(ctl);
  const root = program as N;
  if (root.type !== 'Program') throw new Unsupported(`root ${root.type}`);
  const body = cx.block(root.body as N[], false);
  const renderPieces = (vars: Record<string, unknown>): string[] => {
    ctl.c = 0;
    const g = new Scope(null);
    g.v.set('namespace', NAMESPACE);
    for (const [k, v] of Object.entries(vars)) {
      if (g.v.has(k)) return bail(`variable already declared: ${k}`);
      g.v.set(k, typeof v === 'function' ? wrapJs(v as (...a: unknown[]) => unknown) : v);
    }
    const o: string[] = [];
    body(g, o);
    return o;
  };
  return {
    renderPieces,
    render(vars) {
      // Concatenated as the statements' outputs were before (a rope V8 flattens when read).
      let text = '';
      for (const p of renderPieces(vars)) text += p;
      return text;
    },
  };
}

/** convertToRuntimeValues' function wrapper: primitive arguments only. */
function wrapJs(f: (...a: unknown[]) => unknown): Fn {
  return new Fn((args, kw) => {
    if (kw) return bail('keyword arguments to a global');
    for (const a of args)
      if ((typeof a === 'object' && a !== null) || a instanceof Fn) return bail('global args');
    const r = f(...args) ?? null;
    if (typeof r === 'function') return bail('global returned a function');
    return r;
  });
}

const NAMESPACE = new Fn((args, kw) => {
  if (args.length > 1) return bail('namespace args');
  const entries = new Map<string, unknown>();
  if (args.length === 1) {
    const src = args[0];
    if (isObj(src)) for (const [k, v] of Object.entries(src)) entries.set(k, v);
    else return bail('namespace source');
  }
  if (kw) for (const [k, v] of kw) entries.set(k, v);
  return new Ns(entries);
});

const SPECIAL_NAMES = new Set(['kwargs', 'varargs', 'caller']);

class Compiler {
  constructor(private readonly ctl: Ctl) {}

  block(nodes: N[], inLoop: boolean): Stmt {
    const fs = nodes.map((n) => this.stmt(n, inLoop));
    const ctl = this.ctl;
    if (fs.length === 0) return NOOP;
    if (fs.length === 1) return fs[0]!;
    return (s, o) => {
      for (let i = 0; i < fs.length; i++) {
        fs[i]!(s, o);
        if (ctl.c !== 0) return;
      }
    };
  }

  stmt(n: N, inLoop: boolean): Stmt {
    const ctl = this.ctl;
    switch (n.type) {
      case 'StringLiteral': {
        const v = n.value as string;
        return v.length === 0 ? NOOP : (_, o) => void o.push(v);
      }
      case 'Comment':
        return NOOP;
      case 'Break':
      case 'Continue': {
        if (!inLoop) throw new Unsupported(`${n.type} outside a loop`);
        const c = n.type === 'Break' ? 1 : 2;
        return () => {
          ctl.c = c;
        };
      }
      case 'If': {
        const test = this.expr(n.test);
        const body = this.block(n.body ?? [], inLoop);
        const alt = this.block(n.alternate ?? [], inLoop);
        return (s, o) => (truthy(test(s)) ? body(s, o) : alt(s, o));
      }
      case 'For':
        return this.forStmt(n);
      case 'Set':
        return this.setStmt(n, inLoop);
      case 'Macro':
        return this.macro(n);
      case 'Program':
      case 'CallStatement':
      case 'FilterStatement':
        throw new Unsupported(n.type);
      default: {
        const chain = concatChain(n);
        if (chain !== null) return this.concatStmt(chain.leaves, chain.ops);
        const e = this.expr(n);
        return (s, o) => {
          const v = out(e(s));
          if (v.length > 0) o.push(v);
        };
      }
    }
  }

  /**
   * `{{ a + b ~ c ... }}`: the operands evaluated left to right as the binary expressions would
   * evaluate them; when every operand is a string, each goes out as a piece of its own (the same
   * text as their concatenation), so a message's text stays the very string the request carried
   * (`'<|im_start|>' + role + '\n' + content + '<|im_end|>'` gives `content` itself, not a new
   * string that holds it: the prefix cache fingerprints a whole string once, encoder.ts). Any
   * other operand: the operators applied in order, as `binary` would.
   */
  concatStmt(leaves: N[], ops: string[]): Stmt {
    const es = leaves.map((x) => this.expr(x));
    const k = es.length;
    return (s, o) => {
      const vs: unknown[] = new Array(k);
      let strings = true;
      for (let i = 0; i < k; i++) {
        const v = es[i]!(s);
        vs[i] = v;
        if (typeof v !== 'string') strings = false;
      }
      if (strings) {
        for (let i = 0; i < k; i++) if ((vs[i] as string).length > 0) o.push(vs[i] as string);
        return;
      }
      let acc = vs[0];
      for (let i = 1; i < k; i++) acc = binary(ops[i - 1]!, acc, vs[i]);
      const v = out(acc);
      if (v.length > 0) o.push(v);
    };
  }

  forStmt(n: N): Stmt {
    const ctl = this.ctl;
    let iterNode = n.iterable as N;
    let test: Expr | null = null;
    if (iterNode.type === 'SelectExpression') {
      test = this.expr(iterNode.test);
      iterNode = iterNode.lhs!;
    }
    const iter = this.expr(iterNode);
    const lv = n.loopvar as N;
    let names: string[] | null = null;
    let name: string | null = null;
    if (lv.type === 'Identifier') name = lv.value as string;
    else if (lv.type === 'TupleLiteral' && (lv.value as N[]).every((x) => x.type === 'Identifier'))
      names = (lv.value as N[]).map((x) => x.value as string);
    else throw new Unsupported(`loop variable ${lv.type}`);
    const bind = (sc: Scope, cur: unknown): void => {
      if (name !== null) {
        sc.v.set(name, cur);
        return;
      }
      if (!Array.isArray(cur) || isTuple(cur)) return void bail('unpack a non-array');
      if (cur.length !== names!.length) return void bail('unpack length');
      for (let j = 0; j < names!.length; j++) sc.v.set(names![j]!, cur[j]);
    };
    const body = this.block(n.body ?? [], true);
    const dflt = this.block(n.defaultBlock ?? [], false);
    return (env, o) => {
      const scope = new Scope(env);
      let it = iter(scope);
      if (isObj(it)) it = Object.keys(it);
      else if (!Array.isArray(it)) return bail('for over a non-iterable');
      const src = it as unknown[];
      let items: unknown[] = src;
      if (test || names !== null) {
        items = [];
        for (const cur of src) {
          if (test) {
            const ls = new Scope(scope);
            bind(ls, cur);
            if (!truthy(test(ls))) continue;
          } else if (names !== null) {
            // the interpreter checks unpacking of every item before the loop runs
            if (!Array.isArray(cur) || isTuple(cur) || cur.length !== names.length) return bail('unpack');
          }
          items.push(cur);
        }
      }
      let none = true;
      const len = items.length;
      for (let i = 0; i < len; i++) {
        scope.v.set('loop', {
          index: i + 1,
          index0: i,
          revindex: len - i,
          revindex0: len - i - 1,
          first: i === 0,
          last: i === len - 1,
          length: len,
          previtem: i > 0 ? items[i - 1] : undefined,
          nextitem: i < len - 1 ? items[i + 1] : undefined,
        });
        bind(scope, items[i]);
        const mark = o.length;
        body(scope, o);
        if (ctl.c !== 0) {
          // The interpreter drops the output of an iteration that breaks or continues.
          o.length = mark;
          const c = ctl.c;
          ctl.c = 0;
          if (c === 1) break;
          continue;
        }
        none = false;
      }
      if (none) dflt(scope, o);
    };
  }

  setStmt(n: N, inLoop: boolean): Stmt {
    const ctl = this.ctl;
    const rhs: Expr = n.value ? this.expr(n.value as N) : textOf(this.block(n.body ?? [], inLoop));
    const a = n.assignee as N;
    if (a.type === 'Identifier') {
      const name = a.value as string;
      return (s) => {
        const v = rhs(s);
        if (ctl.c !== 0) return;
        s.v.set(name, v);
      };
    }
    if (a.type === 'TupleLiteral') {
      const names = (a.value as N[]).map((x) => {
        if (x.type !== 'Identifier') throw new Unsupported('set unpack target');
        return x.value as string;
      });
      return (s) => {
        const v = rhs(s);
        if (ctl.c !== 0) return;
        if (!Array.isArray(v) || v.length !== names.length) return bail('set unpack');
        for (let i = 0; i < names.length; i++) s.v.set(names[i]!, v[i]);
      };
    }
    if (a.type === 'MemberExpression' && !a.computed && a.property?.type === 'Identifier') {
      const obj = this.expr(a.object);
      const prop = a.property.value as string;
      return (s) => {
        const v = rhs(s);
        if (ctl.c !== 0) return;
        const o = obj(s);
        if (!(o instanceof Ns)) return bail('set on a non-namespace');
        o.v.set(prop, v);
      };
    }
    throw new Unsupported(`set target ${a.type}`);
  }

  macro(n: N): Stmt {
    const name = n.name!.value as string;
    const params = (n.args as N[]).map((p) => {
      if (p.type === 'Identifier') return { name: p.value as string, dflt: null as Expr | null };
      if (p.type === 'KeywordArgumentExpression')
        return { name: p.key!.value as string, dflt: this.expr(p.value as N) };
      throw new Unsupported(`macro parameter ${p.type}`);
    });
    for (const p of params) if (SPECIAL_NAMES.has(p.name)) throw new Unsupported('special macro parameter');
    const text = textOf(this.block(n.body ?? [], false));
    const fn = new Fn((args, kw, callerScope) => {
      const ms = new Scope(callerScope);
      const rest = kw ? new Map(kw) : null;
      const pending: [string, Expr][] = [];
      for (let i = 0; i < params.length; i++) {
        const p = params[i]!;
        let v: unknown = i < args.length ? args[i] : undefined;
        let given = i < args.length;
        if (!given && rest?.has(p.name)) {
          v = rest.get(p.name);
          rest.delete(p.name);
          given = true;
        }
        if (!given && p.dflt) pending.push([p.name, p.dflt]);
        ms.v.set(p.name, v);
      }
      if (rest && rest.size > 0) return bail('macro keyword argument');
      if (args.length > params.length) return bail('macro arguments');
      for (const [k, d] of pending) ms.v.set(k, d(ms));
      return text(ms);
    });
    return (s) => {
      s.v.set(name, fn);
    };
  }

  args(nodes: N[]): { pos: Expr[]; kw: [string, Expr][] } {
    const pos: Expr[] = [];
    const kw: [string, Expr][] = [];
    for (const a of nodes) {
      if (a.type === 'SpreadExpression' || a.type === 'KeywordSpreadExpression')
        throw new Unsupported(a.type);
      if (a.type === 'KeywordArgumentExpression') kw.push([a.key!.value as string, this.expr(a.value as N)]);
      else pos.push(this.expr(a));
    }
    return { pos, kw };
  }

  expr(n: N | undefined): Expr {
    if (!n) return () => undefined;
    switch (n.type) {
      case 'StringLiteral':
      case 'IntegerLiteral': {
        const v = n.value as unknown;
        return () => v;
      }
      case 'ArrayLiteral':
      case 'TupleLiteral': {
        const items = (n.value as N[]).map((x) => this.expr(x));
        const tuple = n.type === 'TupleLiteral';
        return (s) => {
          const a = items.map((f) => f(s));
          if (tuple) TUPLES.add(a);
          return a;
        };
      }
      case 'ObjectLiteral': {
        const entries = Array.from(n.value as Map<N, N>).map(
          ([k, v]) => [this.expr(k), this.expr(v)] as const,
        );
        return (s) => {
          const o: Record<string, unknown> = {};
          for (const [k, v] of entries) {
            const key = k(s);
            if (typeof key !== 'string') return bail('object key');
            // integer-like keys would be reordered by a JS object (a Map keeps insertion order)
            if (/^(0|[1-9]\d*)$/.test(key) || key === '__proto__') return bail('object key order');
            o[key] = v(s);
          }
          return o;
        };
      }
      case 'Identifier': {
        const name = n.value as string;
        if (SPECIAL_NAMES.has(name)) throw new Unsupported(`identifier ${name}`);
        return (s) => s.get(name);
      }
      case 'MemberExpression':
        return this.memberExpr(n);
      case 'CallExpression':
        return this.call(n);
      case 'UnaryExpression': {
        const arg = this.expr(n.argument);
        const op = n.operator!.value as string;
        if (op === 'not') return (s) => !truthy(arg(s));
        if (op === '-' || op === '+') {
          const sign = op === '-' ? -1 : 1;
          return (s) => {
            const v = arg(s);
            if (typeof v === 'boolean') return sign * (v ? 1 : 0);
            if (typeof v === 'number') return Number.isInteger(v) ? sign * v : bail('float sign');
            return bail('unary on a non-number');
          };
        }
        throw new Unsupported(`unary ${op}`);
      }
      case 'BinaryExpression': {
        const op = n.operator!.value as string;
        const l = this.expr(n.left);
        const r = this.expr(n.right);
        if (op === 'and')
          return (s) => {
            const a = l(s);
            return truthy(a) ? r(s) : a;
          };
        if (op === 'or')
          return (s) => {
            const a = l(s);
            return truthy(a) ? a : r(s);
          };
        if (!BINARY_OPS.has(op)) throw new Unsupported(`operator ${op}`);
        return (s) => binary(op, l(s), r(s));
      }
      case 'FilterExpression':
        return this.filter(this.expr(n.operand), n.filter!);
      case 'TestExpression': {
        const name = n.test!.value as string;
        const t = TESTS[name];
        if (!t || !Object.hasOwn(TESTS, name)) throw new Unsupported(`test ${name}`);
        const v = this.expr(n.operand);
        const neg = !!n.negate;
        return (s) => t(v(s)) !== neg;
      }
      case 'SelectExpression': {
        const test = this.expr(n.test);
        const lhs = this.expr(n.lhs);
        return (s) => (truthy(test(s)) ? lhs(s) : undefined);
      }
      case 'Ternary': {
        const c = this.expr(n.condition);
        const a = this.expr(n.trueExpr);
        const b = this.expr(n.falseExpr);
        return (s) => (truthy(c(s)) ? a(s) : b(s));
      }
      default:
        throw new Unsupported(`expression ${n.type}`);
    }
  }

  memberExpr(n: N): Expr {
    const obj = this.expr(n.object);
    const p = n.property as N;
    if (n.computed && p.type === 'SliceExpression') {
      const start = this.expr(p.start);
      const stop = this.expr(p.stop);
      const step = this.expr(p.step);
      return (s) => {
        const o = obj(s);
        if (!(Array.isArray(o) || typeof o === 'string')) return bail('slice object');
        const a = start(s);
        const b = stop(s);
        const c = step(s);
        for (const x of [a, b, c]) if (!(x === undefined || isInt(x))) return bail('slice index');
        if (Array.isArray(o))
          return slice(
            o as unknown[],
            a as number | undefined,
            b as number | undefined,
            c as number | undefined,
          );
        return slice(
          Array.from(o),
          a as number | undefined,
          b as number | undefined,
          c as number | undefined,
        ).join('');
      };
    }
    let prop: Expr;
    if (n.computed) prop = this.expr(p);
    else if (p.type === 'IntegerLiteral' || p.type === 'Identifier') {
      const v = p.value as unknown;
      prop = () => v;
    } else throw new Unsupported(`member ${p.type}`);
    return (s) => getMember(obj(s), prop(s));
  }

  call(n: N): Expr {
    const { pos, kw } = this.args(n.args as N[]);
    const evalArgs = (s: Scope): [unknown[], Kw] => {
      const a = pos.map((f) => f(s));
      let m: Kw = null;
      if (kw.length > 0) {
        m = new Map();
        for (const [k, f] of kw) {
          if (m.has(k)) return bail('duplicate keyword');
          m.set(k, f(s));
        }
      }
      return [a, m];
    };
    const callee = n.callee as N;
    if (callee.type === 'MemberExpression' && !callee.computed && callee.property?.type === 'Identifier') {
      const obj = this.expr(callee.object);
      const name = callee.property.value as string;
      return (s) => {
        const [a, m] = evalArgs(s);
        const o = obj(s);
        if (o instanceof Ns) {
          const f = o.v.get(name);
          return f instanceof Fn ? f.call(a, m, s) : bail('call of a non-function');
        }
        if (isObj(o) && Object.hasOwn(o, name)) {
          const f = o[name];
          return f instanceof Fn ? f.call(a, m, s) : bail('call of a non-function');
        }
        return callMethod(o, name, a, m);
      };
    }
    const f = this.expr(callee);
    return (s) => {
      const [a, m] = evalArgs(s);
      const fn = f(s);
      if (!(fn instanceof Fn)) return bail('call of a non-function');
      return fn.call(a, m, s);
    };
  }

  filter(operand: Expr, f: N): Expr {
    if (f.type === 'Identifier') {
      const name = f.value as string;
      if (!IDENT_FILTERS.has(name)) throw new Unsupported(`filter ${name}`);
      return (s) => identFilter(name, operand(s));
    }
    if (f.type !== 'CallExpression' || f.callee?.type !== 'Identifier') throw new Unsupported('filter form');
    const name = f.callee.value as string;
    if (!CALL_FILTERS.has(name)) throw new Unsupported(`filter ${name}()`);
    const argNodes = f.args as N[];
    const { pos, kw } = this.args(argNodes);
    const kwMap = (s: Scope): Map<string, unknown> => {
      const m = new Map<string, unknown>();
      for (const [k, e] of kw) {
        if (m.has(k)) return bail('duplicate keyword');
        m.set(k, e(s));
      }
      return m;
    };
    switch (name) {
      case 'tojson':
        return (s) => {
          const v = operand(s);
          const m = kwMap(s);
          const indent = m.has('indent') ? m.get('indent') : null;
          if (!(indent === null || isInt(indent))) return bail('tojson indent');
          const ensureAscii = m.has('ensure_ascii') ? m.get('ensure_ascii') : false;
          if (typeof ensureAscii !== 'boolean') return bail('tojson ensure_ascii');
          const sortKeys = m.has('sort_keys') ? m.get('sort_keys') : false;
          if (typeof sortKeys !== 'boolean') return bail('tojson sort_keys');
          const sepArg = m.has('separators') ? m.get('separators') : null;
          let separators: [string, string] | null = null;
          if (Array.isArray(sepArg)) {
            if (sepArg.length !== 2 || typeof sepArg[0] !== 'string' || typeof sepArg[1] !== 'string')
              return bail('separators');
            separators = [sepArg[0], sepArg[1]];
          } else if (sepArg !== null) return bail('separators');
          for (const p of pos) p(s); // evaluated (and ignored) as the interpreter does
          return toJSON(v, { indent, ensureAscii, sortKeys, separators }, 0, true);
        };
      case 'join':
        return (s) => {
          const v = operand(s);
          let parts: unknown[];
          if (typeof v === 'string') parts = Array.from(v);
          else if (Array.isArray(v)) {
            for (const x of v)
              if ((typeof x === 'object' && x !== null) || x instanceof Fn) return bail('join of containers');
            parts = v;
          } else return bail('join operand');
          const a = pos.map((e) => e(s));
          const m = kwMap(s);
          const sep = a.length > 0 ? a[0] : m.has('separator') ? m.get('separator') : '';
          if (typeof sep !== 'string') return bail('join separator');
          return parts.join(sep);
        };
      case 'int':
        return (s) => {
          const v = operand(s);
          const a = pos.map((e) => e(s));
          const m = kwMap(s);
          const dflt = a.length > 0 ? a[0] : m.has('default') ? m.get('default') : 0;
          if (typeof v === 'string') {
            const n = parseInt(v, 10);
            return isNaN(n) ? dflt : n;
          }
          if (typeof v === 'number') return v;
          if (typeof v === 'boolean') return v ? 1 : 0;
          return bail('int operand');
        };
      case 'default':
        return (s) => {
          const v = operand(s);
          const a = pos.map((e) => e(s));
          const m = kwMap(s);
          const dflt = a.length > 0 ? a[0] : '';
          const b = a.length > 1 ? a[1] : m.has('boolean') ? m.get('boolean') : false;
          if (typeof b !== 'boolean') return bail('default boolean');
          return v === undefined || (b && !truthy(v)) ? dflt : v;
        };
      case 'selectattr':
      case 'rejectattr': {
        const select = name === 'selectattr';
        if (argNodes.some((x) => x.type !== 'StringLiteral'))
          throw new Unsupported(`${name} with non-literal args`);
        const lits = argNodes.map((x) => x.value as string);
        const attr = lits[0];
        const testName = lits[1];
        const value = lits[2];
        if (attr === undefined) throw new Unsupported(`${name} without attribute`);
        let t: ((a: unknown, b: unknown) => boolean) | null = null;
        if (testName !== undefined) {
          if (!Object.hasOwn(TESTS2, testName)) throw new Unsupported(`test ${testName}`);
          t = TESTS2[testName]!;
        }
        return (s) => {
          const v = operand(s);
          if (!Array.isArray(v)) return bail(`${name} operand`);
          if (v.some((x) => !isContainer(x))) return bail(`${name} items`);
          return (v as unknown[]).filter((item) => {
            const has = item instanceof Ns ? item.v.has(attr) : Object.hasOwn(item as object, attr);
            const a = item instanceof Ns ? item.v.get(attr) : (item as Record<string, unknown>)[attr];
            const result = has ? (t ? t(a, value) : truthy(a)) : false;
            return select ? result : !result;
          });
        };
      }
      case 'map':
        return (s) => {
          const v = operand(s);
          if (!Array.isArray(v)) return bail('map operand');
          for (const p of pos) p(s);
          const m = kwMap(s);
          if (!m.has('attribute')) return bail('map without attribute');
          const attr = m.get('attribute');
          if (typeof attr !== 'string') return bail('map attribute');
          const dflt = m.get('default');
          return v.map((item) => {
            if (!isContainer(item)) return bail('map item');
            const x = attribute(item, attr);
            return x === undefined ? dflt : x;
          });
        };
      case 'indent':
        return (s) => {
          const v = operand(s);
          if (typeof v !== 'string') return bail('indent operand');
          const a = pos.map((e) => e(s));
          const m = kwMap(s);
          const pick = (i: number, k: string, d: unknown): unknown =>
            a.length > i ? a[i] : m.has(k) ? m.get(k) : d;
          const width = pick(0, 'width', 4);
          if (!isInt(width)) return bail('indent width');
          const first = pick(1, 'first', false);
          const blank = pick(2, 'blank', false);
          const ind = ' '.repeat(width);
          return v
            .split('\n')
            .map((x, i) => ((!first && i === 0) || (!blank && x.length === 0) ? x : ind + x))
            .join('\n');
        };
      case 'replace':
        return (s) => {
          const v = operand(s);
          if (typeof v !== 'string') return bail('replace operand');
          const a = pos.map((e) => e(s));
          const m = kwMap(s);
          // the interpreter appends the keyword arguments as one more argument
          if (a.length < 2) return bail('replace args');
          if (a.length === 2) {
            const count = m.has('count') ? m.get('count') : null;
            return callMethod(v, 'replace', [a[0], a[1], count], null);
          }
          return bail('replace with a count argument');
        };
    }
    throw new Unsupported(`filter ${name}()`);
  }
}

const BINARY_OPS = new Set(['==', '!=', '<', '>', '<=', '>=', '+', '-', '*', '//', '%', '~', 'in', 'not in']);

/** evaluateMemberExpression after the property is known. */
function getMember(o: unknown, p: unknown): unknown {
  if (isContainer(o)) {
    if (typeof p !== 'string') return bail('non-string property');
    return member(o, p);
  }
  if (Array.isArray(o) || typeof o === 'string') {
    if (typeof p === 'number') {
      if (!Number.isInteger(p)) return bail('float index');
      return o.at(p);
    }
    if (typeof p === 'string') return member(o, p);
    return bail('property type');
  }
  if (typeof p !== 'string') return bail('non-string property');
  return undefined; // numbers, booleans, null, undefined, functions: no builtins
}
