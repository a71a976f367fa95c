package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// stackFlags is a command's flag set with -table, -state-table and, when
// chooser, -backbone, parsed from args.
func stackFlags(t *testing.T, chooser bool, args ...string) (*flag.FlagSet, *string, *string) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	table := fs.String("table", "", "")
	state := fs.String("state-table", "", "")
	if chooser {
		fs.String(backboneFlag, "", backboneHelp)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs, table, state
}

func visited(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// TestBackboneOf: -stack finds one backbone's outputs: the only one without
// more flags (a stack deployed before backbones had ids included), the one
// -backbone names (by id or prefix; Default for the unprefixed one) among
// several. Among several without -backbone, an output that is needed is a
// usage error that lists them and says what to pass; one given as a flag is
// not needed.
func TestBackboneOf(t *testing.T) {
	legacy := map[string]string{keys.OutputEventsTable: "events", keys.OutputStateTable: "state", "OrdersTableName": "orders"}
	one := map[string]string{"Library" + keys.OutputEventsTable: "lib-events", "Library" + keys.OutputStateTable: "lib-state"}
	two := map[string]string{
		"Orders" + keys.OutputEventsTable: "orders-events", "Orders" + keys.OutputStateTable: "orders-state",
		"Billing" + keys.OutputEventsTable: "billing-events", "Billing" + keys.OutputStateTable: "billing-state",
	}
	mixed := map[string]string{keys.OutputEventsTable: "events", "Billing" + keys.OutputEventsTable: "billing-events"}
	for _, tt := range []struct {
		name             string
		outputs          map[string]string
		chooser          bool
		args             []string
		table, state     string
		err, fillErr     string // substrings; "" means none
		usage, fillUsage bool
	}{
		{name: "unprefixed", outputs: legacy, table: "events", state: "state"},
		{name: "one prefixed", outputs: one, table: "lib-events", state: "lib-state"},
		{name: "one prefixed, named", outputs: one, chooser: true, args: []string{"-backbone", "Library"}, table: "lib-events", state: "lib-state"},
		{name: "chosen by id", outputs: two, chooser: true, args: []string{"-backbone", "Billing"}, table: "billing-events", state: "billing-state"},
		{name: "chosen by path", outputs: two, chooser: true, args: []string{"-backbone", "Team/Default/Orders"}, err: `no backbone with the prefix "TeamOrders"`, usage: true},
		{name: "the unprefixed one", outputs: mixed, chooser: true, args: []string{"-backbone", "Default"}, table: "events"},
		{name: "unknown", outputs: two, chooser: true, args: []string{"-backbone", "Shipping"}, err: "stack S has no backbone with the prefix \"Shipping\" (it has Billing, Orders)", usage: true},
		{name: "several, not chosen", outputs: two, chooser: true, fillErr: "stack S holds 2 backbones (Billing, Orders): pass -backbone with one of them", fillUsage: true},
		{name: "several, no chooser", outputs: mixed, fillErr: "stack S holds 2 backbones (Default, Billing): this command takes no -backbone: pass its resource flags instead of -stack", fillUsage: true},
		{name: "several, flags given", outputs: two, chooser: true, args: []string{"-table", "t", "-state-table", "s"}, table: "t", state: "s"},
		{name: "missing output", outputs: map[string]string{"Library" + keys.OutputEventsTable: "lib-events"}, table: "lib-events"},
		{name: "nested, chosen by path", outputs: map[string]string{"TeamOrders" + keys.OutputEventsTable: "e", "Billing" + keys.OutputEventsTable: "b"},
			chooser: true, args: []string{"-backbone", "Team/Orders"}, table: "e"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs, table, state := stackFlags(t, tt.chooser, tt.args...)
			so, err := backboneOf(fs, "S", tt.outputs, visited(fs))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || errors.Is(err, ErrUsage) != tt.usage {
					t.Fatalf("err = %v, want one containing %q (usage: %v)", err, tt.err, tt.usage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			errT, errS := so.fill("table", table, keys.OutputEventsTable), so.fill("state-table", state, keys.OutputStateTable)
			if tt.fillErr != "" {
				if errT == nil || !strings.Contains(errT.Error(), tt.fillErr) || errors.Is(errT, ErrUsage) != tt.fillUsage {
					t.Fatalf("fill: %v, want an error containing %q (usage: %v)", errT, tt.fillErr, tt.fillUsage)
				}
				return
			}
			if tt.state == "" {
				if errS == nil || !strings.Contains(errS.Error(), "stack S has no output ") || !strings.Contains(errS.Error(), keys.OutputStateTable+" (for -state-table)") {
					t.Errorf("fill state-table: %v, want the missing output named", errS)
				}
				errS = nil
			}
			if errT != nil || errS != nil {
				t.Fatalf("fill: %v, %v", errT, errS)
			}
			if *table != tt.table || (tt.state != "" && *state != tt.state) {
				t.Errorf("-table %q -state-table %q, want %q %q", *table, *state, tt.table, tt.state)
			}
		})
	}
}

// TestFillNamesThePrefixedOutput: a missing output of a prefixed backbone is
// named as the stack would have it.
func TestFillNamesThePrefixedOutput(t *testing.T) {
	fs, _, _ := stackFlags(t, false)
	so, err := backboneOf(fs, "S", map[string]string{"Library" + keys.OutputEventsTable: "e"}, visited(fs))
	if err != nil {
		t.Fatal(err)
	}
	var fn string
	if err := so.fill("function", &fn, keys.OutputRepairFunction); err == nil || !strings.Contains(err.Error(), "stack S has no output Library"+keys.OutputRepairFunction+" (for -function)") {
		t.Errorf("fill: %v, want it to name LibraryRepairFunctionName", err)
	}
}
