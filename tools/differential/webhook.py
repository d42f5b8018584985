"""A test admission webhook that both API servers call: HTTPS on 127.0.0.1 with a CA of its own.

A case's webhook configuration names `${webhook}/<behaviour>` (plus `${webhook_ca}` as its
caBundle); `${webhook}` is `https://127.0.0.1:PORT/<server>/<case>`, so the webhook knows which
server called it for which case, records the AdmissionReview under that pair, and answers as the
behaviour says:

  allow                  allowed
  deny                   allowed: false, status {code 403, message "denied by the test webhook"}
  deny-422               allowed: false, status {code 422, reason Invalid, message …}
  warn                   allowed, with two warnings
  label-<k>=<v>          a JSON patch adding that label (none if the object has it already)
  annotate-<k>=<v>       a JSON patch adding that annotation (likewise)
  bad-patch              a JSON patch that does not apply (removes /metadata/nonexistent)
  not-json-patch         patchType JSONPatch with a patch that is not a JSON array
  wrong-uid              a response whose uid is not the request's
  no-response            an AdmissionReview without `response`
  error-500              HTTP 500
  garbage                a body that is not JSON
  hang                   answers after 15 s (beyond any case's timeoutSeconds)
  v1beta1                answers apiVersion admission.k8s.io/v1beta1 (v1 requests only)

Every request is recorded, whatever the behaviour; `take(server, case)` hands them over.
"""

import base64
import datetime
import http.server
import ipaddress
import json
import os
import ssl
import threading
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def serving_certificate(workdir, name):
    """A CA of its own and a serving certificate for 127.0.0.1 signed by it: (CA PEM, path of the
    certificate and key). The test webhook's, and the recording proxies'."""
    ca_pem, cert, _ = _certificates(workdir, name)
    return ca_pem, cert


def _certificates(workdir, name="webhook"):
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "differential-webhook-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "differential-webhook")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    # A CA that signed nothing here: the caBundle of the cases about an untrusted webhook.
    other_key = ec.generate_private_key(ec.SECP256R1())
    other_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "differential-unrelated-ca")])
    other = (x509.CertificateBuilder().subject_name(other_name).issuer_name(other_name)
             .public_key(other_key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
             .sign(other_key, hashes.SHA256()))
    path = os.path.join(workdir, f"{name}.pem")
    with open(path, "wb") as f:
        f.write(leaf.public_bytes(serialization.Encoding.PEM))
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return ca_pem, path, other.public_bytes(serialization.Encoding.PEM)


def _patch_add(obj, field, key, value):
    meta = (obj or {}).get("metadata") or {}
    current = meta.get(field)
    if isinstance(current, dict) and current.get(key) == value:
        return None
    escaped = key.replace("~", "~0").replace("/", "~1")
    if isinstance(current, dict):
        return [{"op": "add", "path": f"/metadata/{field}/{escaped}", "value": value}]
    return [{"op": "add", "path": f"/metadata/{field}", "value": {key: value}}]


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 1024  # both servers call at once, many cases at a time


class Webhook:
    def __init__(self, workdir):
        ca_pem, cert, other_pem = _certificates(workdir)
        self.ca_base64 = base64.b64encode(ca_pem).decode()
        self.wrong_ca_base64 = base64.b64encode(other_pem).decode()
        self.lock = threading.Lock()
        self.records = {}
        webhook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                webhook.handle(self)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.base = f"https://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, server, case):
        return f"{self.base}/{server}/{case}"

    def take(self, server, case):
        with self.lock:
            return self.records.pop((server, case), [])

    def seen(self, server, case, predicate):
        with self.lock:
            return [r for r in self.records.get((server, case), []) if predicate(r)]

    def drop(self, server, case, predicate):
        with self.lock:
            kept = [r for r in self.records.get((server, case), []) if not predicate(r)]
            self.records[(server, case)] = kept

    def handle(self, h):
        parts = h.path.split("?", 1)[0].strip("/").split("/", 2)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length)
        if len(parts) != 3:
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        server, case, behaviour = parts
        try:
            review = json.loads(raw)
        except ValueError:
            review = {"undecodable": raw.decode(errors="replace")}
        with self.lock:
            self.records.setdefault((server, case), []).append({"behaviour": behaviour, "review": review})
        request = review.get("request") or {}
        response = {"uid": request.get("uid", ""), "allowed": True}
        status = 200
        body = None
        if behaviour == "deny":
            response = {"uid": response["uid"], "allowed": False,
                        "status": {"code": 403, "message": "denied by the test webhook"}}
        elif behaviour == "deny-422":
            response = {"uid": response["uid"], "allowed": False,
                        "status": {"code": 422, "reason": "Invalid", "message": "the test webhook finds it invalid"}}
        elif behaviour == "warn":
            response["warnings"] = ["the test webhook warns once", "and twice"]
        elif behaviour.startswith("label-") or behaviour.startswith("annotate-"):
            field = "labels" if behaviour.startswith("label-") else "annotations"
            key, _, value = behaviour.split("-", 1)[1].partition("=")
            patch = _patch_add(request.get("object"), field, key, value)
            if patch:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        elif behaviour == "bad-patch":
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(b'[{"op":"remove","path":"/metadata/nonexistent"}]').decode()
        elif behaviour == "not-json-patch":
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(b'{"op":"add"}').decode()
        elif behaviour == "wrong-uid":
            response["uid"] = "not-the-request-uid"
        elif behaviour == "error-500":
            status, body = 500, b"internal error of the test webhook"
        elif behaviour == "garbage":
            body = b"this is not json"
        elif behaviour == "hang":
            time.sleep(15)
        if body is None:
            api_version = "admission.k8s.io/v1beta1" if behaviour == "v1beta1" else "admission.k8s.io/v1"
            if behaviour == "no-response":
                body = json.dumps({"apiVersion": api_version, "kind": "AdmissionReview"}).encode()
            else:
                body = json.dumps({"apiVersion": api_version, "kind": "AdmissionReview", "response": response}).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        except OSError:
            pass

    def stop(self):
        self.server.shutdown()
