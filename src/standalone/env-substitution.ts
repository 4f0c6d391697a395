// `${NAME}` and `${NAME:-default}` in the string values of a configuration file, so secrets and
// per-deployment addresses come from the environment rather than from the file.
import { describe } from '../peer/option-rules.js';

/** A `${NAME}` whose variable is not set (and that gives no default), at a path in the file. */
export interface MissingVariable {
  readonly variable: string;
  /** Where in the file: `serverApi.keys[0]`. */
  readonly path: string;
}

/** A reference the substitution cannot read, such as `${1X}` or `${NAME` without its brace. */
export interface MalformedReference {
  readonly text: string;
  readonly path: string;
  /** A default holding `${` (`${A:-${B}}`, `${A:-${B}`): a default is taken as written. */
  readonly nested?: boolean;
}

export interface SubstitutionProblems {
  readonly missing: MissingVariable[];
  readonly malformed: MalformedReference[];
}

// `$${` is a literal `${`; a default holding a reference (`${A:-${B}}`, `${A:-x${B}y}`), refused
// whole; `${NAME}` or `${NAME:-default}`; any other `${...` is malformed.
const REFERENCE =
  /\$\$\{|(?<nested>\$\{[A-Za-z_][A-Za-z0-9_]*:-[^}]*?\$\{[^}]*\}[^}]*\})|\$\{(?<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?<fallback>[^}]*))?\}|\$\{[^}]*\}?/g;

interface ReferenceGroups {
  readonly nested: string | undefined;
  readonly name: string | undefined;
  readonly fallback: string | undefined;
}

/**
 * `text` with its references replaced from `env`. `${NAME:-default}` takes the default when NAME
 * is unset or empty (as a shell does); `${NAME}` unset is recorded in `problems.missing`, and is
 * an empty string in the result. Returns `whole: true` when `text` was exactly one reference, so
 * a YAML scalar such as `port: ${PORT}` can be read as the number it names.
 */
export function substitute(
  text: string,
  env: Readonly<Record<string, string | undefined>>,
  path: string,
  problems: SubstitutionProblems,
): { text: string; whole: boolean } {
  if (!text.includes('${')) return { text, whole: false };
  let references = 0;
  let literal = false;
  const result = text.replace(REFERENCE, (match: string, ...rest: unknown[]) => {
    if (match === '$${') {
      literal = true;
      return '${';
    }
    references++;
    const { nested, name, fallback } = rest[rest.length - 1] as ReferenceGroups;
    // An unclosed one (`${A:-${B}`) or an escaped one (`${A:-$${B}}`) as well: a default is
    // taken as written, so `${` in it is never what was meant.
    if (nested !== undefined || fallback?.includes('${')) {
      problems.malformed.push({ text: match, path, nested: true });
      return '';
    }
    if (name === undefined) {
      problems.malformed.push({ text: match, path });
      return '';
    }
    const value = env[name];
    if (fallback !== undefined) return value === undefined || value === '' ? fallback : value;
    if (value === undefined) {
      problems.missing.push({ variable: name, path });
      return '';
    }
    return value;
  });
  const whole = references === 1 && !literal && REFERENCE_ONLY.test(text);
  return { text: result, whole };
}

const REFERENCE_ONLY = /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}$/;

/** The messages of `problems`, one per line, each naming the path in the file. */
export function describeSubstitutionProblems(problems: SubstitutionProblems): string[] {
  return [
    ...problems.missing.map(
      ({ variable, path }) =>
        `${path}: environment variable ${variable} is not set (set it, or give a default: \${${variable}:-value})`,
    ),
    ...problems.malformed.map(({ text, path, nested }) =>
      nested
        ? `${path}: ${describe(text)} holds a reference in its default, which is taken as written: give the default as plain text`
        : `${path}: ${describe(text)} is not a variable reference: use \${NAME} or \${NAME:-default}, or $\${ for a literal \${`,
    ),
  ];
}
