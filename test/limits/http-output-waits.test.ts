/**
 * A POST's reply is made and written as the turn's output allows, as a connection's is
 * (output-waits.test.ts): a batch of large replies, or many exchanges whose async handlers
 * settle together, are made a turn's worth at a time (at most the allowance and the reply that
 * passes it in one task), the reply past it in a chunked response; a reply the turn holds goes
 * whole with its length. A client gone mid-reply has no more of it made.
 *
 * A reply is counted as it is made: its result's toJSON runs as JSON.stringify makes its text.
 */
import { request, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import {
  ANSWER_CHARS,
  CALLS,
  MOST_PER_TURN,
  counted,
  gatedMethod,
} from '../support/output-turns.js';
import { Peak } from '../support/turn-peaks.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface Posted {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * POST `body` to `url` on a connection of its own; with `leave`, the response is destroyed on
 * its first chunk (the client gone mid-reply) and the promise resolves then.
 */
function post(url: string, body: string, leave = false): Promise<Posted> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
        },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        const done = () =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text });
        response.on('data', (chunk: string) => {
          text += chunk;
          if (leave) {
            response.destroy();
            done();
          }
        });
        response.on('end', done);
        response.on('error', leave ? () => {} : reject);
      },
    );
    req.on('error', leave ? () => {} : reject);
    req.end(body);
  });
}

/** A gateway whose `big` (and async `bigAsync`) answers `chars` characters, counted as made. */
async function sizedGateway() {
  const running = await res.gateway({ heartbeatIntervalMs: 0 });
  const made = new Peak();
  let total = 0;
  // Counted as made: in the turn's peak, and in all.
  const counter = {
    add(chars: number) {
      made.add(chars);
      total += chars;
    },
  };
  const result = (params: unknown) => counted(counter, (params as [number])[0]);
  running.gateway.method('big', result);
  running.gateway.method('bigAsync', async (params) => Promise.resolve(result(params)));
  return { ...running, made, total: () => total };
}

const batchOf = (async: boolean, count = CALLS, chars = ANSWER_CHARS) =>
  JSON.stringify(
    Array.from({ length: count }, (_, id) => ({
      jsonrpc: '2.0',
      id,
      method: async ? 'bigAsync' : 'big',
      params: [chars],
    })),
  );

/** The ids of a batch reply's members, and each member's result length. */
function members(text: string): { id: number; chars: number }[] {
  return (JSON.parse(text) as { id: number; result: string }[]).map((m) => ({
    id: m.id,
    chars: m.result.length,
  }));
}

