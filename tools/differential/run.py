"""Running one case on one server: its steps in order, each step's raw result kept for compare.py.

A side is (case, server). Its results are plain data: decoded bodies (JSON, YAML, protobuf read
by protobuf.py, watch streams as lists of events), kubectl's exit code and output, the proxy's
exchanges. Nothing is normalized here: compare.py does that over the whole case at once, so that
aliases are numbered in the same order on both servers.
"""

import ast
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
import urllib.parse

import yaml

import protobuf

KUBECTL_TIMEOUT = 60
HTTP_TIMEOUT = 60
VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# What kubectl fetches to learn the API: compared once, by the discovery cases, not inside every
# kubectl case (kubectl caches it, so whether a command fetches it depends on what ran before).
DISCOVERY = re.compile(r"^/(api|apis)(/[^/?]+)?(/[^/?]+)?(\?.*)?$|^/api/v1(\?.*)?$|^/openapi/|^/version")


def _is_discovery(method, path):
    if method != "GET":
        return False
    p = path.split("?", 1)[0]
    if p.startswith("/openapi/") or p == "/version":
        return True
    parts = p.strip("/").split("/")
    if parts[0] == "api":
        return len(parts) <= 2
    if parts[0] == "apis":
        return len(parts) <= 3
    return False


class _YamlLoader(yaml.SafeLoader):
    """YAML as a client reads it into JSON: a timestamp stays the string it was."""


_YamlLoader.yaml_implicit_resolvers = {
    k: [r for r in v if r[0] != "tag:yaml.org,2002:timestamp"] for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}


def decode(content_type, data):
    """A body by its content type: JSON, YAML, protobuf, watch streams; text otherwise."""
    ct = (content_type or "").split(";")[0].strip().lower()
    stream = "stream=watch" in (content_type or "")
    if not data:
        return None
    if ct == "application/vnd.kubernetes.protobuf":
        try:
            return protobuf.frames(data) if stream else {"protobuf": protobuf.envelope(data)}
        except ValueError as e:
            return {"undecodable-protobuf": str(e), "hex": data.hex()}
    text = data.decode("utf-8", errors="replace")
    if stream and ct.endswith("json"):
        return _json_stream(text)
    if ct.endswith("json") or ct in ("application/json-patch+json", "application/merge-patch+json",
                                      "application/strategic-merge-patch+json"):
        if stream:
            return _json_stream(text)
        try:
            return json.loads(text)
        except ValueError:
            return {"text": text}
    if ct.endswith("yaml"):
        try:
            docs = list(yaml.load_all(text, Loader=_YamlLoader))
            return docs[0] if len(docs) == 1 else docs
        except yaml.YAMLError:
            return {"text": text}
    return {"text": text}


def _json_stream(text):
    events, i, dec = [], 0, json.JSONDecoder()
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return events
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError:
            events.append({"partial": True})
            return events
        events.append(obj)


def keep_event(event):
    """Periodic bookmarks come when the server's timer says: dropped. The bookmark that ends a
    watch's initial events (sendInitialEvents) is part of the protocol: kept."""
    if isinstance(event, dict) and event.get("type") == "BOOKMARK":
        annotations = ((event.get("object") or {}).get("metadata") or {}).get("annotations") or {}
        return annotations.get("k8s.io/initial-events-end") == "true"
    return True


def exchange_record(ex):
    ct = ex.headers and next((v for k, v in ex.headers if k.lower() == "content-type"), None)
    req_ct = next((v for k, v in ex.request_headers if k.lower() == "content-type"), None)
    record = {"request": f"{ex.method} {ex.path}", "user": ex.user}
    if ex.request_body:
        record["request_content_type"] = req_ct
        record["request_body"] = decode(req_ct, ex.request_body)
    accept = next((v for k, v in ex.request_headers if k.lower() == "accept"), None)
    if accept:
        record["accept"] = accept
    if ex.error:
        record["error"] = ex.error
        return record
    record["status"] = ex.status
    record["content_type"] = ct
    warnings = [v for k, v in ex.headers if k.lower() == "warning"]
    if warnings:
        record["warnings"] = warnings
    watching = re.search(r"[?&]watch=(1|true)", ex.path) and ex.status == 200
    body = decode((ct or "") + ";stream=watch" if watching else ct, ex.body)
    if isinstance(body, list) and "stream=watch" in (ct or ""):
        body = [e for e in body if keep_event(e)]
    record["body"] = body
    return record


