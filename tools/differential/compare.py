"""Normalizing a case's results on each server and comparing them.

What is compared, per step: for a request, the status code, the content type, the `Warning`
headers and the body (parsed: Status `reason`, `message`, `details.causes`, the object…); for a
watch, the sequence of events; for kubectl, its exit code, stdout, stderr and each HTTP exchange
it made (request line, request body, status, content type, warnings, answer); for the Python
client, its return value or exception and its exchanges; for the test webhook, the
AdmissionReviews it received.
"""

import difflib
import json

import normalize
import protobuf


def _walk_generated(value, found):
    normalize.generated_names(value, found)
    return found


def _strings_and_bodies(result):
    """Every decoded body of a step (for the generated names)."""
    for key in ("body", "value", "request_body"):
        if key in result:
            yield result[key]
    for key in ("events", "exchanges", "reviews"):
        for item in result.get(key) or []:
            yield item
            if isinstance(item, dict):
                yield from _strings_and_bodies(item)
    if isinstance(result.get("exception"), dict):
        yield result["exception"].get("body")


def _norm_body(value, aliases, generated):
    if isinstance(value, dict) and "protobuf" in value and len(value) == 1:
        return {"protobuf": protobuf.canonical(protobuf.normalize(value["protobuf"], aliases, normalize, generated))}
    if isinstance(value, list) and value and isinstance(value[0], dict) and "raw" in value[0]:
        return protobuf.canonical(protobuf.normalize(value, aliases, normalize, generated))
    if isinstance(value, list):
        return [normalize.body(v, aliases, generated) for v in value]
    return normalize.body(value, aliases, generated)


# Requests kubectl makes to learn the API, beyond discovery (run.py leaves those out): the list
# of CRDs it reads to validate a custom resource when the server's OpenAPI does not describe its
# kind yet, which depends on how soon after a CRD's creation kube-apiserver publishes its schema.
LEARNING = {"GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions"}


def _json_document(text):
    if not isinstance(text, str) or not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def normalize_result(result, aliases, generated):
    out = {}
    for k, v in result.items():
        if k in ("body", "value", "request_body"):
            out[k] = _norm_body(v, aliases, generated)
        elif k == "events":
            out[k] = _norm_body(v, aliases, generated)
        elif k == "exchanges":
            out[k] = [normalize_result(e, aliases, generated) for e in v if e.get("request") not in LEARNING]
        elif k == "reviews":
            out[k] = [{"behaviour": r["behaviour"], "review": normalize.body(r["review"], aliases, generated)} for r in v]
        elif k == "stdout" and _json_document(v) is not None:
            # JSON printed as it came (`kubectl get --raw`): compared as data, keys in one order
            # (Go writes a struct's fields in their order, the sandbox in its own).
            out[k] = json.dumps(normalize.body(_json_document(v), aliases, generated), indent=1, sort_keys=True).split("\n")
        elif k in ("stdout", "stderr"):
            out[k] = normalize.printed(v, aliases, generated).split("\n")
        elif k == "exception" and isinstance(v, dict):
            out[k] = {**v, "body": _norm_body(v.get("body"), aliases, generated)}
        elif isinstance(v, str):
            out[k] = normalize.text(v, aliases, generated)
        else:
            out[k] = normalize.data(v, aliases, generated)
    return out


def normalize_side(results, aliases):
    generated = set()
    for r in results:
        for b in _strings_and_bodies(r):
            _walk_generated(b, generated)
    # Longest prefixes first, so that `web-` does not eat a part of `web-abc-`'s name.
    generated = sorted(generated, key=lambda p: -len(p[0]))
    return [normalize_result(r, aliases, generated) for r in results]


MISSING = "<absent>"


def differences(a, b, path="", out=None, limit=2000):
    """Paths where the sandbox's (a) and kube-apiserver's (b) normalized results differ."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a.keys()) + [k for k in b.keys() if k not in a]:
            differences(a.get(k, MISSING), b.get(k, MISSING), f"{path}.{k}" if path else str(k), out, limit)
    elif isinstance(a, list) and isinstance(b, list) and a and b and _all_lines(a, b) and (path.endswith("stdout") or path.endswith("stderr")):
        if a != b:
            diff = list(difflib.unified_diff(a, b, "sandbox", "kube", n=1, lineterm=""))[2:]
            out.append((path, "\n".join(diff), None))
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append((f"{path}[len]", len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            differences(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append((path, a, b))
    return out


def _all_lines(a, b):
    return all(isinstance(x, str) for x in a + b)


def short(value, width=90):
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= width else text[:width - 1] + "…"
