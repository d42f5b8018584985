"""Kubernetes' protobuf encoding, read without a schema, and a small encoder for request bodies.

kube-apiserver's protobuf is `k8s\\0` followed by a `runtime.Unknown` message (typeMeta: apiVersion
and kind; raw: the object's message; contentEncoding; contentType). The object's message is read
as `protoc --decode_raw` reads one: a list of `[field number, value]` in wire order, a
length-delimited value taken as text when it is printable UTF-8, else as a nested message when
it parses as one, else as bytes (hex). Both servers' answers go through the same reading, so an
ambiguous value is read the same way on both sides; the comparison is of the wire, field order
included.

The one piece of schema used is the one every object shares: field 1 of an object is its
ObjectMeta (of a list, its ListMeta), whose field numbers are fixed in k8s.io/apimachinery's
generated.proto — so the normalization of normalize.py (uids, resourceVersions, times, generated
names) applies to protobuf answers as it does to JSON ones.
"""

import struct

MAGIC = b"k8s\x00"


def _varint(buf, i):
    shift = result = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def parse(buf):
    """A message as a list of [field, value]; raises ValueError if buf is not one."""
    out, i = [], 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field 0")
        if wire == 0:
            v, i = _varint(buf, i)
        elif wire == 1:
            if i + 8 > len(buf):
                raise ValueError("truncated fixed64")
            v = {"fixed64": struct.unpack("<Q", buf[i:i + 8])[0]}
            i += 8
        elif wire == 5:
            if i + 4 > len(buf):
                raise ValueError("truncated fixed32")
            v = {"fixed32": struct.unpack("<I", buf[i:i + 4])[0]}
            i += 4
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated bytes")
            v = _bytes(buf[i:i + n])
            i += n
        else:
            raise ValueError(f"wire type {wire}")
        out.append([field, v])
    return out


def _printable(b):
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if all(c.isprintable() or c in "\t\n\r" for c in s):
        return s
    return None


def _bytes(b):
    if not b:
        return ""
    s = _printable(b)
    if s is not None:
        return s
    if b.startswith(MAGIC):
        return {"k8s": envelope(b)}
    try:
        return {"message": parse(b)}
    except ValueError:
        return {"bytes": b.hex()}


def envelope(buf):
    """`k8s\\0` + runtime.Unknown: {apiVersion, kind, raw (decoded), contentEncoding, contentType}."""
    if not buf.startswith(MAGIC):
        raise ValueError("no k8s protobuf magic")
    unknown = parse(buf[len(MAGIC):])
    out = {}
    for field, v in unknown:
        if field == 1 and isinstance(v, dict) and "message" in v:
            for f, tv in v["message"]:
                out[{1: "apiVersion", 2: "kind"}.get(f, f"typeMeta.{f}")] = tv
        elif field == 1 and isinstance(v, str):
            # typeMeta whose fields are all printable is read as text; read it again.
            for f, tv in parse(v.encode()):
                out[{1: "apiVersion", 2: "kind"}.get(f, f"typeMeta.{f}")] = tv
        elif field == 2:
            raw = v
            if isinstance(v, str):
                raw = {"message": parse(v.encode())} if v else {"message": []}
            out["raw"] = raw.get("message", raw) if isinstance(raw, dict) else raw
        else:
            out[{3: "contentEncoding", 4: "contentType"}.get(field, str(field))] = v
    return out


def frames(buf):
    """A protobuf watch stream: 4-byte big-endian lengths, each a k8s-enveloped WatchEvent
    whose object (field 2, a RawExtension) holds the object's own envelope."""
    events, i = [], 0
    while i + 4 <= len(buf):
        (n,) = struct.unpack(">I", buf[i:i + 4])
        i += 4
        chunk = buf[i:i + n]
        i += n
        if len(chunk) < n:
            events.append({"truncated": len(chunk)})
            break
        try:
            # kube-apiserver frames the WatchEvent itself without the envelope (the stream
            # serializer is the raw one); its object carries one.
            if chunk.startswith(MAGIC):
                events.append(envelope(chunk))
            else:
                events.append({"kind": "WatchEvent", "raw": parse(chunk)})
        except ValueError as e:
            events.append({"undecodable": str(e), "hex": chunk.hex()})
    return events


# --- encoding, for the cases that send protobuf bodies --------------------------------------


def _key(field, wire):
    return _enc_varint(field << 3 | wire)


