import { Ajv } from 'ajv';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { demoContract } from '../../demo/contract.js';
import { defineContract } from '../../src/contract/contract.js';
import { toOpenRpc } from '../../src/contract/openrpc.js';
import type { OpenRpcDocument } from '../../src/contract/openrpc.js';
import { Resources } from '../support/resources.js';
import { RawRpc } from '../support/raw-rpc.js';
import { calc, implementCalc } from './contracts.js';
import { openrpcValidator } from './openrpc-meta.js';

const res = new Resources();
afterEach(() => res.cleanup());

const validate = openrpcValidator();

/** The names this gateway uses for subscriptions: the document must give these, not the defaults. */
const subscriptionMethods = {
  subscribe: 'calc_subscribe',
  notification: 'calc_subscription',
  unsubscribe: 'calc_unsubscribe',
};

async function raw(url: string): Promise<RawRpc> {
  const rpc = await RawRpc.open(url);
  res.track(rpc.socket);
  return rpc;
}

/** The document a gateway serves, both ways, with what GET answered. */
async function discover(url: string, httpUrl: string) {
  const rpc = await raw(url);
  const reply = await rpc.request('rpc.discover');
  const response = await fetch(`${httpUrl}/openrpc.json`);
  const text = await response.text();
  return { rpc, reply, response, text };
}

async function calcGateway() {
  const running = await res.gateway({ subscriptionMethods });
  const { document } = implementCalc(running.gateway);
  return { ...running, document };
}

