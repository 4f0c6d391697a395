import type { Duplex } from 'node:stream';
import { STATUS_CODES, validateHeaderName, validateHeaderValue } from 'node:http';
import type { Logger } from '../peer/logger.js';

/**
 * Thrown from `authenticate` to refuse a connection with an HTTP status. A refusal is an error:
 * its status is a 4xx or 5xx (any other is a RangeError), and its headers are ones Node would
 * send (a name that is no HTTP token, or a value with CR, LF or another control character, is
 * a TypeError), so a hook that copies request data into them cannot add a header or make a
 * refusal read as a success. Thrown from the hook, either error refuses with a 500, logged, as
 * anything else the hook throws does, on every transport.
 */
export class UpgradeRejection extends Error {
  override name = 'UpgradeRejection';
  /** A copy of the headers given, checked and frozen: what is sent is what was checked. */
  readonly headers: Readonly<Record<string, string>>;
  constructor(
    readonly status: number = 401,
    message?: string,
    headers: Readonly<Record<string, string>> = {},
  ) {
    super(message ?? STATUS_CODES[status] ?? 'Rejected');
    if (!isRefusalStatus(status)) {
      throw new RangeError(`UpgradeRejection status must be 400-599, not ${String(status)}`);
    }
    const copy: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers)) {
      validateHeaderName(name);
      validateHeaderValue(name, value);
      copy[name] = value;
    }
    this.headers = Object.freeze(copy);
  }
}

/** Whether `status` is one a refusal may have: an integer from 400 to 599. */
function isRefusalStatus(status: unknown): boolean {
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status <= 599;
}

/**
 * Why a refusal's status or headers must not go on the wire as they are, or undefined when they
 * may: the checks UpgradeRejection's constructor makes, and Node's writeHead makes on the other
 * transports, for the bytes rejectUpgrade writes itself.
 */
export function refusalFault(
  status: number,
  headers: Readonly<Record<string, string>>,
): string | undefined {
  if (!isRefusalStatus(status)) return `status ${String(status)} is not 400-599`;
  for (const [name, value] of Object.entries(headers)) {
    try {
      validateHeaderName(name);
      validateHeaderValue(name, value);
    } catch (err) {
      return (err as Error).message;
    }
  }
  return undefined;
}

/** A refusal about to be sent: its status, its text (undefined: the status's) and headers. */
export interface Refusal {
  status: number;
  message: string | undefined;
  headers: Readonly<Record<string, string>>;
}

/**
 * The refusal to send for `refusal`: itself, or, when its status or headers may not be sent
 * (refusalFault), a plain 500 with the fault logged. Every transport sends what this gives.
 */
export function sendableRefusal(refusal: Refusal, logger: Logger | undefined): Refusal {
  const fault = refusalFault(refusal.status, refusal.headers);
  if (fault === undefined) return refusal;
  logger?.error({ status: refusal.status, fault }, 'refusal not sendable: refused with 500');
  return { status: 500, message: undefined, headers: {} };
}

/**
 * Answer an upgrade request with a plain HTTP error and close the socket once it is written;
 * one whose status or headers may not be sent is a plain 500 (sendableRefusal).
 */
export function rejectUpgrade(
  socket: Duplex,
  status: number,
  text?: string,
  headers: Readonly<Record<string, string>> = {},
  logger?: Logger,
): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const sent = sendableRefusal({ status, message: text, headers }, logger);
  const reasonPhrase = STATUS_CODES[sent.status] ?? 'Error';
  const body = `${sent.message ?? reasonPhrase}\n`;
  const lines = [
    `HTTP/1.1 ${sent.status} ${reasonPhrase}`,
    'Connection: close',
    'Content-Type: text/plain; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...Object.entries(sent.headers).map(([k, v]) => `${k}: ${v}`),
  ];
  // An HTTP server's sockets allow half-open: ended alone, the socket would stay open until the
  // peer sends its FIN, which a peer holding sockets never does.
  socket.once('finish', () => socket.destroy());
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}

/**
 * Refusals a client can cause at will (refused upgrades, refused TCP connections, sockets over
 * the HTTP port's bounds or too slow with their headers), logged so that a flood of them cannot
 * flood the log: the first of each interval at info with its details, the rest of that
 * interval at debug, then one info line with how many there were, by reason. Every refusal is
 * also counted in the metrics.
 */
export class RefusalLog {
  private counts: Record<string, number> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs = 10_000,
  ) {}

  refused(fields: { reason: string } & Record<string, unknown>, msg: string): void {
    if (this.timer === undefined) {
      this.logger.info(fields, msg);
      this.timer = setTimeout(() => this.flush(), this.intervalMs);
      this.timer.unref();
      return;
    }
    this.logger.debug(fields, msg);
    this.counts ??= Object.create(null) as Record<string, number>;
    this.counts[fields.reason] = (this.counts[fields.reason] ?? 0) + 1;
  }

  /** Log what was counted since the last info line, and start a new interval. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const counts = this.counts;
    this.counts = undefined;
    if (!counts) return;
    const total = Object.values(counts).reduce((sum, n) => sum + n, 0);
    this.logger.info(
      { refused: counts, total, intervalMs: this.intervalMs },
      'more connections refused (logged at debug)',
    );
  }
}
