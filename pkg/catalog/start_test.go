package catalog_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
)

// TestStartDeclarations: a DURABLE subscription may declare its start; a
// start elsewhere, or one that cannot be, is refused naming the
// subscription and what to write.
func TestStartDeclarations(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		start catalog.Start
		lane  catalog.Lane
		want  string // "" = accepted
	}{
		{"live, the default", catalog.Start{}, catalog.Durable, ""},
		{"a seq", catalog.FromSeq(5), catalog.Durable, ""},
		{"a time", catalog.FromTime(at), catalog.Durable, ""},
		{"all", catalog.FromAll(), catalog.Durable, ""},
		{"seq 0", catalog.FromSeq(0), catalog.Durable, "seqs begin at 1"},
		{"zero time", catalog.Start{Kind: catalog.StartTime}, catalog.Durable, "Start.Time is zero"},
		{"unknown kind", catalog.Start{Kind: "soon"}, catalog.Durable, `Start.Kind "soon"`},
		{"a start on INLINE", catalog.FromSeq(5), catalog.Inline, "only DURABLE subscriptions have a start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := module()
			for i := range m.Subscribes {
				if m.Subscribes[i].Lane == tc.lane {
					m.Subscribes[i].Start = tc.start
				}
			}
			_, err := catalog.New(m.Spec())
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	for _, s := range []catalog.Start{{}, catalog.FromSeq(7), catalog.FromTime(at), catalog.FromAll()} {
		if got, err := catalog.ParseStart(s.String()); err != nil || got != s {
			t.Errorf("ParseStart(%q) = %+v, %v; want %+v", s.String(), got, err, s)
		}
	}
	if _, err := catalog.ParseStart("seq:0"); err == nil {
		t.Error("ParseStart(seq:0) accepted")
	}
}
