import type { Duplex } from 'node:stream';
import { STATUS_CODES } from 'node:http';

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

/** Answer an upgrade request with a plain HTTP error and close the socket. */
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
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}
