"""What legitimately differs between two API servers run to run, replaced by stable placeholders.

Every rule is narrow and named here; anything not listed is compared byte for byte (after JSON
and YAML are parsed: key order carries no meaning to any client). Placeholders are *aliases*, not
blanks: within one case on one server, the first uid seen becomes `<uid:1>`, the next `<uid:2>`,
and the same uid is the same alias wherever it appears again (an ownerReference, a
precondition's message, kubectl's output). So a sandbox that kept an object's uid across a
replace, or bumped a resourceVersion on a no-op update, still shows as a difference: the
semantics of identity survive, only the random spelling goes.

The rules:
- uids: any RFC 4122 UUID in any string.
- resourceVersions: the value of every `resourceVersion` field of an object (and the same
  numbers where kube quotes them in a message or kubectl prints them). A *list's*
  `metadata.resourceVersion` is the store's current revision, which other cases running at the
  same time move on either server: `<list-rv>`, compared only for being present.
- `continue` tokens: opaque, and they embed a revision: `<continue>` when present, in a list's
  metadata and in a request's query; a watch's `timeoutSeconds`, which client-go picks at random;
  a field selector's terms, sorted (kubectl describe joins them in a Go map's order).
- managedFields entries: compared sorted by manager, operation and subresource (kube orders them
  by their time, to the second).
- timestamps: RFC 3339 strings (`creationTimestamp`, managedFields' `time`, conditions' times,
  `eventTime`…) become `<time>`; kubectl's ages (`5s`, `3m2s`, `<invalid>`) in printed tables
  and in a Table's `Age` cells become `<age>`, and `kubectl describe`'s dates `<date>`.
- generated names: a name made from `generateName` keeps its prefix and aliases its 5-character
  suffix (`web-<gen:1>`); the ServiceAccount admission plugin's `kube-api-access-xxxxx` volume
  likewise.
- addresses: cluster IPs and node ports are allocated at random by both servers; an IPv4 address
  or a `nodePort` that the case did not itself send becomes `<ip:N>` / `<port:N>`.
- kubectl's log lines: klog's header (time, pid) becomes `<klog>`, and a log line repeated at once
  (a discovery error, once per attempt) is kept once.
- credentials and endpoints: JWTs (TokenRequest), PEM certificates and their base64 (the
  `kube-root-ca.crt` ConfigMap, the webhook CA the case sends), the servers' own URLs
  (`https://127.0.0.1:PORT`, the recording proxy's `http://127.0.0.1:PORT`) and the test
  webhook's URL, which carries which server called it.
- Go pointers: an address in a value Go's `%#v` printed into a message (`(*bool)(0xc000…)`)
  becomes `(*bool)(<pointer>)`; a nil pointer stays `(*bool)(nil)`.
- protobuf answers get the same rules through the generic decoding of protobuf.py, plus one for
  a `Time` there: a varint within a day of the run's start is a Unix time.
"""

import re
import time

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
# Go's time.Time String() and kubectl describe's RFC 1123 dates.
GO_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)? \+0000 UTC( m=[+-][\d.]+)?")
RFC1123 = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}")
AGE = re.compile(r"(\d+d)?(\d+h)?(\d+m)?(\d+s)?|<invalid>|<unknown>")
JWT = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
PEM = re.compile(r"-----BEGIN ([A-Z ]+)-----[\s\S]*?-----END \1-----\n?")
PEM_B64 = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]+")
IPV4 = re.compile(r"(?<![\d.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\d.])")
KUBE_API_ACCESS = re.compile(r"kube-api-access-([a-z0-9]{5})")
RV_IN_TEXT = re.compile(r'(resourceVersion["\']?\s*[:=]\s*["\']?|ResourceVersion in (?:precondition|object meta): |ResourceVersion in (?:the precondition|record) \()(\d+)')
NODE_PORT_IN_TEXT = re.compile(r'(nodePort["\']?\s*:\s*)(\d{5})\b|\b(\d{1,5}:)(\d{5})(/(?:TCP|UDP|SCTP))')
# kubectl's scratch files: `kubectl diff`'s directories and the timestamps diff prints for them,
# `kubectl edit`'s saved copy.
SCRATCH = re.compile(r"/tmp/(LIVE|MERGED)-\d+|/tmp/kubectl-edit-\d+\.yaml")
# A Python datetime's str(): a YAML body's timestamp as PyYAML reads it.
PY_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?\+00:00")
# In a request's query: a continue token (opaque, and it embeds a revision), and the
# `timeoutSeconds` client-go picks at random for a watch.
QUERY_CONTINUE = re.compile(r"([?&]continue=)[^&\s]+")
QUERY_TIMEOUT = re.compile(r"([?&]timeoutSeconds=)\d+")
# kubectl describe builds its events' field selector from a Go map: its terms in any order.
QUERY_FIELD_SELECTOR = re.compile(r"([?&]fieldSelector=)([^&\s]+)")
# klog's header on kubectl's log lines: severity, date, time, pid.
KLOG = re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6}\s+\d+ ", re.M)
GO_POINTER = re.compile(r"\((\*[\w.\[\]]+)\)\(0x[0-9a-f]+\)")
DIFF_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+ [+-]\d{4}")


