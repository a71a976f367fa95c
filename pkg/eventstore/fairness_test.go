package eventstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// TestQueuedCallerBoundedByOwnDeadline: a caller queued behind a batch that
// hangs in flight gets its answer at its own deadline, says how long it
// waited and why, and its event is never written.
func TestQueuedCallerBoundedByOwnDeadline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget func(*eventstore.Config) // the store's
		ctx    func() (context.Context, context.CancelFunc)
		isCtx  bool // the context's deadline, not MaxElapsed
	}{
		{"Config.MaxElapsed", func(c *eventstore.Config) { c.MaxElapsed = 200 * time.Millisecond },
			func() (context.Context, context.CancelFunc) { return ctxFor("t1"), func() {} }, false},
		{"context deadline", nil,
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctxFor("t1"), 200*time.Millisecond)
			}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTwinDB(t)
			release, held := make(chan struct{}), make(chan struct{})
			w := &wire{DynamoDB: td.bare}
			w.on = func(n int, in *dynamodb.TransactWriteItemsInput, forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
				if n == 1 { // the first caller's batch hangs in flight
					close(held)
					<-release
				}
				return forward()
			}
			s := td.store(t, w, func(c *eventstore.Config) {
				c.CallTimeout = 10 * time.Second
				if tc.budget != nil {
					tc.budget(c)
				}
			})
			first := make(chan error, 1)
			go func() {
				_, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": 0})
				first <- err
			}()
			<-held
			ctx, cancel := tc.ctx()
			defer cancel()
			begin := time.Now()
			_, err := s.Emit(ctx, "order.placed", map[string]any{"i": 1})
			took := time.Since(begin)
			var ce *eventstore.ContentionError
			if !errors.As(err, &ce) || !errors.Is(err, eventstore.ErrContention) {
				t.Fatalf("got %v, want a *ContentionError", err)
			}
			if took > time.Second {
				t.Errorf("the queued caller waited %v, want about its 200ms deadline", took)
			}
			if ce.Attempts != 0 || ce.Waited < 150*time.Millisecond || ce.Waited != ce.Elapsed || ce.Tenant != "t1" {
				t.Errorf("got %+v, want 0 attempts and the whole ~200ms queued", ce)
			}
			for _, want := range []string{"queued", "deadline", "never sent"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not say %q", err, want)
				}
			}
			if got := errors.Is(err, context.DeadlineExceeded); got != tc.isCtx {
				t.Errorf("errors.Is(err, context.DeadlineExceeded) = %v, want %v", got, tc.isCtx)
			}
			close(release)
			if err := <-first; err != nil {
				t.Fatalf("first caller: %v", err)
			}
			// The abandoned event was never sent: the next one takes seq 2.
			e, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": 2})
			if err != nil || e.Seq != 2 {
				t.Fatalf("third emit: seq %d, %v; want seq 2", e.Seq, err)
			}
			td.checkLog(t, "t1", 2)
			if got := len(w.sent()); got != 2 {
				t.Errorf("%d transactions sent, want 2 (the abandoned event never went out)", got)
			}
		})
	}
}

// TestCallerNotHeldByLaterBatches: a caller's Emit returns when its own batch
// commits, even while the batch after it hangs in flight. (Before, the first
// caller of a burst committed everyone's batches on its own goroutine.)
func TestCallerNotHeldByLaterBatches(t *testing.T) {
	td := newTwinDB(t)
	release1, held1 := make(chan struct{}), make(chan struct{})
	release2, held2 := make(chan struct{}), make(chan struct{})
	w := &wire{DynamoDB: td.bare}
	w.on = func(n int, in *dynamodb.TransactWriteItemsInput, forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
		switch n {
		case 1:
			close(held1)
			<-release1
		case 2:
			close(held2)
			<-release2
		}
		return forward()
	}
	s := td.store(t, w, func(c *eventstore.Config) { c.CallTimeout = 10 * time.Second })
	first := make(chan error, 1)
	go func() {
		_, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": 0})
		first <- err
	}()
	<-held1
	second := make(chan error, 1)
	go func() {
		_, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": 1})
		second <- err
	}()
	waitFor(t, func() bool { return eventstore.PendingForTest(s, "t1") == 1 })
	close(release1)
	<-held2 // the second batch is in flight and stays there
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("first caller: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first caller is still waiting while the next batch is in flight")
	}
	close(release2)
	if err := <-second; err != nil {
		t.Fatalf("second caller: %v", err)
	}
	td.checkLog(t, "t1", 2)
}

