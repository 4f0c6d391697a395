// @vitest-environment happy-dom
/**
 * useCall and useMutation against a real gateway on loopback (a Node client over `ws` inside
 * happy-dom): loading then data, errors, params JSON cannot carry, the call cancelled on the
 * server when the component unmounts or its params change, one call for StrictMode's double
 * mount and for two components asking the same, a settled result shared with a component mounting
 * beside it (no remount loop under a parent that shows loading), `enabled` and `refetch`, and mutations (one started before the effects ran).
 */
import { act, cleanup, screen } from '@testing-library/react';
import { createElement, useEffect, useState } from 'react';
import { afterEach, describe, expect, it } from 'vitest';
import { JsonRpcError } from '../../src/protocol/errors.js';
import { useCall, useMutation } from '../../src/react/index.js';
import type { CallSnapshot } from '../../src/react/index.js';
import { Resources } from '../support/resources.js';
import { waitFor as waitUntil } from '../support/waiting.js';
import { methodLog, recorder, renderWith } from './harness.js';

const res = new Resources();
afterEach(async () => {
  cleanup();
  await res.cleanup();
});

/** A gateway with `sum`, `fail` (-32050), and `slow`, which waits for its cancellation. */
async function setup() {
  const log = methodLog();
  const { url, gateway } = await res.gateway({ middleware: log.middleware });
  gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
  gateway.method('fail', () => {
    throw new JsonRpcError(-32050, 'Not today', { why: 'test' });
  });
  const slow = { started: [] as unknown[], aborted: [] as unknown[] };
  gateway.method('slow', (params, ctx) => {
    slow.started.push(params);
    return new Promise((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => {
        slow.aborted.push(params);
        reject(new Error('aborted'));
      });
    });
  });
  return { log, slow, gateway, client: res.client(url) };
}

/** Renders a call's state as text: "loading", "data 3", "error -32050 Not today". */
function show(call: CallSnapshot<unknown>): string {
  if (call.loading) return 'loading';
  if (call.error instanceof JsonRpcError) return `error ${call.error.code} ${call.error.message}`;
  if (call.error) return `error ${(call.error as Error).message}`;
  return `data ${JSON.stringify(call.data)}`;
}

