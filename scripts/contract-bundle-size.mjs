// What sharing a contract with the browser costs: one small contract and a page that uses it
// with the client, bundled for browsers (esbuild, ESM, minified, es2022) with classic `zod`,
// with `zod/mini`, and with the contract imported for its types only (no validator in the
// bundle). Prints each bundle's minified and gzipped size: the table in docs/contracts.md.
//
//   node scripts/contract-bundle-size.mjs
//
// `wsrpc-gateway/client` is this tree's src/client/index.ts, built as dist/browser/client.js is.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The contract, written with classic zod's methods (`z.string().min(1)`). */
const zodContract = `
import { z } from 'zod';
import { defineContract } from 'wsrpc-gateway/client';

const Message = z.object({ from: z.string(), text: z.string(), at: z.iso.datetime() });

export const chat = defineContract({
  name: 'chat',
  version: '1.0.0',
  methods: {
    send: {
      params: z.object({ room: z.string().min(1), text: z.string().min(1).max(2000) }),
      paramOrder: ['room', 'text'],
      result: z.number().int(),
    },
    history: {
      params: z.object({ room: z.string(), limit: z.number().int().min(1).max(100).optional() }),
      result: z.array(Message),
    },
  },
  notifications: { typing: { params: z.object({ room: z.string(), user: z.string() }) } },
  subscriptions: { 'room.*': { data: Message } },
});
`;

/** The same contract with zod/mini's functions (`z.string().check(z.minLength(1))`). */
const miniContract = `
import * as z from 'zod/mini';
import { defineContract } from 'wsrpc-gateway/client';

const Message = z.object({ from: z.string(), text: z.string(), at: z.iso.datetime() });

export const chat = defineContract({
  name: 'chat',
  version: '1.0.0',
  methods: {
    send: {
      params: z.object({
        room: z.string().check(z.minLength(1)),
        text: z.string().check(z.minLength(1), z.maxLength(2000)),
      }),
      paramOrder: ['room', 'text'],
      result: z.int(),
    },
    history: {
      params: z.object({
        room: z.string(),
        limit: z.optional(z.int().check(z.minimum(1), z.maximum(100))),
      }),
      result: z.array(Message),
    },
  },
  notifications: { typing: { params: z.object({ room: z.string(), user: z.string() }) } },
  subscriptions: { 'room.*': { data: Message } },
});
`;

/** The page, validating with the contract: useContract parses every result and message. */
const validatingPage = `
import { createClient, useContract } from 'wsrpc-gateway/client';
import { chat } from './contract';

const client = createClient({ url: 'ws://localhost:8080/rpc' });
const { api, subscribe } = useContract(client, chat);
subscribe('room.lobby').subscribe((m) => console.log(m.from, m.text));
console.log(await api.history({ room: 'lobby' }), await api.send(['lobby', 'hi']));
`;

/** The page, typed by the contract but shipping none of it: descriptors built from its types. */
const typesOnlyPage = `
import { createClient, method, subscription } from 'wsrpc-gateway/client';
import type { CallParams, CallResult, SubscriptionData } from 'wsrpc-gateway/client';
import type { chat } from './contract';

type Methods = (typeof chat)['methods'];
const history = method<CallParams<Methods['history']>, CallResult<Methods['history']>>('history');
const send = method<CallParams<Methods['send']>, CallResult<Methods['send']>>('send');
const lobby = subscription<undefined, SubscriptionData<(typeof chat)['subscriptions']['room.*']>>('room.lobby');

const client = createClient({ url: 'ws://localhost:8080/rpc' });
client.subscribe(lobby).subscribe((m) => console.log(m.from, m.text));
console.log(await client.call(history, { room: 'lobby' }), await client.call(send, ['lobby', 'hi']));
`;

/** The client alone, for the baseline: what any page using it ships. */
const clientOnlyPage = `
import { createClient } from 'wsrpc-gateway/client';

const client = createClient({ url: 'ws://localhost:8080/rpc' });
client.subscribe('room.lobby').subscribe((m) => console.log(m));
console.log(await client.call('history', { room: 'lobby' }), await client.call('send', ['lobby', 'hi']));
`;

/** `./contract` is `contract`'s text; `wsrpc-gateway/client` is this tree's client. */
function sources(contract) {
  return {
    name: 'contract-and-client',
    setup(b) {
      b.onResolve({ filter: /^wsrpc-gateway\/client$/ }, () => ({
        path: `${root}src/client/index.ts`,
      }));
      b.onResolve({ filter: /^\.\/contract$/ }, () => ({ path: 'contract.ts', namespace: 'page' }));
      b.onLoad({ filter: /.*/, namespace: 'page' }, () => ({
        contents: contract,
        loader: 'ts',
        resolveDir: root,
      }));
    },
  };
}

/** Bundle `page` as dist/browser/client.js is built: its minified and gzipped sizes in bytes. */
async function sizeOf(page, contract = '') {
  const out = await build({
    stdin: { contents: page, resolveDir: root, loader: 'ts', sourcefile: 'page.ts' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    write: false,
    // rxjs ships an ES2015 build under this condition; the default one is ES5, with helpers.
    conditions: ['es2015'],
    plugins: [sources(contract)],
    logLevel: 'error',
  });
  const bundled = out.outputFiles[0].contents;
  return { bytes: bundled.length, gz: gzipSync(bundled).length };
}

const kb = (n) => `${(n / 1000).toFixed(1)} KB`;
const rows = [
  ['client only, no contract', await sizeOf(clientOnlyPage)],
  ['contract as types only (`import type`)', await sizeOf(typesOnlyPage, zodContract)],
  ['contract with `zod/mini`', await sizeOf(validatingPage, miniContract)],
  ['contract with classic `zod`', await sizeOf(validatingPage, zodContract)],
];
const base = rows[0][1].gz;
console.log('| Page bundle | Minified | Gzipped | Gzipped, over the client alone |');
console.log('| --- | --: | --: | --: |');
for (const [name, { bytes, gz }] of rows) {
  const over = gz === base ? '' : `+${kb(gz - base)}`;
  console.log(`| ${name} | ${kb(bytes)} | ${kb(gz)} | ${over} |`);
}
