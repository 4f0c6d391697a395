import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { freePort } from '../support/network.js';
import { waitForState } from '../support/client.js';
import { waitUntil } from '../support/waiting.js';
import { redactUrl } from '../../src/client/redact-url.js';
import { captureLogger, logged, recordText } from '../support/logging.js';
import { sumGateway } from '../support/client.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('client logs', () => {
  it('never carry the query string or userinfo of a URL', async () => {
    const deadPort = await freePort();
    const live = await sumGateway(res, { authenticate: () => ({}) });
    const { logger, records } = captureLogger();
    const client = res.client(
      [
        // Parsed, but refused by the WebSocket (a URL with a fragment).
        'ws://127.0.0.1:1/rpc?token=SECRET0#fragment',
        `ws://user:SECRET1@127.0.0.1:${deadPort}/rpc?token=SECRET2`,
        `${live.url}?token=SECRET4`,
      ],
      { logger },
    );
    await client.opened();
    // The server's drain notice names a URL that is not ours: logged, redacted.
    const draining = live.gateway.drain({
      reconnectUrl: 'wss://other.example/rpc?token=SECRET5',
      deadlineMs: 2_000,
    });
    await waitForState(client, 'reconnecting');
    await draining;
    await waitUntil(
      () => logged(records, 'connection attempt failed').length >= 2,
      'failed attempts after the drain',
    );
    await client.close();

    expect(logged(records, 'could not create WebSocket')[0]?.obj).toMatchObject({
      url: 'ws://127.0.0.1:1/rpc',
    });
    expect(logged(records, 'connection attempt failed').map((r) => r.obj)).toContainEqual(
      expect.objectContaining({ url: `ws://127.0.0.1:${deadPort}/rpc` }),
    );
    expect(logged(records, 'server asked to reconnect elsewhere')[0]?.obj).toMatchObject({
      url: 'wss://other.example/rpc',
    });
    for (const record of records) expect(recordText(record)).not.toMatch(/SECRET/);
  });
});

describe('redactUrl', () => {
  it('drops userinfo, query string and fragment', () => {
    expect(redactUrl('wss://user:pw@gw.example:8443/rpc?token=abc&x=1#frag')).toBe(
      'wss://gw.example:8443/rpc',
    );
    expect(redactUrl('ws://127.0.0.1:8080/rpc')).toBe('ws://127.0.0.1:8080/rpc');
  });

  it('cuts by hand what the URL parser refuses', () => {
    expect(redactUrl('ws//user:pw@host/rpc?token=abc')).toBe('ws//host/rpc');
    expect(redactUrl('not a url //user:pw@host/x#y')).toBe('not a url //host/x');
  });
});