class Side:
    """One case on one server."""

    def __init__(self, env, server, case):
        self.env = env
        self.server = server  # "sandbox" or "kube"
        self.case = case
        self.upstream = env.upstreams[server]
        self.proxy = env.proxies[server]
        self.token_case = f"{case.ns}"
        self.vars = {"ns": case.ns, "webhook": env.webhook.url(server, case.ns),
                     "webhook_ca": env.webhook.ca_base64, "webhook_ca_wrong": env.webhook.wrong_ca_base64}
        self.results = []
        self.background = {}
        self.python = {}
        self.probes = 0

    # -- templating ---------------------------------------------------------------------------

    def sub(self, value):
        if isinstance(value, str):
            return VAR.sub(lambda m: str(self.vars.get(m.group(1), m.group(0))), value)
        if isinstance(value, list):
            return [self.sub(v) for v in value]
        if isinstance(value, dict):
            return {self.sub(k): self.sub(v) for k, v in value.items()}
        return value

    def run(self, setup, steps):
        """The setup's results are kept apart (compared by the setup's own case); the steps'
        are the case's."""
        for step in setup:
            try:
                self.step(step)
            except Exception:  # the setup's own case shows what went wrong
                pass
        for name in list(self.background):
            self.join(name)
        self.proxy.recorder.take(self.token_case)
        self.env.webhook.take(self.server, self.case.ns)
        for step in steps:
            try:
                result = self.step(step)
            except Exception as e:  # a runner error is a result too: both sides should agree
                result = {"runner-error": f"{type(e).__name__}: {e}"}
            self.results.append(result)  # one per step: results[i] is steps[i]'s
        for name in list(self.background):
            self.results.append({"unjoined": name, **self.join(name)})
        self.proxy.recorder.close_streams(self.token_case)

    def step(self, step):
        step = dict(step)
        if "kubectl" in step:
            if "background" in step:
                self.background[step["background"]] = ("kubectl", self.kubectl_start(step), step)
                return {"started": step["background"]}
            return self.kubectl(step)
        if "http" in step:
            if "background" in step:
                holder = {}
                t = threading.Thread(target=lambda: holder.update(result=self.http(step)), daemon=True)
                t.start()
                self.background[step["background"]] = ("http", (t, holder), step)
                return {"started": step["background"]}
            return self.http(step)
        if "python" in step:
            return self.run_python(step)
        if "wait" in step:
            return self.wait(step)
        if "wait_webhooks" in step:
            return self.wait_webhooks(step)
        if "webhook" in step:
            return self.webhook_reviews(step)
        if "join" in step:
            return {"join": step["join"], **self.join(step["join"], step)}
        if "sleep" in step:
            time.sleep(float(step["sleep"]))
            return {"slept": step["sleep"]}
        raise ValueError(f"unknown step {step!r}")

    # -- kubectl ------------------------------------------------------------------------------

    def kubectl_argv(self, step):
        argv = ["kubectl", "--kubeconfig", self.env.kubeconfig(self.server, self.case.ns),
                "--cache-dir", self.env.cache_dir(self.server)]
        if step.get("user") == "user":
            argv += ["--context", "sandbox-user"]
        argv += shlex.split(self.sub(step["kubectl"]))
        return argv

    def kubectl_env(self, step):
        env = {"PATH": os.environ["PATH"], "HOME": self.env.home, "LANG": "C.UTF-8"}
        if "editor" in step:
            env["KUBE_EDITOR"] = "sed -i -e " + shlex.quote(self.sub(step["editor"]))
        return env

    def kubectl_stdin(self, step):
        stdin = step.get("stdin")
        if stdin is None:
            return None
        if not isinstance(stdin, str):
            docs = stdin if isinstance(stdin, list) else [stdin]
            stdin = yaml.safe_dump_all(self.sub(docs), sort_keys=False)
        return self.sub(stdin).encode()

    def kubectl(self, step):
        self.proxy.recorder.take(self.token_case)
        try:
            proc = subprocess.run(self.kubectl_argv(step), input=self.kubectl_stdin(step), capture_output=True,
                                  env=self.kubectl_env(step), timeout=step.get("timeout", KUBECTL_TIMEOUT))
            exit_code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            exit_code, out, err = "timeout", e.stdout or b"", e.stderr or b""
        self.proxy.recorder.close_streams(self.token_case)
        return self.kubectl_result(step, exit_code, out, err)

    def kubectl_result(self, step, exit_code, out, err):
        exchanges = [exchange_record(ex) for ex in self.proxy.recorder.take(self.token_case)
                     if not _is_discovery(ex.method, ex.path)]
        return {"kubectl": step["kubectl"], "exit": exit_code, "stdout": out.decode(errors="replace"),
                "stderr": err.decode(errors="replace"), "exchanges": exchanges}

    def kubectl_start(self, step):
        self.proxy.recorder.take(self.token_case)
        proc = subprocess.Popen(self.kubectl_argv(step), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.kubectl_env(step))
        out, err = [], []
        threading.Thread(target=lambda: out.extend(iter(lambda: proc.stdout.readline(), b"")), daemon=True).start()
        threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True).start()
        # A background kubectl is always a watch: it has made its first requests once it printed
        # something or waited a moment; the next steps run after that.
        deadline = time.monotonic() + float(step.get("start_timeout", 10))
        while not out and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        return proc, out, err

    def join(self, name, join_step=None):
        kind, handle, step = self.background.pop(name)
        join_step = join_step or {}
        timeout = float(join_step.get("timeout", 10))
        if kind == "http":
            t, holder = handle
            t.join(timeout + HTTP_TIMEOUT)
            return holder.get("result", {"runner-error": "still running"})
        proc, out, err = handle
        lines = int(join_step.get("lines", 0))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None and (not lines or len(out) < lines):
            time.sleep(0.05)
        exit_code = proc.poll()
        if exit_code is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            exit_code = "stopped"
        self.proxy.recorder.close_streams(self.token_case)
        time.sleep(0.1)  # the readers' last lines
        return self.kubectl_result(step, exit_code, b"".join(out), b"".join(err))

    # -- raw HTTP -----------------------------------------------------------------------------

    def request_parts(self, step):
        method, _, path = self.sub(step["http"]).partition(" ")
        headers = [(k, str(v)) for k, v in self.sub(step.get("headers") or {}).items()]
        body = None
        ct = step.get("content_type")
        if "body" in step:
            value = self.sub(step["body"])
            ct = ct or "application/json"
            body = (yaml.safe_dump(value, sort_keys=False) if "yaml" in ct else json.dumps(value)).encode()
        elif "body_raw" in step:
            ct = ct or "application/json"
            body = self.sub(step["body_raw"]).encode()
        elif "body_protobuf" in step:
            p = self.sub(step["body_protobuf"])
            ct = ct or "application/vnd.kubernetes.protobuf"
            body = bytes.fromhex(p["hex"]) if "hex" in p else protobuf.encode_envelope(p["apiVersion"], p["kind"], p["fields"])
        if ct and body is not None:
            headers.append(("Content-Type", ct))
        return method, path, headers, body

    def http(self, step):
        method, path, headers, body = self.request_parts(step)
        user = step.get("user", "admin")
        result = {"http": f"{method} {path}"}
        if "events" not in step and re.search(r"[?&]watch=(1|true)\b", path):
            # A watch read to its end would never end when a server accepts what the other
            # refuses: read for a few seconds, whatever comes.
            step = {**step, "events": 1000, "timeout": step.get("timeout", 3)}
        if "events" in step:
            return {**result, **self.watch(user, method, path, headers, body, step)}
        resp = self.upstream.request(user, method, path, headers, body, timeout=step.get("timeout", HTTP_TIMEOUT))
        ct = (resp.header("Content-Type") or [None])[0]
        result.update(status=resp.status, content_type=ct)
        warnings = resp.header("Warning")
        if warnings:
            result["warnings"] = warnings
        result["body"] = decode(ct, resp.body)
        self.capture(step, result["body"])
        return result

    def watch(self, user, method, path, headers, body, step):
        want = int(step["events"])
        timeout = float(step.get("timeout", 10))
        conn, resp = self.upstream.open(user, method, path, headers, body, timeout=timeout)
        ct = resp.getheader("Content-Type")
        # The events are read as a stream whatever the content type says (kube-apiserver labels
        # a JSON watch `application/json`); the content type itself is compared as it came.
        stream_ct = (ct or "") + ";stream=watch" if resp.status == 200 else ct
        data = b""
        deadline = time.monotonic() + timeout
        events = []
        try:
            conn.sock.settimeout(0.5)
            while time.monotonic() < deadline:
                try:
                    chunk = resp.read1(65536)
                except TimeoutError:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                data += chunk
                decoded = decode(stream_ct, data)
                events = [e for e in decoded if keep_event(e)] if isinstance(decoded, list) else []
                if len([e for e in events if not (isinstance(e, dict) and e.get("partial"))]) >= want:
                    break
        finally:
            conn.close()
        decoded = decode(stream_ct, data)
        if isinstance(decoded, list):
            events = [e for e in decoded if keep_event(e)]
        else:
            events = decoded
        return {"status": resp.status, "content_type": ct, "events": events}

    def capture(self, step, body):
        for var, path in (step.get("capture") or {}).items():
            value = body
            for part in re.findall(r"[^.\[\]]+", path):
                if isinstance(value, list):
                    value = value[int(part)] if part.isdigit() and int(part) < len(value) else None
                elif isinstance(value, dict):
                    value = value.get(part)
                else:
                    value = None
            self.vars[var] = "" if value is None else value

    # -- waiting ------------------------------------------------------------------------------

    def wait(self, step):
        method, path, headers, body = self.request_parts({"http": step["wait"], **{k: v for k, v in step.items() if k != "wait"}})
        until = int(step.get("until", 200))
        # `contains`: also wait for this text in the answer (e.g. a path in an index that a
        # controller of kube-apiserver updates a moment after the thing it lists is served).
        contains = self.sub(step["contains"]).encode() if "contains" in step else None
        deadline = time.monotonic() + float(step.get("timeout", 60))
        status = None
        while time.monotonic() < deadline:
            resp = self.upstream.request(step.get("user", "admin"), method, path, headers, body)
            status = resp.status
            if status == until and (contains is None or contains in resp.body):
                return {"wait": step["wait"], "came": True}
            time.sleep(0.1)
        return {"wait": step["wait"], "came": False, "last": status}

    def wait_webhooks(self, step):
        wanted = list(step["wait_webhooks"])
        webhook = self.env.webhook
        deadline = time.monotonic() + float(step.get("timeout", 60))

        def is_probe(r):
            return str(((r["review"].get("request") or {}).get("name") or "")).startswith("wh-probe-")

        came = False
        while time.monotonic() < deadline:
            self.probes += 1
            cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"wh-probe-{self.probes}"}}
            self.upstream.request("admin", "POST", f"/api/v1/namespaces/{self.case.ns}/configmaps?dryRun=All",
                                  [("Content-Type", "application/json")], json.dumps(cm).encode())
            seen = {r["behaviour"] for r in webhook.seen(self.server, self.case.ns, is_probe)}
            if all(b in seen for b in wanted):
                came = True
                break
            time.sleep(0.2)
        webhook.drop(self.server, self.case.ns, is_probe)
        return {"wait_webhooks": wanted, "came": came}

    def webhook_reviews(self, step):
        records = self.env.webhook.take(self.server, self.case.ns)
        out = [{"behaviour": r["behaviour"], "review": r["review"]} for r in records]
        if step["webhook"] != "ordered":
            out.sort(key=lambda r: json.dumps(r, sort_keys=True))
        return {"webhook": step["webhook"], "reviews": out}

    # -- the official Python client -----------------------------------------------------------

    def python_names(self, user):
        if user in self.python:
            return self.python[user]
        from kubernetes import client, dynamic, watch
        config = client.Configuration()
        config.host = self.proxy.url
        config.ssl_ca_cert = self.proxy.ca_path
        config.api_key = {"authorization": f"Bearer diff/{self.token_case}/{user}"}
        api = client.ApiClient(config)
        names = {
            "client": client, "watch": watch, "ns": self.case.ns, "api": api,
            "core": client.CoreV1Api(api), "apps": client.AppsV1Api(api), "batch": client.BatchV1Api(api),
            "rbac": client.RbacAuthorizationV1Api(api), "net": client.NetworkingV1Api(api),
            "policy": client.PolicyV1Api(api), "authz": client.AuthorizationV1Api(api),
            "ext": client.ApiextensionsV1Api(api), "custom": client.CustomObjectsApi(api),
            "admreg": client.AdmissionregistrationV1Api(api), "coord": client.CoordinationV1Api(api),
            "auth": client.AuthenticationV1Api(api), "dyn": lambda: dynamic.DynamicClient(
                # A discovery cache per side and case: the default is one file for every client.
                api, cache_file=os.path.join(self.env.workdir, f"dynamic-{self.server}-{self.case.ns}.json")),
            "json": json,
        }
        self.python[user] = names
        return names

    def run_python(self, step):
        code = self.sub(step["python"])
        names = self.python_names(step.get("user", "admin"))
        api = names["api"]
        self.proxy.recorder.take(self.token_case)
        result = {"python": step["python"]}
        try:
            tree = ast.parse(code)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, "<case>", "exec"), names)
            value = eval(compile(ast.Expression(last.value), "<case>", "eval"), names) if last else None
            if hasattr(value, "to_dict") or isinstance(value, (list, dict)):
                value = api.sanitize_for_serialization(value)
            result["value"] = value
        except Exception as e:
            from kubernetes.client.exceptions import ApiException
            if isinstance(e, ApiException):
                body = e.body
                try:
                    body = json.loads(body)
                except (TypeError, ValueError):
                    pass
                result["exception"] = {"status": e.status, "reason": e.reason, "body": body}
            else:
                result["error"] = f"{type(e).__name__}: {e}"
        self.proxy.recorder.close_streams(self.token_case)
        result["exchanges"] = [exchange_record(ex) for ex in self.proxy.recorder.take(self.token_case)
                               if not _is_discovery(ex.method, ex.path)]
        return result


def literals(case_text):
    """Addresses and node ports the case sends itself: compared as they are."""
    found = set(re.findall(r"(?<![\d.])\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\d.])", case_text))
    found |= set(re.findall(r"nodePort\W+(\d+)", case_text))
    return found


def quote_path(path):
    return urllib.parse.quote(path, safe="/?=&:%,.-_~!$'()*+;@")
