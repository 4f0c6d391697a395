import { byId } from './dom.js';
import { specExamples } from './presets.js';

/** How long the console waits before saying a request got no reply (a notification gets none). */
const SILENCE_MS = 1_000;

const MARKS = { sent: '→ ', reply: '← ', push: '⇠ ', note: '   ' } as const;

/** A notification or call the server sent on its own (it has a method), not a response. */
function isFromServerSide(text: string): boolean {
  try {
    const message = JSON.parse(text) as unknown;
    return typeof message === 'object' && message !== null && 'method' in message;
  } catch {
    return false;
  }
}

/**
 * The raw console: its own WebSocket to /rpc, so what is typed goes on the wire exactly as
 * written (invalid JSON included) and the reply is shown exactly as it came back.
 */
export function startConsole(url: string): void {
  const preset = byId<HTMLSelectElement>('console-preset');
  const input = byId<HTMLTextAreaElement>('console-input');
  const output = byId<HTMLPreElement>('console-output');
  let socket: WebSocket | undefined;
  let silence: ReturnType<typeof setTimeout> | undefined;

  for (const [i, example] of specExamples.entries()) {
    preset.add(new Option(`spec §7: ${example.label}`, String(i)));
  }
  const choose = () => (input.value = specExamples[Number(preset.value)]?.text ?? '');
  preset.addEventListener('change', choose);
  choose();

  const show = (kind: keyof typeof MARKS, text: string) => {
    const entry = document.createElement('div');
    entry.className = `entry ${kind}`;
    entry.textContent = `${MARKS[kind]}${text}`;
    output.append(entry);
    while (output.children.length > 100) output.firstElementChild?.remove();
    output.scrollTop = output.scrollHeight;
  };

  const open = (): Promise<WebSocket> => {
    if (socket && socket.readyState === WebSocket.OPEN) return Promise.resolve(socket);
    const fresh = new WebSocket(url);
    socket = fresh;
    fresh.addEventListener('message', (event) => {
      const text = String(event.data);
      if (isFromServerSide(text)) {
        show('push', text); // e.g. notify_hello's "hello": not a reply to what was sent
        return;
      }
      clearTimeout(silence);
      show('reply', text);
    });
    fresh.addEventListener('close', (event) => {
      if (socket === fresh) socket = undefined;
      show('note', `(console socket closed: ${event.code})`);
    });
    return new Promise((resolve, reject) => {
      fresh.addEventListener('open', () => resolve(fresh), { once: true });
      fresh.addEventListener('error', () => reject(new Error('could not connect')), {
        once: true,
      });
    });
  };

  const send = async () => {
    const text = input.value;
    try {
      const ws = await open();
      show('sent', text);
      ws.send(text);
      clearTimeout(silence);
      silence = setTimeout(
        () => show('note', '(no reply: a notification, or a batch of them, is never answered)'),
        SILENCE_MS,
      );
    } catch (err) {
      show('note', `(${(err as Error).message})`);
    }
  };
  byId('console-send').addEventListener('click', () => void send());
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) void send();
  });
}
