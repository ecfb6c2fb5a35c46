"""A stock Flask app for TestUpstreamFlask (proxy/upstream_test.go): answers
of every framing werkzeug's HTTP/1.1 server makes (a length, chunked from a
generator, none for HEAD, 204 and 304, Connection: close), with keep-alive
on, so toolgate's upstream transport is compared with Go's on a server
that is not Go's.

It listens on 127.0.0.1 on a port the kernel picks, prints the port on its
first line of output, and exits when its standard input closes.
"""

import json
import os
import sys
import threading

from flask import Flask, Response, request
from werkzeug.serving import WSGIRequestHandler, make_server

app = Flask(__name__)


@app.route("/echo", methods=["GET", "POST", "HEAD"])
def echo():
    data = request.get_data()
    out = {"method": request.method, "args": request.args, "len": len(data),
           "ct": request.headers.get("Content-Type", "")}
    return Response(json.dumps(out), content_type="application/json")


@app.route("/stream")
def stream():
    def gen():
        for i in range(5):
            yield json.dumps({"i": i}) + "\n"
    return Response(gen(), content_type="application/x-ndjson")


@app.route("/empty")
def empty():
    return Response(status=204)


@app.route("/notmod")
def notmod():
    return Response(status=304, headers={"ETag": '"v1"'})


@app.route("/close", methods=["POST"])
def close():
    request.get_data()
    return Response("bye", headers={"Connection": "close"})


@app.route("/big", methods=["POST"])
def big():
    return Response("z" * 70000, content_type="text/plain")


def main():
    WSGIRequestHandler.protocol_version = "HTTP/1.1"
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    print(srv.server_port, flush=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    sys.stdin.read()
    os._exit(0)


if __name__ == "__main__":
    main()
