package ddb

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
	"github.com/google/btree"
)

// What the log (wal.go) and snapshots keep of a table, and the reader of the JSON
// state file of earlier versions, which a DataDir holding one is upgraded from.

type persistedState struct {
	Version int
	Saved   time.Time
	Tables  []persistedTable `json:",omitempty"`
	Streams json.RawMessage  `json:",omitempty"`
}

type persistedIndex struct {
	Name           string
	Global         bool
	Hash, Range    KeyDef
	ProjectionType string
	NonKey         []string `json:",omitempty"`
	Status         string   `json:",omitempty"` // "" in earlier versions: ACTIVE
	Online         bool     `json:",omitempty"`
}

type persistedTable struct {
	Name, ARN, ID string
	Created       time.Time
	Hash, Range   KeyDef
	AttrDefs      []KeyDef
	GSIs, LSIs    []persistedIndex `json:",omitempty"`
	TTLAttr       string           `json:",omitempty"`
	Billing       string
	StreamView    string    `json:",omitempty"` // the enabled stream's view type
	StreamARN     string    `json:",omitempty"` // the enabled stream
	StreamLabel   string    `json:",omitempty"`
	StreamCreated time.Time `json:",omitempty"`
	StreamARNs    []string  `json:",omitempty"` // every stream the table has had
	// Items only in the JSON state of earlier versions; snapshots keep them in binary.
	Items []attr.Item `json:",omitempty"`
}

// tableSnap is one table's definition and a copy-on-write clone of its items.
type tableSnap struct {
	head  persistedTable
	items *btree.BTreeG[*entry]
}

func persistIndex(ix *Index) persistedIndex {
	return persistedIndex{Name: ix.Name, Global: ix.Global, Hash: ix.Hash, Range: ix.Range, ProjectionType: ix.ProjectionType,
		NonKey: ix.NonKey, Status: ix.status, Online: ix.online}
}

func restoreIndex(pi persistedIndex) *Index {
	status := pi.Status
	if status == "" {
		status = indexActive
	}
	return &Index{Name: pi.Name, Global: pi.Global, Hash: pi.Hash, Range: pi.Range, ProjectionType: pi.ProjectionType,
		NonKey: pi.NonKey, items: newTree(), status: status, online: pi.Online}
}

// loadFile reads the JSON state file of earlier versions into the (empty) DB.
func (p *persister) loadFile() error {
	f, err := os.Open(filepath.Join(p.dir, stateFile))
	if err != nil {
		return err
	}
	defer f.Close()
	var st persistedState
	if err := json.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(&st); err != nil {
		return fmt.Errorf("decoding %s: %w", stateFile, err)
	}
	if st.Version != stateVersion {
		return fmt.Errorf("%s has version %d, want %d", stateFile, st.Version, stateVersion)
	}
	db := p.db
	if len(st.Streams) > 0 {
		if err := db.streams.restore(st.Streams); err != nil {
			return fmt.Errorf("restoring the streams: %w", err)
		}
	}
	for _, pt := range st.Tables {
		t := newRestoredTable(pt)
		for _, it := range pt.Items {
			t.writeLocked(t.KeyItem(it), it, nil, pt.Created, nil) // no stream linked yet: no records
		}
		linkStreams(db, t, pt)
		db.mu.Lock()
		db.tables[t.Name] = t
		db.mu.Unlock()
	}
	return nil
}
