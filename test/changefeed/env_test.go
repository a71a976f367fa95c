package changefeed_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/changefeed"
)

// TestRequireEnv: a function's own variables and every tracked entity's
// table variable must be set; a missing one is named, and a set one maps
// its table to the entity.
func TestRequireEnv(t *testing.T) {
	ents := []catalog.Entity{{Name: "ORDER", TableEnv: "TEST_ORDERS_TABLE"}, {Name: "CART", TableEnv: "TEST_CARTS_TABLE"}}
	t.Setenv("TEST_FEED_TABLE", "feed")
	t.Setenv("TEST_ORDERS_TABLE", "orders")
	t.Setenv("TEST_CARTS_TABLE", "")

	_, _, err := changefeed.RequireEnv(ents, "TEST_FEED_TABLE", "TEST_STATE_TABLE")
	var missing *awsenv.MissingEnvError
	if !errors.As(err, &missing) || !slices.Equal(missing.Names, []string{"TEST_STATE_TABLE", "TEST_CARTS_TABLE"}) {
		t.Fatalf("got %v, want both unset variables named", err)
	}

	t.Setenv("TEST_STATE_TABLE", "state")
	t.Setenv("TEST_CARTS_TABLE", "carts")
	names := make([]string, 2, 8) // spare capacity: RequireEnv must not write into it
	copy(names, []string{"TEST_FEED_TABLE", "TEST_STATE_TABLE"})
	env, tables, err := changefeed.RequireEnv(ents, names...)
	if err != nil {
		t.Fatal(err)
	}
	if env["TEST_FEED_TABLE"] != "feed" || env["TEST_STATE_TABLE"] != "state" ||
		tables["orders"].Name != "ORDER" || tables["carts"].Name != "CART" || len(tables) != 2 {
		t.Fatalf("env %v, tables %v", env, tables)
	}
	if extra := names[:cap(names)][2:4]; extra[0] != "" || extra[1] != "" {
		t.Errorf("RequireEnv appended into the caller's slice: %q", extra)
	}
}
