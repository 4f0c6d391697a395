"""A JSON-RPC 2.0 upstream service over HTTP for the gateway-mode tests, standard library only.

Started by test/support/python-upstream.ts: listens on 127.0.0.1 (port from argv[1], default 0
for a free one) and prints the port on stdout once listening. Its methods behave as the tests
need (echo the identity headers, sleep, fail, answer garbage, close mid-response, hang, call the
gateway's server API) and the test.* methods report what it saw (calls in flight, attempts per
request id, cancelled requests, hook events).
"""

import base64
import json
import os
import select
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {
    "in_flight": 0,
    "max_in_flight": 0,
    "attempts": {},  # X-Request-Id -> requests received with it
    "calls": {},  # method -> requests received
    "cancelled": {},  # X-Request-Id -> True when the client went away mid-call
    "events": [],  # what wsrpc.events received
}


class RpcError(Exception):
    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def identity(headers):
    context = headers.get("X-Wsrpc-Context")
    if context is not None:
        context = json.loads(base64.urlsafe_b64decode(context + "=" * (-len(context) % 4)))
    user = headers.get("X-Wsrpc-User")
    return {
        "requestId": headers.get("X-Request-Id"),
        "session": headers.get("X-Wsrpc-Session"),
        "user": None if user is None else urllib.parse.unquote(user),
        "context": context,
        "traceparent": headers.get("traceparent"),
        "deadline": headers.get("X-Wsrpc-Deadline"),
    }


def client_gone(sock):
    """True once the gateway closed or reset the connection (it sends nothing else meanwhile)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def server_api(method, params):
    url, key = os.environ["WSRPC_API_URL"], os.environ.get("WSRPC_API_KEY", "")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    request = urllib.request.Request(
        url,
        data=body,
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + key},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        reply = json.loads(response.read())
    if "error" in reply:
        raise RpcError(reply["error"]["code"], reply["error"]["message"], reply["error"].get("data"))
    return reply["result"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        try:
            message = json.loads(self.rfile.read(length))
        except ValueError:
            return self.reply_raw(400, b"not JSON")
        method, params, rid = message.get("method"), message.get("params") or {}, message.get("id")
        request_id = self.headers.get("X-Request-Id")
        if isinstance(method, str) and method.split(".")[0] not in ("orders", "wsrpc", "test"):
            # Other services (billing.get, idem.hang ...) behave as orders.*: routing tests.
            method = "orders." + method.partition(".")[2]
        with lock:
            state["calls"][method] = state["calls"].get(method, 0) + 1
            if request_id is not None:
                state["attempts"][request_id] = state["attempts"].get(request_id, 0) + 1
            counted = not str(method).startswith("test.")  # the tests' own questions are not load
            if counted:
                state["in_flight"] += 1
                state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
        try:
            self.dispatch(method, params, rid, request_id)
        finally:
            if counted:
                with lock:
                    state["in_flight"] -= 1

    def dispatch(self, method, params, rid, request_id):
        if method == "orders.garbage":
            return self.reply_raw(200, b"<html>this is not JSON-RPC</html>")
        if method == "orders.status":
            return self.reply_raw(int(params.get("status", 502)), b"Bad Gateway")
        if method == "orders.close":
            # Headers and part of the body promised, then the socket closed mid-response.
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"jsonrpc":"2.0","res')
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return None
        if method == "orders.hang":
            while not client_gone(self.connection):
                time.sleep(0.02)
            with lock:
                state["cancelled"][request_id] = True
            self.close_connection = True
            return None
        try:
            result = self.call(method, params, request_id)
        except RpcError as err:
            error = {"code": err.code, "message": err.message}
            if err.data is not None:
                error["data"] = err.data
            return self.reply_json(rid, {"error": error})
        if result is CLIENT_GONE:
            self.close_connection = True
            return None
        if rid is None:
            return self.reply_raw(204, b"")
        return self.reply_json(rid, {"result": result})

    def call(self, method, params, request_id):
        if method == "orders.get" or method.endswith(".get"):
            return {"params": params, "path": self.path, "headers": identity(self.headers)}
        if method == "orders.slow":
            until = time.monotonic() + params.get("ms", 1000) / 1000
            while time.monotonic() < until:
                if client_gone(self.connection):
                    with lock:
                        state["cancelled"][request_id] = True
                    return CLIENT_GONE
                time.sleep(0.01)
            return {"slept": params.get("ms", 1000)}
        if method == "orders.cancelled":
            with lock:
                return {"cancelled": state["cancelled"].get(params.get("requestId"), False)}
        if method == "orders.fail":
            raise RpcError(params.get("code", 1001), params.get("message", "failed"), params.get("data"))
        if method == "orders.ledger":
            # Python's integers are exact at any size: the next account number, as JSON writes it.
            account = params["account"]
            result = {"account": account, "next": account + 1, "rate": params.get("rate")}
            if params.get("negativeZero"):
                result["zero"] = -0.0
            return result
        if method == "orders.big":
            return "x" * int(params.get("bytes", 1024))
        if method == "orders.publish":
            publish = {"topic": params["topic"], "data": params.get("data")}
            if params.get("key") is not None:
                publish["idempotencyKey"] = params["key"]
            return server_api("publish", publish)
        if method == "orders.ask":
            return server_api(
                "callClient",
                {"sessionId": params["sessionId"], "method": "ask", "params": {"question": params["question"]}},
            )
        if method == "wsrpc.connect":
            token = params.get("token") or ""
            if not token.startswith("good-"):
                raise RpcError(-32010, "Unauthenticated", {"reason": "bad token"})
            user = token[len("good-"):]
            return {"context": {"user": user, "via": "python"}, "user": user}
        if method == "wsrpc.subscribe":
            topic, user = params.get("topic", ""), params.get("user")
            if topic.startswith("private."):
                return {"allow": user is not None and topic.startswith("private." + user + ".")}
            return {"allow": True}
        if method == "wsrpc.events":
            with lock:
                state["events"].extend(params.get("events", []))
            return None
        if method == "test.events":
            with lock:
                return list(state["events"])
        if method == "test.stats":
            with lock:
                return {
                    "inFlight": state["in_flight"],
                    "maxInFlight": state["max_in_flight"],
                    "attempts": dict(state["attempts"]),
                    "calls": dict(state["calls"]),
                    "cancelled": sorted(state["cancelled"]),
                }
        if method == "test.reset":
            with lock:
                state["max_in_flight"] = state["in_flight"]
                state["attempts"].clear()
                state["calls"].clear()
                state["cancelled"].clear()
                state["events"].clear()
            return True
        raise RpcError(-32601, "Method not found")

    def reply_json(self, rid, member):
        body = json.dumps({"jsonrpc": "2.0", "id": rid, **member}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def reply_raw(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


CLIENT_GONE = object()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = Server(("127.0.0.1", port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
