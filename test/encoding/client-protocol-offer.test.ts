/**
 * The client's `protocols` option beside its encoding: the codec's subprotocol named in
 * `protocols` too is offered once (a name twice makes the WebSocket constructor throw at every
 * dial), and an encoding's subprotocol the client has no codec for is a TypeError told in
 * `disconnects$`, not a connection the gateway answers in an encoding the client cannot read
 * (closed 1003, again at every dial). Against a real gateway with MessagePack on.
 */
import { afterEach, expect, it } from 'vitest';
import type { DisconnectEvent } from '../../src/client/index.js';
import { cbor } from '../../src/cbor.js';
import { msgpack } from '../../src/msgpack.js';
import { Resources } from '../support/resources.js';
import { within } from '../support/waiting.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

it('a msgpack client that names msgpack in protocols too connects and calls', async () => {
  const { url, gateway } = await resources.gateway({ encodings: ['json', 'msgpack'] });
  gateway.method('echo', (params) => params);
  const client = resources.client(url, {
    encoding: msgpack,
    protocols: [msgpack.subprotocol, 'token.abc'],
  });
  expect(await client.call('echo', [1])).toEqual([1]);
});

it.each([
  ['a JSON client', undefined, msgpack.subprotocol],
  ['a cbor client', cbor, msgpack.subprotocol],
])(
  '%s offering %s: a TypeError in disconnects$, nothing dialled',
  async (_what, codec, offered) => {
    const { url, gateway } = await resources.gateway({ encodings: ['json', 'msgpack', 'cbor'] });
    let upgrades = 0;
    gateway.connected$.subscribe(() => upgrades++);
    const client = resources.client(url, {
      ...(codec ? { encoding: codec } : {}),
      protocols: () => [offered],
    });
    const event = await within(
      new Promise<DisconnectEvent>((resolve) => client.disconnects$.subscribe(resolve)),
      'the disconnect event',
    );
    expect(event.error).toEqual(
      new TypeError(
        `protocols offers ${offered}, an encoding this client has no codec for: choose it with the encoding option`,
      ),
    );
    expect(event.willRetry).toBe(true);
    expect(upgrades).toBe(0);
  },
);
