#!/usr/bin/env python3
"""Independent derivation of the known-answer vectors in vectors.json.

Standard library only, written from SPEC.md, not from the Go code. It is valid
for these vectors because they use only integers, strings, booleans, null and
BMP keys, where sorted(keys) and json.dumps(separators=(",", ":"),
ensure_ascii=False) coincide with RFC 8785. Run: python3 derive.py > vectors.json
"""
import hashlib, json

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
