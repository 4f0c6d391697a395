/**
 * SocketGate's choice of the socket to cut when maxHttpSockets is reached, checked against a
 * model over random openings, requests begun (with a body or none) and answered (pipelined ones
 * too), bodies read to their end (before the answer, or after it, as Node dumps one left
 * unread), upgrades read, hand-overs and closes from a few addresses and a trusted proxy: a
 * newcomer from an address holding fewer sockets than another holds waiting on their clients
 * (no request under way: not yet sent, or every response sent; or only requests whose bodies
 * are not read to their end) takes the place of the socket waiting longest (since it opened,
 * since its last response, or since the last request the server had all of was answered) of an
 * address holding the most waiting; otherwise it is refused; past maxHttpSocketsPerIp it is
 * refused whatever the total. The sockets and requests are stand-ins (what the gate reads of
 * a socket: its address, 'close', destroy; of a request: its headers, 'end'), and requests are
 * told of as Node's HTTP server tells of them, on its diagnostics channels: the gate's
 * bookkeeping is what is checked, for sequences real sockets could not be driven through
 * quickly enough.
 */
import { channel } from 'node:diagnostics_channel';
import { EventEmitter } from 'node:events';
import type { Server as NetServer } from 'node:net';
import type { Duplex } from 'node:stream';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { SocketGate } from '../../src/server/admission.js';

const PROXY = '10.0.0.1';
const ADDRESSES = ['192.0.2.1', '192.0.2.2', '192.0.2.3', '2001:db8::1', '2001:db8::2', PROXY];

/** What the gate reads of a socket. */
class StandInSocket extends EventEmitter {
  destroyed = false;

  constructor(readonly remoteAddress: string) {
    super();
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit('close');
  }
}

/** What the gate reads of a request: its headers; 'end' once its body is read to its end. */
class StandInRequest extends EventEmitter {
  readonly headers: Record<string, string>;
  /** Its response is sent. */
  answered = false;
  /** Its body (if any) read to its end: 'end' emitted. */
  read = false;

  constructor(readonly body: boolean) {
    super();
    this.headers = body ? { 'content-length': '100' } : {};
  }
}

interface Held {
  socket: StandInSocket;
  /** Its address group ('2001:db8::1' and '2001:db8::2' share their /64); undefined: the proxy. */
  group: string | undefined;
  /** Its requests, in the order they began. */
  requests: StandInRequest[];
  /** An upgrade's headers were read: never waiting again. */
  upgraded: boolean;
  /** Waiting on its client (SocketSlot.waiting): it may be cut to make room. */
  waiting: boolean;
  /** When it last began to wait (a step number): the one waiting longest goes first. */
  waitingSince: number;
}

/** Its requests whose responses are not sent. */
const underWay = (held: Held) => held.requests.filter((r) => !r.answered);

/** Whether the gate should count `held` as waiting on its client. */
const waitsOnClient = (held: Held) =>
  !held.upgraded && underWay(held).every((r) => r.body && !r.read);

const groupOf = (address: string) =>
  address === PROXY ? undefined : address.startsWith('2001:db8::') ? 'v6' : address;

type Op =
  | { kind: 'open'; address: string }
  | { kind: 'request'; pick: number; body: boolean }
  | { kind: 'answer' | 'read' | 'upgrade' | 'handover' | 'close'; pick: number };

const picking = (kind: 'answer' | 'read' | 'upgrade' | 'handover' | 'close') =>
  fc.record({ kind: fc.constant(kind), pick: fc.nat() });

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('open' as const),
      address: fc.constantFrom(...ADDRESSES),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('request' as const),
      pick: fc.nat(),
      body: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: picking('answer') },
  { weight: 2, arbitrary: picking('read') },
  { weight: 1, arbitrary: picking('upgrade') },
  { weight: 1, arbitrary: picking('handover') },
  { weight: 1, arbitrary: picking('close') },
);

const requestStart = channel('http.server.request.start');
const responseFinish = channel('http.server.response.finish');