describe('discovery', () => {
  it('rpc.discover and GET /openrpc.json return the same document, the one implementContract made', async () => {
    const { url, httpUrl, document } = await calcGateway();
    const { reply, response, text } = await discover(url, httpUrl);
    expect(reply.error).toBeUndefined();
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json\b/);
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    expect(JSON.parse(text)).toStrictEqual(reply.result);
    expect(reply.result).toStrictEqual(JSON.parse(JSON.stringify(document)));
    // The query string does not matter to the route.
    const again = await fetch(`${httpUrl}/openrpc.json?v=2`);
    expect(await again.json()).toStrictEqual(reply.result);
  });

  it("the demo's document is the same both ways too", async () => {
    const { url, httpUrl } = await res.demoGateway();
    const { reply, text } = await discover(url, httpUrl);
    expect(JSON.parse(text)).toStrictEqual(reply.result);
    const doc = reply.result as OpenRpcDocument;
    expect(doc.methods.map((m) => m.name)).toEqual(Object.keys(demoContract.methods));
  });

  it('validates against the OpenRPC meta-schema (@open-rpc/meta-schema, ajv)', async () => {
    const calcDoc = (await calcGateway()).document;
    const demo = await res.demoGateway();
    const demoDoc = (await discover(demo.url, demo.httpUrl)).reply.result;
    for (const doc of [JSON.parse(JSON.stringify(calcDoc)) as unknown, demoDoc]) {
      const valid = validate(doc);
      expect(validate.errors ?? []).toEqual([]);
      expect(valid).toBe(true);
    }
  });

  it('the validator is not vacuous: broken documents fail it', async () => {
    const good = JSON.parse(JSON.stringify((await calcGateway()).document)) as OpenRpcDocument;
    const broken: [string, (doc: Record<string, unknown>) => void][] = [
      ['no info', (doc) => delete doc['info']],
      ['an unknown version', (doc) => (doc['openrpc'] = '9.9.9')],
      ['an unknown top-level member', (doc) => (doc['servicez'] = [])],
      [
        'a method without params',
        (doc) => delete (doc['methods'] as Record<string, unknown>[])[0]!['params'],
      ],
      [
        'an unknown paramStructure',
        (doc) => ((doc['methods'] as Record<string, unknown>[])[0]!['paramStructure'] = 'any'),
      ],
      [
        'a content descriptor without a name',
        (doc) =>
          delete (doc['methods'] as { params: Record<string, unknown>[] }[])[0]!.params[0]!['name'],
      ],
      [
        'a param schema that is not JSON Schema',
        (doc) =>
          ((doc['methods'] as { params: { schema: unknown }[] }[])[0]!.params[0]!.schema = {
            type: 'float',
          }),
      ],
    ];
    expect(validate(good)).toBe(true);
    for (const [what, breakIt] of broken) {
      const doc = JSON.parse(JSON.stringify(good)) as Record<string, unknown>;
      breakIt(doc);
      expect(validate(doc), what).toBe(false);
    }
  });

  it('describes every method: params in paramOrder order with required flags, and results', async () => {
    const { url, httpUrl } = await calcGateway();
    const doc = (await discover(url, httpUrl)).reply.result as OpenRpcDocument;

    expect(doc.openrpc).toBe('1.3.2');
    expect(doc.info).toStrictEqual({
      title: 'calc',
      version: '2.1.0',
      description: 'Test service for the contract layer.',
    });
    expect(doc.methods.map((m) => m.name)).toEqual(Object.keys(calc.methods));
    const method = (name: string) => doc.methods.find((m) => m.name === name)!;

    expect(method('subtract')).toStrictEqual({
      name: 'subtract',
      description: 'minuend - subtrahend',
      paramStructure: 'either',
      params: [
        { name: 'minuend', required: true, schema: { type: 'number' } },
        { name: 'subtrahend', required: true, schema: { type: 'number' } },
      ],
      result: { name: 'result', schema: { type: 'number' } },
    });

    // paramOrder [at, name, tags, note], not the declaration order; note is optional.
    const place = method('place');
    expect(place.paramStructure).toBe('either');
    expect(place.params.map((p) => [p.name, p.required])).toEqual([
      ['at', true],
      ['name', true],
      ['tags', true],
      ['note', false],
    ]);
    expect(place.params[0]!.schema).toMatchObject({
      type: 'object',
      properties: { x: { type: 'number' }, y: { type: 'number' } },
      required: ['x', 'y'],
    });
    expect(place.params[2]!.schema).toStrictEqual({ type: 'array', items: { type: 'string' } });
    expect(place.result).toStrictEqual({ name: 'result', schema: { type: 'string' } });

    // No paramOrder: by name. A member with a default is not required of the caller.
    const configure = method('configure');
    expect(configure.paramStructure).toBe('by-name');
    expect(configure.params).toStrictEqual([
      { name: 'level', required: true, schema: { type: 'string', enum: ['low', 'high'] } },
      {
        name: 'retries',
        required: false,
        schema: expect.objectContaining({ type: 'integer', default: 3 }),
      },
    ]);
    expect(configure.result.schema).toMatchObject({
      type: 'object',
      properties: { level: { type: 'string' }, retries: { type: 'number' } },
    });

    // A tuple: by position, one descriptor per element.
    expect(method('pair')).toMatchObject({
      paramStructure: 'by-position',
      params: [
        { name: 'arg0', required: true, schema: { type: 'string' } },
        { name: 'arg1', required: true, schema: { type: 'number' } },
      ],
      result: { name: 'result', schema: { type: 'string' } },
    });

    expect(method('now').params).toEqual([]);
    expect(method('now').result.schema).toStrictEqual({ type: 'number' });
    expect(method('register').params).toStrictEqual([
      { name: 'name', required: true, schema: { type: 'string' } },
    ]);
  });

  it('lists subscriptions under x-subscriptions with the gateway’s method names and the stream params', async () => {
    const { url, httpUrl } = await calcGateway();
    const { rpc, reply } = await discover(url, httpUrl);
    const doc = reply.result as OpenRpcDocument;

    // The history request keeps its default name: only these three were renamed.
    expect(doc['x-subscriptions'].methods).toStrictEqual({
      ...subscriptionMethods,
      history: 'topic.history',
    });
    const subscriptions = doc['x-subscriptions'].subscriptions;
    expect(subscriptions.map((s) => s.name)).toEqual(['prices', 'count', 'slowCount']);
    expect(subscriptions[0]).toStrictEqual({
      name: 'prices',
      description: 'A topic.',
      params: [],
      data: {
        name: 'data',
        schema: {
          type: 'object',
          properties: { symbol: { type: 'string' }, price: { type: 'number' } },
          required: ['symbol', 'price'],
        },
      },
    });
    expect(subscriptions[1]).toStrictEqual({
      name: 'count',
      description: 'A stream: 1, 2, ... upTo.',
      params: [
        {
          name: 'upTo',
          required: true,
          schema: { type: 'integer', minimum: 1, maximum: 100 },
        },
        { name: 'label', required: false, schema: { type: 'string' } },
      ],
      data: { name: 'data', schema: { type: 'number' } },
    });

    // The documented names are the live ones.
    const subscribed = await rpc.request(subscriptionMethods.subscribe, ['count', { upTo: 2 }]);
    const id = subscribed.result as string;
    await rpc.until(
      () => rpc.notifications(id, subscriptionMethods.notification).some((n) => n.complete),
      'the stream to end',
    );
    expect(
      rpc.notifications(id, subscriptionMethods.notification).map((n) => n.result ?? 'end'),
    ).toEqual([1, 2, 'end']);
  });

  it('lists notifications under x-notifications (no result) and client methods under x-client-methods', async () => {
    const { url, httpUrl } = await calcGateway();
    const doc = (await discover(url, httpUrl)).reply.result as OpenRpcDocument;

    expect(doc['x-notifications']).toStrictEqual([
      {
        name: 'progress',
        description: 'How far along a job is.',
        paramStructure: 'by-name',
        params: [{ name: 'percent', required: true, schema: { type: 'number' } }],
      },
    ]);
    expect(doc['x-client-methods']).toStrictEqual([
      {
        name: 'client.confirm',
        description: 'Ask the user.',
        paramStructure: 'either',
        params: [{ name: 'question', required: true, schema: { type: 'string', minLength: 1 } }],
        result: { name: 'result', schema: { type: 'boolean' } },
      },
    ]);
    // None of them is a method the server answers.
    const served = new Set(doc.methods.map((m) => m.name));
    expect(served.has('progress')).toBe(false);
    expect(served.has('client.confirm')).toBe(false);
  });

  it("covers the demo's subscriptions, notifications and client methods", async () => {
    const { url, httpUrl } = await res.demoGateway();
    const doc = (await discover(url, httpUrl)).reply.result as OpenRpcDocument;
    expect(doc['x-subscriptions'].methods).toStrictEqual({
      subscribe: 'subscribe',
      notification: 'subscription',
      unsubscribe: 'unsubscribe',
      history: 'topic.history',
    });
    expect(doc['x-subscriptions'].subscriptions.map((s) => s.name)).toEqual(
      Object.keys(demoContract.subscriptions),
    );
    const countdown = doc['x-subscriptions'].subscriptions.find((s) => s.name === 'countdown')!;
    expect(countdown.params).toStrictEqual([
      {
        name: 'from',
        required: false,
        schema: { type: 'integer', minimum: 0, maximum: 1000, default: 10 },
      },
    ]);
    expect(doc['x-notifications'].map((n) => [n.name, n.paramStructure])).toEqual([
      ['hello', 'by-position'],
    ]);
    expect(doc['x-client-methods'].map((m) => m.name)).toEqual(['client.confirm']);
  });
});

