package twin

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/pkg/obs"
)

// TypeSchedule is an EventBridge Scheduler schedule.
const TypeSchedule = "AWS::Scheduler::Schedule"

// scheduleProps are the properties of an AWS::Scheduler::Schedule the twin
// reads.
type scheduleProps struct {
	ScheduleExpression string
	State              string
	Target             struct {
		Arn   string
		Input string
	}
}

// schedule is one schedule the twin runs: it invokes its target function
// with the target's Input every period, as Scheduler does with a rate().
type schedule struct {
	tw     *Twin
	id     string
	fn     *function
	input  []byte
	period time.Duration
	runs   int
	mu     sync.Mutex
}

// ratePeriod reads a rate() expression ("rate(1 minute)", "rate(15
// minutes)", "rate(2 hours)", "rate(1 day)").
func ratePeriod(expr string) (time.Duration, error) {
	inner, ok := strings.CutPrefix(expr, "rate(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return 0, fmt.Errorf("schedule expression %q: the twin runs rate() schedules only; give a period in Config.Schedules", expr)
	}
	f := strings.Fields(strings.TrimSuffix(inner, ")"))
	if len(f) != 2 {
		return 0, fmt.Errorf("schedule expression %q: want rate(<value> <unit>)", expr)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 {
		return 0, fmt.Errorf("schedule expression %q: value %q is not a positive integer", expr, f[0])
	}
	unit := map[string]time.Duration{"minute": time.Minute, "minutes": time.Minute, "hour": time.Hour, "hours": time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour}[f[1]]
	if unit == 0 {
		return 0, fmt.Errorf("schedule expression %q: unit %q is not minute(s), hour(s) or day(s)", expr, f[1])
	}
	return time.Duration(n) * unit, nil
}

// startSchedules starts the schedules Config.Schedules names (by the target
// function's code folder), after every function exists.
func (tw *Twin) startSchedules() error {
	if len(tw.cfg.Schedules) == 0 {
		return nil
	}
	for _, res := range tw.t.OfType(TypeSchedule) {
		var p scheduleProps
		if err := tw.rv.Decode(res, &p, "ScheduleExpression", "State", "Target"); err != nil {
			return err
		}
		f := tw.functionByRef(p.Target.Arn)
		if f == nil {
			return fmt.Errorf("%s (%s): Target.Arn %q is no function of this stack", res.LogicalID, TypeSchedule, p.Target.Arn)
		}
		period, ok := tw.cfg.Schedules[filepath.Base(filepath.Dir(f.binary))]
		if !ok {
			continue
		}
		if p.State == "DISABLED" {
			tw.log.Info("twin: schedule disabled in the template", obs.KeyLogicalID, res.LogicalID)
			continue
		}
		if period <= 0 {
			var err error
			if period, err = ratePeriod(p.ScheduleExpression); err != nil {
				return fmt.Errorf("%s (%s): %w", res.LogicalID, TypeSchedule, err)
			}
		}
		input := p.Target.Input
		if input == "" {
			input = "{}"
		}
		s := &schedule{tw: tw, id: res.LogicalID, fn: f, input: []byte(input), period: period}
		tw.schedules[res.LogicalID] = s
		tw.log.Info("twin: schedule", obs.KeyLogicalID, res.LogicalID, obs.KeyFunction, f.id, obs.KeyEvery, period, obs.KeyExpression, p.ScheduleExpression)
		tw.wg.Add(1)
		go s.run(tw.ctx, &tw.wg)
	}
	return nil
}

// run invokes the target every period until ctx ends, the first time one
// period after the start (as Scheduler's rate() does). A failed invocation
// is journaled and logged; the next tick runs as usual (Scheduler's own
// retries are not reproduced).
func (s *schedule) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	tick := time.NewTicker(s.period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		res, err := s.tw.invoke(ctx, s.fn, s.id, s.input, nil, nil, 1)
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if err != nil && ctx.Err() == nil {
			s.tw.log.Warn("twin: scheduled invocation failed", obs.KeyLogicalID, s.id, obs.KeyFunction, s.fn.id, obs.Err(err))
		}
		s.mu.Lock()
		s.runs++
		s.mu.Unlock()
	}
}

// ScheduleRuns returns how many times the schedule with logical ID id has
// invoked its target (0 for a schedule the twin does not run).
func (tw *Twin) ScheduleRuns(id string) int {
	s := tw.schedules[id]
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs
}
