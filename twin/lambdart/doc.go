// Package lambdart runs Lambda functions on this machine the way Lambda
// runs a provided.al2023 function: each execution environment is the
// function's real bootstrap process, started on demand (a cold start), fed
// one invocation at a time through its own Lambda Runtime API listener
// (/2018-06-01/runtime/invocation/next, …/{id}/response, …/{id}/error,
// /2018-06-01/runtime/init/error, and the two Extensions API calls
// aws-lambda-go makes for SIGTERM), and reused while it lives.
//
// It promises Lambda's failure behaviour where a caller can observe it: an
// invocation past the function's timeout kills the process and fails with
// Sandbox.Timedout; a process that dies mid-invocation fails that
// invocation with Runtime.ExitError and is replaced by a fresh one at the
// next invoke; concurrency is capped per function. Kill and KillRequest end
// a process on demand, for tests of what survives a crash.
package lambdart