describe('useCall', () => {
  it('shows loading, then the result', async () => {
    const { client } = await setup();
    const states = recorder<string>();
    function Sum() {
      const text = show(useCall('sum', [1, 2, 3]));
      states.record(text);
      return createElement('p', null, text);
    }
    renderWith(client, createElement(Sum));
    await screen.findByText('data 6');
    expect(states.values).toEqual(['loading', 'data 6']);
  });

  it('shows the JSON-RPC error a call fails with', async () => {
    const { client } = await setup();
    const states = recorder<string>();
    function Fail() {
      const text = show(useCall('fail'));
      states.record(text);
      return createElement('p', null, text);
    }
    renderWith(client, createElement(Fail));
    await screen.findByText('error -32050 Not today');
    expect(states.values).toEqual(['loading', 'error -32050 Not today']);
  });

  it('cancels the call on the server (rpc.cancel) when the component unmounts', async () => {
    const { client, slow } = await setup();
    function Slow() {
      return createElement('p', null, show(useCall('slow', ['unmount'])));
    }
    const view = renderWith(client, createElement(Slow));
    await waitUntil(() => slow.started.length === 1, 'the slow call to start');
    view.unmount();
    await waitUntil(() => slow.aborted.length === 1, 'the server to see the call cancelled');
    expect(slow.aborted).toEqual([['unmount']]);
  });

  it('cancels the call under way when the params change, and calls with the new ones', async () => {
    const { client, slow } = await setup();
    let setWhich!: (which: string) => void;
    function Slow() {
      const [which, set] = useState('first');
      setWhich = set;
      return createElement('p', null, show(useCall('slow', [which])));
    }
    renderWith(client, createElement(Slow));
    await waitUntil(() => slow.started.length === 1, 'the first call to start');
    act(() => setWhich('second'));
    await waitUntil(() => slow.aborted.length === 1, 'the first call to be cancelled');
    await waitUntil(() => slow.started.length === 2, 'the second call to start');
    expect({ started: slow.started, aborted: slow.aborted }).toEqual({
      started: [['first'], ['second']],
      aborted: [['first']],
    });
  });

  it('makes one call for StrictMode, and one for two components asking the same', async () => {
    const { client, log } = await setup();
    // Open: a call made now goes out at once (one given up before that never leaves the queue).
    await client.opened();
    function Sum() {
      return createElement('p', null, show(useCall('sum', [40, 2])));
    }
    renderWith(client, createElement('div', null, createElement(Sum), createElement(Sum)), true);
    expect(await screen.findAllByText('data 42')).toHaveLength(2);
    expect(log.count('sum')).toBe(1);
  });

  it("takes each component's own timeout: another timeoutMs is a call of its own", async () => {
    const { client, slow } = await setup();
    await client.opened();
    function Slow({ name, timeoutMs }: { name: string; timeoutMs?: number }) {
      const call = useCall('slow', ['same'], timeoutMs === undefined ? {} : { timeoutMs });
      return createElement('p', null, `${name} ${show(call)}`);
    }
    renderWith(
      client,
      createElement(
        'div',
        null,
        createElement(Slow, { name: 'patient' }),
        createElement(Slow, { name: 'hasty', timeoutMs: 50 }),
      ),
    );
    await screen.findByText(/^hasty error .*timed out/);
    expect(screen.getByText(/^patient /).textContent).toBe('patient loading');
    expect(slow.started).toEqual([['same'], ['same']]);
  });

  it('shows params JSON cannot carry (a BigInt, a cycle) as a TypeError, as client.call rejects', async () => {
    const { client, log } = await setup();
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    function Unsendable({ name, params }: { name: string; params: Record<string, unknown> }) {
      const call = useCall('sum', params);
      const error = call.error instanceof TypeError ? 'TypeError' : String(call.error);
      return createElement('p', null, `${name} ${call.loading ? 'loading' : error}`);
    }
    renderWith(
      client,
      createElement(
        'div',
        null,
        createElement(Unsendable, { name: 'bigint', params: { n: 1n } }),
        createElement(Unsendable, { name: 'cycle', params: cycle }),
      ),
    );
    await screen.findByText('bigint TypeError');
    await screen.findByText('cycle TypeError');
    expect(log.count('sum')).toBe(0);
  });

  it('shares a settled result with a component that mounts beside it; refetch calls again', async () => {
    const { client, log, gateway } = await setup();
    let count = 0;
    gateway.method('cart.count', () => ++count);
    let showPage!: () => void;
    let refetch!: () => void;
    function Count({ name }: { name: string }) {
      const call = useCall('cart.count');
      if (name === 'page') refetch = call.refetch;
      return createElement('p', null, `${name} ${show(call)}`);
    }
    function App() {
      const [page, setPage] = useState(false);
      showPage = () => setPage(true);
      return createElement(
        'div',
        null,
        createElement(Count, { name: 'header' }),
        page ? createElement(Count, { name: 'page' }) : null,
      );
    }
    renderWith(client, createElement(App), true);
    await screen.findByText('header data 1');
    act(() => showPage());
    await screen.findByText('page data 1');
    act(() => refetch());
    await screen.findByText('page data 2');
    expect(screen.getByText(/^header /).textContent).toBe('header data 2');
    expect(log.count('cart.count')).toBe(2);
  });

  it('a parent showing loading, then a child asking the same call: one call, no remount loop', async () => {
    const { client, log, gateway } = await setup();
    gateway.method('rates.get', () => 1.08);
    let childMounts = 0;
    function Rate() {
      const rate = useCall('rates.get', { pair: 'EUR/USD' });
      useEffect(() => {
        childMounts++;
      }, []);
      return createElement('p', null, `child ${show(rate)}`);
    }
    function Prices() {
      const rate = useCall('rates.get', { pair: 'EUR/USD' });
      if (rate.loading) return createElement('p', null, 'loading…');
      return createElement(Rate);
    }
    renderWith(client, createElement(Prices));
    await screen.findByText('child data 1.08');
    // One more round trip: a call the child's mount made would have reached the server by then.
    expect(await client.call('sum', [1, 1])).toBe(2);
    expect(screen.getByText(/^child /).textContent).toBe('child data 1.08');
    expect(log.count('rates.get')).toBe(1);
    expect(childMounts).toBe(1);
  });

  it('shares a failed result too; refetch retries it', async () => {
    const { client, log, gateway } = await setup();
    let calls = 0;
    gateway.method('flaky', () => {
      if (++calls === 1) throw new JsonRpcError(-32050, 'Not yet');
      return 'ok';
    });
    let showSecond!: () => void;
    let refetch!: () => void;
    function Flaky({ name }: { name: string }) {
      const call = useCall('flaky');
      refetch = call.refetch;
      return createElement('p', null, `${name} ${show(call)}`);
    }
    function App() {
      const [second, setSecond] = useState(false);
      showSecond = () => setSecond(true);
      return createElement(
        'div',
        null,
        createElement(Flaky, { name: 'first' }),
        second ? createElement(Flaky, { name: 'second' }) : null,
      );
    }
    renderWith(client, createElement(App));
    await screen.findByText('first error -32050 Not yet');
    act(() => showSecond());
    await screen.findByText('second error -32050 Not yet');
    expect(log.count('flaky')).toBe(1);
    act(() => refetch());
    await screen.findByText('second data "ok"');
    expect(screen.getByText(/^first /).textContent).toBe('first data "ok"');
    expect(log.count('flaky')).toBe(2);
  });

  it('waits while not enabled; refetch calls again', async () => {
    const { client, log } = await setup();
    let enable!: () => void;
    let refetch!: () => void;
    function Sum() {
      const [enabled, setEnabled] = useState(false);
      enable = () => setEnabled(true);
      const call = useCall('sum', [2, 2], { enabled });
      refetch = call.refetch;
      return createElement('p', null, show(call));
    }
    renderWith(client, createElement(Sum));
    expect(screen.getByText('data undefined')).toBeTruthy();
    await client.call('sum', [0]);
    expect(log.count('sum')).toBe(1);
    act(() => enable());
    await screen.findByText('data 4');
    expect(log.count('sum')).toBe(2);
    act(() => refetch());
    await waitUntil(() => log.count('sum') === 3, 'the refetch');
    await screen.findByText('data 4');
  });
});

