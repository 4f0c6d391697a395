/**
 * A TCP relay from 127.0.0.1:`port` to a broker that can lose the answer to one command: once
 * armed, the first chunk a client sends that holds `marker` is passed on to the broker, which
 * runs it, and the connection is dropped at once on the client's side, so the client never reads
 * the answer (the broker's end is closed after the chunk, which the broker still reads first).
 * `cut()` drops every connection and refuses new ones until `restore()`.
 */
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';

export class LostAnswerRelay {
  port = 0;
  /** Chunks passed on whose answer was dropped. */
  lost = 0;
  private marker: string | undefined;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly targetPort: number) {}

  /** Lose the answer to the next chunk holding `marker`. */
  arm(marker: string): void {
    this.marker = marker;
  }

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
        const marker = this.marker;
        if (marker !== undefined && chunk.toString('latin1').includes(marker)) {
          this.marker = undefined;
          this.lost++;
          inbound.destroy();
          outbound.end(chunk);
          return;
        }
        outbound.write(chunk);
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

  restore(): Promise<number> {
    return this.start();
  }
}
