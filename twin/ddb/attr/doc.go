// Package attr is DynamoDB's data: attribute values and items as the JSON 1.0 wire
// protocol carries them, numbers to 38 significant digits (cockroachdb/apd), DynamoDB's
// key order and equality, and item size by AWS's rule. The server (package ddb) and the
// expression interpreter (package expr) share it.
package attr
