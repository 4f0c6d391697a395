import { z } from 'zod';
import { defineContract } from '../src/index.js';

const Tick = z.object({ symbol: z.string(), price: z.number(), at: z.number() });
const ChatMessage = z.object({ from: z.string(), text: z.string(), at: z.number() });

/**
 * The demo service, defined once: the server's handlers, the typed client
 * (`useContract`), validation and the OpenRPC document (`rpc.discover`,
 * `GET /openrpc.json`) all come from this.
 */
export const demoContract = defineContract({
  name: 'wsrpc-gateway demo',
  version: '1.0.0',
  description: "The JSON-RPC 2.0 specification's example methods, a chat and a ticker.",
  methods: {
    subtract: {
      description: 'minuend - subtrahend; by position [minuend, subtrahend] or by name.',
      params: z.object({ minuend: z.number(), subtrahend: z.number() }),
      paramOrder: ['minuend', 'subtrahend'],
      result: z.number(),
    },
    sum: {
      description: 'The sum of the numbers given by position.',
      params: z.array(z.number()),
      result: z.number(),
    },
    update: {
      description: 'Accepts anything (the specification sends it as a notification).',
      params: z.array(z.unknown()),
      result: z.null(),
    },
    notify_hello: {
      description: 'Answers with a "hello" notification carrying the number.',
      params: z.tuple([z.number()]),
      result: z.null(),
    },
    get_data: {
      description: 'The specification\'s ["hello", 5].',
      result: z.tuple([z.string(), z.number()]),
    },
    ask_client: {
      description:
        'Calls the client method client.confirm with the question and returns its answer.',
      params: z.object({ question: z.string().min(1).max(500) }),
      paramOrder: ['question'],
      result: z.object({ question: z.string(), answer: z.unknown() }),
    },
    'chat.send': {
      description:
        'Publishes a message to the chat topic, for every subscriber but the sender; returns its sequence number.',
      params: z.object({ text: z.string().min(1).max(2_000), from: z.string().max(40).optional() }),
      paramOrder: ['text', 'from'],
      result: z.number(),
    },
    'demo.drop': {
      description:
        'Answers true, then closes this connection (code 4001) so the client shows its reconnect and resume.',
      result: z.literal(true),
    },
  },
  notifications: {
    hello: { params: z.tuple([z.number()]) },
  },
  clientMethods: {
    'client.confirm': {
      description: 'Asks the user; the answer is whatever the client returns.',
      params: z.object({ question: z.string() }),
      result: z.unknown(),
    },
  },
  subscriptions: {
    ticker: { description: 'A random walk, published every 500 ms (TICK_MS).', data: Tick },
    chat: { description: 'Every chat.send message.', data: ChatMessage },
    countdown: {
      description: 'A per-subscriber stream: from, from-1, ... 0, then completes.',
      params: z
        .object({ from: z.number().int().min(0).max(1_000).default(10) })
        .default({ from: 10 }),
      data: z.number(),
    },
  },
});
