/**
 * A notification waiting on an async `authorize` hook holds its params as a call waiting on it
 * does, and counts toward maxInFlight as the call does: past it a notification is dropped before
 * the hook is asked, so a connection makes the node hold at most maxInFlight × maxMessageBytes of
 * params however slow the hook is. A POST /rpc of notifications is answered 204 at once, but its
 * exchange (and its place in maxConnectionsPerIp) lasts until the hook has decided on them.
 */
import { afterEach, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Resources } from '../support/resources.js';
import { within } from '../support/waiting.js';

const res = new Resources();
const releases: (() => void)[] = [];
afterEach(async () => {
  for (const release of releases.splice(0)) release();
  await res.cleanup();
});

const MAX_IN_FLIGHT = 16;
const MAX_MESSAGE_BYTES = 64 * 1024;
const PARAM_CHARS = MAX_MESSAGE_BYTES - 100;

it('params of notifications waiting on an async authorize stay within maxInFlight × maxMessageBytes', async () => {
  let held = 0;
  let asked = 0;
  const { url, gateway } = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: {
      maxInFlight: MAX_IN_FLIGHT,
      maxMessageBytes: MAX_MESSAGE_BYTES,
      bytesPerSecond: 0,
      bytesPerSecondPerIp: 0,
      ratePerSecond: 0,
    },
    authorize: ({ method, params }) => {
      if (method !== 'hold') return true;
      asked++;
      const length = (params as [string])[0].length;
      held += length;
      return new Promise<boolean>((resolve) =>
        releases.push(() => {
          held -= length;
          resolve(true);
        }),
      );
    },
  });
  let handled = 0;
  gateway.method('hold', () => void handled++);
  gateway.method('ping', () => 'pong');
  const socket = res.track(new WebSocket(url));
  await new Promise((resolve) => socket.once('open', resolve));
  const pad = 'x'.repeat(PARAM_CHARS);
  const SENT = MAX_IN_FLIGHT * 8;
  for (let i = 0; i < SENT; i++) {
    socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'hold', params: [pad] }));
  }
  // In order: once this call is answered (busy or not), every notification before it was read.
  const answer = new Promise<string>((resolve) =>
    socket.once('message', (data: Buffer) => resolve(data.toString())),
  );
  socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'ping', id: 1 }));
  // Busy: the notifications waiting on the hook take every place in flight.
  expect(JSON.parse(await within(answer, 'the ping'))).toMatchObject({
    id: 1,
    error: { code: -32000, data: { maxInFlight: MAX_IN_FLIGHT } },
  });
  expect(asked).toBe(MAX_IN_FLIGHT);
  expect(held).toBeLessThanOrEqual(MAX_IN_FLIGHT * MAX_MESSAGE_BYTES);
  // The hook decides: the notifications it was asked about are handled, and calls run again.
  for (const release of releases.splice(0)) release();
  const again = new Promise<string>((resolve) =>
    socket.once('message', (data: Buffer) => resolve(data.toString())),
  );
  socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'ping', id: 2 }));
  expect(JSON.parse(await within(again, 'the second ping'))).toMatchObject({
    id: 2,
    result: 'pong',
  });
  expect(handled).toBe(MAX_IN_FLIGHT);
});

it('a POST /rpc of notifications waiting on an async authorize keeps its exchange until the hook decides', async () => {
  let pending = 0;
  const MAX_PER_IP = 2;
  const PER_POST = 4;
  const { httpUrl, gateway } = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: { maxInFlight: PER_POST, maxConnectionsPerIp: MAX_PER_IP },
    authorize: () => {
      pending++;
      return new Promise<boolean>((resolve) => releases.push(() => resolve(false)));
    },
  });
  gateway.method('hold', () => undefined);
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) {
    const batch = Array.from({ length: PER_POST }, () => ({
      jsonrpc: '2.0',
      method: 'hold',
      params: ['x'],
    }));
    const reply = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(batch),
    });
    await reply.arrayBuffer();
    statuses.push(reply.status);
  }
  // The first two answered 204, their exchanges held by the hooks; the rest refused.
  expect(statuses.slice(0, MAX_PER_IP)).toEqual([204, 204]);
  expect(statuses.slice(MAX_PER_IP).every((status) => status === 429)).toBe(true);
  expect(pending).toBe(MAX_PER_IP * PER_POST);
});