describe('useMutation', () => {
  it('calls on mutate: loading, then data; an error; reset', async () => {
    const { client } = await setup();
    let sum!: ReturnType<typeof useMutation<number>>;
    let fail!: ReturnType<typeof useMutation>;
    const states = recorder<string>();
    function Form() {
      sum = useMutation<number>('sum');
      fail = useMutation('fail');
      const text = `${show(sum)} | ${show(fail)}`;
      states.record(text);
      return createElement('p', null, text);
    }
    renderWith(client, createElement(Form));
    act(() => sum.mutate([5, 6]));
    await screen.findByText('data 11 | data undefined');
    let failed!: Promise<unknown>;
    act(() => {
      failed = fail.mutateAsync();
      // Looked at below, once the state shows it.
      failed.catch(() => undefined);
    });
    await screen.findByText('data 11 | error -32050 Not today');
    await expect(failed).rejects.toMatchObject({ code: -32050 });
    act(() => fail.reset());
    await screen.findByText('data 11 | data undefined');
    expect(states.values).toEqual([
      'data undefined | data undefined',
      'loading | data undefined',
      'data 11 | data undefined',
      'data 11 | loading',
      'data 11 | error -32050 Not today',
      'data 11 | data undefined',
    ]);
  });

  it("shows loading for a mutation started before its effects ran (from a child's effect)", async () => {
    const { client } = await setup();
    const states = recorder<string>();
    // A child's effects run before its parent's: the mutation starts before the hook's own.
    function Start({ mutate }: { mutate: (params: number[]) => void }) {
      useEffect(() => mutate([1, 2]), [mutate]);
      return null;
    }
    function Form() {
      const sum = useMutation<number>('sum');
      const text = show(sum);
      states.record(text);
      return createElement(
        'div',
        null,
        createElement('p', null, text),
        createElement(Start, { mutate: sum.mutate }),
      );
    }
    renderWith(client, createElement(Form));
    await screen.findByText('data 3');
    expect(states.values).toEqual(['data undefined', 'loading', 'data 3']);
  });

  it('does not cancel a mutation under way when the component unmounts', async () => {
    const { client, slow } = await setup();
    let slowCall!: ReturnType<typeof useMutation>;
    function Form() {
      slowCall = useMutation('slow');
      return createElement('p', null, show(slowCall));
    }
    const mounted = renderWith(client, createElement(Form));
    act(() => slowCall.mutate(['kept']));
    await waitUntil(() => slow.started.length === 1, 'the mutation to start');
    mounted.unmount();
    // The server still has it: a call made after it is answered while it goes on.
    expect(await client.call('sum', [1])).toBe(1);
    expect(slow.aborted).toEqual([]);
  });
});
