/**
 * One service, four transports: the demo server (as `npm start` runs it) answers every example
 * of the specification's section 7 identically over WebSocket, HTTP POST, TCP and stdio (a
 * child process), and as the specification says.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { specExamples } from '../../demo/web/presets.js';
import { ensureBuilt, exitOf, mainJs, root } from '../support/demo-process.js';
import { DemoServer } from '../support/demo-server.js';
import { freePort } from '../support/network.js';
import { NO_REPLY, essence, expectedReplies } from '../support/spec-expectations.js';

/** Messages as they arrive, awaited one at a time. */
class Inbox {
  private readonly queue: string[] = [];
  private waiting: ((text: string) => void) | undefined;

  push(text: string): void {
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = undefined;
      resolve(text);
    } else this.queue.push(text);
  }

  next(): Promise<string> {
    const text = this.queue.shift();
    if (text !== undefined) return Promise.resolve(text);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no message within 15 s')), 15_000);
      this.waiting = (t) => {
        clearTimeout(timer);
        resolve(t);
      };
    });
  }
}

/** Feed newline-delimited text into an inbox, line by line. */
function linesInto(inbox: Inbox): (chunk: Buffer) => void {
  let partial = '';
  return (chunk) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line.trim()) inbox.push(line);
  };
}

interface Exchange {
  /** Send one message; resolve with the reply text or NO_REPLY. */
  ask(text: string, index: number): Promise<string>;
}

/**
 * Over a connection, "no reply" shows as the reply to a sentinel request sent right after
 * arriving first; messages the server pushes on its own (`hello`) are set aside.
 */
function connectionExchange(send: (text: string) => void, inbox: Inbox): Exchange {
  return {
    async ask(text, index) {
      const sentinel = `sentinel-${index}`;
      send(text);
      send(`{"jsonrpc":"2.0","method":"sum","params":[0],"id":"${sentinel}"}`);
      let reply: string = NO_REPLY;
      for (;;) {
        const message = await inbox.next();
        const parsed = JSON.parse(message) as { id?: unknown; method?: unknown };
        if (!Array.isArray(parsed) && parsed.method !== undefined) continue; // a push
        if (!Array.isArray(parsed) && parsed.id === sentinel) return reply;
        reply = message;
      }
    },
  };
}

describe('the specification examples over every transport', () => {
  let server: DemoServer;
  let tcpPort: number;
  let ws: WebSocket;
  let tcp: Socket;
  let child: ChildProcess;
  const exchanges: Record<string, Exchange> = {};

  beforeAll(async () => {
    await ensureBuilt();
    tcpPort = await freePort();
    server = new DemoServer(await freePort(), { TCP_PORT: String(tcpPort) });
    await server.start();

    const wsInbox = new Inbox();
    ws = new WebSocket(`ws://127.0.0.1:${server.port}/rpc`);
    ws.on('message', (data: Buffer) => wsInbox.push(data.toString('utf8')));
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    exchanges['WebSocket'] = connectionExchange((text) => ws.send(text), wsInbox);

    exchanges['HTTP POST'] = {
      async ask(text) {
        const response = await fetch(`${server.httpUrl}/rpc`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: text,
        });
        const body = await response.text();
        if (response.status === 204) return body === '' ? NO_REPLY : `204 with a body: ${body}`;
        expect(response.status).toBe(200);
        expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
        return body;
      },
    };

    const tcpInbox = new Inbox();
    tcp = connect(tcpPort, '127.0.0.1');
    tcp.on('data', linesInto(tcpInbox));
    await new Promise((resolve, reject) => tcp.once('connect', resolve).once('error', reject));
    exchanges['TCP'] = connectionExchange((text) => tcp.write(`${text}\n`), tcpInbox);

    const stdioInbox = new Inbox();
    child = spawn(process.execPath, [mainJs], {
      cwd: root,
      env: { ...process.env, STDIO: '1', LOG_LEVEL: 'warn' },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    child.stdout!.on('data', linesInto(stdioInbox));
    exchanges['stdio'] = connectionExchange((text) => child.stdin!.write(`${text}\n`), stdioInbox);
  }, 60_000);

  afterAll(async () => {
    ws?.terminate();
    tcp?.destroy();
    if (child) {
      const exited = exitOf(child);
      child.stdin!.end(); // end of input: the stdio server finishes and exits
      expect((await exited).code).toBe(0);
    }
    if (server) expect(await server.stop()).toBe(0);
  }, 30_000);

  it('answers each example the same way on all four, as the specification says', async () => {
    const got: Record<string, Record<string, unknown>> = {};
    for (const [i, example] of specExamples.entries()) {
      // Newline-delimited JSON carries one message per line: the examples written over
      // several lines go out on one (JSON's whitespace is insignificant; the invalid ones stay so).
      const text = example.text.replace(/\n\s*/g, ' ');
      for (const [name, exchange] of Object.entries(exchanges)) {
        const reply = await exchange.ask(text, i);
        (got[name] ??= {})[example.label] =
          reply === NO_REPLY ? NO_REPLY : essence(JSON.parse(reply));
      }
    }
    expect(Object.keys(got)).toEqual(['WebSocket', 'HTTP POST', 'TCP', 'stdio']);
    for (const name of Object.keys(got))
      expect({ [name]: got[name] }).toEqual({ [name]: expectedReplies });
  }, 60_000);
});
