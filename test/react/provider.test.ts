// @vitest-environment happy-dom
/**
 * ClientProvider and useConnectionState against a real gateway on loopback: a provider given
 * options makes one client (one session, StrictMode included) and closes it on unmount; one
 * given a client leaves it open; useConnectionState follows the state and says why the last
 * connection ended (close code and reason).
 */
import { cleanup, render, screen } from '@testing-library/react';
import { createElement } from 'react';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { RpcClient } from '../../src/client/client.js';
import { ClientProvider, useClient, useConnectionState } from '../../src/react/index.js';
import { Resources } from '../support/resources.js';
import { waitFor as waitUntil } from '../support/waiting.js';
import { recorder, renderWith } from './harness.js';

const res = new Resources();
afterEach(async () => {
  cleanup();
  await res.cleanup();
});

function Connection({ states }: { states?: { record: (state: string) => void } }) {
  const { state, lastDisconnect } = useConnectionState();
  states?.record(state);
  const why = lastDisconnect ? ` ${lastDisconnect.code} ${lastDisconnect.reason}` : '';
  return createElement('p', { 'data-testid': 'connection' }, `${state}${why}`);
}

const textOf = () => screen.getByTestId('connection').textContent;

describe('ClientProvider', () => {
  it('makes one client from options under StrictMode, and closes it on unmount', async () => {
    const { url, gateway } = await res.gateway();
    const opened: string[] = [];
    gateway.connected$.subscribe((session) => opened.push(session.id));
    let seen: RpcClient | undefined;
    function Probe() {
      seen = useClient();
      return createElement(Connection);
    }
    // Every socket a client makes: a client closed at once may not get as far as a session.
    let sockets = 0;
    class CountedWebSocket extends WebSocket {
      constructor(address: string, protocols?: string | string[]) {
        super(address, protocols);
        sockets++;
      }
    }
    const options = {
      url,
      WebSocket: CountedWebSocket,
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    };
    const view = render(createElement(ClientProvider, { options }, createElement(Probe)), {
      reactStrictMode: true,
    });
    await waitUntil(() => textOf() === 'open', 'open');
    expect({ opened: opened.length, sockets }).toEqual({ opened: 1, sockets: 1 });
    const client = seen!;

    view.unmount();
    await waitUntil(() => client.state === 'closed', 'the client closed');
    await waitUntil(() => gateway.sessions.size === 0, 'the session gone');
    expect({ opened: opened.length, sockets }).toEqual({ opened: 1, sockets: 1 });
  });

  it('leaves a client it was given open on unmount', async () => {
    const { url } = await res.gateway();
    const client = res.client(url);
    const view = renderWith(client, createElement(Connection));
    await waitUntil(() => textOf() === 'open', 'open');
    view.unmount();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(client.state).toBe('open');
  });

  it('useClient throws without a provider', () => {
    function Orphan() {
      useClient();
      return null;
    }
    const logged = console.error;
    console.error = () => undefined;
    try {
      expect(() => render(createElement(Orphan))).toThrow(/no <ClientProvider> above/);
    } finally {
      console.error = logged;
    }
  });
});

describe('useConnectionState', () => {
  it('follows the state through a close by the server, with its code and reason', async () => {
    const { url, gateway } = await res.gateway();
    const client = res.client(url);
    const states = recorder<string>();
    renderWith(client, createElement(Connection, { states }));
    await waitUntil(() => textOf() === 'open', 'open');
    for (const session of gateway.sessions.values()) session.close(4001, 'dropped on request');
    await waitUntil(() => textOf() === 'open 4001 dropped on request', 'open again');
    expect(states.values).toEqual(['connecting', 'open', 'reconnecting', 'open']);
  });
});
