import { WebSocket } from 'ws';
import { createClientHost, createSharedClient } from '../../src/client/shared/index.js';
import type {
  ClientHost,
  ClientHostOptions,
  SharedClientOptions,
  SharedRpcClient,
} from '../../src/client/shared/index.js';

/*
 * The shared connection's tests: worker hosts and tabs in this process, each tab's channel a
 * MessageChannel to its host, and everything they made closed after each test (`cleanup`).
 */
export class SharedTabs {
  readonly #hosts: ClientHost[] = [];
  readonly #tabs: SharedRpcClient[] = [];

  /** A worker's side on `ws`, reconnecting quickly, with `options` over those. */
  host(options: ClientHostOptions = {}): ClientHost {
    const host = createClientHost({
      WebSocket,
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
      ...options,
    });
    this.#hosts.push(host);
    return host;
  }

  /**
   * A tab of `host` made with createSharedClient; `wrap` may stand in for the tab's end of its
   * channel (a port that freezes, say).
   */
  tab(
    host: ClientHost,
    url: string,
    extra: Partial<SharedClientOptions> = {},
    wrap: (port: MessagePort) => MessagePort = (port) => port,
  ): { tab: SharedRpcClient; port: MessagePort } {
    let port!: MessagePort;
    const tab = createSharedClient({
      url,
      worker: () => {
        const channel = new MessageChannel();
        host.connect(channel.port2);
        port = channel.port1;
        return { port: wrap(port) };
      },
      ...extra,
    });
    this.track(tab);
    return { tab, port };
  }

  /** A tab made by the test itself, closed with the others. */
  track(tab: SharedRpcClient): SharedRpcClient {
    this.#tabs.push(tab);
    return tab;
  }

  /** Close every tab, then every host. */
  async cleanup(): Promise<void> {
    await Promise.all(this.#tabs.splice(0).map((tab) => tab.close()));
    await Promise.all(this.#hosts.splice(0).map((host) => host.close()));
  }
}

/** A port whose messages wait while it is frozen, as a frozen page's do. */
export class FreezablePort {
  frozen = false;
  readonly #held: MessageEvent[] = [];
  #listener: ((event: MessageEvent) => void) | null = null;
  constructor(readonly inner: MessagePort) {}
  set onmessage(listener: ((event: MessageEvent) => void) | null) {
    this.#listener = listener;
    this.inner.onmessage = listener && ((event) => this.#take(event));
  }
  get onmessage(): ((event: MessageEvent) => void) | null {
    return this.#listener;
  }
  postMessage(message: unknown): void {
    if (!this.frozen) this.inner.postMessage(message);
  }
  close(): void {
    this.inner.close();
  }
  addEventListener(): void {}
  thaw(): void {
    this.frozen = false;
    for (const event of this.#held.splice(0)) this.#listener?.(event);
  }
  #take(event: MessageEvent): void {
    if (this.frozen) this.#held.push(event);
    else this.#listener?.(event);
  }
}
