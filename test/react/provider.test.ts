// @vitest-environment happy-dom
/**
 * ClientProvider and useConnectionState against a real gateway on loopback: a provider given
 * options makes one client (one session, StrictMode included), keeps it while a Suspense
 * fallback hides it, closes it on unmount, and hydrates what the server rendered; one given a
 * client leaves it open; useConnectionState follows the state and says why the last connection
 * ended (close code and reason).
 */
import { act, cleanup, render, screen } from '@testing-library/react';
import { Suspense, createElement, lazy } from 'react';
import type { ComponentType } from 'react';
import { hydrateRoot } from 'react-dom/client';
import { renderToString } from 'react-dom/server';
import { WebSocket } from 'ws';
import { countedWebSocket } from './counted-socket.js';
import { afterEach, describe, expect, it } from 'vitest';
import type { RpcClient } from '../../src/client/client.js';
import {
  ClientProvider,
  useCall,
  useClient,
  useConnectionState,
  useSubscription,
} from '../../src/react/index.js';
import { deferred } from '../support/promises.js';
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
    const counted = countedWebSocket();
    const options = {
      url,
      WebSocket: counted.WebSocket,
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    };
    const view = render(createElement(ClientProvider, { options }, createElement(Probe)), {
      reactStrictMode: true,
    });
    await waitUntil(() => textOf() === 'open', 'open');
    expect({ opened: opened.length, sockets: counted.made() }).toEqual({ opened: 1, sockets: 1 });
    const client = seen!;

    view.unmount();
    await waitUntil(() => client.state === 'closed', 'the client closed');
    await waitUntil(() => gateway.sessions.size === 0, 'the session gone');
    expect({ opened: opened.length, sockets: counted.made() }).toEqual({ opened: 1, sockets: 1 });
  });

  it('keeps its client while a Suspense fallback hides it: one session, no message lost', async () => {
    const { url, gateway } = await res.gateway();
    gateway.topic('feed');
    let opened = 0;
    gateway.connected$.subscribe(() => opened++);
    const clients = new Set<RpcClient>();
    function Feed() {
      clients.add(useClient());
      const feed = useSubscription<string>('feed', undefined, { history: 10 });
      return createElement('p', { 'data-testid': 'feed' }, feed.history.join(' '));
    }
    // A lazy child shown later suspends the boundary, whose fallback hides the provider.
    const late = deferred<{ default: ComponentType }>();
    const Late = lazy(() => late.promise);
    const options = { url, WebSocket, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } };
    const ui = (withLate: boolean) =>
      createElement(
        Suspense,
        { fallback: createElement('p', null, 'fallback') },
        createElement(
          ClientProvider,
          { options },
          createElement(Feed),
          withLate ? createElement(Late) : null,
        ),
      );
    const view = render(ui(false), { reactStrictMode: true });
    await waitUntil(() => gateway.pubsub.topics().feed === 1, 'subscribed');
    await gateway.publish('feed', 'before');
    await waitUntil(() => screen.queryByTestId('feed')?.textContent === 'before', 'the message');
    const [client] = clients;

    view.rerender(ui(true));
    expect(screen.getByText('fallback')).toBeTruthy();
    // Past the macrotask a released client waits before it closes.
    await new Promise((resolve) => setTimeout(resolve, 0));
    await gateway.publish('feed', 'hidden');
    // A round trip on the same socket: the message published before it has arrived.
    await client!.call('no.such.method').catch(() => undefined);
    expect(client!.state).toBe('open');

    await act(async () => {
      late.resolve({ default: () => null });
      await late.promise;
    });
    await gateway.publish('feed', 'after');
    await waitUntil(
      () => screen.queryByTestId('feed')?.textContent?.endsWith('after') === true,
      'after',
    );
    expect(screen.getByTestId('feed').textContent).toBe('before hidden after');
    expect({ opened, clients: clients.size }).toEqual({ opened: 1, clients: 1 });
  });

  it('renders its children on the server and hydrates them, then connects', async () => {
    const { url, gateway } = await res.gateway();
    gateway.method('answer', () => 42);
    const counted = countedWebSocket();
    function App() {
      const { state } = useConnectionState();
      const answer = useCall<number>('answer');
      const text = answer.loading ? 'loading' : String(answer.data);
      return createElement('p', { 'data-testid': 'app' }, `${state} ${text}`);
    }
    const options = { url, WebSocket: counted.WebSocket };
    const ui = createElement(ClientProvider, { options }, createElement(App));
    const html = renderToString(ui);
    expect(html).toBe('<p data-testid="app">connecting loading</p>');
    expect(counted.made()).toBe(0);

    const container = document.createElement('div');
    container.innerHTML = html;
    document.body.append(container);
    const recoverable: unknown[] = [];
    const root = await act(() =>
      hydrateRoot(container, ui, { onRecoverableError: (error) => recoverable.push(error) }),
    );
    try {
      await waitUntil(() => container.textContent === 'open 42', 'open, with the answer');
      expect({ recoverable, sockets: counted.made() }).toEqual({ recoverable: [], sockets: 1 });
    } finally {
      act(() => root.unmount());
      container.remove();
    }
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
