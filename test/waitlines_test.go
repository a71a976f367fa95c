package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// A function's lines reach the stack when the invocation that wrote them
// answers (the twin syncs its output first), but a test that watches
// something else the invocation did (a claim completed in DynamoDB, say) can
// get there before the answer. So a test waits for the line it needs, never
// for some other sign of the invocation.

// waitLines waits until function fn (a logical ID) has logged a line
// containing sub and returns the lines that do.
func (s *stack) waitLines(t *testing.T, fn, sub string) []string {
	t.Helper()
	var lines []string
	eventually(t, 10*time.Second, fmt.Sprintf("a line of %s containing %q", fn, sub), func() (bool, string) {
		lines = s.grep(fn, sub)
		return len(lines) > 0, fmt.Sprintf("%d such lines", len(lines))
	})
	return lines
}

// emailKey is the key of the email effect of event e (notifications'
// effect.Do; the key its "email sent" line names).
func emailKey(e envelope.Envelope) string {
	return effect.Key{EventID: e.ID, Subscription: emailSub, Name: notifications.EffectEmail}.String()
}

// emailsSent counts the "email sent" lines of durable-consumer and
// dlq-repair (which redelivers) per email key.
func (s *stack) emailsSent(t *testing.T) map[string]int {
	t.Helper()
	per := map[string]int{}
	for _, fn := range []string{keys.FnDurableConsumer, keys.FnDLQRepair} {
		id := s.fn[fn]
		for _, line := range s.grep(id, `"msg":"email sent"`) {
			var rec struct {
				Key string `json:"key"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, id+": ")), &rec); err != nil {
				t.Fatalf("email log line %q: %v", line, err)
			}
			per[rec.Key]++
		}
	}
	return per
}

// checkEmailsOnce waits until every event of events has had its email
// (an "email sent" line), then checks that none was sent twice.
func (s *stack) checkEmailsOnce(t *testing.T, events []envelope.Envelope) {
	t.Helper()
	var per map[string]int
	eventually(t, 10*time.Second, "an email line for every event", func() (bool, string) {
		per = s.emailsSent(t)
		for _, e := range events {
			if per[emailKey(e)] == 0 {
				return false, fmt.Sprintf("%s seq %d of %s: no email line", e.Type, e.Seq, e.TenantID)
			}
		}
		return true, ""
	})
	for _, e := range events {
		if n := per[emailKey(e)]; n != 1 {
			t.Errorf("%s seq %d of %s: %d emails sent, want exactly 1", e.Type, e.Seq, e.TenantID, n)
		}
	}
}

// checkEmailsAtLeastOnce waits until every event of events has had its
// email, then checks the at-least-once bound: no email sent more than
// twice, each one sent twice named by a redelivery's WARN (the effect done
// again after an earlier delivery started it and never recorded it done),
// and at least wantTwice of them.
func (s *stack) checkEmailsAtLeastOnce(t *testing.T, events []envelope.Envelope, wantTwice int) {
	t.Helper()
	var per map[string]int
	eventually(t, 10*time.Second, "an email line for every event", func() (bool, string) {
		per = s.emailsSent(t)
		for _, e := range events {
			if per[emailKey(e)] == 0 {
				return false, fmt.Sprintf("%s seq %d of %s: no email line", e.Type, e.Seq, e.TenantID)
			}
		}
		return true, ""
	})
	redone := map[string]bool{}
	for _, fn := range []string{keys.FnDurableConsumer, keys.FnDLQRepair} {
		for _, l := range s.grep(s.fn[fn], "it may happen twice") {
			var rec struct {
				Key string `json:"effect_key"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, s.fn[fn]+": ")), &rec); err == nil {
				redone[rec.Key] = true
			}
		}
	}
	twice := 0
	for _, e := range events {
		switch n := per[emailKey(e)]; {
		case n > 2:
			t.Errorf("%s seq %d of %s: %d emails, want at most 2", e.Type, e.Seq, e.TenantID, n)
		case n == 2 && !redone[emailKey(e)]:
			t.Errorf("%s seq %d of %s: sent twice with no redelivery saying it may be", e.Type, e.Seq, e.TenantID)
		case n == 2:
			twice++
		}
	}
	if twice < wantTwice {
		t.Errorf("emails sent twice: %d, want at least %d (the one the kill caught between send and record)", twice, wantTwice)
	}
	t.Logf("%d events: every email sent, %d twice (each named by a redelivery), redone effects logged: %d", len(events), twice, len(redone))
}

// waitMetric waits until function fn (keys.Fn*) has emitted an EMF value of
// metric, with the Subscription dimension sub, for which ok holds (want
// says what ok wants, for the failure message).
func (s *stack) waitMetric(t *testing.T, fn, metric, sub, want string, ok func(float64) bool) {
	t.Helper()
	id := s.fn[fn]
	eventually(t, 10*time.Second, fmt.Sprintf("%s of %s for %s: %s", metric, fn, sub, want), func() (bool, string) {
		var seen []float64
		for _, l := range s.grep(id, `"`+metric+`"`) {
			var rec map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, id+": ")), &rec); err != nil || rec["Subscription"] != sub {
				continue
			}
			if v, isNum := rec[metric].(float64); isNum {
				if ok(v) {
					return true, ""
				}
				seen = append(seen, v)
			}
		}
		return false, fmt.Sprintf("values emitted: %v", seen)
	})
}
