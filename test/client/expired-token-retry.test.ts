// docs/identity.md, "The client": credentials refused as expired are retried once when there is a
// getToken, since the provider can mint a fresh token: a 4419 close, and a token refused as
// expired when connecting (in-band, -32010 `reason: "expired"`; with the header transport, an
// upgrade refused 401 `token expired`). A second expiry in a row stops the client as any refusal
// does. Against a real gateway with jwtAuth, whose provider first gives a token it had cached.
import { afterEach, describe, expect, it } from 'vitest';
import { AuthenticationError } from '../../src/client/index.js';
import type { DisconnectEvent } from '../../src/client/index.js';
import { Resources } from '../support/resources.js';
import { rejectionOf } from '../support/promises.js';
import {
  disconnectsOf,
  now,
  signHs256,
  validClaims,
  whoamiJwtGateway,
} from '../jwt/jwt-fixtures.js';

const res = new Resources();
afterEach(() => res.cleanup());

const expiredToken = () => signHs256(validClaims({ iat: now() - 1_200, exp: now() - 600 }));

/** What a refusal event says, without the error's stack. */
const summary = (event: DisconnectEvent) => ({
  code: event.code,
  httpStatus: event.httpStatus,
  reason: (event.error as AuthenticationError | undefined)?.reason,
  authentication: event.error instanceof AuthenticationError,
  willRetry: event.willRetry,
});

describe('a token refused as expired when connecting', () => {
  it('in-band: retried once with a fresh token from getToken', async () => {
    const { url } = await whoamiJwtGateway(res, true);
    let asked = 0;
    const getToken = () => (++asked === 1 ? expiredToken() : signHs256());
    const client = res.client(url, { getToken });
    const events = disconnectsOf(client);
    await client.opened();
    expect(await client.call('whoami')).toBe('alice');
    expect(events.map(summary)).toEqual([
      {
        code: 4401,
        httpStatus: undefined,
        reason: 'expired',
        authentication: true,
        willRetry: true,
      },
    ]);
    expect(asked).toBe(2);
  });

  it('with the header transport: an upgrade refused 401 "token expired" is retried once too', async () => {
    const { url } = await whoamiJwtGateway(res, false);
    let asked = 0;
    const getToken = () => (++asked === 1 ? expiredToken() : signHs256());
    const client = res.client(url, { getToken, tokenTransport: 'header' });
    const events = disconnectsOf(client);
    await client.opened();
    expect(await client.call('whoami')).toBe('alice');
    expect(events.map(summary)).toEqual([
      {
        code: 1006,
        httpStatus: 401,
        reason: 'token expired',
        authentication: true,
        willRetry: true,
      },
    ]);
  });

  it('expired again on the retry: the client stops, calls reject with AuthenticationError', async () => {
    const { url } = await whoamiJwtGateway(res, true);
    let asked = 0;
    const client = res.client(url, {
      getToken: () => {
        asked++;
        return expiredToken();
      },
    });
    const events = disconnectsOf(client);
    // Rejected once the client has stopped for good, not at the first refusal.
    expect(await rejectionOf(client.call('whoami'))).toBeInstanceOf(AuthenticationError);
    expect(client.state).toBe('closed');
    expect(events.map((event) => [event.code, event.willRetry])).toEqual([
      [4401, true],
      [4401, false],
    ]);
    expect(asked).toBe(2);
  });
});