def _enc_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_message(fields):
    """fields: [[number, value], …]; a value is an int (varint), a str (text), bytes, or a list
    of [number, value] (a nested message)."""
    out = bytearray()
    for field, v in fields:
        field = int(field)
        if isinstance(v, bool):
            out += _key(field, 0) + _enc_varint(int(v))
        elif isinstance(v, int):
            out += _key(field, 0) + _enc_varint(v)
        elif isinstance(v, str):
            b = v.encode()
            out += _key(field, 2) + _enc_varint(len(b)) + b
        elif isinstance(v, (bytes, bytearray)):
            out += _key(field, 2) + _enc_varint(len(v)) + bytes(v)
        elif isinstance(v, dict) and "hex" in v:
            b = bytes.fromhex(v["hex"])
            out += _key(field, 2) + _enc_varint(len(b)) + b
        elif isinstance(v, list):
            b = encode_message(v)
            out += _key(field, 2) + _enc_varint(len(b)) + b
        else:
            raise ValueError(f"cannot encode {v!r}")
    return bytes(out)


def encode_envelope(api_version, kind, raw_fields):
    unknown = [[1, [[1, api_version], [2, kind]]], [2, encode_message(raw_fields)], [3, ""], [4, ""]]
    # contentEncoding and contentType are empty: omitted, as Go's encoder omits them.
    return MAGIC + encode_message(unknown[:2])


# --- normalization ---------------------------------------------------------------------------

# k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto
OBJECT_META = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion",
               8: "creationTimestamp", 9: "deletionTimestamp", 17: "managedFields"}
LIST_META = {2: "resourceVersion", 3: "continue"}
MANAGED_FIELDS_TIME = 4


def normalize(tree, aliases, norm, generated=(), is_list=False, top=True):
    """Applies normalize.py's rules to a decoded envelope (or a list of watch frames)."""
    if isinstance(tree, list) and top:
        return [normalize(e, aliases, norm, generated, top=True) for e in tree]
    if isinstance(tree, dict) and "raw" in tree and top:
        out = dict(tree)
        kind = tree.get("kind", "")
        out["raw"] = _object(tree["raw"], aliases, norm, generated, isinstance(kind, str) and kind.endswith("List"))
        for k, v in tree.items():
            if k != "raw":
                out[k] = _generic(v, aliases, norm, generated)
        return out
    return _generic(tree, aliases, norm, generated)


def _object(fields, aliases, norm, generated, is_list):
    if not isinstance(fields, list):
        return _generic(fields, aliases, norm, generated)
    out = []
    for field, v in fields:
        if field == 1 and isinstance(v, dict) and "message" in v:
            out.append([field, {"message": _meta(v["message"], aliases, norm, generated, is_list)}])
        elif is_list and field == 2 and isinstance(v, dict) and "message" in v:
            out.append([field, {"message": _object(v["message"], aliases, norm, generated, False)}])
        elif field == 2 and isinstance(v, dict) and "k8s" in v:
            # a WatchEvent's object
            out.append([field, {"k8s": normalize(v["k8s"], aliases, norm, generated)}])
        else:
            out.append([field, _generic(v, aliases, norm, generated)])
    return out


def _meta(fields, aliases, norm, generated, is_list):
    out = []
    for field, v in fields:
        if is_list:
            if field == 2 and isinstance(v, str) and v:
                v = "<list-rv>"
            elif field == 3 and isinstance(v, str) and v:
                v = "<continue>"
            else:
                v = _generic(v, aliases, norm, generated)
        elif field == 6 and isinstance(v, str) and v:
            v = aliases.alias("rv", v)
        elif field in (8, 9) and isinstance(v, dict) and "message" in v:
            v = "<time>"
        else:
            v = _generic(v, aliases, norm, generated)
        out.append([field, v])
    return out


def _generic(v, aliases, norm, generated):
    if isinstance(v, str):
        return norm.text(v, aliases, generated)
    if isinstance(v, int):
        return "<unix-time>" if norm.unix_time(v) else v
    if isinstance(v, list):
        return [[f, _generic(x, aliases, norm, generated)] for f, x in v]
    if isinstance(v, dict):
        if "message" in v:
            return {"message": _generic(v["message"], aliases, norm, generated)}
        if "k8s" in v:
            return {"k8s": normalize(v["k8s"], aliases, norm, generated)}
        return dict(v)
    return v


def _is_message(v):
    return isinstance(v, list) and all(isinstance(f, list) and len(f) == 2 and isinstance(f[0], int) for f in v)


def canonical(tree):
    """What a Go client decodes alike, written alike: fields in field-number order (repeated
    fields keep their relative order), and a field holding its zero value (`""`, 0, an empty
    message) as if absent — gogo protobuf writes every non-pointer field, zero or not, and
    reading either gives the same Go value. (A pointer field set to its zero value is the one
    case this hides; docs/sandbox.md lists where the sandbox loses those.)"""
    if _is_message(tree) and tree:
        kept = [[f, canonical(v)] for f, v in tree if v not in ("", 0)]
        return sorted(kept, key=lambda fv: fv[0])
    if isinstance(tree, list):
        return [canonical(v) for v in tree]
    if isinstance(tree, dict):
        return {k: canonical(v) for k, v in tree.items()}
    return tree
