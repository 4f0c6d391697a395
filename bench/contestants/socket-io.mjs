// (7) Socket.IO with acknowledgements for request/response and a room for fan-out, as its
// docs show: socket.on("sum", (params, callback) => callback(...)), socket.join("bench"),
// io.to("bench").emit("bench", data). Clients use socket.io-client with the websocket
// transport only (no long-polling first).
export default {
  id: 'socket-io',
  name: 'Socket.IO 4.8.4',
  client: { kind: 'socket.io', path: '/' },
  async start(host) {
    const { createServer } = await import('node:http');
    const { Server } = await import('socket.io');
    const httpServer = createServer();
    const io = new Server(httpServer, { serveClient: false });
    io.on('connection', (socket) => {
      socket.on('sum', ([a, b], callback) => callback(a + b));
      socket.on('subscribe', (room, callback) => {
        void socket.join(room);
        callback('0x1');
      });
    });
    await new Promise((resolve) => httpServer.listen(0, host, resolve));
    return {
      port: httpServer.address().port,
      publish: (data) => io.to('bench').emit('bench', data),
      close: () => new Promise((resolve) => io.close(() => resolve())),
    };
  },
};
