// Package expr parses and evaluates DynamoDB expressions for the twin's DynamoDB:
// condition and filter expressions, update expressions, projection expressions and key
// condition expressions, with expression attribute names and values.
//
// It promises AWS's documented grammar and behaviour — document paths with nested maps
// and list indexes, the comparators, BETWEEN, IN, AND/OR/NOT with AWS's precedence,
// the functions, SET/REMOVE/ADD/DELETE, the expression limits and the reserved words —
// and AWS's ValidationException wording for what it refuses (*Error). Numbers are exact
// 38-digit decimals (attr.AddNumbers, attr.Compare); nothing goes through float64.
//
// Sources, cited again beside the code and the tests:
//   - https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html
//   - https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html
//   - https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ProjectionExpressions.html
//   - https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.KeyConditionExpressions.html
//   - https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ExpressionAttributeNames.html
//   - https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.Attributes.html
//   - https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ReservedWords.html
//   - https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-expression-parameters
//
// Parsing is a hand-written lexer and a recursive-descent parser, once per request.
// A parsed Condition, Update, Projection or KeyCondition is never changed after parsing,
// so it may be evaluated from several goroutines; Params belong to one request.
package expr
