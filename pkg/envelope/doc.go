// Package envelope defines the one event shape of fourlanes, its validation,
// its canonical bytes (RFC 8785, JSON Canonicalization Scheme) and its
// conversions: envelope ⇄ DynamoDB item, and DynamoDB stream image → envelope
// (both the aws-lambda-go typed image and the raw stream JSON a Pipe delivers).
//
// It promises:
//   - Optional fields (correlation_id, causation_id, actor_id) are absent when
//     unset, never empty strings, in JSON and in the item alike.
//   - Payload values are only nil, bool, string, json.Number, []any and
//     map[string]any, and every number is exact in IEEE 754 binary64 (I-JSON).
//   - For any valid envelope, CanonicalBytes is identical after
//     item → stream image → envelope, so a hash recomputed downstream matches.
package envelope
