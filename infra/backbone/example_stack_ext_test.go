package backbone_test

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/fourlanes/fourlanes/examples/orders/infra/stack"
	"github.com/fourlanes/fourlanes/infra/backbone"
)

// The package's tests synthesize the orders example's real stack (see
// example_test_hook_test.go), and its pinned IDs are the test's.
func init() {
	if stack.LogicalOrdersTable != backbone.LogicalOrdersTable || stack.LogicalSearchTable != backbone.LogicalSearchTable ||
		stack.OutputOrdersTable != backbone.OutputOrdersTable {
		panic("infra/backbone tests: the example's pinned logical IDs differ from examples/orders/infra/stack's")
	}
	backbone.SetExampleStack(func(app awscdk.App, id string, props *backbone.Props) (awscdk.Stack, *backbone.Backbone) {
		s := stack.NewStack(app, id, props)
		return s.Stack, s.Backbone
	})
}
