"""Cases: YAML files under tests/differential/cases/, one file per area, one line per case.

A file is either a list of cases or a mapping with `cases:` and an optional `setup:` (steps run in
each case's namespace before the case's own). A setup is compared once, as a case of its own
(`<file>/setup`, in a namespace of its own); inside the other cases only their own steps are
compared, so that one difference in a shared setup counts once, not once per case. A case is:

- one line: a kubectl command line (`kubectl get configmaps -o wide`), or one HTTP request
  (`GET /api/v1/namespaces/${ns}/configmaps?limit=1`);
- or a mapping: `name:` (the case's id within its file; one-liners are named by their text) and
  `steps:` (or the keys of a single step directly, e.g. `{http: POST …, body: {…}}`).

Steps (each a mapping; the key that names its kind comes first):

  kubectl: ARGS          the real kubectl, through the recording proxy: exit code, stdout and
                         stderr, and every non-discovery HTTP exchange it made. Options: `user:
                         user` (the sandbox-user context), `stdin:` (text or a YAML object, for
                         `-f -`), `editor:` (a sed script: KUBE_EDITOR for `kubectl edit`),
                         `background: NAME` (runs on; `join: NAME` ends it once its stdout has
                         `lines:` lines, or after `timeout:` seconds).
  http: METHOD PATH      one request from the runner itself: `body:` (YAML → JSON unless
                         `content_type:` says YAML, a patch type, …), `body_raw:` (text sent as
                         is), `body_protobuf: {apiVersion, kind, fields}` (fields as
                         [[number, value], …], see protobuf.py), `headers:`, `user:`, `events: N`
                         (a watch: read N events, bookmarks without `k8s.io/initial-events-end`
                         dropped), `background: NAME`, `capture: {var: dotted.path}`.
  python: CODE           the official Python client, through the proxy (names: `ns`, `client`,
                         `watch`, `core`, `apps`, `batch`, `rbac`, `net`, `policy`, `authz`,
                         `ext`, `custom`, `admreg`, `coord`, `auth`, `dyn()`); the value of the
                         last expression, or the ApiException.
  wait: METHOD PATH      polls until `until:` (a status code, default 200): not compared
                         beyond whether it came. For what kube-apiserver does a moment later (a
                         CRD served, a webhook configuration in effect).
  wait_webhooks: [B…]    dry-run creates of ConfigMaps until the test webhook saw each listed
                         behaviour called: a webhook configuration is in effect.
  webhook: ordered|any   the AdmissionReviews the test webhook received since the last such
                         step, normalized, in arrival order or sorted.
  join: NAME             the result of a background step.

In any string, `${ns}` is the case's namespace (also the current namespace of kubectl's
context), `${webhook}` the test webhook's URL for this case and server, `${webhook_ca}` its CA
(base64), and `${var}` a value captured by an earlier step.
"""

import os
import re
import urllib.parse

import yaml

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
STEP_KINDS = ("kubectl", "http", "python", "wait", "wait_webhooks", "webhook", "join", "sleep")


class Case:
    def __init__(self, file, index, name, steps, setup, text):
        self.file = file
        self.index = index
        self.name = name
        self.id = f"{file}/{name}"
        self.ns = f"{file}-{index}"[:63].rstrip("-")
        self.steps = steps
        self.setup = setup
        self.text = text  # the case as written, to find the values it sends itself

    def __repr__(self):
        return self.id


def slug(text):
    s = re.sub(r"\$\{[^}]*\}", "", urllib.parse.unquote(text))
    # Selectors differ by their operators alone: name them.
    for op, word in (("!=", "-ne-"), ("==", "-eqeq-"), ("=", "-eq-"), ("!", "-not-")):
        s = s.replace(op, word)
    s = re.sub(r"[^a-zA-Z0-9]+", "-", s).strip("-").lower()
    return s[:120].rstrip("-") or "case"


def step_of(item):
    if isinstance(item, str):
        if item.startswith("kubectl "):
            return {"kubectl": item[len("kubectl "):]}
        if item.split(" ", 1)[0] in METHODS:
            return {"http": item}
        raise ValueError(f"a one-line step is a kubectl command or an HTTP request: {item!r}")
    if not isinstance(item, dict) or not any(k in item for k in STEP_KINDS):
        raise ValueError(f"not a step: {item!r}")
    return item


def load(directory, only=None):
    cases = []
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(".yaml"):
            continue
        file = entry[:-len(".yaml")]
        with open(os.path.join(directory, entry)) as f:
            doc = yaml.safe_load(f)
        setup = []
        items = doc
        if isinstance(doc, dict):
            setup = [step_of(s) for s in doc.get("setup") or []]
            items = doc.get("cases") or []
        names = set()
        if setup:
            names.add("setup")
            case = Case(file, 0, "setup", setup, [], yaml.safe_dump(setup))
            if only is None or re.search(only, case.id):
                cases.append(case)
        for index, item in enumerate(items, 1):
            if isinstance(item, str):
                name, steps = slug(item[len("kubectl "):] if item.startswith("kubectl ") else item), [step_of(item)]
            elif isinstance(item, dict) and "steps" in item:
                name, steps = item.get("name") or f"case-{index}", [step_of(s) for s in item["steps"]]
            elif isinstance(item, dict):
                body = {k: v for k, v in item.items() if k != "name"}
                first = next(k for k in body if k in STEP_KINDS)
                name = item.get("name") or slug(str(body[first]))
                steps = [step_of(body)]
            else:
                raise ValueError(f"{entry}: case {index}: {item!r}")
            if name in names and isinstance(item, dict) and "name" in item:
                raise ValueError(f"{entry}: two cases named {name!r}: rename one of them")
            base, n = name, 1
            while name in names:  # one-liners alike in their first 120 characters
                n += 1
                name = f"{base}-{n}"
            names.add(name)
            case = Case(file, index, name, steps, setup, yaml.safe_dump(item) + yaml.safe_dump(setup))
            if only is None or re.search(only, case.id):
                cases.append(case)
    return cases
