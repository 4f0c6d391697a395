/**
 * SocketGate's choice of the socket to cut when maxHttpSockets is reached, checked against a
 * model over random openings, requests begun and answered (pipelined ones too), upgrades read,
 * hand-overs and closes from a few addresses and a trusted proxy: a newcomer from an address
 * holding fewer sockets than another holds idle ones (no request under way: not yet sent, or
 * every response sent) takes the place of the socket idle longest (since it opened or since its
 * last response) of an address holding the most idle; otherwise it is refused; past
 * maxHttpSocketsPerIp it is refused whatever the total. The sockets are stand-ins (what the gate
 * reads of a socket: its address, 'close', destroy), and requests are told of as Node's HTTP
 * server tells of them, on its diagnostics channels: the gate's bookkeeping is what is checked,
 * for sequences real sockets could not be driven through quickly enough.
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

interface Held {
  socket: StandInSocket;
  /** Its address group ('2001:db8::1' and '2001:db8::2' share their /64); undefined: the proxy. */
  group: string | undefined;
  /** Requests begun (headers in) whose responses are not sent. */
  underWay: number;
  /** No request under way and no upgrade read: it may be cut to make room. */
  idle: boolean;
  /** When it last became idle (a step number): the one idle longest goes first. */
  idleSince: number;
}

const groupOf = (address: string) =>
  address === PROXY ? undefined : address.startsWith('2001:db8::') ? 'v6' : address;

type Op =
  | { kind: 'open'; address: string }
  | { kind: 'request' | 'answer' | 'upgrade' | 'handover' | 'close'; pick: number };

const picking = (kind: Exclude<Op['kind'], 'open'>) =>
  fc.record({ kind: fc.constant(kind), pick: fc.nat() });

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('open' as const),
      address: fc.constantFrom(...ADDRESSES),
    }),
  },
  { weight: 3, arbitrary: picking('request') },
  { weight: 3, arbitrary: picking('answer') },
  { weight: 1, arbitrary: picking('upgrade') },
  { weight: 1, arbitrary: picking('handover') },
  { weight: 1, arbitrary: picking('close') },
);

const requestStart = channel('http.server.request.start');
const responseFinish = channel('http.server.response.finish');

it('cuts the socket idle longest of an address holding the most idle ones, only for an address holding fewer', () => {
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
        const tell = (on: typeof requestStart, socket: StandInSocket) =>
          on.publish({ request: {}, response: {}, socket, server });
        let held: Held[] = [];
        let step = 0;
        const count = (group: string) => held.filter((h) => h.group === group).length;
        const idleOf = (group: string) => held.filter((h) => h.group === group && h.idle).length;

        try {
          for (const next of ops) {
            step++;
            if (next.kind !== 'open') {
              if (held.length === 0) continue;
              const target = held[next.pick % held.length]!;
              const socket = target.socket;
              switch (next.kind) {
                case 'request':
                  tell(requestStart, socket);
                  gate.headersRead(socket as unknown as Duplex);
                  target.underWay++;
                  target.idle = false;
                  break;
                case 'answer':
                  // Node tells of a response only for a request it told of.
                  if (target.underWay === 0) continue;
                  tell(responseFinish, socket);
                  if (--target.underWay === 0) {
                    target.idle = true;
                    target.idleSince = step;
                  }
                  break;
                case 'upgrade':
                  gate.headersRead(socket as unknown as Duplex);
                  target.idle = false;
                  break;
                case 'handover':
                  gate.handedOver(socket as unknown as Duplex);
                  held = held.filter((h) => h !== target);
                  // Its response (an event stream's) ends later: the gate counts it no more.
                  if (target.underWay > 0) tell(responseFinish, socket);
                  break;
                case 'close':
                  socket.destroy();
                  held = held.filter((h) => h !== target);
                  break;
              }
              expect(gate.open).toBe(held.length);
              continue;
            }
            const group = groupOf(next.address);
            const mine = group === undefined ? 0 : count(group);
            const groups = [
              ...new Set(held.flatMap((h) => (h.group === undefined ? [] : [h.group]))),
            ];
            const most = Math.max(0, ...groups.map(idleOf));
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
                expect(victim.idle).toBe(true);
                expect(idleOf(victim.group!)).toBe(most);
                const idleLongest = Math.min(
                  ...held.filter((h) => h.group === victim.group && h.idle).map((h) => h.idleSince),
                );
                expect(victim.idleSince).toBe(idleLongest);
              } else {
                expect(cut).toEqual([]);
              }
              held = held.filter((h) => !h.socket.destroyed);
              held.push({ socket, group, underWay: 0, idle: true, idleSince: step });
            }
            expect(gate.open).toBe(held.length);
          }
        } finally {
          unwatch();
        }
      },
    ),
    { numRuns: 300 },
  );
});
