import { JsonRpcError, MethodNotFoundError } from '../protocol/errors.js';
import {
  decodeSubscriptionNotification,
  isSubscriptionId,
} from '../protocol/subscription-frames.js';
import type {
  SubscriptionId,
  SubscriptionMethodNames,
  SubscriptionNotification,
  SubscriptionUpdate,
} from '../protocol/subscription-frames.js';
import type { Params } from '../protocol/types.js';
import { Deadline } from './deadline.js';
import { ConnectionError, messageOf, withHint } from './errors.js';
import type { Output } from './errors.js';
import { jsonText } from './json-text.js';
import { writeKeptNumbers } from './kept-numbers.js';
import { MAX_EARLY_BYTES, MAX_EARLY_MESSAGES, mebibytes } from './limits.js';
import type { PeerConnection } from './peer-connection.js';
import { terminalText } from './terminal-text.js';
import { Utf8Budget } from './utf8-budget.js';

/** Shown with a -32601 answer to the subscribe call. */
export const METHODS_EXAMPLE = '--methods eth_subscribe,eth_subscription,eth_unsubscribe';
/** Longest wait for the unsubscribe answer on Ctrl+C. */
const UNSUBSCRIBE_TIMEOUT_MS = 2_000;

type Outcome =
  | { kind: 'complete' }
  | { kind: 'stopped' }
  | { kind: 'failed'; error: unknown }
  | { kind: 'closed'; code: number; reason: string };

export interface SubscribeRun {
  topic: string;
  params: Params | undefined;
  /** The subscribe, notification and unsubscribe method names the server uses (`--methods`). */
  methods: SubscriptionMethodNames;
  deadline: Deadline;
  /** Aborted on Ctrl+C (SIGINT, SIGTERM) or when stdout is gone: unsubscribe and end with success. */
  stop: AbortSignal;
  stdout: Output;
  stderr: Output;
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
  const early: SubscriptionNotification[] = [];
  /** By subscription id, the notifications dropped past MAX_EARLY_MESSAGES (told on stderr). */
  const droppedEarly = new Map<SubscriptionId, number>();
  const earlyText = new Utf8Budget(MAX_EARLY_BYTES);
  let lastEarlyFrame = 0;
  let settled = false;
  let finish!: (outcome: Outcome) => void;
  const done = new Promise<Outcome>((resolve) => {
    finish = (outcome) => {
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
  });
  const failed = (message: string): void =>
    finish({ kind: 'failed', error: new ConnectionError(message) });

  function handle(update: SubscriptionUpdate): void {
    // A message, or a stream's last notification, may say what was skipped just before it.
    if ('missed' in update && update.missed) {
      run.stderr.write(`wsrpc: the server skipped ${update.missed} messages (slow consumer)\n`);
    }
    switch (update.kind) {
      case 'error':
        finish({ kind: 'failed', error: JsonRpcError.fromErrorObject(update.error) });
        return;
      case 'complete':
        finish({ kind: 'complete' });
        return;
      case 'gap': {
        const { gap } = update;
        const count = gap === null ? 'an unknown number of messages' : `${gap} messages`;
        run.stderr.write(`wsrpc: ${count} were lost (no longer in the server's history)\n`);
        return;
      }
      case 'message':
        print(update.result);
        return;
      case 'position':
      case 'epoch':
      case 'other':
      // A starting position or an epoch, without data: nothing to print.
    }
  }

  /**
   * One line of compact JSON, safe for a terminal (jsonText); a message that cannot be printed
   * ends the run.
   */
  function print(result: unknown): void {
    let text: string;
    try {
      text = jsonText(result);
    } catch (err) {
      failed(`cannot print a message of the subscription: ${messageOf(err)}`);
      return;
    }
    run.stdout.write(`${text}\n`);
  }

  /**
   * Keep a notification until the subscribe answer names ours, within MAX_EARLY_BYTES of text
   * (in UTF-8 bytes). Past MAX_EARLY_MESSAGES a message is dropped and counted, but the end of a
   * stream (complete, error) is always kept: without it the command would wait for ever.
   */
  function keepEarly(decoded: SubscriptionNotification): void {
    // A batch's notifications share one frame: its text is counted once.
    const { frames, text } = connection.frame;
    let within = true;
    if (frames !== lastEarlyFrame) {
      lastEarlyFrame = frames;
      within = earlyText.add(text);
    }
    if (!within) {
      failed(
        `${connection.endpoint.hostPort} sent more than ${mebibytes(MAX_EARLY_BYTES)} of notifications before answering "${methods.subscribe}" (the CLI's limit)`,
      );
      return;
    }
    const { kind } = decoded.update;
    if (early.length < MAX_EARLY_MESSAGES || kind === 'complete' || kind === 'error') {
      early.push(decoded);
      return;
    }
    const { subscription } = decoded;
    droppedEarly.set(subscription, (droppedEarly.get(subscription) ?? 0) + 1);
  }

  /** Say how many of ours were dropped before the answer, if any (once). */
  function tellDropped(ours: SubscriptionId): void {
    const count = droppedEarly.get(ours);
    droppedEarly.clear();
    if (count === undefined) return;
    run.stderr.write(
      `wsrpc: ${count} messages were dropped: they came before the server answered "${methods.subscribe}", past the ${MAX_EARLY_MESSAGES} the CLI keeps until then\n`,
    );
  }

  /**
   * Handle what came before the answer, in order. What was dropped came after the first
   * MAX_EARLY_MESSAGES kept, and before the ends of streams kept past them.
   */
  function handleEarly(ours: SubscriptionId): void {
    const pending = early.splice(0);
    for (const [index, notification] of pending.entries()) {
      if (settled) return;
      if (index === MAX_EARLY_MESSAGES) tellDropped(ours);
      if (notification.subscription === ours) handle(notification.update);
    }
    if (!settled) tellDropped(ours);
  }

  const notifications = connection.notifications$.subscribe((notification) => {
    if (settled || notification.method !== methods.notification) return;
    const decoded = decodeSubscriptionNotification(notification.params);
    if (!decoded) return;
    if (id === undefined) keepEarly(decoded);
    else if (decoded.subscription === id) handle(decoded.update);
  });
  const onStop = (): void => finish({ kind: 'stopped' });
  if (run.stop.aborted) onStop();
  run.stop.addEventListener('abort', onStop);
  void connection.closed.then(({ code, reason }) => finish({ kind: 'closed', code, reason }));

  const wireParams: Params = run.params === undefined ? [run.topic] : [run.topic, run.params];
  connection.call(methods.subscribe, wireParams, run.deadline).then(
    (result) => {
      if (!isSubscriptionId(result)) {
        failed(
          `${connection.endpoint.hostPort} answered "${methods.subscribe}" with ${terminalText(writeKeptNumbers(JSON.stringify(result ?? null)))} instead of a subscription id`,
        );
        return;
      }
      id = result;
      // The --timeout covers connecting and this answer; the stream runs until stopped or ended.
      run.deadline.lift();
      handleEarly(id);
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
