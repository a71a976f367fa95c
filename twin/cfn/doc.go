// Package cfn reads a synthesized CloudFormation template the way the local
// twin needs it: resources by type, property values with their intrinsic
// functions (Ref, Fn::GetAtt, Fn::Join, Fn::Select, Fn::Split, Fn::Sub,
// Fn::If and the condition functions, Fn::FindInMap, Fn::Base64) evaluated
// against identities the caller supplies, and the staged code asset of a
// function.
//
// It promises to resolve only what is asked for, so a property the twin does
// not use (an IAM role's ARN, say) never needs an answer, and to name the
// resource and property path in every error.
package cfn
