// The demo page. It imports the client from the package's browser build: the page's build
// (scripts/build-demo-web.mjs) maps this import to /client.js, dist/browser/client.js as served.
import { createClient } from '../../src/client/index.js';
import type { ConnectionState, PresenceState, SubscriptionEvent } from '../../src/client/index.js';
import { Sparkline } from './chart.js';
import { startConsole } from './console.js';
import { byId, clock, logEvent } from './dom.js';
import type { ChatMessage, Tick } from '../pubsub.js';

const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/rpc`;
// A short backoff cap: a restarted demo server is found again within about two seconds. The
// first retry waits 0.5-1 s, so "Drop connection" misses a tick or two that the resume replays.
// The page's identity: a short-lived token from the demo server, presented in-band as the first
// message of every connection and again whenever the server asks for a fresh one (rpc.token).
const identity = { fetched: 0, connections: 0 };
async function getToken(): Promise<string> {
  const response = await fetch('/demo/token', { cache: 'no-store' });
  if (!response.ok) throw new Error(`GET /demo/token: ${response.status}`);
  identity.fetched++;
  return response.text();
}
const client = createClient({
  url,
  getToken,
  reconnect: { initialDelayMs: 1_000, maxDelayMs: 2_000 },
});

// --- Connection state, reconnects, latency ------------------------------------------------

let reconnects = 0;
let lastState: ConnectionState = 'connecting';
/** Where the ticker was when the connection dropped, and when it came back. */
let resume:
  | { afterSeq: number | undefined; droppedAt: number; backAt?: number; nextSeq?: number }
  | undefined;

client.state$.subscribe((state) => {
  const badge = byId('state');
  badge.textContent = state;
  badge.dataset['state'] = state;
  if (state === 'open') {
    if (lastState === 'reconnecting') {
      reconnects++;
      byId('reconnects').textContent = String(reconnects);
      if (resume) resume.backAt = Date.now();
      logEvent('reconnected; the client resubscribes to ticker and chat by itself', 'good');
    } else {
      logEvent(`connected to ${url}`, 'good');
    }
  } else if (state === 'reconnecting') {
    resume = { afterSeq: ticker.lastSeq, droppedAt: Date.now() };
    ticker.replayed = 0;
    logEvent(`connection lost after ticker #${ticker.lastSeq ?? '–'}; reconnecting…`, 'warn');
  } else if (state === 'closed') {
    logEvent('client closed', 'warn');
  }
  lastState = state;
});

async function measureLatency(): Promise<void> {
  if (client.state !== 'open') return;
  const started = performance.now();
  try {
    await client.call('get_data', undefined, { timeoutMs: 5_000 });
    byId('latency').textContent = `${(performance.now() - started).toFixed(1)} ms`;
  } catch {
    byId('latency').textContent = '–';
  }
}
setInterval(() => void measureLatency(), 2_000);
client.state$.subscribe((state) => {
  if (state === 'open') void measureLatency();
});

byId('drop').addEventListener('click', () => {
  client.call('demo.drop').catch(() => undefined); // the answer races the close; either is fine
});

// --- Ticker -------------------------------------------------------------------------------

const ticker = {
  chart: new Sparkline(60),
  count: 0,
  lost: 0,
  lastSeq: undefined as number | undefined,
  lastPrice: undefined as number | undefined,
  /** Ticks published while the connection was down, replayed by the resume. */
  replayed: 0,
};

function setResumeNote(text: string, tone: 'good' | 'warn'): void {
  const note = byId('resume-info');
  note.textContent = text;
  note.className = `note ${tone}`;
}

