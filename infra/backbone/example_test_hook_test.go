package backbone

import "github.com/aws/aws-cdk-go/awscdk/v2"

// These tests synthesize the orders example's real stack
// (examples/orders/infra/stack.NewStack) and check it whole. An internal
// test cannot import it (it imports backbone), so the external test package
// hands it in: example_stack_ext_test.go sets exampleStack in its init,
// before any test runs.
var exampleStack func(app awscdk.App, id string, props *Props) *exampleStackT

// exampleStackT is what these tests use of the example's stack.
type exampleStackT struct {
	awscdk.Stack
	*Backbone
}

// SetExampleStack is how the external test package hands the example's
// stack in.
func SetExampleStack(f func(app awscdk.App, id string, props *Props) (awscdk.Stack, *Backbone)) {
	exampleStack = func(app awscdk.App, id string, props *Props) *exampleStackT {
		st, b := f(app, id, props)
		return &exampleStackT{Stack: st, Backbone: b}
	}
}

// The example's pinned logical IDs and output (examples/orders/infra/stack
// holds them and tests them against the real stack too).
const (
	LogicalOrdersTable = "OrdersTable"
	LogicalSearchTable = "SearchTable"
	OutputOrdersTable  = "OrdersTableName"
)
