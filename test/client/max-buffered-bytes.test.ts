/**
 * createClient's `maxBufferedBytes`: the bound on what the client leaves queued for a server that
 * does not read. Against a real server that sends requests and never reads the answers, the
 * client stops reading at the bound it was given (not at the 4 MiB default), over a `ws`
 * WebSocket and over `tcpSocket`, and through the shared worker (the tab's option reaches the
 * worker's client); it goes on once the server reads. The option is checked like the others.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createClient } from '../../src/client/index.js';
import type { RpcClient } from '../../src/client/client.js';
import { resolveClientOptions } from '../../src/client/client-options.js';
import { createSharedClient } from '../../src/client/shared/index.js';
import { tcpSocket } from '../../src/transport/ndjson-socket.js';
import type { WebSocketConstructor } from '../../src/transport/websocket-transport.js';
import { SharedTabs } from '../support/shared-tabs.js';
import {
  READ_SLACK,
  tcpNoReadServer as noReadOverTcp,
  wsNoReadServer as noReadOverWs,
} from '../support/no-read-server.js';
import type { NoReadServer } from '../support/no-read-server.js';
import { waitFor } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
const shared = new SharedTabs();
afterEach(async () => {
  await shared.cleanup();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The bound given: far below the 4 MiB default. */
const MAX_BUFFERED = 256 * 1024;
/** Requests the server sends: 32 MiB of answers, past the default and the kernel's buffers. */
const REQUESTS = 2048;
const wsNoReadServer = () => noReadOverWs(REQUESTS, cleanups);
const tcpNoReadServer = () => noReadOverTcp(REQUESTS, cleanups);

/** What the client's socket was told: the bytes queued for the server at each pause, and resumes. */
interface Watch {
  pausedAt: number[];
  resumes: number;
}

/** `Base` with its pause() and resume() (what the client's transport calls) recorded in `watch`. */
function watched(Base: WebSocketConstructor, watch: Watch): WebSocketConstructor {
  const Pausable = Base as new (
    url: string,
    protocols?: string | string[],
  ) => {
    readonly bufferedAmount: number;
    pause(): void;
    resume(): void;
  };
  return class Watched extends Pausable {
    override pause(): void {
      watch.pausedAt.push(this.bufferedAmount);
      super.pause();
    }

    override resume(): void {
      watch.resumes++;
      super.resume();
    }
  };
}

function client(url: string, options: Record<string, unknown>): RpcClient {
  const made = createClient({ url, heartbeat: false, reconnect: false, ...options });
  cleanups.push(() => made.close());
  return made;
}

/** The client stops reading just past MAX_BUFFERED, then reads everything once the server does. */
async function expectPausedAtBoundThenResumed(server: NoReadServer, watch: Watch): Promise<void> {
  await waitFor(() => watch.pausedAt.length > 0, 'the client to stop reading', 60_000);
  expect(watch.pausedAt[0]).toBeGreaterThan(MAX_BUFFERED);
  expect(watch.pausedAt[0]).toBeLessThanOrEqual(MAX_BUFFERED + READ_SLACK);
  server.startReading();
  await waitFor(
    () => server.answers() === REQUESTS,
    () => `all answers (${server.answers()})`,
    60_000,
  );
  expect(watch.resumes).toBeGreaterThan(0);
  expect(Math.max(...watch.pausedAt)).toBeLessThanOrEqual(MAX_BUFFERED + READ_SLACK);
}

describe('createClient maxBufferedBytes: a server that sends but never reads', () => {
  it('ws: the client stops reading at the bound given, and goes on once the server reads', async () => {
    const server = await wsNoReadServer();
    const watch: Watch = { pausedAt: [], resumes: 0 };
    client(server.url, {
      WebSocket: watched(WebSocket as unknown as WebSocketConstructor, watch),
      maxBufferedBytes: MAX_BUFFERED,
    });
    await expectPausedAtBoundThenResumed(server, watch);
  });

  it('tcpSocket: the same over newline-delimited JSON', async () => {
    const server = await tcpNoReadServer();
    const watch: Watch = { pausedAt: [], resumes: 0 };
    client(server.url, {
      WebSocket: watched(tcpSocket(), watch),
      maxBufferedBytes: MAX_BUFFERED,
    });
    await expectPausedAtBoundThenResumed(server, watch);
  });

  it("through the shared worker: the tab's bound reaches the worker's client", async () => {
    const server = await wsNoReadServer();
    const watch: Watch = { pausedAt: [], resumes: 0 };
    const host = shared.host({
      heartbeat: false,
      WebSocket: watched(WebSocket as unknown as WebSocketConstructor, watch),
    });
    shared.tab(host, server.url, { maxBufferedBytes: MAX_BUFFERED });
    await expectPausedAtBoundThenResumed(server, watch);
  });
});

describe('createClient maxBufferedBytes: the option', () => {
  const base = { url: 'ws://127.0.0.1:1/rpc', WebSocket };

  it('is an integer at least 0 (0: no bound), default 4 MiB', () => {
    expect(resolveClientOptions(base).maxBufferedBytes).toBe(4 * 1024 * 1024);
    expect(resolveClientOptions({ ...base, maxBufferedBytes: 0 }).maxBufferedBytes).toBe(0);
    expect(resolveClientOptions({ ...base, maxBufferedBytes: 1 }).maxBufferedBytes).toBe(1);
  });

  it.each([
    [-1, RangeError, 'maxBufferedBytes must be an integer at least 0, not -1'],
    [1.5, RangeError, 'maxBufferedBytes must be an integer at least 0, not 1.5'],
    [Infinity, RangeError, 'maxBufferedBytes must be an integer at least 0'],
    ['1mb', TypeError, 'maxBufferedBytes must be an integer at least 0'],
  ])('%j is refused by createClient, naming the option', (value, type, message) => {
    const make = () => createClient({ ...base, maxBufferedBytes: value as number });
    expect(make).toThrow(type);
    expect(make).toThrow(message);
  });

  it('is refused by createSharedClient in the tab, naming the option', () => {
    const worker = () => ({ port: new MessageChannel().port1 });
    const make = () => createSharedClient({ url: base.url, worker, maxBufferedBytes: -1 } as never);
    expect(make).toThrow(RangeError);
    expect(make).toThrow('maxBufferedBytes must be an integer at least 0');
  });
});
