import { JsonRpcError, MethodNotFoundError } from '../protocol/errors.js';
import type { ErrorObject, Params } from '../protocol/types.js';
import { Deadline } from './deadline.js';
import { ConnectionError, withHint } from './errors.js';
import type { Output } from './errors.js';
import type { PeerConnection } from './peer-connection.js';

/** The three method names of the subscription protocol (`--methods SUBSCRIBE,NOTIFICATION,UNSUBSCRIBE`). */
export interface SubscriptionMethodNames {
  subscribe: string;
  /** The notification that carries the messages. */
  notification: string;
  unsubscribe: string;
}

/** The gateway's default subscription method names (docs/pubsub.md, "Wire format"). */
export const DEFAULT_SUBSCRIPTION_METHODS: Readonly<SubscriptionMethodNames> = {
  subscribe: 'subscribe',
  notification: 'subscription',
  unsubscribe: 'unsubscribe',
};
/** Shown with a -32601 answer to the subscribe call. */
export const METHODS_EXAMPLE = '--methods eth_subscribe,eth_subscription,eth_unsubscribe';
/** Longest wait for the unsubscribe answer on Ctrl+C. */
const UNSUBSCRIBE_TIMEOUT_MS = 2_000;
/** Messages kept while the subscribe answer is still on its way up the stack. */
const MAX_EARLY_MESSAGES = 10_000;

type Message = Record<string, unknown>;
type SubscriptionId = string | number;

type Outcome =
  | { kind: 'complete' }
  | { kind: 'stopped' }
  | { kind: 'failed'; error: unknown }
  | { kind: 'closed'; code: number; reason: string };

export interface SubscribeRun {
  topic: string;
  params: Params | undefined;
  /** The subscribe, notification and unsubscribe method names the server uses. */
  methods: SubscriptionMethodNames;
  deadline: Deadline;
  /** Aborted on Ctrl+C (SIGINT, SIGTERM) or when stdout is gone: unsubscribe and end with success. */
  stop: AbortSignal;
  stdout: Output;
  stderr: Output;
}

function isErrorObject(value: unknown): value is ErrorObject {
  const error = value as Partial<ErrorObject> | null;
  return typeof error?.code === 'number' && typeof error.message === 'string';
}

/**
 * Subscribe to a topic or stream and print each message's data as one line of compact JSON.
 * Resolves when stopped (after unsubscribing) or when the server completes the stream;
 * rejects with a JsonRpcError (refused, or the stream ended with an error) or a
 * ConnectionError (the connection closed under it).
 */
export async function runSubscribe(connection: PeerConnection, run: SubscribeRun): Promise<void> {
  const { methods } = run;
  let id: SubscriptionId | undefined;
  const early: Message[] = [];
  let finish!: (outcome: Outcome) => void;
  const done = new Promise<Outcome>((resolve) => {
    let settled = false;
    finish = (outcome) => {
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
  });

  function handle(message: Message): void {
    if (message['subscription'] !== id) return;
    if ('error' in message) {
      const error = message['error'];
      finish({
        kind: 'failed',
        error: isErrorObject(error)
          ? JsonRpcError.fromErrorObject(error)
          : new JsonRpcError(-32603, `the stream ended with an error: ${JSON.stringify(error)}`),
      });
    } else if (message['complete'] === true) {
      finish({ kind: 'complete' });
    } else if ('gap' in message) {
      const gap = message['gap'];
      const count = typeof gap === 'number' ? `${gap} messages` : 'an unknown number of messages';
      run.stderr.write(`wsrpc: ${count} were lost (no longer in the server's history)\n`);
    } else if ('result' in message) {
      const missed = message['missed'];
      if (typeof missed === 'number' && missed > 0) {
        run.stderr.write(`wsrpc: the server skipped ${missed} messages (slow consumer)\n`);
      }
      run.stdout.write(`${JSON.stringify(message['result'])}\n`);
    }
    // Anything else (a starting position without data) prints nothing.
  }

  const notifications = connection.notifications$.subscribe((notification) => {
    const message = notification.params;
    if (notification.method !== methods.notification) return;
    if (typeof message !== 'object' || message === null || Array.isArray(message)) return;
    if (id !== undefined) handle(message as Message);
    else if (early.length < MAX_EARLY_MESSAGES) early.push(message as Message);
  });
  const onStop = (): void => finish({ kind: 'stopped' });
  if (run.stop.aborted) onStop();
  run.stop.addEventListener('abort', onStop);
  void connection.closed.then(({ code, reason }) => finish({ kind: 'closed', code, reason }));

  const wireParams: Params = run.params === undefined ? [run.topic] : [run.topic, run.params];
  connection.call(methods.subscribe, wireParams, run.deadline).then(
    (result) => {
      if (typeof result !== 'string' && typeof result !== 'number') {
        finish({
          kind: 'failed',
          error: new ConnectionError(
            `${connection.endpoint.hostPort} answered "${methods.subscribe}" with ${JSON.stringify(result)} instead of a subscription id`,
          ),
        });
        return;
      }
      id = result;
      for (const message of early.splice(0)) handle(message);
    },
    (error: unknown) => finish({ kind: 'failed', error: explainRefusal(error, methods) }),
  );

  const outcome = await done;
  run.stop.removeEventListener('abort', onStop);
  notifications.unsubscribe();
  switch (outcome.kind) {
    case 'complete':
      return;
    case 'stopped':
      if (id !== undefined) await unsubscribe(connection, methods.unsubscribe, id);
      return;
    case 'failed':
      throw outcome.error;
    case 'closed':
      throw connection.closedError(outcome.code, outcome.reason);
  }
}

/** A server without the subscribe method may just name it differently: say how to give its names. */
function explainRefusal(error: unknown, methods: SubscriptionMethodNames): unknown {
  if (!(error instanceof MethodNotFoundError)) return error;
  return withHint(
    error,
    `the server has no "${methods.subscribe}" method; if it names its subscription methods differently, give them with --methods SUBSCRIBE,NOTIFICATION,UNSUBSCRIBE, e.g. ${METHODS_EXAMPLE}`,
  );
}

/** Best effort: the server also drops the subscription when the connection closes. */
async function unsubscribe(
  connection: PeerConnection,
  method: string,
  id: SubscriptionId,
): Promise<void> {
  try {
    await connection.call(method, [id], new Deadline(UNSUBSCRIBE_TIMEOUT_MS));
  } catch {
    // Closing the connection ends it anyway.
  }
}
