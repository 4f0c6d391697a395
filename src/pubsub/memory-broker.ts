import { defaultRetention } from './broker.js';
import type { Broker, BrokerMessage, History, Retention } from './broker.js';

interface TopicLog {
  lastSeq: number;
  retention: Retention;
  /** Retained messages, oldest first, with when they were published. */
  messages: { message: BrokerMessage; at: number }[];
}

/**
 * The embedded broker: one process, no network. Delivery is synchronous, so
 * a publish reaches every subscriber before `publish` returns, in order. Each
 * topic keeps a bounded history (length and age) for clients that resume.
 */
export class MemoryBroker implements Broker {
  private readonly listeners = new Map<string, (message: BrokerMessage) => void>();
  private readonly logs = new Map<string, TopicLog>();
  private closed = false;

  constructor(private readonly now: () => number = Date.now) {}

  get ready(): boolean {
    return !this.closed;
  }

  publish(
    topic: string,
    payload: string,
    retention: Retention = defaultRetention,
  ): Promise<number> {
    if (this.closed) return Promise.reject(new Error('Broker closed'));
    if (topic.startsWith('$')) {
      // Addressed to a node or user (SessionRouter): delivered now or never, so no log is kept
      // (one per user name ever notified would grow without bound).
      this.listeners.get(topic)?.({ topic, seq: 0, payload });
      return Promise.resolve(0);
    }
    let log = this.logs.get(topic);
    if (!log) {
      log = { lastSeq: 0, retention, messages: [] };
      this.logs.set(topic, log);
    }
    log.retention = retention;
    const message: BrokerMessage = { topic, seq: ++log.lastSeq, payload };
    if (retention.maxLength > 0) log.messages.push({ message, at: this.now() });
    this.trim(log, retention);
    this.listeners.get(topic)?.(message);
    return Promise.resolve(message.seq);
  }

  subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    this.listeners.set(topic, deliver);
    return Promise.resolve();
  }

  unsubscribe(topic: string): Promise<void> {
    this.listeners.delete(topic);
    return Promise.resolve();
  }

  history(topic: string, afterSeq: number): Promise<History> {
    const log = this.logs.get(topic);
    if (!log) return Promise.resolve({ messages: [], lastSeq: 0 });
    this.trimByAge(log, log.retention.maxAgeMs);
    const messages = log.messages.filter((m) => m.message.seq > afterSeq).map((m) => m.message);
    return Promise.resolve({ messages, lastSeq: log.lastSeq });
  }

  close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    return Promise.resolve();
  }

  private trim(log: TopicLog, retention: Retention): void {
    const excess = log.messages.length - retention.maxLength;
    if (excess > 0) log.messages.splice(0, excess);
    this.trimByAge(log, retention.maxAgeMs);
  }

  private trimByAge(log: TopicLog, maxAgeMs: number): void {
    const oldest = this.now() - maxAgeMs;
    let drop = 0;
    while (drop < log.messages.length && log.messages[drop]!.at < oldest) drop++;
    if (drop > 0) log.messages.splice(0, drop);
  }
}
