// Package payloads is a fixture of payload types: Rich uses every kind a
// payload may hold (the gate's schema of it is want/widget.made/v1.json);
// the others have no JSON Schema.
package payloads

import (
	"context"
	"encoding/json"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// Part is an element of Rich.Parts.
type Part struct {
	SKU string `json:"sku"`
	Qty int32  `json:"qty"`
}

// Base is embedded in Rich: its fields are Rich's.
type Base struct {
	ID string `json:"id"`
}

// Extra is embedded by pointer: its fields are optional.
type Extra struct {
	Batch string `json:"batch"`
}

// Code decodes itself from a JSON string.
type Code int

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Code) UnmarshalText(b []byte) error { *c = Code(len(b)); return nil }

// Rich is widget.made v1.
type Rich struct {
	Base
	*Extra
	Count    int              `json:"count"`
	Small    uint8            `json:"small"`
	Price    float64          `json:"price"`
	Done     bool             `json:"done"`
	Parts    []Part           `json:"parts"`
	Pair     [2]string        `json:"pair"`
	Blob     []byte           `json:"blob,omitempty"`
	At       time.Time        `json:"at"`
	Note     string           `json:"note,omitempty"`
	Ref      *string          `json:"ref"`
	Labels   map[string]int64 `json:"labels,omitempty"`
	Maybe    []*Part          `json:"maybe,omitzero"`
	Any      any              `json:"any,omitempty"`
	Held     any              `json:"held"` // required: present, null allowed
	Lot      string           `json:"lot"`
	Code     Code             `json:"code"`
	Raw      json.RawMessage  `json:"raw,omitempty"`
	Skipped  string           `json:"-"`
	Untagged string
	hidden   int
}

// Chan has a field JSON cannot carry.
type Chan struct {
	C chan int `json:"c"`
}

// Loop contains itself.
type Loop struct {
	Next *Loop `json:"next"`
}

// Quoted uses the ",string" option.
type Quoted struct {
	N int `json:"n,string"`
}

// Module declares the fixture's types.
var Module = catalog.Module[catalog.NoHandlers]{
	Name: "widgets",
	Emits: []catalog.EventType{
		{Name: "widget.made", Doc: "A widget was made.", Versions: []catalog.Version{catalog.V[Rich](1)}},
		{Name: "widget.broken", Versions: []catalog.Version{
			catalog.V[Chan](1),   // want (5) "widget.broken v1: payload payloads.Chan has no JSON Schema: field c: has Go type chan int, which JSON cannot carry"
			catalog.V[Loop](2),   // want (5) "widget.broken v2: payload payloads.Loop has no JSON Schema: field next: type github.com/fourlanes/fourlanes/pkg/catalog/gate/testdata/payloads.Loop contains itself"
			catalog.V[Quoted](3), // want (5) "uses the json \",string\" option"
		}},
	},
}

// Service emits.
type Service struct{ Store *eventstore.Store }

// Make emits both types.
func (s *Service) Make(ctx context.Context) error {
	if _, err := s.Store.Emit(ctx, "widget.made", Rich{}); err != nil {
		return err
	}
	_, err := s.Store.Emit(ctx, "widget.broken", Quoted{})
	return err
}
