#!/usr/bin/env python3
"""boto3 check of the twin's own DynamoDB.

Usage: boto3_check.py ENDPOINT

A second SDK (boto3/botocore, the other client real users have) against the same server
the Go parity suite (twin/ddb/parity_*_test.go) drives through aws-sdk-go-v2:
it writes and reads the items the Go suite writes and expects the same answers and the
same errors. botocore also checks what the Go SDK checks differently: the x-amz-crc32
of every response, the error shapes (ConditionalCheckFailedException's Item,
TransactionCanceledException's CancellationReasons), base64 binaries, Streams records.

Exits 0 when everything matches; otherwise prints the first mismatch (with the AWS
documentation page the expectation follows) and exits 1.
"""

import os
import sys

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

DOCS = "https://docs.aws.amazon.com/amazondynamodb/latest"
CHECKS = 0


class Mismatch(Exception):
    pass


def check(what, got, want, doc):
    global CHECKS
    CHECKS += 1
    if got != want:
        raise Mismatch(f"{what}: got {got!r}, want {want!r} (doc {doc})")


def norm(v):
    """A value in a canonical form: sets sorted, so set order never matters."""
    if isinstance(v, dict):
        if len(v) == 1:
            (k, x), = v.items()
            if k in ("SS", "NS", "BS"):
                return {k: sorted(x)}
            if k == "M":
                return {"M": {kk: norm(vv) for kk, vv in x.items()}}
            if k == "L":
                return {"L": [norm(e) for e in x]}
        return {kk: norm(vv) for kk, vv in v.items()}
    return v


def expect_error(what, fn, code, doc, *fragments):
    """Calls fn, which must fail with code and a message containing every fragment.
    Returns the error response."""
    global CHECKS
    CHECKS += 1
    try:
        fn()
    except ClientError as e:
        got = e.response["Error"]["Code"]
        msg = e.response["Error"].get("Message", "")
        if got != code:
            raise Mismatch(f"{what}: got error {got} ({msg}), want {code} (doc {doc})")
        for f in fragments:
            if f not in msg:
                raise Mismatch(f"{what}: got message {msg!r}, want it to contain {f!r} (doc {doc})")
        return e.response
    raise Mismatch(f"{what}: got success, want {code} (doc {doc})")


def seed(pk):
    """The same item as exprSeed in parity_expr_test.go."""
    return {
        "pk": {"S": pk},
        "s": {"S": "hello world"},
        "n": {"N": "10"},
        "neg": {"N": "-5"},
        "b": {"B": b"\x01\x02\x03"},
        "t": {"BOOL": True},
        "nul": {"NULL": True},
        "l": {"L": [{"S": "a"}, {"N": "2"}, {"M": {"m": {"S": "x"}}}]},
        "m": {"M": {"a": {"M": {"b": {"M": {"c": {"S": "deep"}}}}}, "n": {"N": "1"}}},
        "ss": {"SS": ["a", "b", "c"]},
        "ns": {"NS": ["1", "2", "3"]},
        "bs": {"BS": [b"\x01", b"\x02"]},
        "a.b": {"S": "dotted"},
        "status": {"S": "active"},
        "es": {"S": ""},
    }


