#!/usr/bin/env python3
"""A second, independent implementation of SPEC.md (Python standard library,
written from the spec, not from the Go code).

  python3 derive.py > vectors.json          the known-answer vectors
  python3 derive.py verify TENANT FILE...   verify exports (SPEC.md §6); prints
                                            "FILE: intact", "FILE: <reason> seq N",
                                            "FILE: <reason> line L" or "FILE: error ..."
                                            (TENANT "" takes the first event's)

The vectors use only integers, strings, booleans, null and BMP keys, where
sorted(keys) and json.dumps(separators=(",", ":"), ensure_ascii=False)
coincide with RFC 8785; the verifier implements RFC 8785 in full (jcs below).
"""
import hashlib, json, re, sys
from decimal import Decimal
from fractions import Fraction

def genesis(tenant):
    return hashlib.sha256(b"fourlanes/genesis\x00\x01" + tenant.encode()).hexdigest()

def canonical(env):
    e = {k: v for k, v in env.items() if k != "hash"}
    return json.dumps(e, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

def chain_hash(env):
    return hashlib.sha256(b"fourlanes/chain\x00\x01" + bytes.fromhex(env["prev_hash"]) + canonical(env)).hexdigest()

def ev(tenant, seq, typ, payload, prev, **opt):
    e = {"id": "0190c5a8-7d4e-7c3b-9d1a-%012d" % seq, "type": typ, "tenant_id": tenant,
         "occurred_at": "2026-11-29T19:45:0%dZ" % seq, "schema_version": 1,
         "payload": payload, "seq": seq, "prev_hash": prev}
    e.update(opt)
    e["hash"] = chain_hash(e)
    return e

def main_vectors():
  vectors = []
  for t in ["acme", "globex", "tenant-\u00fc"]:
      vectors.append({"name": "genesis " + t, "kind": "genesis", "tenant_id": t, "expected": genesis(t),
                      "derivation": "SHA-256 of 'fourlanes/genesis' 0x00 0x01 || UTF-8 tenant id, by derive.py"})
  e1 = ev("acme", 1, "order.placed", {}, genesis("acme"))
  e2 = ev("acme", 2, "order.paid", {"order_id": "o-1", "amount_cents": 12995, "paid": True, "coupon": None},
          e1["hash"], actor_id="user-7", correlation_id="req-42")
  e3 = ev("acme", 3, "order.shipped",
          {"z": 1, "a": [1, "two", {"y": False, "b": None}], "\u00e9": "caf\u00e9 \u20ac", "quote\"back\\slash": "line\nbreak\ttab"},
          e2["hash"], causation_id=e2["id"])
  for name, e in [("seq 1, empty payload, from genesis", e1), ("seq 2, optional fields set", e2),
                  ("seq 3, key order, escapes, non-ASCII", e3)]:
      vectors.append({"name": name, "kind": "event", "envelope": e, "canonical": canonical(e).decode(),
                      "expected": e["hash"],
                      "derivation": "derive.py: canonical = sorted-key compact JSON of the envelope without hash; "
                                    "hash = SHA-256('fourlanes/chain' 0x00 0x01 || raw(prev_hash) || canonical)"})
  print(json.dumps({"vectors": vectors}, indent=2, ensure_ascii=False))


# ---- The verifier (SPEC.md §1, §5, §6) ----

MAX_SAFE = 2**53 - 1
MAX_SCHEMA = 2**31 - 1
MAX_DEPTH_READ = 64       # a line nested deeper is not read (§6 step 1)
MAX_PAYLOAD_DEPTH = 32    # the payload object is level 1
MAX_PAYLOAD_BYTES = 400 * 1024 - 8 * 1024
MAX_LINE = 8 << 20
REQUIRED = {"id", "type", "tenant_id", "occurred_at", "schema_version", "payload", "seq", "prev_hash", "hash"}
OPTIONAL = {"correlation_id", "causation_id", "actor_id"}
STRINGS = {"id", "type", "tenant_id", "occurred_at", "prev_hash", "hash"} | OPTIONAL


class Num:
    """A JSON number as written."""
    def __init__(self, s):
        self.s = s


class Obj(dict):
    """A JSON object; names that occur more than once are in .repeated."""
    def __init__(self, pairs):
        super().__init__()
        self.repeated = set()
        for k, v in pairs:
            if k in self:
                self.repeated.add(k)
            self[k] = v


def _reject(c):
    raise ValueError("not JSON: " + c)


def has_surrogate(s):
    return any(0xD800 <= ord(c) <= 0xDFFF for c in s)


def depth(v):
    if isinstance(v, Obj):
        return 1 + max((depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((depth(x) for x in v), default=0)
    return 0


def broken(v):
    """Whether v breaks I-JSON: a repeated name, or a string (name or value)
    that is not valid Unicode. Invalid UTF-8 reaches here as surrogates
    (decoded with surrogateescape), like a lone escaped surrogate."""
    if isinstance(v, Obj):
        return bool(v.repeated) or any(has_surrogate(k) or broken(x) for k, x in v.items())
    if isinstance(v, list):
        return any(broken(x) for x in v)
    return isinstance(v, str) and has_surrogate(v)


def read_line(b):
    """§6 step 1: (object, violation) or None when the line cannot be read."""
    violation = False
    if b.startswith(b"\xef\xbb\xbf"):
        violation, b = True, b[3:]
    try:
        v = json.loads(b.decode("utf-8", "surrogateescape"), object_pairs_hook=Obj,
                       parse_int=Num, parse_float=Num, parse_constant=_reject)
    except (ValueError, RecursionError):
        return None
    if not isinstance(v, Obj) or depth(v) > MAX_DEPTH_READ:
        return None
    return v, violation or broken(v)


def member(o, name):
    if name in o and name not in o.repeated:
        return True, o[name]
    return False, None


def read_int(v, mx, signed=True):
    """An integer written without fraction or exponent, within ±mx."""
    if not isinstance(v, Num) or not re.fullmatch(r"-?[0-9]{1,20}" if signed else r"[0-9]{1,20}", v.s):
        return None
    x = int(v.s)
    return x if -mx <= x <= mx else None


def sig_digits(s):
    m = s.split("e")[0].split("E")[0].lstrip("-").replace(".", "").strip("0")
    return len(m)


def number_ok(s):
    """§1: exact in binary64 (I-JSON), integers within ±(2^53−1), within
    DynamoDB's range (0 or 1e-130 ≤ |x| < 1e126) and 38 digits."""
    d = sig_digits(s)
    if d > 38:
        return False
    f = float(s)
    a = abs(f)
    if a == float("inf") or a >= 1e126 or (d > 0 and a < 1e-130):
        return False
    want = Fraction(s)
    if want.denominator == 1 and abs(want) > MAX_SAFE:
        return False
    return Fraction(repr(f)) == want


def es6(f):
    """ECMAScript Number.prototype.toString of a binary64 (RFC 8785 §3.2.2.3)."""
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    t = Decimal(repr(abs(f))).as_tuple()
    digits, exp = "".join(map(str, t.digits)), t.exponent
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped.lstrip("0")
    k = len(digits)
    n = k + exp
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        es = ("+" if e >= 0 else "-") + str(abs(e))
        out = digits + "e" + es if k == 1 else digits[0] + "." + digits[1:] + "e" + es
    return sign + out


def jcs_string(s):
    out = ['"']
    for c in s:
        o = ord(c)
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c in "\b\f\n\r\t":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[c])
        elif o < 0x20:
            out.append("\\u%04x" % o)
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def jcs(v):
    """RFC 8785 serialization of a value as read (Num keeps its spelling)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, Num):
        return es6(float(v.s))
    if isinstance(v, str):
        return jcs_string(v)
    if isinstance(v, list):
        return "[" + ",".join(jcs(x) for x in v) + "]"
    keys = sorted(v.keys(), key=lambda k: k.encode("utf-16-be"))
    return "{" + ",".join(jcs_string(k) + ":" + jcs(v[k]) for k in keys) + "}"


def payload_ok(v, level):
    """§1 payload values: depth, non-empty names, numbers."""
    if isinstance(v, (Obj, list)):
        if level > MAX_PAYLOAD_DEPTH:
            return False
        items = v.items() if isinstance(v, Obj) else ((None, x) for x in v)
        return all(k != "" and payload_ok(x, level + 1) for k, x in items)
    if isinstance(v, Num):
        return number_ok(v.s)
    return True


def size(v):
    """The payload size rule (SPEC.md §1): UTF-8 bytes of names and strings,
    numbers by half their canonical digits plus 2, 1 for a literal, 3 per
    container plus 1 per element."""
    if v is None or isinstance(v, bool):
        return 1
    if isinstance(v, str):
        return len(v.encode())
    if isinstance(v, Num):
        return len(es6(float(v.s))) // 2 + 2
    if isinstance(v, list):
        return 3 + sum(size(x) + 1 for x in v)
    return 3 + sum(len(k.encode()) + size(x) + 1 for k, x in v.items())


DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def time_ok(s):
    m = re.fullmatch(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{0,8}[1-9])?Z", s)
    if not m:
        return False
    y, mo, d, h, mi, se = (int(x) for x in m.groups()[:6])
    if not 1 <= mo <= 12:
        return False
    dim = DAYS[mo - 1] + (1 if mo == 2 and y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else 0)
    return 1 <= d <= dim and h <= 23 and mi <= 59 and se <= 59


def tenant_ok(s):
    return 1 <= len(s) <= 128 and all("!" <= c <= "~" for c in s)


def well_formed(o):
    """§1 for an event line already read without an I-JSON violation."""
    names = set(o.keys())
    if not REQUIRED <= names or names - REQUIRED - OPTIONAL:
        return False
    for n in names & STRINGS:
        if type(o[n]) is not str or (n in OPTIONAL and o[n] == ""):
            return False
    sv = read_int(o["schema_version"], MAX_SCHEMA)
    p = o["payload"]
    return (sv is not None and sv >= 1 and isinstance(p, Obj) and payload_ok(p, 1) and size(p) <= MAX_PAYLOAD_BYTES
            and re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", o["id"]) is not None
            and len(o["type"].encode()) <= 256
            and re.fullmatch(r"[a-z][a-z0-9_]*(\.[A-Za-z0-9][A-Za-z0-9_-]*)+", o["type"]) is not None
            and tenant_ok(o["tenant_id"]) and time_ok(o["occurred_at"])
            and re.fullmatch(r"[0-9a-f]{64}", o["prev_hash"]) is not None
            and re.fullmatch(r"[0-9a-f]{64}", o["hash"]) is not None)


def read_head(o, violation):
    if violation or set(o.keys()) != {"head"}:
        return None
    h = o["head"]
    if not isinstance(h, Obj) or set(h.keys()) != {"tenant_id", "last_seq", "last_hash"}:
        return None
    n = read_int(h["last_seq"], MAX_SAFE, signed=False)
    if type(h["tenant_id"]) is not str or type(h["last_hash"]) is not str or n is None:
        return None
    return h["tenant_id"], n, h["last_hash"]


def verify(data, tenant):
    """SPEC.md §6 over an export's bytes: 'intact', '<reason> seq N' or '<reason> line L'."""
    last_seq, last_hash, head, started = 0, None, None, False
    for no, raw in enumerate(data.split(b"\n"), 1):
        b = raw.strip(b" \t\r")
        if len(b) > MAX_LINE:
            return "malformed event line %d" % no
        if not b:
            continue
        if head is not None:
            return "malformed event line %d" % no
        r = read_line(b)
        if r is None:
            return "malformed event line %d" % no
        o, violation = r
        if "head" in o:
            head = read_head(o, violation)
            if head is None:
                return "malformed event line %d" % no
            continue
        ok, v = member(o, "seq")
        seq = read_int(v, MAX_SAFE) if ok else None
        if seq is None:
            return "malformed event line %d" % no
        ok, t = member(o, "tenant_id")
        t_read = ok and type(t) is str and not has_surrogate(t)
        if not started:
            if tenant == "":
                tenant = t if t_read else ""
            last_hash, started = genesis(tenant), True
        if not t_read:
            return "malformed event seq %d" % seq
        if t != tenant:
            return "wrong tenant seq %d" % seq
        if seq == last_seq and last_seq > 0:
            return "duplicate seq seq %d" % seq
        if seq < last_seq + 1:
            return "out of order seq %d" % seq
        if seq > last_seq + 1:
            return "missing seq seq %d" % (last_seq + 1)
        if violation or not well_formed(o):
            return "malformed event seq %d" % seq
        if o["prev_hash"] != last_hash:
            return "prev_hash mismatch seq %d" % seq
        e = Obj([(k, x) for k, x in o.items() if k != "hash"])
        h = hashlib.sha256(b"fourlanes/chain\x00\x01" + bytes.fromhex(last_hash) + jcs(e).encode()).hexdigest()
        if h != o["hash"]:
            return "hash mismatch seq %d" % seq
        last_seq, last_hash = seq, o["hash"]
    if not started:
        if tenant == "" and head is None:
            return "error empty export"
        if tenant == "":
            tenant = head[0]
        last_hash = genesis(tenant)
    if head is None:
        return "intact" if last_seq == 0 else "head mismatch seq %d" % last_seq
    if head != (tenant, last_seq, last_hash):
        return "head mismatch seq %d" % (last_seq + 1 if head[1] > last_seq else last_seq)
    return "intact"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "verify":
        for path in sys.argv[3:]:
            with open(path, "rb") as f:
                print("%s: %s" % (path, verify(f.read(), sys.argv[2])))
    else:
        main_vectors()
