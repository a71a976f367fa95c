package reconcile

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// cursor is what a resume cursor encodes. It names a walk row; it carries no
// chain position, so it cannot make a walk skip events.
type cursor struct {
	V      int    `json:"v"`
	All    bool   `json:"all,omitempty"` // pages all tenants
	After  string `json:"a,omitempty"`   // all tenants: the last tenant finished
	Tenant string `json:"t,omitempty"`   // the tenant whose walk is in progress
	Walk   string `json:"w,omitempty"`   // its walk row id
	Mode   Mode   `json:"m"`
}

const cursorVersion = 1

func encodeCursor(c cursor) string {
	c.V = cursorVersion
	raw, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("reconcile: marshal cursor: %v", err)) // plain strings and ints
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeCursor(s string) (cursor, error) {
	bad := fmt.Errorf("%w: not a cursor this endpoint returned; pass back the cursor of the previous response unchanged, or omit it to start a new walk", ErrBadCursor)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, bad
	}
	var c cursor
	if err := json.Unmarshal(raw, &c); err != nil || c.V != cursorVersion || (c.Mode != Incremental && c.Mode != Full) {
		return cursor{}, bad
	}
	if !c.All && (c.Tenant == "" || c.Walk == "") || c.All && c.Walk != "" && c.Tenant == "" {
		return cursor{}, bad
	}
	return c, nil
}
