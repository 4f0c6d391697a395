import type { Duplex } from 'node:stream';
import { STATUS_CODES } from 'node:http';
import type { Logger } from '../peer/logger.js';

/** Thrown from `authenticate` to refuse a connection with an HTTP status. */
export class UpgradeRejection extends Error {
  override name = 'UpgradeRejection';
  constructor(
    readonly status: number = 401,
    message?: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message ?? STATUS_CODES[status] ?? 'Rejected');
  }
}

/** Answer an upgrade request with a plain HTTP error and close the socket once it is written. */
export function rejectUpgrade(
  socket: Duplex,
  status: number,
  message = STATUS_CODES[status] ?? 'Error',
  headers: Readonly<Record<string, string>> = {},
): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = `${message}\n`;
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Connection: close',
    'Content-Type: text/plain; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
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