function showTick(event: SubscriptionEvent<Tick>): void {
  if (event.gap !== undefined) {
    // History no longer reached back to where we left off.
    ticker.lost += event.gap ?? 0;
    byId('ticker-lost').textContent = String(ticker.lost);
    setResumeNote(
      `Resumed, but ${event.gap ?? 'an unknown number of'} tick(s) were beyond the server's history.`,
      'warn',
    );
    return;
  }
  const { data: tick, seq } = event;
  if (seq !== undefined && ticker.lastSeq !== undefined) {
    if (seq <= ticker.lastSeq) {
      logEvent(`ticker numbering restarted at #${seq} (the server restarted)`, 'warn');
      setResumeNote(
        `The server restarted: with the in-memory broker its topic history starts over, so the ticker goes on from #${seq}.`,
        'warn',
      );
      resume = undefined;
    } else if (seq > ticker.lastSeq + 1) {
      ticker.lost += seq - ticker.lastSeq - 1;
      byId('ticker-lost').textContent = String(ticker.lost);
    }
  }
  if (resume?.backAt !== undefined && resume.afterSeq !== undefined && seq !== undefined) {
    // Published while we were away (the demo's server and page share a clock).
    if (seq > resume.afterSeq && tick.at < resume.backAt) ticker.replayed++;
    resume.nextSeq ??= seq;
    setResumeNote(
      `Resumed after #${resume.afterSeq}, next came #${resume.nextSeq}: ${ticker.replayed} tick(s) published while away were replayed, in order; lost: ${ticker.lost}.`,
      ticker.lost === 0 ? 'good' : 'warn',
    );
  }
  ticker.count++;
  if (seq !== undefined) ticker.lastSeq = seq;
  const previous = ticker.lastPrice;
  ticker.lastPrice = tick.price;
  byId('ticker-symbol').textContent = tick.symbol;
  byId('ticker-price').textContent = tick.price.toFixed(2);
  const change = byId('ticker-change');
  if (previous !== undefined) {
    const delta = tick.price - previous;
    change.textContent = `${delta >= 0 ? '▲' : '▼'} ${Math.abs(delta).toFixed(2)}`;
    change.className = `change ${delta >= 0 ? 'up' : 'down'}`;
  }
  byId('ticker-count').textContent = String(ticker.count);
  byId('ticker-seq').textContent = seq === undefined ? '–' : `#${seq}`;
  ticker.chart.push(tick.price);
}

client.subscribeWithMeta<Tick>('ticker').subscribe({
  next: showTick,
  error: (err: unknown) =>
    logEvent(`ticker subscription failed: ${(err as Error).message}`, 'warn'),
});

// --- Chat ---------------------------------------------------------------------------------

const nameInput = byId<HTMLInputElement>('chat-name');
nameInput.value =
  sessionStorage.getItem('chat-name') ?? `guest-${Math.random().toString(36).slice(2, 6)}`;
nameInput.addEventListener('change', () => sessionStorage.setItem('chat-name', nameInput.value));

/** One message in the list: another's from the topic, or this page's own, shown as it is sent. */
function showChat(message: ChatMessage, mine: boolean): void {
  const item = document.createElement('li');
  if (mine) item.className = 'mine';
  const from = document.createElement('span');
  from.className = 'from';
  from.textContent = message.from;
  const text = document.createElement('span');
  text.className = 'text';
  text.textContent = message.text;
  const time = document.createElement('time');
  time.textContent = clock(message.at);
  item.append(from, text, time);
  const list = byId<HTMLUListElement>('chat-list');
  list.append(item);
  while (list.children.length > 100) list.firstElementChild?.remove();
  list.scrollTop = list.scrollHeight;
}

// The server publishes a message to everyone but its sender (`except`): what arrives is others'.
client.subscribe<ChatMessage>('chat').subscribe({
  next: (message) => showChat(message, false),
  error: (err: unknown) => logEvent(`chat subscription failed: ${(err as Error).message}`, 'warn'),
});

byId<HTMLFormElement>('chat-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = byId<HTMLInputElement>('chat-input');
  const text = input.value.trim();
  if (!text) return;
  input.value = '';
  const from = nameInput.value.trim() || undefined;
  showChat({ from: from ?? 'me', text, at: Date.now() }, true);
  // While reconnecting the call waits in the client's offline queue and goes out on reconnect.
  client
    .call('chat.send', { text, from })
    .catch((err: unknown) => logEvent(`chat.send failed: ${(err as Error).message}`, 'warn'));
});

// Who is in the room: the chat topic's subscribers on every node, this page marked.
let room: PresenceState = { count: 0, members: [] };
/** The room list; this page is told apart by its session id (demo.whoami, below). */
function showRoom(ownSessionId: string | undefined): void {
  byId('chat-count').textContent = String(room.count);
  byId<HTMLUListElement>('chat-room').replaceChildren(
    ...room.members.map((member) => {
      const item = document.createElement('li');
      const you = member.sessionId === ownSessionId;
      item.textContent = you ? 'you' : `guest ${member.sessionId.slice(-4)}`;
      if (you) item.className = 'you';
      return item;
    }),
  );
}
client.presence('chat').subscribe({
  next: (state) => {
    room = state;
    showRoom(whoami()?.sessionId);
  },
  error: (err: unknown) => logEvent(`chat presence failed: ${(err as Error).message}`, 'warn'),
});

