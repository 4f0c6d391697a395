import { JsonRpcError } from '../protocol/errors.js';
import { writeKeptNumbers } from './kept-numbers.js';
import { terminalText } from './terminal-text.js';

/** The CLI's exit codes (also listed in the help text). */
export const ExitCode = {
  Success: 0,
  /** The server answered with a JSON-RPC error. */
  RpcError: 1,
  /** The command line is wrong. */
  Usage: 2,
  /** The server could not be reached or talked to. */
  Unreachable: 3,
} as const;

/** The command line is wrong: exit 2, with a pointer to the help of `command`. */
export class UsageError extends Error {
  override name = 'UsageError';
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
  }
}

/** The server could not be reached, refused us, or went away: exit 3. */
export class ConnectionError extends Error {
  override name = 'ConnectionError';
}

const hints = new WeakMap<object, string>();

/** Attach a line of advice to an error, printed after it by `reportFailure`. */
export function withHint<E extends object>(err: E, hint: string): E {
  hints.set(err, hint);
  return err;
}

/** The message of anything thrown. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Something the CLI can write lines to (process.stderr, or a test double). */
export interface Output {
  write(text: string): unknown;
}

/**
 * Print `err` for a person, never with a stack trace, and return the exit code.
 * JSON-RPC errors are printed as `error CODE: MESSAGE` and, when present, `data: JSON`.
 * What a server wrote is printed through terminalText: its control characters escaped, cut to
 * MAX_TERMINAL_TEXT (JSON.stringify leaves the C1 range and DEL as they are, so `data` too).
 */
export function reportFailure(err: unknown, stderr: Output): number {
  if (err instanceof UsageError) {
    const help = err.command ? `wsrpc ${err.command} --help` : 'wsrpc --help';
    stderr.write(`wsrpc: ${err.message}\nRun '${help}' for usage.\n`);
    return ExitCode.Usage;
  }
  if (err instanceof JsonRpcError) {
    stderr.write(`error ${err.code}: ${terminalText(err.message)}\n`);
    if (err.data !== undefined) {
      stderr.write(`data: ${terminalText(writeKeptNumbers(JSON.stringify(err.data)))}\n`);
    }
    const hint = hints.get(err);
    if (hint !== undefined) stderr.write(`wsrpc: ${hint}\n`);
    return ExitCode.RpcError;
  }
  if (err instanceof ConnectionError) {
    // The server's parts of the message were escaped and cut where they were put in; escaping
    // the whole line as well covers what Node or ws quote from the server in their own errors.
    stderr.write(`wsrpc: ${terminalText(err.message, Infinity)}\n`);
    return ExitCode.Unreachable;
  }
  stderr.write(`wsrpc: unexpected failure: ${terminalText(messageOf(err))}\n`);
  return ExitCode.Unreachable;
}
