import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, mainJs, waitForLivez, spawnServer } from '../support/demo-process.js';
import { Resources } from '../support/resources.js';
import { freePort } from '../support/network.js';
import { upgradeRefusal } from '../support/sockets.js';
import type { RawRpc } from '../support/raw-rpc.js';
import { within } from '../support/waiting.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

beforeAll(ensureBuilt, 120_000);

const hasNotice = (raw: RawRpc) => () =>
  raw.frames.some((f) => f.method === 'rpc.reconnect' && f.id === undefined);

describe('drain on SIGTERM (child process: node dist/demo/main.js)', () => {
  it('notifies every client, lets the in-flight call finish, closes with 1012 and exits 0', async () => {
    const port = await freePort();
    const httpUrl = `http://127.0.0.1:${port}`;
    const url = `ws://127.0.0.1:${port}/rpc`;
    const { child, output, exited } = spawnServer(mainJs, port, { DRAIN_DEADLINE_MS: '30000' });
    res.children.push(child);
    await waitForLivez(child, httpUrl);

    const asker = await openRaw(res, url);
    const others = [await openRaw(res, url), await openRaw(res, url)];
    const everyone = [asker, ...others];
    // Every raw text frame too, to check the notice byte for byte.
    const texts = everyone.map((raw) => {
      const seen: string[] = [];
      raw.socket.on('message', (data) => seen.push((data as Buffer).toString('utf8')));
      return seen;
    });
    for (const raw of everyone) await raw.barrier();
    for (const raw of everyone) raw.answerPings();

    // ask_client calls back client.confirm on the asking connection; it stays unanswered for now.
    asker.send({
      jsonrpc: '2.0',
      method: 'ask_client',
      params: { question: 'ship it?' },
      id: 'ask',
    });
    await asker.until(
      () => asker.frames.some((f) => f.method === 'client.confirm'),
      'the server-to-client call',
    );
    const confirm = asker.frames.find((f) => f.method === 'client.confirm')!;
    expect(confirm.params).toEqual({ question: 'ship it?' });
    expect(confirm.id).toBeDefined();

    expect(child.kill('SIGTERM')).toBe(true);

    for (const raw of everyone) await raw.until(hasNotice(raw), 'the rpc.reconnect notice');
    for (const seen of texts) {
      expect(seen).toContain('{"jsonrpc":"2.0","method":"rpc.reconnect","params":{}}');
    }
    // The idle clients are let go once they have answered the drain's ping; the asker's call
    // holds the process.
    for (const raw of others) {
      expect(await within(raw.closed, 'an idle client to close')).toEqual({
        code: 1012,
        reason: 'service restart',
      });
    }
    const ready = await fetch(`${httpUrl}/readyz`);
    expect(ready.status).toBe(503);
    await ready.arrayBuffer();
    expect((await upgradeRefusal(res, url)).status).toBe(503);
    expect(child.exitCode).toBeNull();
    expect(asker.frames.some((f) => f.id === 'ask')).toBe(false);

    // Answer the callback only now: the call was in flight when SIGTERM arrived.
    asker.send({ jsonrpc: '2.0', result: 'yes', id: confirm.id });
    expect(await asker.response('ask')).toEqual({
      jsonrpc: '2.0',
      result: { question: 'ship it?', answer: 'yes' },
      id: 'ask',
    });
    expect(await within(asker.closed, 'the asker to close')).toEqual({
      code: 1012,
      reason: 'service restart',
    });

    const { code, signal } = await within(exited, 'the process to exit', 30_000);
    expect({ code, signal, output: code === 0 ? '' : output() }).toEqual({
      code: 0,
      signal: null,
      output: '',
    });
  }, 60_000);
});
