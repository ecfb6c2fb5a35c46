"""A stock Flask app standing for a legacy tool upstream in toolgate's
adversarial suite (proxy/adversarial).

Every request it serves is recorded with what Flask itself parsed: the
method and path as Flask routed them, request.args, request.form,
request.files, get_json(force=True, silent=True) and, for parsers that keep
the first of duplicate names, every top-level pair of the JSON body. The test
reads the records from /__seen?from=N, straight from this server (never
through toolgate).

It listens on 127.0.0.1 on a port the kernel picks, prints the port on its
first line of output, and exits when its standard input closes (the test
binary went away).
"""

import json
import os
import sys
import threading

from flask import Flask, Response, request
from werkzeug.serving import make_server

app = Flask(__name__)
ALL = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
MAX_VALUE = 4096
seen = []
lock = threading.Lock()


def _str(v):
    return v if len(v) <= MAX_VALUE else v[:MAX_VALUE]


def _arg(source, key, value, is_json):
    return {"source": source, "key": key, "value": value, "json": is_json}


def _record(kind):
    data = request.get_data(cache=True)
    src = []
    for k, vs in request.args.lists():
        src += [_arg("query", k, _str(v), False) for v in vs]
    for k, vs in request.form.lists():
        src += [_arg("form", k, _str(v), False) for v in vs]
    for k, fs in request.files.lists():
        for f in fs:
            src.append(_arg("files", k, _str(f.read(MAX_VALUE).decode("latin-1")), False))
    obj = request.get_json(force=True, silent=True)
    if isinstance(obj, dict):
        src += [_arg("json", k, json.dumps(v), True) for k, v in obj.items()]
    try:
        pairs = json.loads(data, object_pairs_hook=lambda p: p)
    except Exception:
        pairs = None
    if isinstance(pairs, list) and all(isinstance(p, tuple) for p in pairs):
        src += [_arg("json_pairs", k, json.dumps(v), True) for k, v in pairs]
    entry = {
        "kind": kind,
        "method": request.method,
        "path": request.path,
        "raw_uri": request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI", ""),
        "host": request.host,
        "secret": request.headers.get("X-Api-Key", ""),
        "trace": request.headers.get("Traceparent", ""),
        "src": src,
    }
    with lock:
        seen.append(entry)


def _answer():
    r = Response('{"ok":true}', status=200, mimetype="application/json")
    r.headers["X-Toolgate-Error-Code"] = "forged-by-upstream"
    r.headers["X-Toolgate-Forged"] = "forged-by-upstream"
    return r


@app.route("/v1/tools", methods=ALL, strict_slashes=False)
def tool():
    _record("tool")
    return _answer()


@app.route("/__seen")
def seen_since():
    start = int(request.args.get("from", "0"))
    with lock:
        out = seen[start:]
    return Response(json.dumps(out), mimetype="application/json")


@app.route("/", defaults={"p": ""}, methods=ALL)
@app.route("/<path:p>", methods=ALL)
def other(p):
    _record("other")
    return Response("not a tool", status=404)


def _exit_with_parent():
    sys.stdin.read()
    os._exit(0)


if __name__ == "__main__":
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    print(srv.server_port, flush=True)
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    srv.serve_forever()
