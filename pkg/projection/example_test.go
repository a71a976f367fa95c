package projection_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/projection"
)

// A projection of loans: a late older write and a late write after the
// delete change nothing.
func ExampleProjector() {
	p := &projection.Projector{
		Name:   "shelf",
		Entity: "LOAN",
		Store:  projection.NewMemory(), // projection.Table in a function
		Shape: func(loan map[string]any) (map[string]any, error) {
			return map[string]any{"on_shelf": loan["status"] == "returned"}, nil
		},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: obs.NewMetrics(io.Discard), // nil: EMF on stdout
	}
	ctx := context.Background()
	for _, c := range []projection.Change{
		{Entity: "LOAN", ID: "l1", Version: 2, Item: map[string]any{"status": "returned"}}, // early: parked
		{Entity: "LOAN", ID: "l1", Version: 1, Item: map[string]any{"status": "open"}},     // closes the gap
		{Entity: "LOAN", ID: "l1", Version: 1, Item: map[string]any{"status": "open"}},     // a duplicate
	} {
		if err := p.Apply(ctx, "t1", c); err != nil {
			fmt.Println(err)
		}
	}
	r, _, _ := p.Store.Get(ctx, "t1", "LOAN", "l1")
	fmt.Println(r.Version, r.Item["on_shelf"])

	_ = p.Apply(ctx, "t1", projection.Change{Entity: "LOAN", ID: "l1", Version: 2, Deleted: true})
	_ = p.Apply(ctx, "t1", projection.Change{Entity: "LOAN", ID: "l1", Version: 2, Item: map[string]any{"status": "returned"}})
	r, _, _ = p.Store.Get(ctx, "t1", "LOAN", "l1")
	fmt.Println(r.Version, r.Deleted)
	// Output:
	// 2 true
	// 2 true
}
