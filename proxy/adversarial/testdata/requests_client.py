"""A legacy Python client for toolgate's adversarial suite: it sends the
calls it reads from standard input (one JSON object a line) with the
requests library, configured only by the environment (HTTP_PROXY), as a
legacy service is, and prints one JSON line per call: the status and the
headers of the answer, or the error.
"""

import json
import sys

import requests


def main():
    s = requests.Session()  # trust_env: HTTP_PROXY and NO_PROXY from the environment
    for line in sys.stdin:
        c = json.loads(line)
        kw = {"headers": c.get("headers", {}), "timeout": 10}
        for k in ("json", "data", "params"):
            if k in c:
                kw[k] = c[k]
        if "files" in c:
            kw["files"] = {k: ("f.txt", v) for k, v in c["files"].items()}
        try:
            r = s.request(c["method"], c["url"], **kw)
            out = {"status": r.status_code, "headers": {k: v for k, v in r.headers.items()}}
        except Exception as e:  # the suite judges what reached the upstreams
            out = {"error": type(e).__name__ + ": " + str(e)[:200]}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
