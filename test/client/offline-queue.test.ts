import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { rejectionOf } from '../support/promises.js';
import { waitForState } from '../support/client.js';
import { captureLogger, logged } from '../support/logging.js';
import { sumGateway } from '../support/client.js';
import { waitFor } from '../support/waiting.js';
import { NotConnectedError } from '../../src/protocol/local-errors.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('offline queue: params that cannot be serialised', () => {
  it('fail at once while disconnected, as they do while connected', async () => {
    const first = await sumGateway(res);
    const client = res.client(first.url);
    await client.opened();
    // Connected: a notification throws, a call rejects.
    expect(() => client.notify('record', [1n])).toThrow(TypeError);
    expect(await rejectionOf(client.call('sum', [1n]))).toBeInstanceOf(TypeError);

    await first.gateway.close();
    await waitForState(client, 'reconnecting');
    const circular: Record<string, unknown> = {};
    circular['self'] = circular;
    expect(() => client.notify('record', [1n])).toThrow(TypeError);
    expect(() => client.notify('record', circular)).toThrow(TypeError);
    expect(await rejectionOf(client.call('record', circular))).toBeInstanceOf(TypeError);
    const batch = await rejectionOf(client.batch([{ method: 'record', params: [2n] }]));
    expect(batch).toBeInstanceOf(TypeError);

    // Nothing bad was queued: the next connection carries the good calls only.
    const good = client.call('sum', [1, 2]);
    await sumGateway(res, {}, first.port);
    expect(await good).toBe(3);
  });

  it('a queued entry that fails when flushed is dropped alone; the rest are sent', async () => {
    const first = await sumGateway(res);
    const { logger, records } = captureLogger();
    const client = res.client(first.url, { logger, callTimeoutMs: 5_000 });
    await client.opened();
    await first.gateway.close();
    await waitForState(client, 'reconnecting');

    // Valid when queued, made unserialisable before the flush.
    const note: Record<string, unknown> = { n: 1 };
    client.notify('record', note);
    const call: Record<string, unknown> = { n: 2 };
    const badCall = rejectionOf(client.call('record', call));
    note['self'] = note;
    call['self'] = call;
    client.notify('record', ['later']);
    const after = client.call('sum', [2, 3]);
    const later: unknown[] = [];

    const second = await sumGateway(res, {}, first.port);
    second.gateway.method('record', (params) => {
      later.push(params);
    });
    expect(await badCall).toBeInstanceOf(TypeError);
    // Without a robust flush the throw escapes onopen and nothing after it is sent.
    expect(await after).toBe(5);
    // Queued before the call, so handled before the call was answered.
    expect(later).toEqual([['later']]);
    expect(logged(records, 'queued notification dropped')).toHaveLength(1);
  });
});

describe('offline queue: full', () => {
  it('a notification past maxQueued throws NotConnectedError, as a call rejects; those queued are sent on connecting', async () => {
    const first = await sumGateway(res);
    const client = res.client(first.url, { maxQueued: 2 });
    await client.opened();
    await first.gateway.close();
    await waitForState(client, 'reconnecting');

    const queued = client.call('sum', [1, 2]);
    client.notify('record', ['kept']);
    const refused = await rejectionOf(client.call('sum', [3, 4]));
    expect(refused).toBeInstanceOf(NotConnectedError);
    expect(() => client.notify('record', ['over'])).toThrow(
      new NotConnectedError('Not connected and 2 calls are already queued'),
    );

    const second = await sumGateway(res, {}, first.port);
    const recorded: unknown[] = [];
    second.gateway.method('record', (params) => void recorded.push(params));
    expect(await queued).toBe(3);
    await waitFor(() => recorded.length === 1, 'the queued notification');
    expect(await client.call('sum', [0, 0])).toBe(0);
    expect(recorded).toEqual([['kept']]);
  });
});
