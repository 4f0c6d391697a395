import { MethodNotFoundError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';
import type { RpcConnection } from './connection.js';
import type { Deadline } from './deadline.js';
import { ConnectionError, messageOf, withHint } from './errors.js';
import type { Output } from './errors.js';
import { jsonText, jsonTextLength } from './json-text.js';
import { MAX_INDENTED_TEXT } from './limits.js';

/**
 * Print the answer to `method` as pretty JSON, safe for a terminal (jsonText): indented by 2, or
 * compact on one line when indented it would pass MAX_INDENTED_TEXT (measured first, without
 * writing it: indented, a large array nested deep takes up to some 130 times its compact size).
 * One that cannot be printed is a ConnectionError.
 */
function printJson(value: unknown, method: string, stdout: Output): void {
  let text: string;
  try {
    // A result is never absent on the wire; print null rather than nothing if it were.
    const indented = jsonTextLength(value ?? null, 2, MAX_INDENTED_TEXT) <= MAX_INDENTED_TEXT;
    text = jsonText(value ?? null, indented ? 2 : undefined);
  } catch (err) {
    throw new ConnectionError(`cannot print the answer to "${method}": ${messageOf(err)}`);
  }
  stdout.write(`${text}\n`);
}

/** `call`: print the result as pretty JSON. */
export async function runCall(
  connection: RpcConnection,
  method: string,
  params: Params | undefined,
  deadline: Deadline,
  stdout: Output,
): Promise<void> {
  printJson(await connection.call(method, params, deadline), method, stdout);
}

/** `notify`: send, make sure it left, print nothing. */
export async function runNotify(
  connection: RpcConnection,
  method: string,
  params: Params | undefined,
  deadline: Deadline,
): Promise<void> {
  await connection.notify(method, params, deadline);
}

/** `discover`: the OpenRPC document from `rpc.discover`, as pretty JSON. */
export async function runDiscover(
  connection: RpcConnection,
  deadline: Deadline,
  stdout: Output,
): Promise<void> {
  try {
    printJson(await connection.call('rpc.discover', undefined, deadline), 'rpc.discover', stdout);
  } catch (err) {
    if (err instanceof MethodNotFoundError) {
      throw withHint(err, 'this server publishes no OpenRPC document (rpc.discover)');
    }
    throw err;
  }
}