# kube-apiserver orders managedFields by time, to the second, then by manager: two writes in one
# second or in two come out in different orders. Times are normalized away, so the entries are
# compared in an order of their own.
MANAGED_FIELDS_ORDER = ("manager", "operation", "subresource", "apiVersion", "fieldsType")


class Aliases:
    """One case on one server: the placeholders handed out so far, in order of first sight."""

    def __init__(self, literals=()):
        self.tables = {}
        # What the case itself sent (addresses, ports): never aliased, so that a server that
        # ignored a requested clusterIP still shows.
        self.literals = set(literals)
        self.urls = []  # (literal, placeholder), longest first

    def alias(self, kind, value):
        table = self.tables.setdefault(kind, {})
        if value not in table:
            table[value] = f"<{kind}:{len(table) + 1}>"
        return table[value]

    def add_url(self, url, placeholder):
        self.urls.append((url, placeholder))
        self.urls.sort(key=lambda p: -len(p[0]))


def _ip(m, aliases):
    text = m.group(0)
    if any(int(p) > 255 for p in m.groups()):
        return text
    if text in aliases.literals or text.startswith("127.") or text.startswith("0.") or text == "255.255.255.255":
        return text
    return aliases.alias("ip", text)


def text(s, aliases, generated=()):
    """Normalizes free text: a message, a header, kubectl's output."""
    for url, placeholder in aliases.urls:
        s = s.replace(url, placeholder)
    s = PEM.sub("<pem>", s)
    s = PEM_B64.sub("<pem-base64>", s)
    s = JWT.sub("<jwt>", s)
    s = UUID.sub(lambda m: aliases.alias("uid", m.group(0)), s)
    s = RFC3339.sub("<time>", s)
    s = GO_TIME.sub("<time>", s)
    s = RFC1123.sub("<date>", s)
    s = PY_TIME.sub("<time>", s)
    s = QUERY_CONTINUE.sub(r"\1<continue>", s)
    s = QUERY_TIMEOUT.sub(r"\1<timeout>", s)
    s = QUERY_FIELD_SELECTOR.sub(lambda m: m.group(1) + "%2C".join(sorted(m.group(2).split("%2C"))), s)
    s = RV_IN_TEXT.sub(lambda m: m.group(1) + aliases.alias("rv", m.group(2)), s)
    s = KUBE_API_ACCESS.sub(lambda m: "kube-api-access-" + aliases.alias("gen", m.group(1)), s)
    s = SCRATCH.sub(lambda m: f"/tmp/<{m.group(1) or 'kubectl-edit'}>", s)
    s = DIFF_TIME.sub("<time>", s)
    s = GO_POINTER.sub(r"(\1)(<pointer>)", s)
    s = NODE_PORT_IN_TEXT.sub(lambda m: _node_port(m, aliases), s)
    for prefix, suffix in generated:
        s = s.replace(prefix + suffix, prefix + aliases.alias("gen", suffix))
    s = IPV4.sub(lambda m: _ip(m, aliases), s)
    return s


def _node_port(m, aliases):
    if m.group(2):
        port = m.group(2)
        return m.group(1) + (port if port in aliases.literals else aliases.alias("port", port))
    port = m.group(4)
    return m.group(3) + (port if port in aliases.literals else aliases.alias("port", port)) + m.group(5)


AGE_CELL = re.compile(r"(\d+d)?(\d+h)?(\d+m)?(\d+s)?(?<=[dhms])|<invalid>")
AGE_HEADERS = {"AGE", "DURATION", "LAST SEEN", "FIRST SEEN", "CREATED AT", "LAST SCHEDULE"}


