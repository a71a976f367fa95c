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
//   - A payload is read into its Go type by one rule (fit.go), strict at an
//     emit (CheckPayload: no member the type lacks) and tolerant in a reader
//     (DecodePayload: unknown members ignored); in both, a required field
//     that is missing or null, or a value of the wrong kind, is an error
//     naming the field, never a zero value.
package envelope
