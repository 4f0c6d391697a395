// Per-turn write coalescing for `ws` sockets: the first frame written to a socket
// in an event-loop turn corks its net.Socket, and one setImmediate uncorks every
// socket corked in that turn, so all the frames of one turn leave in one write
// (one syscall) per socket instead of one per frame.
const corked = new Set();
let scheduled = false;

function uncorkAll() {
  scheduled = false;
  for (const socket of corked) socket.uncork();
  corked.clear();
}

/** `ws.send(frame)`, coalesced with the other frames written to `ws` in this turn. */
export function sendCoalesced(ws, frame) {
  // ws keeps its net.Socket in `_socket`; cork/uncork nest, so ws's own cork in send() still works.
  const socket = ws._socket;
  if (socket && !corked.has(socket)) {
    socket.cork();
    corked.add(socket);
    if (!scheduled) {
      scheduled = true;
      setImmediate(uncorkAll);
    }
  }
  ws.send(frame);
}
