/**
 * `drain({ beforeClose })` runs its hook once the sessions are drained and before the gateway
 * closes, also when another caller started the drain first (the standalone server's shutdown
 * after the application's own drain): the hook of every caller that comes while sessions still
 * drain runs, in order, with the gateway's server still listening.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('drain({ beforeClose })', () => {
  it('runs the hook of each caller that comes while the sessions drain, before the close', async () => {
    const { gateway, url } = await res.gateway();
    // A client that answers no ping: its session drains until DRAIN_PING_WAIT_MS.
    const client = await openRaw(res, url);
    await client.request('rpc.ping');
    const ran: string[] = [];
    const hook = (name: string) => () => {
      ran.push(`${name} ${gateway.httpServer.listening ? 'listening' : 'closed'}`);
      return Promise.resolve();
    };
    const first = gateway.drain({ beforeClose: hook('first') });
    const plain = gateway.drain();
    await client.until(() => client.frames.some((f) => f.method === 'rpc.reconnect'), 'notice');
    const second = gateway.drain({ beforeClose: hook('second') });
    await Promise.all([first, plain, second]);
    expect(ran).toEqual(['first listening', 'second listening']);
    // Once the gateway has closed, a hook has nothing to come before: it is not run.
    await gateway.drain({ beforeClose: hook('late') });
    expect(ran).toEqual(['first listening', 'second listening']);
  });
});
