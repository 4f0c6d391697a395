import { WebSocket } from 'ws';
import type { Logger } from '../../src/peer/logger.js';
import type { WebSocketConstructor } from '../../src/transport/websocket-transport.js';
import type { GatewayOptions } from '../../src/server/options.js';
import type { Resources } from '../integration/harness.js';
import type { WireFrame } from '../pubsub/helpers.js';
import type { RunningGateway } from '../support/gateway.js';

export interface LogRecord {
  level: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  obj: unknown;
  msg: string | undefined;
  bindings: Record<string, unknown>;
}

/** A Logger that keeps every record (child loggers included) in `records`. */
export function captureLogger(): { logger: Logger; records: LogRecord[] } {
  const records: LogRecord[] = [];
  const make = (bindings: Record<string, unknown>): Logger => {
    const at =
      (level: LogRecord['level']) =>
      (obj: unknown, msg?: string): void => {
        records.push({ level, obj, msg, bindings });
      };
    return {
      trace: at('trace'),
      debug: at('debug'),
      info: at('info'),
      warn: at('warn'),
      error: at('error'),
      child: (more) => make({ ...bindings, ...more }),
    };
  };
  return { logger: make({}), records };
}

/** The records with message `msg`. */
export function logged(records: readonly LogRecord[], msg: string): LogRecord[] {
  return records.filter((r) => r.msg === msg);
}

/** Everything a record holds as text, errors included (message and stack), for leak checks. */
export function recordText(record: LogRecord): string {
  return JSON.stringify([record.msg, record.bindings, record.obj], (_key, value: unknown) => {
    if (value instanceof Error) return { ...value, message: value.message, stack: value.stack };
    return value;
  });
}

/** A `ws` WebSocket class that records every frame the client sends. */
export function recordingWebSocket(sent: WireFrame[]): WebSocketConstructor {
  return class RecordingWebSocket extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols);
      const send = this.send.bind(this) as (data: string) => void;
      this.send = ((data: string) => {
        const parsed = JSON.parse(data) as WireFrame | WireFrame[];
        for (const frame of Array.isArray(parsed) ? parsed : [parsed]) sent.push(frame);
        send(data);
      }) as typeof this.send;
    }
  };
}

/** A gateway with a `sum` method (the demo service is not needed by these tests). */
export async function sumGateway(
  res: Resources,
  options: GatewayOptions<unknown> = {},
  port = 0,
): Promise<RunningGateway> {
  const running = await res.gateway<unknown>(options, port);
  running.gateway.method('sum', (params) =>
    (params as number[]).reduce((total, n) => total + n, 0),
  );
  return running;
}
