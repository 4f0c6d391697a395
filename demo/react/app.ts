// The demo page in React, with wsrpc-gateway/react's hooks against the demo service: the
// connection state, the ticker (latest price, a window of the last ones, the subscription's
// status), the chat (a subscription and a mutation), a call that follows its inputs, and the
// countdown stream with `reset`. Bundled whole (React, the client, the hooks) into react.js by
// scripts/build-demo-web.mjs; served at /react.
import { StrictMode, createElement as h, useState } from 'react';
import type { ReactNode } from 'react';
import { createRoot } from 'react-dom/client';
import {
  ClientProvider,
  useCall,
  useConnectionState,
  useMutation,
  useSubscription,
} from '../../src/react/index.js';
import type { ChatMessage, Tick } from '../pubsub.js';

const time = (at: number) => new Date(at).toLocaleTimeString([], { hour12: false });

function Card(props: { title: string; id: string; children?: ReactNode }) {
  return h(
    'section',
    { className: 'card', id: props.id },
    h('h2', null, props.title),
    props.children,
  );
}

function Connection() {
  const { state, lastDisconnect } = useConnectionState();
  const drop = useMutation('demo.drop');
  const why = lastDisconnect
    ? `last close ${lastDisconnect.code ?? '–'} ${lastDisconnect.reason ?? ''}`
    : '';
  return h(
    'header',
    { className: 'bar' },
    h('div', { className: 'brand' }, h('h1', null, 'wsrpc-gateway · React')),
    h(
      'div',
      { className: 'status' },
      h('span', { id: 'state', className: 'badge', 'data-state': state }, state),
      h('span', { id: 'last-close', className: 'metric' }, why),
      h(
        'button',
        { id: 'drop', type: 'button', className: 'ghost', onClick: () => drop.mutate() },
        'Drop connection',
      ),
    ),
  );
}

function Ticker() {
  const ticker = useSubscription<Tick>('ticker', undefined, { history: 20 });
  const { status, data, history } = ticker;
  return h(
    Card,
    { title: 'Ticker', id: 'ticker' },
    h('p', { className: 'price' }, data ? data.price.toFixed(2) : '–'),
    h(
      'p',
      { className: 'note' },
      h('span', { id: 'ticker-status' }, status.state),
      status.seq === undefined ? '' : ` · #${status.seq}`,
    ),
    h(
      'ol',
      { id: 'ticker-history', className: 'messages' },
      history.map((tick) => h('li', { key: tick.at }, `${time(tick.at)} ${tick.price.toFixed(2)}`)),
    ),
  );
}

function Chat() {
  const chat = useSubscription<ChatMessage>('chat', undefined, { history: 10 });
  const send = useMutation<number>('chat.send');
  // chat.send publishes to everyone but the sender: the page shows its own at once.
  const [mine, setMine] = useState<ChatMessage[]>([]);
  const [text, setText] = useState('');
  const shown = [...chat.history, ...mine].sort((a, b) => a.at - b.at).slice(-10);
  const submit = (event: { preventDefault(): void }) => {
    event.preventDefault();
    if (!text) return;
    const message = { from: 'you', text, at: Date.now() };
    send.mutateAsync({ text, from: 'react' }).then(
      () => setMine((before) => [...before, message].slice(-10)),
      () => undefined,
    );
    setText('');
  };
  return h(
    Card,
    { title: 'Chat', id: 'chat' },
    h(
      'ul',
      { id: 'chat-list', className: 'messages' },
      shown.map((m) =>
        h(
          'li',
          { key: `${m.at} ${m.from} ${m.text}` },
          h('span', { className: 'from' }, m.from),
          ' ',
          h('span', { className: 'text' }, m.text),
        ),
      ),
    ),
    h(
      'form',
      { className: 'composer', onSubmit: submit },
      h('input', {
        id: 'chat-text',
        className: 'text',
        value: text,
        placeholder: 'Say something',
        onChange: (e: { target: { value: string } }) => setText(e.target.value),
      }),
      h('button', { id: 'chat-send', type: 'submit', disabled: send.loading }, 'Send'),
    ),
    send.error ? h('p', { className: 'note warn' }, (send.error as Error).message) : null,
  );
}

function Subtract() {
  const [minuend, setMinuend] = useState(42);
  const [subtrahend, setSubtrahend] = useState(23);
  // A new call at each change; the one under way is cancelled (rpc.cancel).
  const result = useCall<number>('subtract', { minuend, subtrahend });
  const input = (value: number, set: (n: number) => void, id: string) =>
    h('input', {
      id,
      type: 'number',
      value,
      onChange: (e: { target: { value: string } }) => set(Number(e.target.value)),
    });
  return h(
    Card,
    { title: 'subtract', id: 'subtract' },
    h(
      'p',
      null,
      input(minuend, setMinuend, 'minuend'),
      ' − ',
      input(subtrahend, setSubtrahend, 'subtrahend'),
      ' = ',
      h('strong', { id: 'difference' }, result.loading ? '…' : String(result.data)),
    ),
  );
}

function Countdown() {
  const countdown = useSubscription<number>('countdown', { from: 5 }, { history: 6 });
  return h(
    Card,
    { title: 'Countdown stream', id: 'countdown' },
    h(
      'p',
      null,
      h('span', { id: 'countdown-status' }, countdown.status.state),
      ' ',
      h('span', { id: 'countdown-history' }, countdown.history.join(' ')),
    ),
    h('button', { id: 'countdown-reset', type: 'button', onClick: countdown.reset }, 'Again'),
  );
}

const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/rpc`;
const options = { url, reconnect: { initialDelayMs: 500, maxDelayMs: 2_000 } };

createRoot(document.getElementById('root')!).render(
  h(
    StrictMode,
    null,
    h(
      ClientProvider,
      { options },
      h(Connection),
      h('main', { className: 'grid' }, h(Ticker), h(Chat), h(Subtract), h(Countdown)),
    ),
  ),
);
