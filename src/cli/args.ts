import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DEFAULT_SUBSCRIPTION_METHODS } from '../protocol/subscription-frames.js';
import type { SubscriptionMethodNames } from '../protocol/subscription-frames.js';
import type { Params } from '../protocol/types.js';
import type { ConnectOptions } from './connection.js';
import { endpointOf, schemeOf } from './endpoint.js';
import type { Endpoint } from './endpoint.js';
import { UsageError } from './errors.js';
import { keepNumberTexts } from './kept-numbers.js';
import { METHODS_EXAMPLE } from './subscribe.js';

export const commandNames = ['call', 'notify', 'subscribe', 'discover'] as const;
export type CommandName = (typeof commandNames)[number];

export const DEFAULT_TIMEOUT_MS = 10_000;

export type Invocation =
  | { kind: 'help'; command: CommandName | undefined }
  | { kind: 'version' }
  | {
      kind: 'run';
      command: CommandName;
      endpoint: Endpoint;
      /** The method (call, notify, discover) or topic (subscribe). */
      target: string;
      params: Params | undefined;
      connect: ConnectOptions;
      timeoutMs: number;
      /** subscribe: the server's subscription method names (--methods; the defaults otherwise). */
      subscriptionMethods: SubscriptionMethodNames;
    };

const optionSpec = {
  header: { type: 'string', short: 'H', multiple: true },
  protocol: { type: 'string', multiple: true },
  timeout: { type: 'string' },
  insecure: { type: 'boolean', short: 'k' },
  cacert: { type: 'string' },
  methods: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;

/** Positional arguments of each command, after the command name. */
const positionalsOf: Readonly<Record<CommandName, { required: string[]; optional?: string }>> = {
  call: { required: ['URL', 'METHOD'], optional: 'PARAMS' },
  notify: { required: ['URL', 'METHOD'], optional: 'PARAMS' },
  subscribe: { required: ['URL', 'TOPIC'], optional: 'PARAMS' },
  discover: { required: ['URL'] },
};

function isCommand(name: string | undefined): name is CommandName {
  return (commandNames as readonly string[]).includes(name ?? '');
}

export function usageLine(command: CommandName): string {
  const { required, optional } = positionalsOf[command];
  return `wsrpc ${command} ${required.join(' ')}${optional ? ` [${optional}]` : ''} [OPTIONS]`;
}

/**
 * Read PARAMS: JSON text holding an array (positional) or an object (named). Each number whose
 * text JSON.stringify would change (`12345678901234567891`, `1e400`, `-0`, `1.0`) is kept as a
 * marked string (keepNumberTexts), written back as typed when the request is sent.
 */
export function parseParams(text: string, command: CommandName): Params {
  const example = `e.g. '[42, 23]' or '{"minuend": 42, "subtrahend": 23}' (quote it for the shell)`;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new UsageError(
      `PARAMS is not valid JSON (${why}): ${text}\nGive a JSON array or object, ${example}`,
      command,
    );
  }
  if (typeof value !== 'object' || value === null) {
    const kind = value === null ? 'null' : typeof value;
    throw new UsageError(
      `PARAMS must be a JSON array (positional params) or object (named params), not ${kind}: ${text}\nWrap a single value in an array, ${example}`,
      command,
    );
  }
  // Parsed again with the numbers kept: the checks above read the text as typed, so their
  // messages never quote a marked string.
  return JSON.parse(keepNumberTexts(text)) as Params;
}

/** `1st`, `2nd`, `3rd`, `4th`... for naming one of a repeated option's arguments. */
function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/**
 * Which of a repeated option's arguments is meant, without quoting it: a header value or a
 * subprotocol may be a token, which stderr (a terminal, a CI log) must not show.
 */
function which(option: string, index: number, text: string): string {
  return `the ${ordinal(index + 1)} ${option} (${text.length} characters, not shown: it may hold a secret)`;
}

/**
 * `-H "Name: value"` (the `index`th -H, from 0) into a header name (lower case) and value. A
 * mistyped one is named by its position and length only; a valid name is shown, never a value.
 */
export function parseHeader(text: string, command: CommandName, index = 0): [string, string] {
  const colon = text.indexOf(':');
  const name = colon > 0 ? text.slice(0, colon).trim() : '';
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
    throw new UsageError(
      `-H takes "Name: value"; ${which('-H', index, text)} has no header name (letters, digits and !#$%&'*+.^_\`|~-) before a colon; e.g. -H 'Authorization: Bearer TOKEN'`,
      command,
    );
  }
  const value = text.slice(colon + 1).trim();
  // What an HTTP header value may hold (RFC 9110 5.5): tab, visible ASCII, and bytes past it.
  if (/[^\t\x20-\x7e\x80-\xff]/.test(value)) {
    throw new UsageError(
      `-H ${name}: the value holds a character a header cannot carry (a control character, or one past U+00FF)`,
      command,
    );
  }
  return [name.toLowerCase(), value];
}

