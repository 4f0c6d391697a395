import { defer, from, map, range } from 'rxjs';
import { z } from 'zod';
import { defineContract } from '../../src/contract/contract.js';
import { implementContract } from '../../src/server/contract-server.js';
import type { ImplementOptions } from '../../src/server/contract-server.js';
import type { Gateway } from '../../src/server/gateway.js';

/** Names an async refinement rejects: the check runs in a promise, as a database lookup would. */
export const TAKEN = new Set(['admin', 'root']);

/** A contract exercising every shape the contract layer handles. */
export const calc = defineContract({
  name: 'calc',
  version: '2.1.0',
  description: 'Test service for the contract layer.',
  methods: {
    subtract: {
      description: 'minuend - subtrahend',
      params: z.object({ minuend: z.number(), subtrahend: z.number() }),
      paramOrder: ['minuend', 'subtrahend'],
      result: z.number(),
    },
    /** Nested object, array and an optional member; paramOrder differs from the declaration order. */
    place: {
      params: z.object({
        name: z.string(),
        at: z.object({ x: z.number(), y: z.number() }),
        tags: z.array(z.string()),
        note: z.string().optional(),
      }),
      paramOrder: ['at', 'name', 'tags', 'note'],
      result: z.string(),
    },
    /** An object without paramOrder: by name only. */
    configure: {
      params: z.object({ level: z.enum(['low', 'high']), retries: z.number().int().default(3) }),
      result: z.object({ level: z.string(), retries: z.number() }),
    },
    /** A tuple: by position only. */
    pair: { params: z.tuple([z.string(), z.number()]), result: z.string() },
    /** No params at all. */
    now: { result: z.number() },
    /** An async refinement: validation returns a promise. */
    register: {
      params: z.object({
        name: z.string().refine(async (name) => {
          await new Promise<void>((resolve) => setImmediate(resolve));
          return !TAKEN.has(name);
        }, 'Name is taken'),
      }),
      paramOrder: ['name'],
      result: z.object({ name: z.string() }),
    },
    /** Its handler breaks the result schema on purpose. */
    broken: { params: z.object({ kind: z.enum(['sync', 'async']) }), result: z.number() },
    /** A result schema with a default: the handler may leave `count` out, the caller's type has it. */
    tally: { result: z.object({ count: z.number().default(0) }) },
  },
  notifications: {
    progress: { description: 'How far along a job is.', params: z.object({ percent: z.number() }) },
  },
  clientMethods: {
    'client.confirm': {
      description: 'Ask the user.',
      params: z.object({ question: z.string().min(1) }),
      paramOrder: ['question'],
      result: z.boolean(),
    },
  },
  subscriptions: {
    prices: { description: 'A topic.', data: z.object({ symbol: z.string(), price: z.number() }) },
    count: {
      description: 'A stream: 1, 2, ... upTo.',
      params: z.object({ upTo: z.number().int().min(1).max(100), label: z.string().optional() }),
      data: z.number(),
    },
    slowCount: {
      description: 'The same stream behind an async params check.',
      params: z.object({
        upTo: z
          .number()
          .int()
          .refine(async (n) => {
            await new Promise<void>((resolve) => setImmediate(resolve));
            return n >= 1;
          }, 'Must be at least 1'),
      }),
      data: z.number(),
    },
  },
});

/** What reached each handler, in order: the params after validation. */
export interface Seen {
  method: string;
  params: unknown;
}

/** Serve `calc` on `gateway`, recording the params every handler and stream receives. */
export function implementCalc(gateway: Gateway, options: ImplementOptions = {}) {
  const seen: Seen[] = [];
  const record = (method: string, params: unknown) => seen.push({ method, params });
  const document = implementContract(
    gateway,
    calc,
    {
      methods: {
        subtract: (params) => {
          record('subtract', params);
          return params.minuend - params.subtrahend;
        },
        place: (params) => {
          record('place', params);
          return `${params.name}@${params.at.x},${params.at.y}`;
        },
        configure: (params) => {
          record('configure', params);
          return params;
        },
        pair: (params) => {
          record('pair', params);
          return params[0].repeat(params[1]);
        },
        now: (params) => {
          record('now', params);
          return 1_700_000_000_000;
        },
        register: (params) => {
          record('register', params);
          return { name: params.name };
        },
        broken: (params) => {
          record('broken', params);
          const wrong = 'not a number' as unknown as number;
          return params.kind === 'sync' ? wrong : Promise.resolve(wrong);
        },
        tally: () => ({}),
      },
      streams: {
        count: (params) => {
          record('count', params);
          return range(1, params.upTo);
        },
        slowCount: (params) => {
          record('slowCount', params);
          return defer(() => from([params.upTo])).pipe(map((n) => n));
        },
      },
    },
    options,
  );
  return { seen, document };
}
