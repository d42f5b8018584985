"""The two API servers as the runner reaches them, and the recording proxy real clients go through.

Each server is an `Upstream`: its URL, its CA, and how each of the two users authenticates — the
sandbox with bearer tokens, kube-apiserver with client certificates, both read from the
kubeconfig the server wrote (contexts `sandbox`, the admin, and `sandbox-user`).

kubectl and the Python client talk to a `Proxy` instead: HTTPS on 127.0.0.1 with a CA of its
own, one per server. A client's bearer token names the case and the user (`diff/<case>/<user>`:
kubectl sends no token over plain HTTP, and a case in the URL's path would give every case a
discovery cache of its own, each filled anew); the proxy replaces it with that user's real
credentials, forwards the request as it came (minus
`Accept-Encoding`, so that no answer comes back compressed), streams the answer back, and records
the exchange under the case: method, path, the request's body and content headers, status, the
answer's headers and body. Only the exchanges' bytes are kept; decoding and normalizing is
compare.py's.
"""

import base64
import http.client
import http.server
import os
import socket
import ssl
import tempfile
import threading
import time

import yaml

import webhook


class _Server(http.server.ThreadingHTTPServer):
    # kubectl asks for every group version's discovery at once (a hundred requests with a few
    # CRDs about); socketserver's default backlog of 5 would drop connections, which the client's
    # kernel retries after 1, 3, 7, 15, 31 s, past kubectl's 32 s timeout.
    request_queue_size = 1024


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # list of (name, value), in order
        self.body = body

    def header(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]


class Upstream:
    def __init__(self, name, kubeconfig_path, workdir):
        self.name = name
        with open(kubeconfig_path) as f:
            config = yaml.safe_load(f)
        cluster = config["clusters"][0]["cluster"]
        self.server = cluster["server"]
        host_port = self.server.split("://", 1)[1]
        self.host, port = host_port.rsplit(":", 1)
        self.port = int(port)
        ca = base64.b64decode(cluster["certificate-authority-data"])
        users = {u["name"]: u["user"] for u in config["users"]}
        contexts = {c["name"]: c["context"] for c in config["contexts"]}
        self.users = {}
        for role, context in (("admin", "sandbox"), ("user", "sandbox-user")):
            user = users[contexts[context]["user"]]
            ctx = ssl.create_default_context(cadata=ca.decode())
            headers = []
            if "token" in user:
                headers.append(("Authorization", "Bearer " + user["token"]))
            else:
                cert = os.path.join(workdir, f"{name}-{role}.pem")
                with open(cert, "wb") as f:
                    f.write(base64.b64decode(user["client-certificate-data"]))
                    f.write(b"\n")
                    f.write(base64.b64decode(user["client-key-data"]))
                ctx.load_cert_chain(cert)
            self.users[role] = (ctx, headers)

    def connect(self, user, timeout):
        ctx, _ = self.users[user]
        return http.client.HTTPSConnection(self.host, self.port, context=ctx, timeout=timeout)

    def open(self, user, method, path, headers=(), body=None, timeout=60):
        """Sends a request and returns (connection, http.client response) for streaming."""
        conn = self.connect(user, timeout)
        conn.putrequest(method, path, skip_accept_encoding=True)
        for k, v in list(self.users[user][1]) + list(headers):
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        return conn, conn.getresponse()

    def request(self, user, method, path, headers=(), body=None, timeout=60):
        conn, resp = self.open(user, method, path, headers, body, timeout)
        try:
            data = resp.read()
        finally:
            conn.close()
        return Response(resp.status, resp.getheaders(), data)


# Headers of a client's request that belong to the hop, or that the proxy replaces.
HOP = {"host", "authorization", "accept-encoding", "connection", "content-length", "keep-alive",
       "transfer-encoding", "proxy-connection", "te", "upgrade"}
RESPONSE_HOP = {"connection", "content-length", "keep-alive", "transfer-encoding", "content-encoding"}