it('cuts the socket waiting longest on its client of an address holding the most waiting ones, only for an address holding fewer', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 1, max: 6 }),
      fc.array(op, { maxLength: 80 }),
      (maxHttpSockets, maxHttpSocketsPerIp, ops) => {
        const server = new EventEmitter();
        const gate = new SocketGate(
          { maxHttpSockets, maxHttpSocketsPerIp, headersTimeoutMs: 0 },
          { trusts: (address) => address === PROXY },
          () => undefined,
        );
        const unwatch = gate.watch(server as unknown as NetServer);
        // What Node publishes for a request of `server` on `socket`, as the gateway then reads it.
        const tell = (on: typeof requestStart, socket: StandInSocket, request: StandInRequest) =>
          on.publish({ request, response: {}, socket, server });
        let held: Held[] = [];
        let step = 0;
        const count = (group: string) => held.filter((h) => h.group === group).length;
        const waitingOf = (group: string) =>
          held.filter((h) => h.group === group && h.waiting).length;
        /** `target` waits on its client now, or not; since this step if it begins to. */
        const reconsider = (target: Held) => {
          const waits = waitsOnClient(target);
          if (waits && !target.waiting) target.waitingSince = step;
          target.waiting = waits;
        };

        try {
          for (const next of ops) {
            step++;
            if (next.kind !== 'open') {
              if (held.length === 0) continue;
              const target = held[next.pick % held.length]!;
              const socket = target.socket;
              switch (next.kind) {
                case 'request': {
                  const request = new StandInRequest(next.body);
                  tell(requestStart, socket, request);
                  gate.headersRead(socket as unknown as Duplex);
                  target.requests.push(request);
                  break;
                }
                case 'answer': {
                  // Node answers a socket's requests in the order they came, each one it told of.
                  const first = underWay(target)[0];
                  if (first === undefined) continue;
                  tell(responseFinish, socket, first);
                  first.answered = true;
                  break;
                }
                case 'read': {
                  // Bodies come in the order of their requests; one Node dumps after its answer too.
                  const first = target.requests.find((r) => r.body && !r.read);
                  if (first === undefined) continue;
                  first.read = true;
                  first.emit('end');
                  break;
                }
                case 'upgrade':
                  // An upgrade's headers come on a socket with no request under way.
                  if (underWay(target).length > 0) continue;
                  gate.headersRead(socket as unknown as Duplex);
                  target.upgraded = true;
                  break;
                case 'handover':
                  gate.handedOver(socket as unknown as Duplex);
                  held = held.filter((h) => h !== target);
                  // Its response (an event stream's) ends later: the gate counts it no more.
                  for (const request of underWay(target)) tell(responseFinish, socket, request);
                  break;
                case 'close':
                  socket.destroy();
                  held = held.filter((h) => h !== target);
                  break;
              }
              reconsider(target);
              expect(gate.open).toBe(held.length);
              continue;
            }
            const group = groupOf(next.address);
            const mine = group === undefined ? 0 : count(group);
            const groups = [
              ...new Set(held.flatMap((h) => (h.group === undefined ? [] : [h.group]))),
            ];
            const most = Math.max(0, ...groups.map(waitingOf));
            const before = [...held];
            const socket = new StandInSocket(next.address);
            server.emit('connection', socket);

            const cut = before.filter((h) => h.socket.destroyed);
            if (mine >= maxHttpSocketsPerIp || (held.length >= maxHttpSockets && most <= mine)) {
              expect(socket.destroyed).toBe(true);
              expect(cut).toEqual([]);
            } else {
              expect(socket.destroyed).toBe(false);
              if (held.length >= maxHttpSockets) {
                expect(cut).toHaveLength(1);
                const victim = cut[0]!;
                expect(victim.waiting).toBe(true);
                expect(waitingOf(victim.group!)).toBe(most);
                const waitingLongest = Math.min(
                  ...held
                    .filter((h) => h.group === victim.group && h.waiting)
                    .map((h) => h.waitingSince),
                );
                expect(victim.waitingSince).toBe(waitingLongest);
              } else {
                expect(cut).toEqual([]);
              }
              held = held.filter((h) => !h.socket.destroyed);
              held.push({
                socket,
                group,
                requests: [],
                upgraded: false,
                waiting: true,
                waitingSince: step,
              });
            }
            expect(gate.open).toBe(held.length);
          }
        } finally {
          unwatch();
        }
      },
    ),
    { numRuns: 1000 },
  );
});

it('a socket waiting since it opened keeps its place while the body of its request is to come: it goes before one that opened after it', () => {
  const server = new EventEmitter();
  const gate = new SocketGate(
    { maxHttpSockets: 2, maxHttpSocketsPerIp: 2, headersTimeoutMs: 0 },
    undefined,
    () => undefined,
  );
  const unwatch = gate.watch(server as unknown as NetServer);
  try {
    const first = new StandInSocket('192.0.2.1');
    const second = new StandInSocket('192.0.2.1');
    server.emit('connection', first);
    server.emit('connection', second);
    // The first one's headers come last, those of a POST whose body is still to come.
    const request = new StandInRequest(true);
    requestStart.publish({ request, response: {}, socket: first, server });
    gate.headersRead(first as unknown as Duplex);

    server.emit('connection', new StandInSocket('192.0.2.2'));
    expect([first.destroyed, second.destroyed]).toEqual([true, false]);
  } finally {
    unwatch();
  }
});
