import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';

/**
 * A TCP relay from 127.0.0.1:`port` (any free one) to 127.0.0.1:`targetPort`, to cut one
 * process off from a server while others keep it: `cut()` drops every relayed connection
 * and refuses new ones, `restore()` listens again on the same port. `hold()` keeps what the
 * relayed clients send from reaching the server (their commands stay under way, unanswered)
 * until `release()`; `heldText()` reads what is held. `loseAnswerTo(marker)` passes the next
 * chunk holding `marker` on to the server, which runs it, and drops that client's connection at
 * once, so that it never reads the answer.
 */
export class TcpRelay {
  port = 0;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  /** While held: what each client sent, not yet passed on to its server connection. */
  private held: Map<Socket, Buffer[]> | undefined;
  /** Chunks passed on whose answer was lost (loseAnswerTo). */
  lost = 0;
  private loseMarker: string | undefined;

  constructor(
    private readonly targetPort: number,
    /**
     * Looks at each chunk a client sends: true cuts that connection there (the chunk dropped,
     * both ends closed), so that what the chunk carried is under way, unanswered, when it drops.
     */
    private readonly cutOn?: (chunk: Buffer) => boolean,
  ) {}

  async start(): Promise<number> {
    const server = createServer((inbound) => {
      const outbound = connect({ host: '127.0.0.1', port: this.targetPort });
      for (const socket of [inbound, outbound]) {
        this.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.once('close', () => {
          this.sockets.delete(socket);
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.on('data', (chunk: Buffer) => {
        if (this.cutOn?.(chunk)) {
          inbound.destroy();
          outbound.destroy();
          return;
        }
        const marker = this.loseMarker;
        if (marker !== undefined && chunk.toString('latin1').includes(marker)) {
          // The server still reads the chunk before its end closes.
          this.loseMarker = undefined;
          this.lost++;
          inbound.destroy();
          outbound.end(chunk);
          return;
        }
        const held = this.held;
        if (!held) outbound.write(chunk);
        else if (held.has(outbound)) held.get(outbound)!.push(chunk);
        else held.set(outbound, [chunk]);
      });
      outbound.pipe(inbound);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
    this.server = server;
    return this.port;
  }

  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    const closed = server
      ? new Promise<void>((resolve) => server.close(() => resolve()))
      : Promise.resolve();
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  /** Lose the answer to the next chunk a client sends that holds `marker`. */
  loseAnswerTo(marker: string): void {
    this.loseMarker = marker;
  }

  /** Hold what clients send from now on, until `release`. */
  hold(): void {
    this.held ??= new Map();
  }

  /** What is held, every connection's, as text (latin1: byte for byte). */
  heldText(): string {
    return [...(this.held?.values() ?? [])]
      .flat()
      .map((chunk) => chunk.toString('latin1'))
      .join('');
  }

  /** Pass on what was held, in order, and stop holding. */
  release(): void {
    const held = this.held;
    this.held = undefined;
    for (const [outbound, chunks] of held ?? []) for (const chunk of chunks) outbound.write(chunk);
  }

  restore(): Promise<number> {
    return this.start();
  }
}
