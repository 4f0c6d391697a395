import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { closeOf, silentWebSocket, upgradeRefusal } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('HTTP endpoints beside the WebSocket', () => {
  it('GET /livez is 200', async () => {
    const { httpUrl } = await res.demoGateway();
    const response = await fetch(`${httpUrl}/livez`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('application/json');
    expect(await response.json()).toEqual({ status: 'ok' });
  });

  it('GET /readyz is 200 with the number of sessions', async () => {
    const { httpUrl, url } = await res.demoGateway();
    const empty = await fetch(`${httpUrl}/readyz`);
    expect(empty.status).toBe(200);
    expect(await empty.json()).toEqual({ status: 'ready', sessions: 0 });

    const client = res.client(url);
    await client.opened();
    const withOne = await fetch(`${httpUrl}/readyz?probe=1`);
    expect(withOne.status).toBe(200);
    expect(await withOne.json()).toEqual({ status: 'ready', sessions: 1 });
  });

  it('GET /rpc without an upgrade is 426', async () => {
    const { httpUrl } = await res.demoGateway();
    const response = await fetch(`${httpUrl}/rpc`);
    expect(response.status).toBe(426);
    expect(response.headers.get('upgrade')).toBe('websocket');
    expect(await response.text()).toContain('WebSocket');
  });

  it('an unknown path is 404', async () => {
    const { httpUrl } = await res.demoGateway();
    for (const path of ['/', '/nope', '/rpc/extra', '/livez/x']) {
      const response = await fetch(`${httpUrl}${path}`);
      expect(response.status, path).toBe(404);
      await response.arrayBuffer();
    }
  });

  it('an httpHandler serves other paths; returning false gives 404', async () => {
    const { httpUrl } = await res.demoGateway({
      httpHandler: (req, response) => {
        if (req.url !== '/hello') return false;
        response.end('hi');
        return true;
      },
    });
    const hello = await fetch(`${httpUrl}/hello`);
    expect(hello.status).toBe(200);
    expect(await hello.text()).toBe('hi');
    const other = await fetch(`${httpUrl}/other`);
    expect(other.status).toBe(404);
    await other.arrayBuffer();
  });

  it('an upgrade on a wrong path fails with 404', async () => {
    const { port } = await res.demoGateway();
    const refused = await upgradeRefusal(res, `ws://127.0.0.1:${port}/wrong`);
    expect(refused.status).toBe(404);
    const nested = await upgradeRefusal(res, `ws://127.0.0.1:${port}/rpc/deeper`);
    expect(nested.status).toBe(404);
  });

  it('serves the WebSocket on a custom path', async () => {
    const { port, httpUrl } = await res.demoGateway({ path: '/ws' });
    const client = res.client(`ws://127.0.0.1:${port}/ws`);
    expect(await client.call('sum', [1, 2])).toBe(3);
    const oldPath = await upgradeRefusal(res, `ws://127.0.0.1:${port}/rpc`);
    expect(oldPath.status).toBe(404);
    const get = await fetch(`${httpUrl}/ws`);
    expect(get.status).toBe(426);
    await get.arrayBuffer();
  });

  it('during gateway.close(): /readyz is 503, new upgrades get 503, /livez stays 200', async () => {
    const { gateway, port, httpUrl, url } = await res.demoGateway();
    // A client that completes the handshake but never answers the close frame keeps
    // close() waiting (up to its timeout), which holds the gateway in its draining state.
    const silent = await silentWebSocket(res, port);
    expect(gateway.sessions.size).toBe(1);

    let closed = false;
    const closing = gateway.close({ timeoutMs: 15_000 }).then(() => (closed = true));
    const closeFrame = await silent.nextData();
    expect(closeFrame[0]).toBe(0x88); // FIN + close opcode
    expect(closeFrame.readUInt16BE(2)).toBe(1001);

    const ready = await fetch(`${httpUrl}/readyz`);
    expect(ready.status).toBe(503);
    expect((await ready.json()).status).toBe('draining');
    const live = await fetch(`${httpUrl}/livez`);
    expect(live.status).toBe(200);
    await live.arrayBuffer();
    const refused = await upgradeRefusal(res, url);
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(closed).toBe(false);

    // Once the last socket goes, close() finishes and the port stops answering.
    silent.socket.destroy();
    await closing;
    expect(gateway.httpServer.listening).toBe(false);
    await expect(fetch(`${httpUrl}/livez`)).rejects.toThrow();
  });

  it('gateway.close() cuts off a client that never finishes the closing handshake', async () => {
    const { gateway, port } = await res.demoGateway();
    const silent = await silentWebSocket(res, port);
    const gone = new Promise<void>((resolve) => silent.socket.once('close', () => resolve()));
    await gateway.close({ timeoutMs: 100 });
    await gone;
    expect(gateway.sessions.size).toBe(0);
  });

  it('a second gateway.close() resolves only once the gateway is closed', async () => {
    const { gateway, port } = await res.demoGateway();
    const silent = await silentWebSocket(res, port);
    const first = gateway.close({ timeoutMs: 15_000 });
    await silent.nextData(); // the close frame: the first close() is under way
    const second = gateway.close().then(() => ({ listening: gateway.httpServer.listening }));
    const early = await Promise.race([
      second,
      new Promise((resolve) => setImmediate(() => resolve('still closing'))),
    ]);
    silent.socket.destroy();
    await first;
    // A caller awaiting close() must be able to rely on the gateway being closed.
    expect(early).toBe('still closing');
    expect(await second).toEqual({ listening: false });
  });

  it('session.close() closes one socket with the given code', async () => {
    const { gateway, url } = await res.demoGateway();
    const raw = await res.raw(url);
    const [session] = [...gateway.sessions.values()];
    const closed = closeOf(raw.socket);
    session!.close(4000, 'kicked');
    expect(await closed).toEqual({ code: 4000, reason: 'kicked' });
    expect(await session!.closed).toEqual({ code: 4000, reason: 'kicked' });
  });
});
