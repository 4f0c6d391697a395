/**
 * SocketGate's choice of the socket to cut when maxHttpSockets is reached, checked against a
 * model over random openings, headers read and closes from a few addresses and a trusted proxy:
 * a newcomer from an address holding fewer sockets than another holds half-sent ones takes the
 * place of the oldest half-sent socket of an address holding the most half-sent; otherwise it is
 * refused; past maxHttpSocketsPerIp it is refused whatever the total. The sockets are stand-ins
 * (what the gate reads of a socket: its address, 'close', destroy): the gate's bookkeeping is
 * what is checked, for sequences real sockets could not be driven through quickly enough.
 */
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
  halfSent: boolean;
}

const groupOf = (address: string) =>
  address === PROXY ? undefined : address.startsWith('2001:db8::') ? 'v6' : address;

type Op =
  | { kind: 'open'; address: string }
  | { kind: 'headers'; pick: number }
  | { kind: 'close'; pick: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('open' as const),
      address: fc.constantFrom(...ADDRESSES),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('headers' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const), pick: fc.nat() }) },
);

it('cuts the oldest half-sent socket of an address holding the most, only for an address holding fewer', () => {
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
        gate.watch(server as unknown as NetServer);
        let held: Held[] = [];
        const count = (group: string) => held.filter((h) => h.group === group).length;
        const halfSentOf = (group: string) =>
          held.filter((h) => h.group === group && h.halfSent).length;

        for (const step of ops) {
          if (step.kind !== 'open') {
            if (held.length === 0) continue;
            const target = held[step.pick % held.length]!;
            if (step.kind === 'headers') {
              gate.headersRead(target.socket as unknown as Duplex);
              target.halfSent = false;
            } else {
              target.socket.destroy();
              held = held.filter((h) => h !== target);
            }
            expect(gate.open).toBe(held.length);
            continue;
          }
          const group = groupOf(step.address);
          const mine = group === undefined ? 0 : count(group);
          const groups = [
            ...new Set(held.flatMap((h) => (h.group === undefined ? [] : [h.group]))),
          ];
          const most = Math.max(0, ...groups.map(halfSentOf));
          const before = [...held];
          const socket = new StandInSocket(step.address);
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
              expect(victim.halfSent).toBe(true);
              expect(halfSentOf(victim.group!)).toBe(most);
              const oldest = held.find((h) => h.group === victim.group && h.halfSent);
              expect(oldest).toBe(victim);
            } else {
              expect(cut).toEqual([]);
            }
            held = held.filter((h) => !h.socket.destroyed);
            held.push({ socket, group, halfSent: true });
          }
          expect(gate.open).toBe(held.length);
        }
      },
    ),
    { numRuns: 300 },
  );
});
