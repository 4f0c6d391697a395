#!/usr/bin/env node
import { parseCommandLine } from './args.js';
import type { Invocation } from './args.js';
import { runCall, runDiscover, runNotify } from './commands.js';
import type { ConnectOptions, RpcConnection } from './connection.js';
import { Deadline } from './deadline.js';
import type { Endpoint } from './endpoint.js';
import { ExitCode, reportFailure } from './errors.js';
import { isGatewayCommand, runGatewayCommand } from './gateway-commands.js';
import { commandUsage, generalHelp } from './help.js';
import { HttpConnection } from './http-connection.js';
import type { PeerConnection } from './peer-connection.js';
import { runSubscribe } from './subscribe.js';
import { TcpConnection } from './tcp-connection.js';
import { readVersion } from './version.js';
import { WsConnection } from './ws-connection.js';

type Run = Extract<Invocation, { kind: 'run' }>;

/** Aborted by Ctrl+C, SIGTERM, or a closed stdout (e.g. `| head`); a second Ctrl+C exits at once. */
function stopSignal(): AbortSignal {
  const controller = new AbortController();
  const stop = (): void => {
    if (controller.signal.aborted) process.exit(ExitCode.Success);
    controller.abort();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  process.stdout.on('error', () => controller.abort());
  return controller.signal;
}

/** A bidirectional connection: a WebSocket (ws://, wss://) or NDJSON over TCP (tcp://, tls://). */
function openPeerConnection(
  endpoint: Endpoint,
  options: ConnectOptions,
  deadline: Deadline,
  signal?: AbortSignal,
): Promise<PeerConnection> {
  return endpoint.kind === 'tcp'
    ? TcpConnection.open(endpoint, options, deadline, signal)
    : WsConnection.open(endpoint, options, deadline, signal);
}

async function execute(run: Run): Promise<void> {
  const deadline = new Deadline(run.timeoutMs);
  const { stdout, stderr } = process;
  let connection: RpcConnection | undefined;
  try {
    if (run.command === 'subscribe') {
      const stop = stopSignal(); // before connecting: Ctrl+C while connecting also exits 0
      let peer: PeerConnection;
      try {
        peer = await openPeerConnection(run.endpoint, run.connect, deadline, stop);
      } catch (err) {
        if (stop.aborted) return;
        throw err;
      }
      connection = peer;
      const { target: topic, params, subscriptionMethods: methods } = run;
      await runSubscribe(peer, { topic, params, methods, deadline, stop, stdout, stderr });
      return;
    }
    connection =
      run.endpoint.kind === 'http'
        ? new HttpConnection(run.endpoint, run.connect)
        : await openPeerConnection(run.endpoint, run.connect, deadline);
    if (run.command === 'call') await runCall(connection, run.target, run.params, deadline, stdout);
    else if (run.command === 'notify')
      await runNotify(connection, run.target, run.params, deadline);
    else await runDiscover(connection, deadline, stdout);
  } finally {
    // Within what is left of --timeout: a server that stopped answering never closes either.
    await connection?.close(deadline);
  }
}

export async function main(argv: readonly string[]): Promise<number> {
  // A reader that went away (`| head`) is not an error worth a stack trace.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE')
      process.stderr.write(`wsrpc: cannot write to stdout: ${err.message}\n`);
  });
  try {
    // serve and check-config run the gateway itself (wsrpc-gateway, the same program).
    if (isGatewayCommand(argv[0])) {
      return await runGatewayCommand(argv, {
        stdout: process.stdout,
        stderr: process.stderr,
        env: process.env,
      });
    }
    const invocation = parseCommandLine(argv);
    if (invocation.kind === 'help') {
      process.stdout.write(invocation.command ? commandUsage(invocation.command) : generalHelp());
      return ExitCode.Success;
    }
    if (invocation.kind === 'version') {
      process.stdout.write(`${readVersion()}\n`);
      return ExitCode.Success;
    }
    await execute(invocation);
    return ExitCode.Success;
  } catch (err) {
    return reportFailure(err, process.stderr);
  }
}

const code = await main(process.argv.slice(2));
process.exitCode = code;
// Everything is closed by now; should some handle linger anyway, do not hang on it.
setTimeout(() => process.exit(code), 1_000).unref();
