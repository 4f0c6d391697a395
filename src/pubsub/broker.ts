/** One published message as a broker hands it back: JSON text plus its per-topic sequence number. */
export interface BrokerMessage {
  topic: string;
  /** Increases by one per message on the topic; the same on every node that sees it. */
  seq: number;
  /** The payload, already serialized as JSON text (serialized once, at publish). */
  payload: string;
}

/**
 * Where topics live. The gateway subscribes a topic on the broker while it
 * has at least one local subscriber, and publishes through it, so every node
 * sharing a broker shares one topic space. The in-memory broker is the
 * embedded default.
 */
export interface Broker {
  /** Publish JSON text; resolves with the message's sequence number once the broker has it. */
  publish(topic: string, payload: string): Promise<number>;
  /** Deliver the topic's messages, in sequence order, until `unsubscribe`. */
  subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void>;
  unsubscribe(topic: string): Promise<void>;
  /** True while the broker can take publishes. */
  readonly ready: boolean;
  close(): Promise<void>;
}
