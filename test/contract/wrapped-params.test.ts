/**
 * Params that are neither an object nor a tuple (a nullable, a union) are documented in OpenRPC
 * as one member named "params", by name: `{"params": X}` is validated as X, whatever X is (null
 * included), and when X does not pass, as sent (a union may take an object whose only member is
 * `params` itself); when neither passes, the -32602 has X's issues, the documented form's.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineContract } from '../../src/contract/contract.js';
import { implementContract } from '../../src/server/contract-server.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

const Either = z.union([z.object({ params: z.string() }), z.object({ other: z.number() })]);

const contract = defineContract({
  name: 'wrapped',
  version: '1.0.0',
  methods: {
    maybe: { params: z.string().nullable(), result: z.string() },
    either: { params: Either, result: z.string() },
    eitherLater: { params: Either.refine(async () => Promise.resolve(true)), result: z.string() },
  },
});

/** Each handler answers with what it was given, as JSON text. */
async function wrappedGateway() {
  const { gateway, url } = await res.gateway();
  const seen = (params: unknown) => JSON.stringify(params);
  const document = implementContract(gateway, contract, {
    methods: { maybe: seen, either: seen, eitherLater: seen },
  });
  return { document, rpc: await openRaw(res, url) };
}

describe('params documented as one member named "params"', () => {
  it('are documented so: by name, one param "params"', async () => {
    const { document } = await wrappedGateway();
    for (const method of document.methods) {
      expect(method.paramStructure).toBe('by-name');
      expect(method.params.map((param) => param.name)).toEqual(['params']);
    }
  });

  it('{"params": null} is null, as the document says', async () => {
    const { rpc } = await wrappedGateway();
    expect((await rpc.request('maybe', { params: null })).result).toBe('null');
    expect((await rpc.request('maybe', { params: 'x' })).result).toBe('"x"');
  });

  it.each(['either', 'eitherLater'])(
    '%s: an object whose only member is "params" the schema takes as sent is taken as sent',
    async (method) => {
      const { rpc } = await wrappedGateway();
      expect((await rpc.request(method, { params: 'x' })).result).toBe('{"params":"x"}');
      expect((await rpc.request(method, { other: 1 })).result).toBe('{"other":1}');
      // The documented form: X is the params.
      expect((await rpc.request(method, { params: { params: 'y' } })).result).toBe(
        '{"params":"y"}',
      );
      expect((await rpc.request(method, { params: { other: 2 } })).result).toBe('{"other":2}');
    },
  );

  it('when neither X nor the params as sent pass, the issues are X’s', async () => {
    const { rpc } = await wrappedGateway();
    // X is the number 5; the params as sent are an object.
    const maybe = await rpc.request('maybe', { params: 5 });
    expect(maybe.error).toMatchObject({
      code: -32602,
      data: { issues: [{ path: [], message: expect.stringMatching(/received number/) }] },
    });
    for (const method of ['either', 'eitherLater']) {
      const either = await rpc.request(method, { params: 5 });
      expect(either.error).toMatchObject({ code: -32602, data: { issues: [{ path: [] }] } });
    }
  });
});