describe('a POST’s reply past a turn’s allowance', () => {
  const expected = Array.from({ length: CALLS }, (_, id) => ({ id, chars: ANSWER_CHARS }));

  for (const async of [false, true]) {
    it(`is made a turn’s worth at a time and arrives whole, chunked (a batch, ${async ? 'async' : 'plain'} handlers)`, async () => {
      const running = await sizedGateway();
      const answer = await post(`${running.httpUrl}/rpc`, batchOf(async));
      expect(answer.status).toBe(200);
      expect(answer.headers['transfer-encoding']).toBe('chunked');
      expect(answer.headers['content-length']).toBeUndefined();
      expect(members(answer.body)).toEqual(expected);
      expect(running.made.most).toBeGreaterThan(0);
      expect(running.made.most).toBeLessThanOrEqual(MOST_PER_TURN * ANSWER_CHARS);
    });
  }

  it('is made a turn’s worth at a time when many exchanges’ handlers settle together', async () => {
    const running = await sizedGateway();
    const made = new Peak();
    gatedMethod(running.gateway, CALLS, made);
    const body = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'gated' });
    const answers = await Promise.all(
      Array.from({ length: CALLS }, (_, id) => post(`${running.httpUrl}/rpc`, body(id))),
    );
    answers.forEach((answer, id) => {
      expect(answer.status).toBe(200);
      const reply = JSON.parse(answer.body) as { id: number; result: string };
      expect([reply.id, reply.result.length]).toEqual([id, ANSWER_CHARS]);
    });
    expect(made.most).toBeGreaterThan(0);
    expect(made.most).toBeLessThanOrEqual(MOST_PER_TURN * ANSWER_CHARS);
  });

  it('goes whole, with its length, when the turn holds it', async () => {
    const running = await sizedGateway();
    const answer = await post(`${running.httpUrl}/rpc`, batchOf(true, 3, 1000));
    expect(answer.status).toBe(200);
    expect(answer.headers['content-length']).toBe(String(Buffer.byteLength(answer.body)));
    expect(members(answer.body).map((m) => m.chars)).toEqual([1000, 1000, 1000]);
  });

  it('has no more made once its client is gone, and the gateway answers on', async () => {
    const running = await sizedGateway();
    const calls = 80;
    const left = await post(`${running.httpUrl}/rpc`, batchOf(true, calls), true);
    expect(left.status).toBe(200);
    const madeWhenLeft = running.total();
    // The exchange ends (its session counted no more) once the gateway sees the client gone.
    await waitUntil(() => running.gateway.sessions.size === 0, 'the exchange ended');
    expect(running.total()).toBeLessThan(calls * ANSWER_CHARS);
    expect(running.total()).toBeLessThanOrEqual(madeWhenLeft + 2 * MOST_PER_TURN * ANSWER_CHARS);
    const next = await post(`${running.httpUrl}/rpc`, batchOf(true, 2, 10));
    expect(members(next.body)).toEqual([
      { id: 0, chars: 10 },
      { id: 1, chars: 10 },
    ]);
  });

  it('is cut, nothing more made, when its user is revoked while it is written', async () => {
    const { gateway, httpUrl } = await res.gateway<{ user: string }>({
      heartbeatIntervalMs: 0,
      authenticate: ({ headers }) => {
        const token = /^Bearer (.+)$/.exec(headers.authorization ?? '')?.[1];
        if (!token) throw new UpgradeRejection(401);
        return { user: token };
      },
      userOf: (context) => context.user,
    });
    let made = 0;
    gateway.method('bigAsync', async () =>
      Promise.resolve({
        toJSON() {
          made++;
          return 'x'.repeat(ANSWER_CHARS);
        },
      }),
    );
    const calls = 80;
    const body = JSON.stringify(
      Array.from({ length: calls }, (_, id) => ({ jsonrpc: '2.0', id, method: 'bigAsync' })),
    );
    let revoked: Promise<number> | undefined;
    const outcome = await new Promise<{ status: number; complete: boolean }>((resolve) => {
      const req = request(
        `${httpUrl}/rpc`,
        {
          method: 'POST',
          agent: false,
          headers: {
            authorization: 'Bearer carol',
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(body)),
          },
        },
        (response) => {
          // Revoked once its first chunk is here: the rest is under way.
          response.on('data', () => {
            revoked ??= gateway.revokeUser('carol');
          });
          const done = () =>
            resolve({ status: response.statusCode ?? 0, complete: response.complete });
          response.on('end', done);
          response.on('error', done);
          response.on('aborted', done);
        },
      );
      req.on('error', () => resolve({ status: 0, complete: false }));
      req.end(body);
    });
    expect(await revoked).toBe(1);
    // Its headers were out: the reply is cut short (an error to the client), not completed.
    expect(outcome).toEqual({ status: 200, complete: false });
    await waitUntil(() => gateway.sessions.size === 0, 'the exchange ended');
    expect(made).toBeLessThan(calls);
  });

  it('ends, its exchange let go, when a pipelined POST’s connection goes before its reply has it', async () => {
    const running = await sizedGateway();
    const rpc = (running.gateway as unknown as { httpRpc: { inFlight: number } }).httpRpc;
    const { port } = new URL(running.httpUrl);
    const body = batchOf(false);
    const socket = connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    // Two POSTs on one connection, never read: the second's response waits for the first's to
    // end before it has the socket, its chunks held by Node meanwhile.
    socket.pause();
    const one = `POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    socket.write(one + one);
    await waitUntil(() => rpc.inFlight === 2, 'both exchanges running');
    // Until nothing more is made for a while (a hundred turns of the event loop).
    for (let still = 0; still < 100;) {
      const before = running.total();
      await new Promise((resolve) => setImmediate(resolve));
      still = running.total() === before ? still + 1 : 0;
    }
    socket.destroy();
    await waitUntil(() => rpc.inFlight === 0, 'both exchanges ended');
  });
});
