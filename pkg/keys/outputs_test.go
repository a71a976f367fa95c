package keys

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBackbonePrefix(t *testing.T) {
	for _, tt := range []struct{ path, want string }{
		{"Orders", "Orders"},
		{"Default", ""},               // the id a stack deployed before backbones had ids keeps
		{"Team/Orders", "TeamOrders"}, // a backbone inside a team's construct
		{"Team/Default", "Team"},
		{"orders-eu_1", "orderseu1"}, // logical IDs take letters and digits only
		{"TeamOrders", "TeamOrders"}, // the prefix itself, as -backbone takes it
	} {
		if got := BackbonePrefix(tt.path); got != tt.want {
			t.Errorf("BackbonePrefix(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestBackboneOutputs(t *testing.T) {
	outputs := map[string]string{
		// A stack deployed before backbones had ids, one with the id Billing,
		// and an output of the team's own.
		OutputEventsTable: "events", OutputStateTable: "state",
		"Billing" + OutputEventsTable: "billing-events", "Billing" + OutputReconcileURL: "https://billing",
		"OrdersTableName": "orders",
	}
	if diff := cmp.Diff([]string{"", "Billing"}, OutputBackbones(outputs)); diff != "" {
		t.Errorf("OutputBackbones (-want +got):\n%s", diff)
	}
	for prefix, want := range map[string]map[string]string{
		"":        {OutputEventsTable: "events", OutputStateTable: "state"},
		"Billing": {OutputEventsTable: "billing-events", OutputReconcileURL: "https://billing"},
		"Nothing": {},
	} {
		if diff := cmp.Diff(want, BackboneOutputs(outputs, prefix)); diff != "" {
			t.Errorf("BackboneOutputs(%q) (-want +got):\n%s", prefix, diff)
		}
	}
	if OutputBackbones(map[string]string{"OrdersTableName": "orders"}) != nil {
		t.Error("a stack without a backbone's outputs has backbones")
	}
	// Every output a backbone declares is one BackboneOutputs knows.
	for _, name := range []string{OutputReconcileURL, OutputReconcileCallerPolicy, OutputEmitterPolicy, OutputRepairFunction,
		OutputEventsTable, OutputStateTable, OutputDashboard, OutputDurableDLQ, OutputPipeDLQ, OutputChangeFeedDLQ,
		OutputAlarmTopic, OutputCheckpointBucket, OutputCheckpointKey} {
		if !slices.Contains(OutputNames, name) {
			t.Errorf("OutputNames lacks %s", name)
		}
	}
}
