// The load generator's Socket.IO client: socket.io-client itself (Socket.IO's framing,
// acks and handshake are its own), websocket transport only, one connection per socket.
import { io } from 'socket.io-client';

class SocketIoConnection {
  constructor(socket) {
    this.socket = socket;
    this.onReply = () => undefined;
    this.onData = () => undefined;
  }

  call(id, a, b) {
    this.socket.emit('sum', [a, b], (result) => this.onReply(id, result));
  }

  subscribe() {
    this.socket.on('bench', (data) => this.onData(data.k));
    return new Promise((resolve) => this.socket.emit('subscribe', 'bench', () => resolve()));
  }

  close() {
    const engine = this.socket.io.engine;
    if (!this.socket.connected) return Promise.resolve();
    return new Promise((resolve) => {
      engine.once('close', () => resolve());
      this.socket.disconnect();
    });
  }
}

export function open(url) {
  return new Promise((resolve, reject) => {
    const socket = io(url, { transports: ['websocket'], forceNew: true, reconnection: false });
    socket.once('connect', () => resolve(new SocketIoConnection(socket)));
    socket.once('connect_error', reject);
  });
}