function parseHeaders(list: readonly string[], command: CommandName): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [index, text] of list.entries()) {
    const [name, value] = parseHeader(text, command, index);
    const before = headers[name];
    // A repeated header is one header with the values joined (cookies with "; ").
    headers[name] =
      before === undefined ? value : `${before}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  return headers;
}

/** The longest delay a timer takes (2^31-1 ms). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

function parseTimeout(text: string | undefined, command: CommandName): number {
  if (text === undefined) return DEFAULT_TIMEOUT_MS;
  // Decimal digits only: Number() would also take `0x10`, `1e3`, `0b11` and ` 5 `.
  if (!/^[0-9]+$/.test(text)) {
    throw new UsageError(
      `--timeout takes a whole number of milliseconds (0: no limit), got "${text}"; e.g. --timeout 30000`,
      command,
    );
  }
  const value = Number(text);
  // The longest a timer waits (about 24.8 days); a longer one would fire at once.
  if (value > MAX_TIMEOUT_MS) {
    throw new UsageError(
      `--timeout is at most ${MAX_TIMEOUT_MS} ms (about 24.8 days; 0: no limit), got "${text}"`,
      command,
    );
  }
  return value;
}

/** `--methods SUBSCRIBE,NOTIFICATION,UNSUBSCRIBE`: exactly three non-empty names. */
export function parseMethods(text: string, command: CommandName): SubscriptionMethodNames {
  const names = text.split(',').map((name) => name.trim());
  if (names.length !== 3 || names.some((name) => name === '')) {
    throw new UsageError(
      `--methods takes three comma-separated names, SUBSCRIBE,NOTIFICATION,UNSUBSCRIBE, got "${text}"; e.g. ${METHODS_EXAMPLE}`,
      command,
    );
  }
  const [subscribe, notification, unsubscribe] = names as [string, string, string];
  return { subscribe, notification, unsubscribe };
}

function readCa(file: string, command: CommandName): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new UsageError(`cannot read --cacert ${file} (${code})`, command);
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----')) {
    throw new UsageError(
      `--cacert ${file} holds no PEM certificate (no "-----BEGIN CERTIFICATE-----" line)`,
      command,
    );
  }
  return text;
}

function parseEndpoint(text: string, command: CommandName): Endpoint {
  const example = 'e.g. ws://localhost:8080/rpc, http://localhost:8080/rpc or tcp://localhost:9000';
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(
      `"${maskedUrlText(text)}" is not a URL; give the full endpoint, ${example}`,
      command,
    );
  }
  const endpoint = endpointOf(url);
  if (!endpoint) {
    throw new UsageError(
      `the URL must start with ws://, wss://, http://, https://, tcp:// or tls:// (got "${maskedUrlText(text)}"); ${example}`,
      command,
    );
  }
  // A server never sees a fragment (it is not sent); ws would refuse one, HTTP and TCP drop it.
  if (url.href.includes('#')) {
    throw new UsageError(
      `the URL has a fragment (a "#" and what follows it), which is never sent to the server; remove it, ${example}`,
      command,
    );
  }
  if (endpoint.kind !== 'tcp') return endpoint;
  if (url.username !== '' || url.password !== '') {
    // The URL is not quoted: it holds a password. As -H on tcp://, credentials are refused
    // rather than dropped without a word.
    throw new UsageError(
      `${url.protocol}// URLs cannot carry credentials (user:password@): TCP carries no headers, so there is nothing to send them in; the server decides by address. To send credentials, use the server's ${schemeOf('ws', endpoint.secure)} or ${schemeOf('http', endpoint.secure)} endpoint`,
      command,
    );
  }
  if (endpoint.port === undefined || endpoint.host === '') {
    throw new UsageError(
      `${url.protocol}// URLs need a host and a port, e.g. ${url.protocol}//localhost:9000 (got "${maskedUrlText(text)}")`,
      command,
    );
  }
  return endpoint;
}

/**
 * The URL as typed, fit to quote in a usage error: its userinfo, query string and fragment, where
 * passwords and tokens travel (an OAuth token in `#access_token=`), are shown as `***`. By hand, as a text that is not a URL cannot
 * be parsed into its parts: everything up to the last `@` counts as userinfo (a password typed
 * with a raw `/` or `#` in it is what makes such a text unparseable). The rest is kept, to show
 * the mistake.
 */
