import { DEFAULT_SUBSCRIPTION_METHODS } from '../protocol/subscription-frames.js';
import { DEFAULT_TIMEOUT_MS, usageLine } from './args.js';
import type { CommandName } from './args.js';
import { gatewayCommandsHelp } from './gateway-commands.js';
import { MAX_EARLY_MESSAGES } from './limits.js';
import { METHODS_EXAMPLE } from './subscribe.js';

const { subscribe, notification, unsubscribe } = DEFAULT_SUBSCRIPTION_METHODS;

const methodsOption = `      --methods SUBSCRIBE,NOTIFICATION,UNSUBSCRIBE
                              (subscribe only) The server's subscription method names, for a
                              gateway configured with other names (default
                              ${subscribe},${notification},${unsubscribe}), e.g.
                              ${METHODS_EXAMPLE}`;

/** The options, with --methods in the general help and subscribe's only. */
function options(withMethods: boolean): string {
  return `Options:
  -H, --header "Name: value"  Send this header on the WebSocket upgrade or the HTTP POST
                              (repeatable), e.g. -H 'Authorization: Bearer TOKEN'; not for
                              tcp:// or tls:// (TCP carries no headers)
      --protocol NAME         Offer this WebSocket subprotocol, e.g. a token (repeatable;
                              offered after jsonrpc-2.0, so the server answers with that);
                              ws:// and wss:// only
      --timeout MS            Give up when the command takes longer, in milliseconds (decimal
                              digits): connecting, the answer and the close (subscribe: until
                              the subscribe answer) (default ${DEFAULT_TIMEOUT_MS}; 0: no limit)
  -k, --insecure              Accept any TLS certificate (no verification)
      --cacert FILE           Trust the PEM certificate(s) in FILE, e.g. a self-signed server's
${withMethods ? `${methodsOption}\n` : ''}  -h, --help                  Show help (also per command: wsrpc call --help)
      --version               Print the version`;
}

const exitCodes = `Exit codes:
  0  success
  1  the server answered with a JSON-RPC error (stderr: "error CODE: MESSAGE" and "data: JSON")
  2  usage error: wrong arguments
  3  could not reach or talk to the server: refused, unknown host, timeout, TLS,
     authentication rejected, unexpected HTTP status, the server refused the connection
     (tcp://, tls://), connection closed, an answer that is not a JSON-RPC response`;

const urlLine = `URL     The full endpoint: ws://, wss://, http://, https://, or tcp:// and tls://
        (newline-delimited JSON over TCP, e.g. a gateway's listenTcp),
        e.g. ws://localhost:8080/rpc or tcp://localhost:9000; without a #fragment,
        and tcp:// and tls:// without user:password@ (TCP has nowhere to send them)`;

const urlAndParams = `${urlLine}
PARAMS  JSON text, one argument: an array (positional) or an object (named),
        e.g. '[42, 23]' or '{"minuend": 42, "subtrahend": 23}'; sent as typed,
        each number's text kept (12345678901234567891, 1e400, -0)`;

const commandHelp: Readonly<
  Record<CommandName, { summary: string; details: string; examples: string[] }>
