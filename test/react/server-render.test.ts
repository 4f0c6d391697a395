/**
 * Server rendering (Node, no DOM): a ClientProvider given options renders its children, their
 * hooks showing the state before any call (loading, connecting), and makes no client: no
 * socket is opened on the server.
 */
import { createElement } from 'react';
import { renderToString } from 'react-dom/server';
import { countedWebSocket } from './counted-socket.js';
import { describe, expect, it } from 'vitest';
import {
  ClientProvider,
  useCall,
  useConnectionState,
  useMutation,
  useSubscription,
} from '../../src/react/index.js';

describe('ClientProvider on the server', () => {
  it('renders its children with the hooks before any call, opening no socket', () => {
    const counted = countedWebSocket();
    function App() {
      const { state } = useConnectionState();
      const call = useCall('rates.get', { pair: 'EUR/USD' });
      const off = useCall('rates.get', undefined, { enabled: false });
      const feed = useSubscription('prices', undefined, { history: 3 });
      const save = useMutation('save');
      return createElement(
        'p',
        null,
        `${state} call:${call.loading} off:${off.loading} feed:${feed.status.state} save:${save.loading}`,
      );
    }
    const options = { url: 'ws://127.0.0.1:9/rpc', WebSocket: counted.WebSocket };
    const html = renderToString(createElement(ClientProvider, { options }, createElement(App)));
    expect(html).toBe('<p>connecting call:true off:false feed:connecting save:false</p>');
    expect(counted.made()).toBe(0);
  });
});