export function maskedUrlText(text: string): string {
  return text
    .replace(/^([a-z][a-z\d+.-]*:\/\/)?.*@/is, '$1***@')
    .replace(/\?[^#]*/, (query) => (query === '?' ? query : '?***'))
    .replace(/#.+$/s, '#***');
}

/** -H and --protocol ride on the HTTP upgrade or POST: a tcp:// or tls:// connection has neither. */
function checkNoHeaders(
  endpoint: Endpoint,
  values: { header?: string[] | undefined; protocol?: string[] | undefined },
  command: CommandName,
): void {
  if (endpoint.kind !== 'tcp') return;
  const option =
    (values.header ?? []).length > 0
      ? '-H/--header'
      : (values.protocol ?? []).length > 0
        ? '--protocol'
        : undefined;
  if (option === undefined) return;
  const secure = endpoint.secure ? 'wss://' : 'ws://';
  throw new UsageError(
    `${option} cannot be used with ${endpoint.url.protocol}//: TCP carries no headers (no HTTP request, no WebSocket subprotocol), so there is nothing to send them in; the server decides by address. To send credentials, use the server's ${secure} or ${endpoint.secure ? 'https://' : 'http://'} endpoint`,
    command,
  );
}

function parseOptions(argv: readonly string[]) {
  try {
    return parseArgs({
      args: [...argv],
      options: optionSpec,
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    const command = argv.find((arg) => isCommand(arg)) as CommandName | undefined;
    const { code, message } = err as { code?: string; message?: string };
    const option = /'(-[^' ]*)/.exec(message ?? '')?.[1];
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) {
      throw new UsageError(`unknown option ${option}`, command);
    }
    throw new UsageError(message ?? String(err), command);
  }
}

/** Turn the command line (without `node` and the script) into what to do; throws UsageError. */
export function parseCommandLine(argv: readonly string[]): Invocation {
  const { values, positionals } = parseOptions(argv);
  const [first, ...rest] = positionals;
  if (first === 'help') {
    const topic = rest[0];
    if (topic !== undefined && !isCommand(topic)) throw unknownCommand(topic);
    return { kind: 'help', command: topic };
  }
  if (values.version) return { kind: 'version' };
  if (first !== undefined && !isCommand(first)) throw unknownCommand(first);
  if (values.help) return { kind: 'help', command: first };
  if (first === undefined)
    throw new UsageError(`no command given; the commands are ${commandNames.join(', ')}`);
  const command = first;
  if (values.methods !== undefined && command !== 'subscribe') {
    throw new UsageError(
      `--methods names the subscription methods and is only for subscribe, not ${command}`,
      command,
    );
  }

  const { required, optional } = positionalsOf[command];
  if (rest.length < required.length) {
    const missing = required.slice(rest.length).join(' and ');
    throw new UsageError(`${command} needs ${missing}: ${usageLine(command)}`, command);
  }
  const most = required.length + (optional ? 1 : 0);
  if (rest.length > most) {
    // Not echoed: an unquoted `-H Authorization: Bearer TOKEN` leaves the token among them.
    const extra = rest.length - most;
    const what = `${extra} more than ${command} takes, not shown: one may hold a secret`;
    const hint = optional ? ` (PARAMS is one argument: quote the JSON, e.g. '[42, 23]')` : '';
    throw new UsageError(`too many arguments (${what})${hint}`, command);
  }

  const endpoint = parseEndpoint(rest[0]!, command);
  if (command === 'subscribe' && endpoint.kind === 'http') {
    throw new UsageError(
      `subscriptions need a two-way connection: use ws:// or wss:// (or tcp://, tls://) instead of ${endpoint.url.protocol}// (e.g. ws://${endpoint.url.host}${endpoint.url.pathname})`,
      command,
    );
  }
  checkNoHeaders(endpoint, values, command);
  const protocols = values.protocol ?? [];
  for (const [index, protocol] of protocols.entries()) {
    // A subprotocol is an HTTP token (RFC 6455 4.1), and each is sent once.
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(protocol)) {
      throw new UsageError(
        `--protocol takes a subprotocol name (letters, digits and !#$%&'*+.^_\`|~-); ${which('--protocol', index, protocol)} holds another character`,
        command,
      );
    }
  }
  if (new Set(protocols).size !== protocols.length) {
    throw new UsageError('--protocol names each subprotocol once', command);
  }
  if (protocols.length > 0 && endpoint.kind === 'http') {
    throw new UsageError(
      `--protocol is a WebSocket subprotocol and needs a ws:// or wss:// URL; over HTTP send credentials with -H 'Authorization: Bearer TOKEN'`,
      command,
    );
  }
  const target = command === 'discover' ? 'rpc.discover' : rest[1]!;
  if (target === '') throw new UsageError(`${required[1]} must not be empty`, command);
  const paramsText = command === 'discover' ? undefined : rest[2];

  return {
    kind: 'run',
    command,
    endpoint,
    target,
    params: paramsText === undefined ? undefined : parseParams(paramsText, command),
    timeoutMs: parseTimeout(values.timeout, command),
    subscriptionMethods:
      values.methods === undefined
        ? { ...DEFAULT_SUBSCRIPTION_METHODS }
        : parseMethods(values.methods, command),
    connect: {
      headers: parseHeaders(values.header ?? [], command),
      protocols,
      insecure: values.insecure ?? false,
      ca: values.cacert === undefined ? undefined : readCa(values.cacert, command),
    },
  };
}

function unknownCommand(name: string): UsageError {
  return new UsageError(`unknown command "${name}"; the commands are ${commandNames.join(', ')}`);
}