> = {
  call: {
    summary: 'Call METHOD and print its result as JSON on stdout.',
    details: urlAndParams,
    examples: [
      `wsrpc call ws://localhost:8080/rpc subtract '[42, 23]'`,
      `wsrpc call http://localhost:8080/rpc subtract '{"minuend": 42, "subtrahend": 23}'`,
      `wsrpc call wss://gw.example.com/rpc whoami -H 'Authorization: Bearer TOKEN'`,
      `wsrpc call wss://localhost:8443/rpc rpc.ping --cacert ./cert.pem`,
      `wsrpc call tcp://localhost:9000 subtract '[42, 23]'`,
      `wsrpc call tls://localhost:9443 subtract '[42, 23]' --cacert ./cert.pem`,
    ],
  },
  notify: {
    summary: 'Send a notification: no answer is expected and nothing is printed.',
    details: urlAndParams,
    examples: [
      `wsrpc notify ws://localhost:8080/rpc update '[1, 2, 3]'`,
      `wsrpc notify http://localhost:8080/rpc log '{"level": "info", "text": "hello"}'`,
      `wsrpc notify tcp://localhost:9000 update '[1, 2, 3]'`,
    ],
  },
  subscribe: {
    summary: `Subscribe to a topic or per-subscriber stream and print each message's data as one
line of compact JSON, until Ctrl+C (unsubscribes, exit 0) or the server ends the stream
(exit 0; ended with an error: exit 1). Gaps and skipped messages are told on stderr, and
so are messages dropped before the subscribe answer (past ${MAX_EARLY_MESSAGES}; the stream's end is kept).`,
    details: `URL     ws://, wss://, tcp:// or tls:// (subscriptions need a two-way connection, not
        HTTP), e.g. ws://localhost:8080/rpc or tcp://localhost:9000
TOPIC   A topic or stream name, e.g. prices.BTC
PARAMS  JSON text for a stream, an array or an object, e.g. '{"from": 3}'`,
    examples: [
      `wsrpc subscribe ws://localhost:8080/rpc prices.BTC`,
      `wsrpc subscribe ws://localhost:8080/rpc countdown '{"from": 3}'`,
      `wsrpc subscribe wss://gw.example.com/rpc chat.lobby --protocol token.SECRET | jq .text`,
      `wsrpc subscribe ws://localhost:8080/rpc newHeads ${METHODS_EXAMPLE}`,
      `wsrpc subscribe tcp://localhost:9000 prices.BTC`,
    ],
  },
  discover: {
    summary: "Print the server's OpenRPC document (the rpc.discover method) as JSON.",
    details: urlLine,
    examples: [
      `wsrpc discover ws://localhost:8080/rpc`,
      `wsrpc discover https://gw.example.com/rpc -k | jq '.methods[].name'`,
      `wsrpc discover tls://gw.example.com:9443`,
    ],
  },
};

export function generalHelp(): string {
  return `wsrpc: a command-line client for JSON-RPC 2.0 gateways (WebSocket, HTTP or TCP)

Usage:
  wsrpc call URL METHOD [PARAMS]      Call METHOD and print its result as JSON
  wsrpc notify URL METHOD [PARAMS]    Send a notification (no answer, prints nothing)
  wsrpc subscribe URL TOPIC [PARAMS]  Print each message of a topic or stream, one JSON line each,
                                      until Ctrl+C or the server ends it (not over HTTP)
  wsrpc discover URL                  Print the server's OpenRPC document (rpc.discover)
  wsrpc COMMAND --help                Help on one command

The gateway from a configuration file (the same program, also installed as wsrpc-gateway):
${gatewayCommandsHelp.replace('Usage:\n', '')}

${urlAndParams}

${options(true)}

Examples:
  wsrpc call ws://localhost:8080/rpc subtract '[42, 23]'
  wsrpc call http://localhost:8080/rpc subtract '{"minuend": 42, "subtrahend": 23}'
  wsrpc subscribe wss://gw.example.com/rpc prices.BTC -H 'Authorization: Bearer TOKEN'
  wsrpc discover wss://localhost:8443/rpc --cacert ./cert.pem
  wsrpc call tcp://localhost:9000 subtract '[42, 23]'
  wsrpc subscribe tls://localhost:9443 prices.BTC --cacert ./cert.pem

${exitCodes}
`;
}

export function commandUsage(command: CommandName): string {
  const help = commandHelp[command];
  return `Usage: ${usageLine(command)}

${help.summary}

${help.details}

${options(command === 'subscribe')}

Examples:
${help.examples.map((line) => `  ${line}`).join('\n')}

${exitCodes}
`;
}