// --- Server-to-browser call ---------------------------------------------------------------

/** The server calls this; it resolves when the user clicks Yes or No. */
client.method<{ question: string }, 'yes' | 'no'>('client.confirm', ({ question }, ctx) => {
  const overlay = byId('confirm-dialog');
  byId('confirm-question').textContent = question;
  overlay.hidden = false;
  logEvent(`the server called client.confirm("${question}") and is waiting for you`);
  return new Promise((resolve, reject) => {
    const done = (answer: 'yes' | 'no') => {
      overlay.hidden = true;
      yes.removeEventListener('click', onYes);
      no.removeEventListener('click', onNo);
      resolve(answer);
    };
    const yes = byId('confirm-yes');
    const no = byId('confirm-no');
    const onYes = () => done('yes');
    const onNo = () => done('no');
    yes.addEventListener('click', onYes);
    no.addEventListener('click', onNo);
    // The server may give up (timeout, cancel, disconnect): close the question with it.
    ctx.signal.addEventListener('abort', () => {
      overlay.hidden = true;
      reject(new Error('the server stopped waiting'));
    });
  });
});

byId('ask').addEventListener('click', () => {
  const question = byId<HTMLInputElement>('ask-question').value.trim() || 'Are you there?';
  const result = byId('ask-result');
  const button = byId<HTMLButtonElement>('ask');
  button.disabled = true;
  result.className = 'result';
  result.textContent = 'Waiting for the server to call this page…';
  const started = performance.now();
  client
    .call('ask_client', { question }, { timeoutMs: 120_000 })
    .then((reply) => {
      const { answer } = reply as { question: string; answer: unknown };
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      result.className = 'result good';
      result.textContent = `The server asked, awaited your click, and got back: ${JSON.stringify(answer)} (${seconds} s round trip).`;
    })
    .catch((err: unknown) => {
      result.className = 'result bad';
      result.textContent = `The call failed: ${(err as Error).message}`;
    })
    .finally(() => (button.disabled = false));
});

// --- Identity: the token's expiry and its refreshes on the live connection -----------------

interface WhoAmI {
  sessionId: string;
  anonymous?: true;
  token?: number;
  expiresAt?: number | null;
}

let session: WhoAmI | undefined;
function whoami(): WhoAmI | undefined {
  return session;
}
client.state$.subscribe((state) => {
  if (state === 'open') identity.connections++;
});

async function showIdentity(): Promise<void> {
  if (client.state !== 'open') return;
  try {
    const now = (await client.call('demo.whoami', undefined, { timeoutMs: 5_000 })) as WhoAmI;
    if (session && now.sessionId === session.sessionId && now.token !== session.token) {
      logEvent(`token #${now.token} took over on the same connection (server-asked refresh)`);
    }
    if (now.sessionId !== session?.sessionId) showRoom(now.sessionId);
    session = now;
    byId('identity-token').textContent = now.token === undefined ? 'none' : `#${now.token}`;
    // Every token fetched beyond the one each connection starts with was a live refresh.
    byId('identity-refreshes').textContent = String(
      Math.max(0, identity.fetched - identity.connections),
    );
  } catch {
    // Shown again on the next tick.
  }
}
setInterval(() => {
  void showIdentity();
  const expiresAt = session?.expiresAt;
  byId('identity-expires').textContent =
    typeof expiresAt === 'number'
      ? `${Math.max(0, Math.ceil((expiresAt - Date.now()) / 1000))} s`
      : '–';
}, 1_000);

byId('identity-refresh').addEventListener('click', () => {
  client.authenticate().then(
    ({ expiresAt }) =>
      logEvent(`refreshed now: the new token expires at ${clock(expiresAt)}`, 'good'),
    (err: unknown) => logEvent(`refresh refused: ${(err as Error).message}`, 'warn'),
  );
});

// --- Raw console --------------------------------------------------------------------------

startConsole(url);
