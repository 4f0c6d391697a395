import type { Broker, BrokerMessage } from './broker.js';

/**
 * The embedded broker: one process, no network. Delivery is synchronous, so
 * a publish reaches every subscriber before `publish` returns, in order.
 */
export class MemoryBroker implements Broker {
  private readonly listeners = new Map<string, (message: BrokerMessage) => void>();
  private readonly sequences = new Map<string, number>();
  private closed = false;

  get ready(): boolean {
    return !this.closed;
  }

  publish(topic: string, payload: string): Promise<number> {
    if (this.closed) return Promise.reject(new Error('Broker closed'));
    const seq = (this.sequences.get(topic) ?? 0) + 1;
    this.sequences.set(topic, seq);
    this.listeners.get(topic)?.({ topic, seq, payload });
    return Promise.resolve(seq);
  }

  subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    this.listeners.set(topic, deliver);
    return Promise.resolve();
  }

  unsubscribe(topic: string): Promise<void> {
    this.listeners.delete(topic);
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    return Promise.resolve();
  }
}