// TestPerCallerAttemptBudget: a caller that joins a contended batch late gets
// its full budget of attempts, not what the batch has left.
func TestPerCallerAttemptBudget(t *testing.T) {
	td := newTwinDB(t)
	joined := make(chan struct{})
	var once sync.Once
	w := &wire{DynamoDB: td.bare}
	// Every transaction conflicts; after the third, a second caller joins.
	w.on = func(n int, in *dynamodb.TransactWriteItemsInput, forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
		if n == 3 {
			once.Do(func() { close(joined) })
		}
		return nil, cancelled("None", "TransactionConflict")
	}
	s := td.store(t, w, func(c *eventstore.Config) { c.MaxAttempts = 5; c.MaxElapsed = time.Minute })
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, errs[0] = s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": 0}) }()
	go func() {
		defer wg.Done()
		<-joined
		_, errs[1] = s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": 1})
	}()
	wg.Wait()
	for i, err := range errs {
		var ce *eventstore.ContentionError
		if !errors.As(err, &ce) || ce.Attempts != 5 {
			t.Errorf("caller %d: got %v, want a ContentionError after its own 5 attempts", i, err)
			continue
		}
		if !strings.Contains(ce.Reason, "5-attempt budget") || !strings.Contains(err.Error(), "another transaction held the head") {
			t.Errorf("caller %d: %q does not say which budget ended it and why", i, err)
		}
	}
	// The late caller rode in batches with the first: fewer calls than 5 + 5.
	if got := len(w.sent()); got >= 10 {
		t.Errorf("%d transactions sent, want the late caller to share the first's", got)
	}
}

// newBudgetServer starts our own DynamoDB, in a process of the test's own,
// with AWS's write conflicts and a per-partition write budget of wcu per
// second, and creates an events table.
func newBudgetServer(t *testing.T, wcu float64) (*dynamodb.Client, string, string) {
	t.Helper()
	admin := localaws.DynamoDBProcess(t, "-conflicts", "-partition-wcu", strconv.FormatFloat(wcu, 'f', -1, 64))
	table := localaws.UniqueName(t, "events")
	localaws.CreateTable(t, admin, eventstore.TableSchema(table))
	return admin, table, aws.ToString(admin.Options().BaseEndpoint)
}

// TestIndependentStoresOneTenant is the Lambda shape on a server that
// conflicts as AWS does, with AWS's per-partition write budget: 16 stores,
// each with its own client, one emitter each, on one tenant. Every emit
// commits, the chain verifies, and the stores did contend (or the test proved
// nothing).
func TestIndependentStoresOneTenant(t *testing.T) {
	admin, table, url := newBudgetServer(t, 1000)
	const stores, each = 16, 6
	all := make([]*eventstore.Store, stores)
	for i := range all {
		all[i] = mustStore(t, localaws.NewDynamoDB(url), eventstore.Config{Table: table, Catalog: catalog})
	}
	var wg sync.WaitGroup
	errs := make(chan error, stores*each)
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": i}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("emit: %v", err)
	}
	var failed int64
	for _, s := range all {
		failed += s.Stats().FailedAttempts
	}
	(&fixture{db: admin, table: table, store: all[0]}).verify(t, "t1", stores*each)
	t.Logf("%d events, %d attempts lost to contention", stores*each, failed)
	if failed == 0 {
		t.Error("no attempt was lost to contention: the test did not test it")
	}
}

// TestThrottledPartitionPacedNotFailed: a transaction the partition's write
// budget refuses (ProvisionedThroughputExceeded, nothing written) is paced
// and retried like contention, not returned to the caller.
func TestThrottledPartitionPacedNotFailed(t *testing.T) {
	_, table, url := newBudgetServer(t, 10) // a burst of 10 WCU: two 4-WCU emits, then 10 WCU/s
	s := mustStore(t, localaws.NewDynamoDB(url), eventstore.Config{Table: table, Catalog: catalog})
	for i := range 4 {
		if _, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": i}); err != nil {
			t.Fatalf("emit %d: %v", i, err)
		}
	}
	if st := s.Stats(); st.Throttled == 0 || st.Events != 4 {
		t.Errorf("got %+v, want 4 events and some throttled attempts", st)
	}
}

// TestContendedBatchTakesLaterCallers: a batch that lost to contention goes
// out again with the callers that queued while it was in flight, so the more
// contended the head, the more events one winning transaction carries.
func TestContendedBatchTakesLaterCallers(t *testing.T) {
	td := newTwinDB(t)
	release, held := make(chan struct{}), make(chan struct{})
	w := &wire{DynamoDB: td.bare}
	w.on = func(n int, in *dynamodb.TransactWriteItemsInput, forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
		if n == 1 { // the lone first caller's transaction loses a race
			close(held)
			<-release
			return nil, cancelled("None", "TransactionConflict")
		}
		return forward()
	}
	s := td.store(t, w, nil)
	const callers = 5
	errs := make([]error, callers)
	var wg sync.WaitGroup
	emit := func(i int) {
		defer wg.Done()
		_, errs[i] = s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": i})
	}
	wg.Add(1)
	go emit(0)
	<-held
	for i := 1; i < callers; i++ {
		wg.Add(1)
		go emit(i)
	}
	waitFor(t, func() bool { return eventstore.PendingForTest(s, "t1") == callers-1 })
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	calls := w.sent()
	if len(calls) != 2 || len(calls[1].seqs) != callers {
		t.Fatalf("sent %d transactions, the retry carrying %v; want 2, the retry carrying all %d callers", len(calls), calls[len(calls)-1].seqs, callers)
	}
	td.checkLog(t, "t1", callers)
}
