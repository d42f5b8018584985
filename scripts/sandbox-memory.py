#!/usr/bin/env python3
"""Memory per stored object of a `lien sandbox` (issue 10; docs/benchmarks.md, "Memory per
stored object").

    target/release/lien sandbox --no-lien --port 0 --kubeconfig /tmp/sbm.kubeconfig &
    python3 scripts/sandbox-memory.py /tmp/sbm.kubeconfig $! 100000
    python3 scripts/sandbox-memory.py /tmp/sbm.kubeconfig $! 10000 20   # then time 20 lists

With a fourth argument L, then lists all N ConfigMaps L times and prints the median and fastest
time of a list (the request and reading its whole answer).

Creates namespace `mem` and N small ConfigMaps in it (two data keys; about 420 bytes of JSON
each as stored, managedFields included) over 8 keep-alive HTTPS connections, and prints the
sandbox's VmRSS / VmHWM before and after, and the difference per object. Standard library only.
"""
import base64
import http.client
import json
import ssl
import sys
import threading
import time

kubeconfig, pid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# Optional: after the creates, list the namespace this many times (one connection, in turn)
# and print the time per list: the cost of reading what is stored.
lists = int(sys.argv[4]) if len(sys.argv) > 4 else 0
cfg = json.load(open(kubeconfig))
cluster = cfg["clusters"][0]["cluster"]
host, port = cluster["server"].removeprefix("https://").rsplit(":", 1)
ctx = ssl.create_default_context(
    cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
token = cfg["users"][0]["user"]["token"]


def rss():
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def request(conn, method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body else None,
                 headers={"Authorization": f"Bearer {token}",
                          "Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status >= 300:
        raise SystemExit(f"{method} {path}: {resp.status} {data[:300]!r}")
    return data


conn = http.client.HTTPSConnection(host, int(port), context=ctx)
request(conn, "POST", "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mem"}})
time.sleep(1)
before = rss()
THREADS = 8


def create(first):
    c = http.client.HTTPSConnection(host, int(port), context=ctx)
    for i in range(first, n, THREADS):
        request(c, "POST", "/api/v1/namespaces/mem/configmaps",
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}"},
                 "data": {"key": "value", "setting": str(i)}})


started = time.time()
workers = [threading.Thread(target=create, args=(t,)) for t in range(THREADS)]
for w in workers:
    w.start()
for w in workers:
    w.join()
elapsed = time.time() - started
time.sleep(1)
after = rss()
one = request(conn, "GET", "/api/v1/namespaces/mem/configmaps/cm-1")
print(f"created {n} ConfigMaps in {elapsed:.1f} s; one is {len(one)} bytes of JSON")
print(f"VmRSS / VmHWM before {before[0]} / {before[1]} KiB, after {after[0]} / {after[1]} KiB")
print(f"per object: {(after[0] - before[0]) * 1024 / n:.0f} B of VmRSS, "
      f"{(after[1] - before[1]) * 1024 / n:.0f} B of VmHWM")

if lists:
    times = []
    for _ in range(lists):
        t0 = time.perf_counter()
        body = request(conn, "GET", "/api/v1/namespaces/mem/configmaps")
        times.append(time.perf_counter() - t0)
    items = json.loads(body)["items"]
    assert len(items) >= n, f"every ConfigMap listed: {len(items)}"
    times.sort()
    print(f"list of {n} ConfigMaps ({len(body)} bytes), {lists} times: "
          f"median {times[len(times) // 2] * 1000:.0f} ms, fastest {times[0] * 1000:.0f} ms")