class Exchange:
    def __init__(self, user, method, path, headers, body):
        self.user = user
        self.method = method
        self.path = path
        self.request_headers = headers
        self.request_body = body
        self.status = None
        self.headers = []
        self.body = b""
        self.error = None


class Recorder:
    """Exchanges per case, in the order the client sent them; open streams per case."""

    def __init__(self):
        self.lock = threading.Lock()
        self.exchanges = {}
        self.open_streams = {}

    def start(self, case, exchange):
        with self.lock:
            self.exchanges.setdefault(case, []).append(exchange)

    def take(self, case):
        with self.lock:
            return self.exchanges.pop(case, [])

    def opened(self, case, conn):
        with self.lock:
            self.open_streams.setdefault(case, set()).add(conn)

    def closed(self, case, conn):
        with self.lock:
            self.open_streams.get(case, set()).discard(conn)

    def close_streams(self, case):
        """Ends the case's streams still open (a `kubectl get -w` killed after its time): the
        proxy's thread blocked reading the upstream wakes up and finishes the record."""
        with self.lock:
            conns = list(self.open_streams.pop(case, set()))
        for conn in conns:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except Exception:
                pass


class Proxy:
    def __init__(self, upstream, workdir):
        self.upstream = upstream
        self.recorder = Recorder()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one_request(self):
                try:
                    super().handle_one_request()
                except (ConnectionError, socket.timeout):
                    self.close_connection = True

            def do_any(self):
                proxy.forward(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_any

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        ca_pem, cert = webhook.serving_certificate(workdir, f"proxy-{upstream.name}")
        self.ca_path = os.path.join(workdir, f"proxy-{upstream.name}-ca.pem")
        with open(self.ca_path, "wb") as f:
            f.write(ca_pem)
        self.ca_base64 = base64.b64encode(ca_pem).decode()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert)
        ctx.set_alpn_protocols(["http/1.1"])
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def forward(self, h):
        case, user, path = "unknown", "admin", h.path
        token = (h.headers.get("Authorization") or "").removeprefix("Bearer ").split("/")
        if len(token) == 3 and token[0] == "diff":
            case, user = token[1], token[2]
        length = int(h.headers.get("Content-Length") or 0)
        if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = _read_chunked(h.rfile)
        else:
            body = h.rfile.read(length) if length else None
        headers = [(k, v) for k, v in h.headers.items() if k.lower() not in HOP]
        ex = Exchange(user, h.command, path, headers, body or b"")
        self.recorder.start(case, ex)
        try:
            conn, resp = self.upstream.open(user, h.command, path, headers, body, timeout=120)
        except Exception as e:  # the upstream is down: the client sees a 502
            ex.error = str(e)
            h.send_response(502)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        self.recorder.opened(case, conn)
        ex.status = resp.status
        ex.headers = resp.getheaders()
        h.send_response_only(resp.status, resp.reason)
        for k, v in ex.headers:
            if k.lower() not in RESPONSE_HOP:
                h.send_header(k, v)
        # The answer is streamed as it comes (a watch never ends by itself) and the connection
        # closes after it: the client needs no length.
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True
        chunks = []
        try:
            while True:
                try:
                    chunk = resp.read1(65536)
                except (OSError, http.client.HTTPException):
                    break
                if not chunk:
                    break
                chunks.append(chunk)
                try:
                    h.wfile.write(chunk)
                    h.wfile.flush()
                except OSError:
                    break
        finally:
            ex.body = b"".join(chunks)
            self.recorder.closed(case, conn)
            conn.close()

    def stop(self):
        self.server.shutdown()


def _read_chunked(rfile):
    out = bytearray()
    while True:
        size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            rfile.readline()
            return bytes(out)
        out += rfile.read(size)
        rfile.readline()


def wait_until(predicate, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return value
        time.sleep(interval)


def tempdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)
