import type { StandardSchemaV1 } from '@standard-schema/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { useContract } from '../../src/client/contract-client.js';
import { defineContract } from '../../src/contract/contract.js';
import type { OpenRpcDocument } from '../../src/contract/openrpc.js';
import { implementContract } from '../../src/server/contract-server.js';
import { Resources } from '../support/resources.js';
import { RawRpc } from '../support/raw-rpc.js';
import { openrpcValidator } from './openrpc-meta.js';

/*
 * The contract layer with a Standard Schema that is not zod: hand-rolled objects that
 * only validate (no JSON Schema), with issue paths given as `{ key }` objects.
 */

const res = new Resources();
afterEach(() => res.cleanup());

type Issue = StandardSchemaV1.Issue;

/** A Standard Schema from a plain function: `check` returns the issues (none: valid). */
function handRolled<T>(check: (value: Record<string, unknown>) => Issue[]): StandardSchemaV1<T> {
  return {
    '~standard': {
      version: 1,
      vendor: 'hand-rolled',
      validate: (value) => {
        if (typeof value !== 'object' || value === null || Array.isArray(value)) {
          return { issues: [{ message: 'Expected an object' }] };
        }
        const issues = check(value as Record<string, unknown>);
        return issues.length > 0 ? { issues } : { value: value as T };
      },
    },
  };
}

const point = handRolled<{ x: number; y: number; tags?: string[] }>((value) => {
  const issues: Issue[] = [];
  for (const key of ['x', 'y']) {
    if (typeof value[key] !== 'number') issues.push({ message: 'Not a number', path: [{ key }] });
  }
  const tags = value['tags'];
  if (tags !== undefined) {
    if (!Array.isArray(tags)) issues.push({ message: 'Not a list', path: ['tags'] });
    else {
      tags.forEach((tag, i) => {
        if (typeof tag !== 'string') {
          issues.push({ message: 'Not a string', path: [{ key: 'tags' }, { key: i }] });
        }
      });
    }
  }
  return issues;
});

/** An object whose only member is `params`: must never be mistaken for the "params" wrapper. */
const boxed = handRolled<{ params: number }>((value) =>
  typeof value['params'] === 'number'
    ? []
    : [{ message: 'Not a number', path: [{ key: 'params' }] }],
);

const aNumber: StandardSchemaV1<number> = {
  '~standard': {
    version: 1,
    vendor: 'hand-rolled',
    validate: (value) =>
      typeof value === 'number' ? { value } : { issues: [{ message: 'Not a number' }] },
  },
};

const shapes = defineContract({
  name: 'shapes',
  version: '1.0.0',
  methods: {
    move: { params: point, paramOrder: ['x', 'y', 'tags'], result: aNumber },
    box: { params: boxed, result: aNumber },
  },
});

async function shapesGateway() {
  const running = await res.gateway();
  const seen: unknown[] = [];
  implementContract(running.gateway, shapes, {
    methods: {
      move: (params) => {
        seen.push(params);
        return params.x + params.y;
      },
      box: (params) => {
        seen.push(params);
        return params.params;
      },
    },
  });
  const rpc = await RawRpc.open(running.url);
  res.track(rpc.socket);
  return { ...running, rpc, seen };
}

describe('a hand-rolled Standard Schema (validate only, no JSON Schema)', () => {
  it('validates: -32602 with {key} path segments flattened to names and indexes', async () => {
    const { rpc, seen } = await shapesGateway();
    const reply = await rpc.request('move', { x: 'one', y: 2, tags: ['a', 2] });
    expect(reply.error).toStrictEqual({
      code: -32602,
      message: 'Invalid params',
      data: {
        issues: [
          { path: ['x'], message: 'Not a number' },
          { path: ['tags', 1], message: 'Not a string' },
        ],
      },
    });
    expect((await rpc.request('move', {})).error?.data).toStrictEqual({
      issues: [
        { path: ['x'], message: 'Not a number' },
        { path: ['y'], message: 'Not a number' },
      ],
    });
    expect(seen).toEqual([]);
  });

  it('maps positional params onto paramOrder names', async () => {
    const { rpc, url, seen } = await shapesGateway();
    expect((await rpc.request('move', [1, 2])).result).toBe(3);
    expect((await rpc.request('move', [1, 2, ['a']])).result).toBe(3);
    expect((await rpc.request('move', [1, 'two'])).error?.data).toStrictEqual({
      issues: [{ path: ['y'], message: 'Not a number' }],
    });
    const { api } = useContract(res.client(url), shapes);
    expect(await api.move([4, 5])).toBe(9);
    expect(seen).toStrictEqual([
      { x: 1, y: 2 },
      { x: 1, y: 2, tags: ['a'] },
      { x: 4, y: 5 },
    ]);
  });

  it('gets {"params": X} as it is: nothing is unwrapped without a JSON Schema saying so', async () => {
    const { rpc, url, seen } = await shapesGateway();
    expect((await rpc.request('box', { params: 5 })).result).toBe(5);
    const { api } = useContract(res.client(url), shapes);
    expect(await api.box({ params: 6 })).toBe(6);
    expect(seen).toStrictEqual([{ params: 5 }, { params: 6 }]);
  });

  it('is still discoverable: params listed by paramOrder names, schema {}, and the document valid', async () => {
    const { rpc } = await shapesGateway();
    const doc = (await rpc.request('rpc.discover')).result as OpenRpcDocument;
    const validate = openrpcValidator();
    expect(validate(doc), JSON.stringify(validate.errors)).toBe(true);
    expect(doc.methods).toStrictEqual([
      {
        name: 'move',
        paramStructure: 'either',
        params: [
          { name: 'x', schema: {} },
          { name: 'y', schema: {} },
          { name: 'tags', schema: {} },
        ],
        result: { name: 'result', schema: {} },
      },
      // Without paramOrder nothing can be said of the params' layout.
      { name: 'box', paramStructure: 'either', params: [], result: { name: 'result', schema: {} } },
    ]);
  });
});