def main(endpoint):
    cfg = Config(retries={"max_attempts": 1, "mode": "standard"})
    kw = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="AKIDBOTO3",
              aws_secret_access_key="boto3-secret", config=cfg)
    c = boto3.client("dynamodb", **kw)
    st = boto3.client("dynamodbstreams", **kw)
    suffix = str(os.getpid())

    def table(name, keys, stream=None):
        args = dict(TableName=name, BillingMode="PAY_PER_REQUEST",
                    KeySchema=[{"AttributeName": k, "KeyType": kt} for k, _, kt in keys],
                    AttributeDefinitions=[{"AttributeName": k, "AttributeType": t} for k, t, _ in keys])
        if stream:
            args["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream}
        c.create_table(**args)
        return name

    tbl = table("boto3-parity-" + suffix, [("pk", "S", "HASH")], stream="NEW_AND_OLD_IMAGES")
    try:
        run(c, st, tbl, table, suffix)
    finally:
        for name in [t for t in c.list_tables()["TableNames"] if t.endswith(suffix)]:
            c.delete_table(TableName=name)


def run(c, st, tbl, table, suffix):
    # ---- items written and read back (TestParityConditionOperators' seed) ----
    item = seed("e1")
    c.put_item(TableName=tbl, Item=item)
    got = c.get_item(TableName=tbl, Key={"pk": {"S": "e1"}}, ConsistentRead=True).get("Item")
    check("GetItem of the seed item", norm(got), norm(item), f"{DOCS}/APIReference/API_GetItem.html")

    # ---- conditions as filters (a subset of TestParityConditionOperators) ----
    ops = f"{DOCS}/developerguide/Expressions.OperatorsAndFunctions.html"
    filters = [
        ("n = :v", {":v": {"N": "10"}}, None, True),
        ("n = :v", {":v": {"S": "10"}}, None, False),
        ("n BETWEEN :a AND :b", {":a": {"N": "9"}, ":b": {"N": "11"}}, None, True),
        ("n IN (:a, :b)", {":a": {"N": "1"}, ":b": {"N": "2"}}, None, False),
        ("begins_with(b, :v)", {":v": {"B": b"\x01\x02"}}, None, True),
        ("contains(ss, :v)", {":v": {"S": "a"}}, None, True),
        ("contains(l, :v)", {":v": {"S": "a"}}, None, True),
        ("size(s) = :v", {":v": {"N": "11"}}, None, True),
        ("attribute_type(nul, :v)", {":v": {"S": "NULL"}}, None, True),
        ("l[2].m = :v", {":v": {"S": "x"}}, None, True),
        ("#d = :v", {":v": {"S": "dotted"}}, {"#d": "a.b"}, True),
        ("n = :ten OR n = :one AND s = :nope", {":ten": {"N": "10"}, ":one": {"N": "1"}, ":nope": {"S": "nope"}}, None, True),
    ]
    for expr, values, names, want in filters:
        args = dict(TableName=tbl, KeyConditionExpression="pk = :pk", FilterExpression=expr,
                    ExpressionAttributeValues=dict(values, **{":pk": {"S": "e1"}}), ConsistentRead=True)
        if names:
            args["ExpressionAttributeNames"] = names
        out = c.query(**args)
        check(f"filter {expr}", out["Count"] == 1, want, ops)
        check(f"filter {expr} ScannedCount", out["ScannedCount"], 1, f"{DOCS}/developerguide/Query.Other.html")

    # ---- updates (a subset of TestParityUpdateExpressions) ----
    upd = f"{DOCS}/developerguide/Expressions.UpdateExpressions.html"
    updates = [
        ("SET n = n + :v", {":v": {"N": "1"}}, {"n": {"N": "11"}}, []),
        ("SET l = list_append(l, :v)", {":v": {"L": [{"S": "y"}]}},
         {"l": {"L": [{"S": "a"}, {"N": "2"}, {"M": {"m": {"S": "x"}}}, {"S": "y"}]}}, []),
        ("SET l[10] = :v", {":v": {"S": "x"}}, {"l": {"L": [{"S": "a"}, {"N": "2"}, {"M": {"m": {"S": "x"}}}, {"S": "x"}]}}, []),
        ("SET c = if_not_exists(c, :z) + :one", {":z": {"N": "0"}, ":one": {"N": "1"}}, {"c": {"N": "1"}}, []),
        ("REMOVE l[0], m.a.b.c", None, {"l": {"L": [{"N": "2"}, {"M": {"m": {"S": "x"}}}]},
                                       "m": {"M": {"a": {"M": {"b": {"M": {}}}}, "n": {"N": "1"}}}}, []),
        ("ADD ss :v, n :one", {":v": {"SS": ["d"]}, ":one": {"N": "1"}}, {"ss": {"SS": ["a", "b", "c", "d"]}, "n": {"N": "11"}}, []),
        ("DELETE ss :v", {":v": {"SS": ["a", "b", "c"]}}, {}, ["ss"]),
    ]
    for expr, values, changes, removed in updates:
        c.put_item(TableName=tbl, Item=seed("u"))
        args = dict(TableName=tbl, Key={"pk": {"S": "u"}}, UpdateExpression=expr, ReturnValues="ALL_NEW")
        if values:
            args["ExpressionAttributeValues"] = values
        out = c.update_item(**args)
        want = seed("u")
        want.update(changes)
        for r in removed:
            del want[r]
        check(f"update {expr}", norm(out["Attributes"]), norm(want), upd)

    # ---- projection ----
    out = c.get_item(TableName=tbl, Key={"pk": {"S": "e1"}}, ProjectionExpression="l[2].m, l[0], m.a.b.c")
    check("projection l[2].m, l[0], m.a.b.c", norm(out["Item"]),
          norm({"l": {"L": [{"S": "a"}, {"M": {"m": {"S": "x"}}}]}, "m": {"M": {"a": {"M": {"b": {"M": {"c": {"S": "deep"}}}}}}}}),
          f"{DOCS}/developerguide/Expressions.ProjectionExpressions.html")

    # ---- ConditionalCheckFailedException with the old item ----
    old = {"pk": {"S": "c"}, "v": {"N": "1"}, "tags": {"SS": ["x"]}}
    c.put_item(TableName=tbl, Item=old)
    resp = expect_error("PutItem failed condition, ALL_OLD",
                        lambda: c.put_item(TableName=tbl, Item={"pk": {"S": "c"}}, ConditionExpression="attribute_not_exists(pk)",
                                           ReturnValuesOnConditionCheckFailure="ALL_OLD"),
                        "ConditionalCheckFailedException", f"{DOCS}/APIReference/API_PutItem.html", "The conditional request failed")
    check("ConditionalCheckFailedException Item", norm(resp.get("Item")), norm(old), f"{DOCS}/APIReference/API_PutItem.html")
    resp = expect_error("PutItem failed condition, no ReturnValuesOnConditionCheckFailure",
                        lambda: c.put_item(TableName=tbl, Item={"pk": {"S": "c"}}, ConditionExpression="attribute_not_exists(pk)"),
                        "ConditionalCheckFailedException", f"{DOCS}/APIReference/API_PutItem.html")
    check("ConditionalCheckFailedException Item when not asked", resp.get("Item"), None, f"{DOCS}/APIReference/API_PutItem.html")

    # ---- TransactionCanceledException with CancellationReasons ----
    tx = f"{DOCS}/APIReference/API_TransactWriteItems.html"
    resp = expect_error("cancelled transaction", lambda: c.transact_write_items(TransactItems=[
        {"Put": {"TableName": tbl, "Item": {"pk": {"S": "tx-new"}}}},
        {"Update": {"TableName": tbl, "Key": {"pk": {"S": "c"}}, "UpdateExpression": "SET v = :two",
                    "ConditionExpression": "v = :nine", "ExpressionAttributeValues": {":two": {"N": "2"}, ":nine": {"N": "9"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        {"ConditionCheck": {"TableName": tbl, "Key": {"pk": {"S": "nothing"}}, "ConditionExpression": "attribute_not_exists(pk)"}},
    ]), "TransactionCanceledException", tx, "[None, ConditionalCheckFailed, None]")
    reasons = resp.get("CancellationReasons")
    check("CancellationReasons codes", [r.get("Code") for r in reasons or []], ["None", "ConditionalCheckFailed", "None"], tx)
    check("CancellationReasons[1].Item", norm(reasons[1].get("Item")), norm(old), tx)
    check("CancellationReasons[1].Message", reasons[1].get("Message"), "The conditional request failed", tx)
    check("cancelled transaction wrote nothing", c.get_item(TableName=tbl, Key={"pk": {"S": "tx-new"}}, ConsistentRead=True).get("Item"),
          None, f"{DOCS}/developerguide/transaction-apis.html")
    expect_error("two actions on one item", lambda: c.transact_write_items(TransactItems=[
        {"Put": {"TableName": tbl, "Item": {"pk": {"S": "same"}}}},
        {"Delete": {"TableName": tbl, "Key": {"pk": {"S": "same"}}}},
    ]), "ValidationException", tx, "Transaction request cannot include multiple operations on one item")
    expect_error("same ClientRequestToken, other parameters", lambda: [
        c.transact_write_items(ClientRequestToken="boto3-token", TransactItems=[{"Put": {"TableName": tbl, "Item": {"pk": {"S": "tok"}}}}]),
        c.transact_write_items(ClientRequestToken="boto3-token", TransactItems=[{"Put": {"TableName": tbl, "Item": {"pk": {"S": "tok2"}}}}]),
    ], "IdempotentParameterMismatchException", tx)

    # ---- ValidationException wording (TestParityExpressionErrors, TestParity*Limits) ----
    cons = f"{DOCS}/developerguide/ServiceQuotas.html"
    types_doc = f"{DOCS}/developerguide/HowItWorks.NamingRulesDataTypes.html"
    put = lambda it: (lambda: c.put_item(TableName=tbl, Item=it))
    errors = [
        ("reserved word", lambda: c.put_item(TableName=tbl, Item={"pk": {"S": "r"}}, ConditionExpression="status = :v",
                                             ExpressionAttributeValues={":v": {"S": "x"}}),
         ["Attribute name is a reserved keyword; reserved keyword: status"], f"{DOCS}/developerguide/ReservedWords.html"),
        ("unused value", lambda: c.put_item(TableName=tbl, Item={"pk": {"S": "r"}}, ConditionExpression="attribute_not_exists(pk)",
                                            ExpressionAttributeValues={":unused": {"S": "x"}}),
         ["Value provided in ExpressionAttributeValues unused in expressions: keys: {:unused}"], f"{DOCS}/developerguide/Expressions.ExpressionAttributeValues.html"),
        ("undefined name", lambda: c.put_item(TableName=tbl, Item={"pk": {"S": "r"}}, ConditionExpression="attribute_not_exists(#x)"),
         ["An expression attribute name used in the document path is not defined; attribute name: #x"], f"{DOCS}/developerguide/Expressions.ExpressionAttributeNames.html"),
        ("item of 400 KB + 1", put({"pk": {"S": "k"}, "d": {"S": "x" * (409600 - 4 + 1)}}),
         ["Item size has exceeded the maximum allowed size"], cons),
        ("partition key of 2049 bytes", put({"pk": {"S": "p" * 2049}}), ["Size of hashkey has exceeded the maximum size limit of"], cons),
        ("empty partition key", put({"pk": {"S": ""}}),
         ["The AttributeValue for a key attribute cannot contain an empty string value. Key: pk"], types_doc),
        ("39 significant digits", put({"pk": {"S": "k"}, "v": {"N": "1" * 39}}),
         ["Attempting to store more than 38 significant digits in a Number"], types_doc),
        ("number overflow", put({"pk": {"S": "k"}, "v": {"N": "1E+126"}}), ["Number overflow"], types_doc),
        ("number underflow", put({"pk": {"S": "k"}, "v": {"N": "1E-131"}}), ["Number underflow"], types_doc),
        ("empty set", put({"pk": {"S": "k"}, "v": {"SS": []}}), ["may not be empty"], types_doc),
        ("duplicate set members", put({"pk": {"S": "k"}, "v": {"SS": ["a", "a"]}}), ["contains duplicates"], types_doc),
        ("wrong key type", put({"pk": {"N": "1"}}), ["Type mismatch for key pk expected: S actual: N"], f"{DOCS}/APIReference/API_PutItem.html"),
    ]
    for what, fn, fragments, doc in errors:
        expect_error(what, fn, "ValidationException", doc, *fragments)
    c.put_item(TableName=tbl, Item={"pk": {"S": "k"}, "d": {"S": "x" * (409600 - 4)}})  # exactly 400 KB: accepted

    # ---- consumed capacity ----
    out = c.put_item(TableName=tbl, Item={"pk": {"S": "w"}, "d": {"S": "x" * (1025 - 3 - 1)}}, ReturnConsumedCapacity="TOTAL")
    check("PutItem of 1,025 bytes consumes", out["ConsumedCapacity"]["CapacityUnits"], 2.0, f"{DOCS}/developerguide/read-write-operations.html")
    out = c.get_item(TableName=tbl, Key={"pk": {"S": "w"}}, ReturnConsumedCapacity="TOTAL")
    check("eventually consistent GetItem of 1,025 bytes consumes", out["ConsumedCapacity"]["CapacityUnits"], 0.5,
          f"{DOCS}/developerguide/read-write-operations.html")

    # ---- key order (TestParityKeyOrder) ----
    q = f"{DOCS}/APIReference/API_Query.html"
    for typ, ordered in [
        ("S", [{"S": v} for v in ["A", "a", "z", "\u00e9", "\u20ac", "\uff21", "\U0001F600"]]),
        ("N", [{"N": v} for v in ["-100", "-10", "-1.5", "0", "0.001", "2", "10", "100", "1500"]]),
        ("B", [{"B": v} for v in [b"\x00", b"\x01", b"\x7f", b"\x80", b"\xff", b"\xff\x00"]]),
    ]:
        kt = table(f"boto3-order-{typ}-{suffix}", [("pk", "S", "HASH"), ("sk", typ, "RANGE")])
        for i, v in reversed(list(enumerate(ordered))):
            c.put_item(TableName=kt, Item={"pk": {"S": "k"}, "sk": v, "rk": {"N": str(i)}})
        out = c.query(TableName=kt, KeyConditionExpression="pk = :k", ExpressionAttributeValues={":k": {"S": "k"}})
        check(f"{typ} sort key order", [int(it["rk"]["N"]) for it in out["Items"]], list(range(len(ordered))), q)

    # ---- paging (TestParityPaging: Limit 5 over 10 items ends with an empty page) ----
    pt = table(f"boto3-paging-{suffix}", [("pk", "S", "HASH"), ("sk", "N", "RANGE")])
    for i in range(1, 11):
        c.put_item(TableName=pt, Item={"pk": {"S": "p"}, "sk": {"N": str(i)}})
    pages, start = [], None
    while True:
        args = dict(TableName=pt, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}}, Limit=5)
        if start:
            args["ExclusiveStartKey"] = start
        out = c.query(**args)
        pages.append([int(it["sk"]["N"]) for it in out["Items"]])
        start = out.get("LastEvaluatedKey")
        if not start or len(pages) > 10:
            break
    check("Limit 5 pages", pages, [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10], []], f"{DOCS}/developerguide/Query.Pagination.html")

    # ---- streams: what the writes above left in the table's stream ----
    arn = st.list_streams(TableName=tbl)["Streams"][0]["StreamArn"]
    shards = st.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    records = []
    for sh in shards:
        it = st.get_shard_iterator(StreamArn=arn, ShardId=sh["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            out = st.get_records(ShardIterator=it)
            records += out["Records"]
            if not out["Records"]:
                break
            it = out.get("NextShardIterator")
    first = records[0]
    sd = f"{DOCS}/developerguide/Streams.html"
    check("first record eventName", first["eventName"], "INSERT", sd)
    check("first record NewImage", norm(first["dynamodb"]["NewImage"]), norm(seed("e1")), sd)
    check("first record eventSource", first["eventSource"], "aws:dynamodb", sd)
    names = {r["eventName"] for r in records}
    check("event names seen", sorted(names), ["INSERT", "MODIFY"], sd)
    print(f"boto3 check: ok ({CHECKS} checks, {len(records)} stream records)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: boto3_check.py ENDPOINT", file=sys.stderr)
        sys.exit(2)
    try:
        main(sys.argv[1])
    except Mismatch as e:
        print(f"boto3 check: MISMATCH: {e}", file=sys.stderr)
        sys.exit(1)
    except ClientError as e:
        print(f"boto3 check: MISMATCH: unexpected error {e.response['Error'].get('Code')}: {e} ", file=sys.stderr)
        sys.exit(1)
