import { z } from 'zod';
import { defineContract } from '../../src/contract/contract.js';
import { bindMethods } from '../../src/contract/bind.js';
import { implementContract, clientApi } from '../../src/server/contract-server.js';
import { useContract } from '../../src/client/contract-client.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { RpcClient } from '../../src/client/client.js';
import type { Session } from '../../src/server/session.js';
import { of } from 'rxjs';

const c = defineContract({
  name: 'c', version: '1',
  methods: {
    subtract: { params: z.object({ minuend: z.number(), subtrahend: z.number() }), paramOrder: ['minuend', 'subtrahend'], result: z.number() },
    noParams: { result: z.string() },
  },
  clientMethods: { 'client.confirm': { params: z.object({ q: z.string() }), result: z.boolean() } },
  subscriptions: { ticker: { data: z.object({ p: z.number() }) }, cd: { params: z.object({ from: z.number() }), data: z.number() } },
});
declare const client: RpcClient;
declare const gw: Gateway;
declare const session: Session;
const { api, subscribe } = useContract(client, c);
void api.subtract(['a', 'b']);
void api.subtract([1, 2, 3, 4]);
void api.noParams();
void api.noParams(undefined);
subscribe('cd');
subscribe('ticker', { x: 1 } as never);
implementContract(gw, c, { methods: { subtract: () => 1, noParams: () => 'x', extra: () => 1 } });
implementContract(gw, c, { methods: { subtract: () => 1 } });
implementContract(gw, c, { methods: { subtract: () => 1, noParams: () => 'x' }, streams: { cd: () => of('x') } });
implementContract(gw, c, { methods: { subtract: () => 1, noParams: () => 'x' }, streams: { nope: () => of('x') } });
void clientApi(session, c)['client.confirm']({ q: 1 });
void bindMethods;
