package backbone

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
)

// TestSchedules: reconcile runs incrementally every 15 minutes and from
// genesis daily, dlq-repair hourly; each with its own role; reconcile's input
// is the Function URL request it answers.
func TestSchedules(t *testing.T) {
	s := synth(t)
	st := s.stack
	scheds := s.resources("AWS::Scheduler::Schedule")
	if len(scheds) != 5 {
		t.Fatalf("%d schedules, want 5 (with the heartbeat's, TestHeartbeatSchedule)", len(scheds))
	}
	type want struct {
		expr   string
		fn     Function
		full   *bool
		resume bool
	}
	yes, no := true, false
	wants := map[string]want{
		"ReconcileIncremental": {ReconcileIncrementalEvery, st.Reconcile.Function, &no, false},
		"ReconcileFull":        {ReconcileFullAt, st.Reconcile.Function, &yes, false},
		// Continues the daily round hourly; resume=true never starts one.
		"ReconcileFullContinue": {ReconcileFullContinueAt, st.Reconcile.Function, &yes, true},
		"DLQRepair":             {RepairEvery, st.Repair.Function, nil, false},
	}
	for name, w := range wants {
		t.Run(name, func(t *testing.T) {
			sc, ok := st.Schedules.ByName[name]
			if !ok {
				t.Fatalf("no schedule %s built", name)
			}
			p := props(scheds[*s.stack.GetLogicalId(sc)])
			if p == nil {
				t.Fatalf("no schedule %s", name)
			}
			if p["ScheduleExpression"] != w.expr || p["State"] != "ENABLED" {
				t.Errorf("expression %v state %v, want %s ENABLED", p["ScheduleExpression"], p["State"], w.expr)
			}
			target := p["Target"].(map[string]any)
			if diff := cmp.Diff(getAtt(s.id(w.fn.Fn), "Arn"), target["Arn"]); diff != "" {
				t.Errorf("target (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(getAtt(s.id(st.Schedules.Roles[w.fn.name]), "Arn"), target["RoleArn"]); diff != "" {
				t.Errorf("role (-want +got):\n%s", diff)
			}
			input, _ := target["Input"].(string)
			if w.full == nil {
				if input != "{}" {
					t.Errorf("dlq-repair input %q, want {} (every source)", input)
				}
				return
			}
			var req events.LambdaFunctionURLRequest
			if err := json.Unmarshal([]byte(input), &req); err != nil {
				t.Fatalf("input %q: %v", input, err)
			}
			if req.RequestContext.HTTP.Method != "GET" || req.RawPath != "/" {
				t.Errorf("input %s: want GET /", input)
			}
			// scheduled=true: each run resumes the round from the cursor the
			// state table keeps; without it every run would redo the first page.
			wantQ := url.Values{"scheduled": {"true"}, "limit": {"100"}}
			if *w.full {
				wantQ.Set("full", "true")
			}
			if w.resume {
				wantQ.Set("resume", "true")
			}
			q, err := url.ParseQuery(req.RawQueryString)
			if err != nil {
				t.Fatalf("query %q: %v", req.RawQueryString, err)
			}
			if diff := cmp.Diff(wantQ, q); diff != "" {
				t.Errorf("query %q (-want +got):\n%s", req.RawQueryString, diff)
			}
			if req.RequestContext.Authorizer != nil {
				t.Errorf("input names an authorizer %+v: reconcile accepts scheduled=true only from a direct invoke, which has none", req.RequestContext.Authorizer)
			}
		})
	}
	if _, ok := st.Schedules.Roles[keys.FnReconcile]; !ok {
		t.Error("no scheduler role for reconcile")
	}
}

// noTenants is a log with no tenant.
type noTenants struct{ reconcile.Log }

func (noTenants) Tenants(context.Context, string, int32) ([]string, string, error) {
	return nil, "", nil
}

type noDeadLetters struct{}

func (noDeadLetters) DeadLetters(context.Context, string, string, int32) ([]delivery.DeadLetter, string, error) {
	return nil, "", nil
}
func (noDeadLetters) CountDeadLetters(context.Context, string) (int, error) { return 0, nil }

// TestScheduleInputsReachScheduledRounds hands each reconcile schedule's
// input, as Scheduler invokes it, to reconcile's own handler: each is taken
// as a scheduled call (not a page of GET /), and the continuation never
// starts a round.
func TestScheduleInputsReachScheduledRounds(t *testing.T) {
	state := reconcile.NewMemoryState()
	r, err := reconcile.New(reconcile.Config{Log: noTenants{}, DeadLetters: noDeadLetters{}, State: state, Rounds: state})
	if err != nil {
		t.Fatal(err)
	}
	h := reconcile.NewHandler(r, slog.New(slog.NewTextHandler(io.Discard, nil)))
	call := func(input string) map[string]any {
		t.Helper()
		var req events.LambdaFunctionURLRequest
		if err := json.Unmarshal([]byte(input), &req); err != nil {
			t.Fatal(err)
		}
		resp, err := h.Handle(context.Background(), req)
		var body map[string]any
		if err != nil || resp.StatusCode != 200 || json.Unmarshal([]byte(resp.Body), &body) != nil {
			t.Fatalf("input %s: %d %s %v, want 200", input, resp.StatusCode, resp.Body, err)
		}
		return body
	}
	if b := call(ReconcileFullContinueInput()); b["idle"] != true {
		t.Errorf("continuation with no full round in progress: %v, want idle", b)
	}
	for _, full := range []bool{false, true} {
		if b := call(ReconcileScheduleInput(full)); b["round_complete"] != true || b["saved"] != true {
			t.Errorf("schedule input (full %v): %v, want a scheduled round, completed and saved", full, b)
		}
	}
	for _, mode := range []reconcile.Mode{reconcile.Incremental, reconcile.Full} {
		if rd, _ := state.Round(context.Background(), mode); rd.Completed.IsZero() {
			t.Errorf("%s round not recorded as completed: %+v", mode, rd)
		}
	}
}
