// Run by test/react/react18-hydration.test.ts as `node --import ./register.mjs hydrate.mjs`:
// the server renders a <ClientProvider options> page with React 18, a happy-dom document
// hydrates it against a real gateway, and what happened to the server's DOM is printed as
// one line of JSON: whether its nodes were kept (and what the user typed in them) or removed
// and made again, and how often the app's effect mounted and unmounted.
import { Window } from 'happy-dom';

const window = new Window({ url: 'http://localhost/' });
// react-dom looks for a DOM when it loads: the globals come first, React after.
for (const name of ['window', 'document', 'navigator', 'Node', 'Element', 'HTMLElement']) {
  Object.defineProperty(globalThis, name, {
    value: name === 'window' ? window : window[name],
    configurable: true,
    writable: true,
  });
}
globalThis.IS_REACT_ACT_ENVIRONMENT = false;

const { createElement, useEffect, useState, version } = await import('react');
const { hydrateRoot } = await import('react-dom/client');
const { renderToString } = await import('react-dom/server');
const { WebSocket } = await import('ws');
const { createGateway } = await import('../../../dist/src/index.js');
const { silentLogger } = await import('../../../dist/src/peer/logger.js');
const { ClientProvider, useCall, useClient, useConnectionState } =
  await import('../../../dist/src/react/index.js');

const gateway = createGateway({ logger: silentLogger, heartbeatIntervalMs: 0 });
gateway.method('answer', () => 42);
const { port } = await gateway.listen(0, '127.0.0.1');

const effects = { mounted: 0, unmounted: 0 };
/** Needs the client itself: rendered once a useEffect has run, as docs/react.md says. */
function ClientUser() {
  const client = useClient();
  return createElement('span', { id: 'client' }, client.state);
}
function WhenMounted() {
  const [mounted, setMounted] = useState(false);
  useEffect(() => setMounted(true), []);
  return mounted ? createElement(ClientUser) : null;
}
function App() {
  const { state } = useConnectionState();
  const answer = useCall('answer');
  useEffect(() => {
    effects.mounted++;
    return () => void effects.unmounted++;
  }, []);
  return createElement(
    'div',
    null,
    createElement('input', { id: 'name', defaultValue: '' }),
    createElement(WhenMounted),
    createElement('p', { id: 'state' }, `${state} ${answer.loading ? 'loading' : answer.data}`),
  );
}
const ui = createElement(
  ClientProvider,
  { options: { url: `ws://127.0.0.1:${port}/rpc`, WebSocket } },
  createElement(App),
);

const { document } = window;
const container = document.createElement('div');
container.innerHTML = renderToString(ui);
document.body.append(container);
const serverInput = container.querySelector('#name');
serverInput.value = 'typed before hydration ended';
const removed = [];
new window.MutationObserver((records) => {
  for (const record of records) for (const node of record.removedNodes) removed.push(node.nodeName);
}).observe(container, { childList: true, subtree: true });

const recoverable = [];
const root = hydrateRoot(container, ui, {
  onRecoverableError: (error) => recoverable.push(String(error)),
});
const deadline = Date.now() + 10_000;
const text = () => container.querySelector('#state')?.textContent;
while (text() !== 'open 42' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));

const input = container.querySelector('#name');
console.log(
  JSON.stringify({
    react: version,
    shown: text(),
    clientUser: container.querySelector('#client') !== null,
    inputKept: input === serverInput,
    typed: input?.value,
    removed,
    effects,
    recoverable,
  }),
);
root.unmount();
await gateway.close();
process.exit(0);