def printed(out, aliases, generated=()):
    """kubectl's output: text rules, then ages, then column padding (a column is as wide as its
    widest cell, which an age or an alias changes)."""
    lines = []
    ages = set()  # the columns of the table being printed whose header names a time
    out = KLOG.sub("<klog> ", out)
    for line in text(out, aliases, generated).split("\n"):
        if lines and line.startswith("<klog> ") and lines[-1] == line:
            continue  # kubectl logs a discovery error once per attempt, as many as time allowed
        indent = len(line) - len(line.lstrip(" "))
        cells = [c for c in re.split(r" {2,}|\t", line[indent:])]
        if any(c in AGE_HEADERS for c in cells) and indent == 0:
            ages = {i for i, c in enumerate(cells) if c in AGE_HEADERS}
        elif not line.strip():
            ages = set()
        elif ages:
            # An empty cell merges into the padding and shifts the cells after it: any cell of
            # the row that reads as an age is one.
            cells = ["<age>" if c and AGE_CELL.fullmatch(c) else c for c in cells]
        lines.append((" " * indent + "   ".join(cells)).rstrip())
    return "\n".join(lines)


def generated_names(value, found=None):
    """(generateName, suffix) of every object in a decoded body that got a generated name."""
    found = set() if found is None else found
    if isinstance(value, dict):
        meta = value.get("metadata")
        if isinstance(meta, dict):
            prefix, name = meta.get("generateName"), meta.get("name")
            if isinstance(prefix, str) and isinstance(name, str) and prefix and name.startswith(prefix):
                if len(name) == len(prefix) + 5:
                    found.add((prefix, name[len(prefix):]))
        for v in value.values():
            generated_names(v, found)
    elif isinstance(value, list):
        for v in value:
            generated_names(v, found)
    return found


def _age_columns(table):
    columns = table.get("columnDefinitions") or []
    return {i for i, c in enumerate(columns) if isinstance(c, dict) and c.get("name") in ("Age", "Duration")}


def data(value, aliases, generated=(), list_meta=False, parent=None):
    """Normalizes a decoded JSON/YAML body. Keys are visited in sorted order, so that aliases are
    numbered alike whatever order each server writes its keys in; keys are normalized too
    (managedFields name list items by uid: `k:{"uid":"…"}`)."""
    if isinstance(value, dict):
        out = {}
        for k in sorted(value, key=str):
            v = value[k]
            nk = text(k, aliases, generated) if isinstance(k, str) else k
            if k == "resourceVersion" and isinstance(v, str) and v:
                out[nk] = "<list-rv>" if list_meta else aliases.alias("rv", v)
            elif k == "continue" and isinstance(v, str) and v and list_meta:
                out[nk] = "<continue>"
            elif k == "nodePort" and isinstance(v, int) and str(v) not in aliases.literals:
                out[nk] = aliases.alias("port", str(v))
            elif k == "managedFields" and isinstance(v, list):
                entries = data(v, aliases, generated, parent=k)
                out[nk] = sorted(entries, key=lambda e: [str(e.get(f)) for f in MANAGED_FIELDS_ORDER] if isinstance(e, dict) else [])
            else:
                out[nk] = data(v, aliases, generated, parent=k)
        return data_table_ages(value, out)
    if isinstance(value, list):
        return [data(v, aliases, generated, parent=parent) for v in value]
    if isinstance(value, str):
        return text(value, aliases, generated)
    return value


def is_list(value):
    kind = value.get("kind") if isinstance(value, dict) else None
    return isinstance(kind, str) and (kind.endswith("List") or kind == "Table") or (
        isinstance(value, dict) and isinstance(value.get("items"), list) and "metadata" in value
        and isinstance(value["metadata"], dict) and "name" not in value["metadata"])


def body(value, aliases, generated=()):
    """A whole answer: a list's own metadata (its revision, its continue token) is the list's."""
    if is_list(value):
        out = {}
        for k in sorted(value, key=str):
            v = value[k]
            if k == "metadata" and isinstance(v, dict):
                out[k] = data(v, aliases, generated, list_meta=True)
            else:
                out[k] = data(v, aliases, generated, parent=k)
        return data_table_ages(value, out)
    return data(value, aliases, generated)


def data_table_ages(value, out):
    if value.get("kind") == "Table" and isinstance(value.get("rows"), list):
        ages = _age_columns(value)
        for row in out.get("rows", []):
            cells = row.get("cells") if isinstance(row, dict) else None
            if isinstance(cells, list):
                for i in ages:
                    if i < len(cells) and isinstance(cells[i], str):
                        cells[i] = "<age>"
    return out


RUN_START = time.time()


def unix_time(n):
    """A protobuf varint that is a Unix time of this run (metav1.Time's seconds)."""
    return abs(n - RUN_START) < 86400
