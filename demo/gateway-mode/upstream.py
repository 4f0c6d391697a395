"""The orders service of the gateway-mode example: JSON-RPC 2.0 over HTTP, standard library only.

The gateway routes `orders.*` calls here (POST /rpc) with the caller's identity in headers
(X-Wsrpc-Session, X-Wsrpc-User, X-Request-Id). The service answers them, publishes order updates
and calls the client back through the gateway's server API (WSRPC_API_URL, WSRPC_API_KEY).

    PORT=9001 WSRPC_API_URL=http://127.0.0.1:8081/ WSRPC_API_KEY=... python3 upstream.py
"""

import itertools
import json
import os
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_URL = os.environ.get("WSRPC_API_URL", "http://127.0.0.1:8081/")
API_KEY = os.environ.get("WSRPC_API_KEY", "")
ids = itertools.count(1)
orders = {}


class RpcError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


def server_api(method, params):
    """Call the gateway's server API; its result, or RpcError with its error."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    request = urllib.request.Request(
        API_URL,
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"},
    )
    with urllib.request.urlopen(request, timeout=15) as response:
        reply = json.load(response)
    if "error" in reply:
        raise RpcError(reply["error"]["code"], reply["error"]["message"])
    return reply["result"]


def call(method, params, headers):
    session = headers.get("X-Wsrpc-Session")
    if method == "orders.create":
        order = {"id": next(ids), "item": params.get("item", "?"), "status": "created"}
        orders[order["id"]] = order
        # Every subscriber of orders.updates, on every gateway, gets it with its sequence number.
        published = server_api("publish", {"topic": "orders.updates", "data": order})
        return {"order": order, "seq": published["seq"]}
    if method == "orders.get":
        order = orders.get(params.get("id"))
        if order is None:
            raise RpcError(-32001, "no such order")
        return {"order": order, "session": session, "requestId": headers.get("X-Request-Id")}
    if method == "orders.confirm":
        order = orders.get(params.get("id"))
        if order is None:
            raise RpcError(-32001, "no such order")
        # Ask the caller's own client (on whichever gateway it is connected to).
        answer = server_api(
            "callClient",
            {"sessionId": session, "method": "confirm", "params": {"order": order}, "timeoutMs": 10000},
        )
        order["status"] = "confirmed" if answer.get("result") is True else "cancelled"
        server_api("publish", {"topic": "orders.updates", "data": order})
        return {"order": order}
    raise RpcError(-32601, "Method not found")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        try:
            reply = {"result": call(request["method"], request.get("params") or {}, self.headers)}
        except RpcError as err:
            reply = {"error": {"code": err.code, "message": err.message}}
        if "id" not in request:  # a notification: nothing to answer
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], **reply}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    server = ThreadingHTTPServer((os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "9001"))), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