describe('schemas the document cannot inline', () => {
  interface Tree {
    value: number;
    children: Tree[];
  }
  const Tree: z.ZodType<Tree> = z.lazy(() =>
    z.object({ value: z.number(), children: z.array(Tree) }),
  );
  /** Refers to itself through a getter: zod gives `{"$ref": "#"}`. */
  const Chain = z.object({
    id: z.string(),
    get next() {
      return Chain.optional();
    },
  });
  const forest = defineContract({
    name: 'forest',
    version: '1.0.0',
    methods: {
      plant: { params: z.object({ tree: Tree, label: z.string() }), result: Tree },
      link: { params: z.object({ chain: Chain }), result: z.array(Tree) },
    },
    subscriptions: { growth: { data: Tree } },
  });
  const doc = () =>
    JSON.parse(JSON.stringify(toOpenRpc(forest, subscriptionMethods))) as OpenRpcDocument;

  /** ajv with the whole document loaded, so a schema in it is compiled with its refs resolved there. */
  function compileFromDocument(document: unknown, pointer: string) {
    const ajv = new Ajv({ strict: false });
    ajv.addSchema(document as object, 'https://example.test/openrpc.json');
    return ajv.compile({ $ref: `https://example.test/openrpc.json#${pointer}` });
  }

  it('recursive ones (z.lazy, getters) go to components.schemas, and their $refs resolve in the document', () => {
    const document = doc();
    expect(validate(document)).toBe(true);

    const leaf = { value: 2, children: [] };
    const tree = { value: 1, children: [leaf, { value: 3, children: [leaf] }] };
    const badTree = { value: 1, children: [{ value: 'two', children: [] }] };
    const treeParam = compileFromDocument(document, '/methods/0/params/0/schema');
    expect(document.methods[0]!.params[0]!.name).toBe('tree');
    expect(treeParam(tree)).toBe(true);
    expect(treeParam(badTree)).toBe(false);
    expect(compileFromDocument(document, '/methods/0/result/schema')(tree)).toBe(true);
    expect(compileFromDocument(document, '/methods/0/result/schema')(badTree)).toBe(false);
    const growth = compileFromDocument(document, '/x-subscriptions/subscriptions/0/data/schema');
    expect(growth(badTree)).toBe(false);
    expect(growth(tree)).toBe(true);

    // The root of the params refers to itself ("#"): that is the chain schema, not the document.
    const chainParam = compileFromDocument(document, '/methods/1/params/0/schema');
    expect(chainParam({ id: 'a', next: { id: 'b', next: { id: 'c' } } })).toBe(true);
    expect(chainParam({ id: 'a', next: { id: 'b', next: { id: 3 } } })).toBe(false);
    expect(Object.keys(document.components?.schemas ?? {}).length).toBeGreaterThan(0);
    expect(JSON.stringify(document)).not.toContain('#/definitions/');
  });

  it('a member JSON Schema cannot represent (z.custom()) becomes {}, the others are still described', () => {
    const calendar = defineContract({
      name: 'calendar',
      version: '1.0.0',
      methods: {
        schedule: {
          params: z.object({
            when: z.custom<string>((value) => typeof value === 'string'),
            title: z.string(),
          }),
          paramOrder: ['title', 'when'],
          result: z.boolean(),
        },
      },
    });
    const document = JSON.parse(
      JSON.stringify(toOpenRpc(calendar, subscriptionMethods)),
    ) as OpenRpcDocument;
    expect(validate(document)).toBe(true);
    expect(document.methods[0]).toStrictEqual({
      name: 'schedule',
      paramStructure: 'either',
      params: [
        { name: 'title', required: true, schema: { type: 'string' } },
        { name: 'when', required: true, schema: {} },
      ],
      result: { name: 'result', schema: { type: 'boolean' } },
    });
  });
});

describe('a gateway without a contract', () => {
  it('answers rpc.discover -32601 and GET /openrpc.json 404', async () => {
    const { gateway, url, httpUrl } = await res.gateway();
    gateway.method('echo', (params) => params);
    const rpc = await raw(url);
    const reply = await rpc.request('rpc.discover');
    expect(reply.result).toBeUndefined();
    expect(reply.error?.code).toBe(-32601);
    expect((await rpc.request('echo', ['still served'])).result).toEqual(['still served']);
    const response = await fetch(`${httpUrl}/openrpc.json`);
    expect(response.status).toBe(404);
    await response.body?.cancel();
  });
});
