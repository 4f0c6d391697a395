// A NATS link whose consumers (as readHistory makes and fetches them) are watched or steered by
// a test: the broker stays real, only when things happen is chosen. Shared by the NATS history
// tests.
import type { Consumer, ConsumerMessages } from '@nats-io/jetstream';
import type { Link } from '../../src/pubsub/nats-link.js';

export interface ConsumerHooks {
  /** Awaited before each consumer is made. */
  beforeConsumer?: () => Promise<void>;
  /** Each fetch of a consumer made through the link: `fetch` makes the real one. */
  fetch?: (fetch: () => Promise<ConsumerMessages>) => Promise<ConsumerMessages>;
}

/** `link` with its consumers going through `hooks`. */
export function withConsumerHooks(link: Link, hooks: ConsumerHooks): Link {
  const consumers = new Proxy(link.js.consumers, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (key !== 'get' || typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        await hooks.beforeConsumer?.();
        const consumer = (await (value as (...a: unknown[]) => Promise<Consumer>).apply(
          target,
          args,
        )) as Consumer;
        return new Proxy(consumer, {
          get(c, k, r) {
            const member: unknown = Reflect.get(c, k, r);
            if (k !== 'fetch' || typeof member !== 'function' || !hooks.fetch) return member;
            const real = (a: unknown[]) => () =>
              (member as (...x: unknown[]) => Promise<ConsumerMessages>).apply(c, a);
            return (...a: unknown[]) => hooks.fetch!(real(a));
          },
        });
      };
    },
  });
  const js = new Proxy(link.js, {
    get: (target, key, receiver): unknown =>
      key === 'consumers' ? consumers : (Reflect.get(target, key, receiver) as unknown),
  });
  return { ...link, js };
}
