import { Ajv } from 'ajv';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';

/*
 * A client generated from nothing but the OpenRPC document a running gateway
 * serves: no import of the contract, the demo or the library's client. It
 * speaks raw JSON-RPC over a plain `ws` socket.
 */

const res = new Resources();
afterEach(() => res.cleanup());

interface Descriptor {
  name: string;
  required?: boolean;
  schema: object;
}
interface MethodObject {
  name: string;
  paramStructure?: 'by-name' | 'by-position' | 'either';
  params: Descriptor[];
  result?: Descriptor;
}
interface Doc {
  methods: MethodObject[];
}

/** A JSON-RPC error answer, as the generated client rejects with it. */
class RemoteError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data: unknown,
  ) {
    super(message);
  }
}

type Generated = Readonly<Record<string, (args?: Record<string, unknown>) => Promise<unknown>>>;

/**
 * Fetch the document, open a socket, and build one function per method it lists.
 * `either`: how to send the params of a method whose paramStructure is "either"
 * (by name unless told otherwise; by position only when the document says so).
 */
async function generateClient(
  httpUrl: string,
  wsUrl: string,
  either: 'by-name' | 'by-position' = 'by-name',
) {
  const response = await fetch(`${httpUrl}/openrpc.json`);
  expect(response.status).toBe(200);
  const doc = (await response.json()) as Doc;

  const socket = res.track(new WebSocket(wsUrl));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  const sent: Record<string, unknown>[] = [];
  const pending = new Map<number, (frame: Record<string, unknown>) => void>();
  socket.on('message', (data) => {
    const frame = JSON.parse((data as Buffer).toString('utf8')) as Record<string, unknown>;
    if (typeof frame['id'] === 'number') pending.get(frame['id'])?.(frame);
  });
  let lastId = 0;
  const request = (method: string, params: unknown) => {
    const id = ++lastId;
    const frame: Record<string, unknown> = { jsonrpc: '2.0', method, id };
    if (params !== undefined) frame['params'] = params;
    sent.push(frame);
    socket.send(JSON.stringify(frame));
    return new Promise<unknown>((resolve, reject) => {
      pending.set(id, (reply) => {
        pending.delete(id);
        const error = reply['error'] as
          { code: number; message: string; data?: unknown } | undefined;
        if (error) reject(new RemoteError(error.code, error.message, error.data));
        else resolve(reply['result']);
      });
    });
  };

  // Results are checked against the document's result schemas.
  const ajv = new Ajv({ strict: false });
  const api: Record<string, (args?: Record<string, unknown>) => Promise<unknown>> = Object.create(
    null,
  ) as Record<string, never>;
  for (const method of doc.methods) {
    const checkResult = ajv.compile(method.result?.schema ?? {});
    const names = method.params.map((p) => p.name);
    api[method.name] = async (args = {}) => {
      const unknown = Object.keys(args).filter((name) => !names.includes(name));
      if (unknown.length > 0) throw new TypeError(`${method.name} has no param ${unknown.join()}`);
      const missing = method.params.filter((p) => p.required && !(p.name in args));
      if (missing.length > 0) {
        throw new TypeError(`${method.name} needs ${missing.map((p) => p.name).join()}`);
      }
      let params: unknown;
      if (method.params.length === 0) params = undefined;
      else if (
        (method.paramStructure ?? 'either') === 'either'
          ? either === 'by-position'
          : method.paramStructure === 'by-position'
      ) {
        const given = names.map((name) => args[name]);
        while (given.length > 0 && given[given.length - 1] === undefined) given.pop();
        params = given;
      } else {
        params = Object.fromEntries(names.filter((n) => n in args).map((n) => [n, args[n]]));
      }
      const result = await request(method.name, params);
      if (!checkResult(result)) {
        throw new TypeError(
          `${method.name} answered off its schema: ${ajv.errorsText(checkResult.errors)}`,
        );
      }
      return result;
    };
  }
  return { api: Object.freeze(api) as Generated, doc, sent };
}

async function demoClient(either?: 'by-name' | 'by-position') {
  const { url, httpUrl } = await res.demoGateway();
  return generateClient(httpUrl, url, either);
}

describe('a client generated from /openrpc.json', () => {
  it('has a function for exactly the methods the document lists', async () => {
    const { api, doc } = await demoClient();
    expect(Object.keys(api)).toEqual(doc.methods.map((m) => m.name));
    expect(Object.keys(api)).toEqual(
      expect.arrayContaining(['subtract', 'sum', 'get_data', 'notify_hello']),
    );
  });

  it('calls subtract by name: { minuend: 42, subtrahend: 23 } -> 19', async () => {
    const { api, sent } = await demoClient();
    expect(await api['subtract']!({ minuend: 42, subtrahend: 23 })).toBe(19);
    expect(await api['subtract']!({ subtrahend: 42, minuend: 23 })).toBe(-19);
    expect(sent.map((f) => f['params'])).toEqual([
      { minuend: 42, subtrahend: 23 },
      { minuend: 23, subtrahend: 42 },
    ]);
  });

  it('calls by position where the document says so, and without params where it lists none', async () => {
    const { api, sent } = await demoClient();
    expect(await api['notify_hello']!({ arg0: 5 })).toBeNull();
    expect(await api['get_data']!()).toEqual(['hello', 5]);
    expect(sent.map((f) => f['params'])).toEqual([[5], undefined]);
  });

  it('calls sum from what the document says: [1, 2, 4] -> 7', async () => {
    // Either reading of "either" will do; the first is what the generated client does by default.
    const outcomes: unknown[] = [];
    for (const either of ['by-name', 'by-position'] as const) {
      const { api, doc, sent } = await demoClient(either);
      const sum = doc.methods.find((m) => m.name === 'sum')!;
      const args = Object.fromEntries(sum.params.map((p) => [p.name, [1, 2, 4]]));
      const outcome = await api['sum']!(args).catch((err: unknown) => err);
      outcomes.push({ sent: sent[0]?.['params'], outcome });
      if (outcome === 7) break;
    }
    expect(outcomes.at(-1), `sum documented as ${JSON.stringify(outcomes)}`).toMatchObject({
      outcome: 7,
    });
  });

  it('gets the server’s -32602 for values the document’s schemas rule out', async () => {
    const { api } = await demoClient();
    const error = await api['subtract']!({ minuend: '42', subtrahend: 23 }).catch(
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(RemoteError);
    expect(error).toMatchObject({
      code: -32602,
      data: { issues: [{ path: ['minuend'], message: expect.any(String) }] },
    });
  });

  it('cannot call a method the document does not list', async () => {
    const { api, sent } = await demoClient();
    for (const name of ['multiply', 'rpc.discover', 'client.confirm', 'subscribe', 'toString']) {
      expect(name in api, name).toBe(false);
      expect(api[name], name).toBeUndefined();
    }
    expect(() => (api as Record<string, () => unknown>)['multiply']!()).toThrow(TypeError);
    expect(() => {
      (api as Record<string, unknown>)['multiply'] = () => 6;
    }).toThrow(TypeError);
    // Nor pass a param the document does not list, nor leave out a required one.
    await expect(api['subtract']!({ minuend: 1, subtrahend: 2, extra: 3 })).rejects.toThrow(
      'subtract has no param extra',
    );
    await expect(api['subtract']!({ minuend: 1 })).rejects.toThrow('subtract needs subtrahend');
    expect(sent).toEqual([]);
  });
});
