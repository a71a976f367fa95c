// Package eventpattern evaluates EventBridge event patterns (the content
// filters of rules and of Pipes' FilterCriteria) and resolves the JSON paths
// that Pipes' dynamic parameters use, such as "$.tenant_id".
//
// It exists so that a filter or a target path read from the synthesized
// CloudFormation template can be checked against real sample records, in tests
// and in the local twin, instead of trusting a copied string.
//
// It promises the semantics of EventBridge's matcher (aws/event-ruler,
// rulesForJSONEvent) for this subset:
//
//   - exact match of strings, numbers (numerically: 300 matches 300.0),
//     booleans and null;
//   - prefix, suffix and equals-ignore-case (alone or inside prefix/suffix),
//     wildcard;
//   - anything-but with a string, a number, a list of either, or a prefix,
//     suffix, equals-ignore-case or wildcard; it never matches an absent field;
//   - numeric with "=", or a lower and/or upper bound ("<", "<=", ">", ">=");
//   - exists true/false, on leaf values only (a field whose value is an object
//     does not "exist" as a leaf);
//   - nested objects, "$or" (two or more objects), and OR semantics for the
//     values listed for a field;
//   - an array in the event matches if any element matches, and all fields of
//     one object pattern must match within the same array element ("array
//     consistency").
//
// Differences from event-ruler, all deliberate: field names are walked
// structurally, so a key containing a dot is not the same as a nested path;
// exact-match strings that look like IP addresses are not turned into CIDR
// ranges; numeric ranges are not limited to ±5e9; exists:false under an
// array of objects is judged per element.
//
// Compile with ForPipes to refuse what Pipes' filters do not accept (the
// "Pipe support: No" rows of the EventBridge comparison-operator table and
// patterns longer than 4096 bytes), so a pattern that AWS would reject at
// deploy time is rejected locally too.
package eventpattern
