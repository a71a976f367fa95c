package e2e

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// notarized is a stack with what the tests of the notary read: its
// checkpoint bucket, the key that verifies it, and the log name.
type notarized struct {
	*stack
	bucket, log string
	pub         *checkpoint.PublicKey
	s3          *s3.Client
	table       string
}

func startNotarized(t *testing.T) *notarized {
	t.Helper()
	s := startStack(t, nil)
	env, err := s.tw.FunctionEnv(s.fn[keys.FnNotary])
	if err != nil {
		t.Fatal(err)
	}
	n := &notarized{stack: s, bucket: env[keys.EnvCheckpointBucket], log: env[keys.EnvCheckpointLog], table: s.env[keys.EnvEventsTable]}
	if n.bucket == "" || n.log == "" || env[keys.EnvCheckpointKey] == "" {
		t.Fatalf("the notary's environment lacks the checkpoint bucket, key or log: %v", env)
	}
	kc := kms.NewFromConfig(localaws.Config(), func(o *kms.Options) { o.BaseEndpoint = aws.String(s.tw.KMSEndpoint()) })
	pk, err := kc.GetPublicKey(context.Background(), &kms.GetPublicKeyInput{KeyId: aws.String(env[keys.EnvCheckpointKey])})
	if err != nil {
		t.Fatal(err)
	}
	if n.pub, err = checkpoint.ParsePublicKey(pk.PublicKey); err != nil {
		t.Fatal(err)
	}
	n.s3 = s3.NewFromConfig(localaws.Config(), func(o *s3.Options) { o.BaseEndpoint = aws.String(s.tw.S3Endpoint()); o.UsePathStyle = true })
	return n
}

// checkpoints returns the tenant's checkpoints in the bucket, seq → hash,
// each verified with the stack's key.
func (n *notarized) checkpoints(t *testing.T, tenant string) map[int64]string {
	t.Helper()
	ctx := context.Background()
	out, err := n.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(n.bucket), Prefix: aws.String(checkpoint.ObjectPrefix(tenant))})
	if err != nil {
		t.Fatal(err)
	}
	cps := map[int64]string{}
	for _, o := range out.Contents {
		obj, err := n.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(n.bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(obj.Body)
		obj.Body.Close()
		cp, err := checkpoint.Open(msg, n.log, n.pub)
		if err != nil {
			t.Fatalf("checkpoint %s does not verify: %v", aws.ToString(o.Key), err)
		}
		cps[cp.Seq] = cp.Hash
	}
	return cps
}

// head reads the tenant's head row.
func (n *notarized) head(t *testing.T, tenant string) (int64, string) {
	t.Helper()
	h := n.item(t, n.table, tenant, keys.HeadSeq)
	seq, _ := strconv.ParseInt(h[keys.AttrLastSeq].(*types.AttributeValueMemberN).Value, 10, 64)
	return seq, h[keys.AttrLastHash].(*types.AttributeValueMemberS).Value
}

// settled waits until the notary signed the tenant's head as it stands,
// and returns the honest hashes of seq 1 to the head.
func (n *notarized) settled(t *testing.T, tenant string) map[int64]string {
	t.Helper()
	eventually(t, 60*time.Second, "the notary signed the head of "+tenant, func() (bool, string) {
		seq, hash := n.head(t, tenant)
		cps := n.checkpoints(t, tenant)
		return cps[seq] == hash, fmt.Sprintf("head %d %s, checkpoints %v", seq, hash, cps)
	})
	honest := map[int64]string{}
	for _, e := range n.allEvents(t, tenant) {
		honest[e.Seq] = e.Hash
	}
	return honest
}

// caughtUp waits until the notary has read everything the stream holds now
// (its mapping has nothing left to do) and returns its findings so far.
func (n *notarized) caughtUp(t *testing.T) {
	t.Helper()
	var last int64 = -1
	eventually(t, 60*time.Second, "the notary read the stream to its end", func() (bool, string) {
		st, _ := n.tw.Poller(n.notaryMap)
		done := st.IteratorAge == 0 && st.Read == st.Delivered+st.Filtered+st.Failed && st.Read == last
		last = st.Read
		return done, fmt.Sprintf("notary mapping %+v", st)
	})
}

// finding waits for the notary's ERROR line of kind on tenant.
func (n *notarized) finding(t *testing.T, kind, tenant string) string {
	t.Helper()
	var line string
	eventually(t, 60*time.Second, "the notary reported "+kind, func() (bool, string) {
		lines := n.grep(n.fn[keys.FnNotary], "notary finding")
		for _, l := range lines {
			if strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, `"finding":"`+kind+`"`) && strings.Contains(l, `"chain":"`+tenant+`"`) {
				line = l
				return true, ""
			}
		}
		return false, "notary findings:\n" + strings.Join(lines, "\n")
	})
	// The invocation's metrics are written when it ends.
	eventually(t, 30*time.Second, "the notary counted "+kind, func() (bool, string) {
		// One value, or one per finding of the kind in the invocation ([1,1]).
		emf := n.grep(n.fn[keys.FnNotary], `"`+keys.MetricNotaryFinding+`":`)
		for _, l := range emf {
			if strings.Contains(l, `"Finding":"`+kind+`"`) && strings.Contains(l, `"Namespace":"`+keys.MetricNamespace+`"`) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no EMF %s line with Finding %s:\n%s", keys.MetricNotaryFinding, kind, strings.Join(emf, "\n"))
	})
	return line
}

// neverSignedOver checks that every checkpoint of the tenant states the
// honest hash at its seq: nothing the attack wrote was signed.
func (n *notarized) neverSignedOver(t *testing.T, tenant string, honest map[int64]string) {
	t.Helper()
	for seq, hash := range n.checkpoints(t, tenant) {
		if honest[seq] != hash {
			t.Errorf("checkpoint at seq %d states hash %s, not the honest %q: the notary signed over the attack", seq, hash, honest[seq])
		}
	}
}

// reconciled checks reconcile's report after an attack: broken, with a
// finding that names what the notary saw.
func (n *notarized) reconciled(t *testing.T, tenant, want string) {
	t.Helper()
	r := n.reconcile(tenant)
	if r.ChainIntact == nil || *r.ChainIntact {
		t.Errorf("reconcile after the attack: chain_intact %v, want false (first_break %s)", r.ChainIntact, r.FirstBreak)
	}
	var reasons []string
	for _, f := range r.Findings {
		reasons = append(reasons, f.Reason)
	}
	joined := strings.Join(reasons, "; ")
	if !strings.Contains(joined, want) {
		t.Errorf("reconcile findings %q, want one containing %q", joined, want)
	}
	if r.Notary == nil || !r.Notary.Broken {
		t.Errorf("reconcile's notary view %+v, want broken", r.Notary)
	}
}

func (n *notarized) put(t *testing.T, it map[string]types.AttributeValue) {
	t.Helper()
	if _, err := n.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(n.table), Item: it}); err != nil {
		t.Fatal(err)
	}
}

// rewriteTail re-seals every event from seq from on (payload edited at
// from, hashes recomputed and linked) and moves the head to the new last
// hash, by PutItem: what the emitter role can do, and no link check sees.
func (n *notarized) rewriteTail(t *testing.T, tenant string, from int64) {
	t.Helper()
	last, _ := n.head(t, tenant)
	var prev string
	for seq := from; seq <= last; seq++ {
		e, err := envelope.FromItem(n.item(t, n.table, tenant, seq))
		if err != nil {
			t.Fatal(err)
		}
		if seq == from {
			e.Payload["forged"] = true
		} else {
			e.PrevHash = prev
		}
		if err := chain.Seal(&e); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
		it, err := e.ToItem()
		if err != nil {
			t.Fatal(err)
		}
		n.put(t, it)
	}
	h := n.item(t, n.table, tenant, keys.HeadSeq)
	h[keys.AttrLastHash] = &types.AttributeValueMemberS{Value: prev}
	n.put(t, h)
}

func (n *notarized) orders(t *testing.T, tenant string, from, count int) {
	t.Helper()
	for i := from; i < from+count; i++ {
		if _, err := n.app.Order(context.Background(), tenant, i); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNotaryRewriteNeverSigned: after the notary signed the head, the tail
// is rewritten from the last checkpoint's predecessor on, every hash
// recomputed and the head moved (PutItem, as the emitter role may). The
// notary reports the rewrite (ERROR, EMF NotaryFinding), signs nothing of
// the forgery, nor anything appended on top of it; reconcile reports the
// chain broken and names the notary's finding.
func TestNotaryRewriteNeverSigned(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	n := startNotarized(t)
	const tenant = "acme"
	n.orders(t, tenant, 0, 3)
	honest := n.settled(t, tenant)
	last, _ := n.head(t, tenant)
	if lines := n.grep(n.fn[keys.FnNotary], "notary finding"); len(lines) != 0 {
		t.Fatalf("findings on honest appends:\n%s", strings.Join(lines, "\n"))
	}

	n.rewriteTail(t, tenant, last-1)
	n.finding(t, "rewrite", tenant)
	// An honest append on top of the forged head: the notary does not sign it.
	n.orders(t, tenant, 3, 1)
	n.caughtUp(t)
	n.neverSignedOver(t, tenant, honest)
	if seq, _ := n.head(t, tenant); n.checkpoints(t, tenant)[seq] != "" {
		t.Errorf("the head at seq %d, appended on the forgery, was signed", seq)
	}
	n.reconciled(t, tenant, "notary: rewrite")
}

// TestNotaryTruncationNeverSigned: the tail is deleted and the head rolled
// back to an older event (its true hash). The notary reports the removal,
// signs nothing after it; reconcile reports the rollback.
func TestNotaryTruncationNeverSigned(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	n := startNotarized(t)
	const tenant = "acme"
	n.orders(t, tenant, 0, 3)
	honest := n.settled(t, tenant)
	before := n.checkpoints(t, tenant)
	last, _ := n.head(t, tenant)
	if last < 3 {
		t.Fatalf("head at %d, want at least 3 events", last)
	}
	ctx := context.Background()
	for seq := last; seq > last-2; seq-- {
		if _, err := n.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(n.table), Key: map[string]types.AttributeValue{
			keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant}, keys.AttrSeq: &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	h := n.item(t, n.table, tenant, keys.HeadSeq)
	h[keys.AttrLastSeq] = &types.AttributeValueMemberN{Value: strconv.FormatInt(last-2, 10)}
	h[keys.AttrLastHash] = &types.AttributeValueMemberS{Value: honest[last-2]}
	n.put(t, h)

	n.finding(t, "removed", tenant)
	n.caughtUp(t)
	n.neverSignedOver(t, tenant, honest)
	if after := n.checkpoints(t, tenant); len(after) != len(before) {
		t.Errorf("checkpoints %v after the rollback, want only the %v signed before it", after, before)
	}
	n.reconciled(t, tenant, "notary: removed")
}

// TestNotaryPlantedRowNeverSigned: one Put at head+1 with a valid prev_hash
// and hash, the head left where it was (the emitter role may). The notary
// reports a planted row and signs nothing over it.
func TestNotaryPlantedRowNeverSigned(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	n := startNotarized(t)
	const tenant = "acme"
	n.orders(t, tenant, 0, 2)
	honest := n.settled(t, tenant)
	last, lastHash := n.head(t, tenant)
	e, err := envelope.FromItem(n.item(t, n.table, tenant, last))
	if err != nil {
		t.Fatal(err)
	}
	e.Seq, e.PrevHash, e.ID = last+1, lastHash, "0190c5a8-7d4e-7c3b-9d1a-00000000beef"
	e.Payload["planted"] = true
	if err := chain.Seal(&e); err != nil {
		t.Fatal(err)
	}
	it, err := e.ToItem()
	if err != nil {
		t.Fatal(err)
	}
	n.put(t, it)

	n.finding(t, "planted", tenant)
	n.caughtUp(t)
	if h := n.checkpoints(t, tenant)[last+1]; h != "" {
		t.Errorf("the planted row at seq %d was signed (%s)", last+1, h)
	}
	n.neverSignedOver(t, tenant, honest)
	n.reconciled(t, tenant, "notary: planted")
}

// TestNotaryCatchesUpAfterStop: the notary's mapping is disabled; honest
// orders and then a consistent rewrite of them happen while it is stopped.
// Enabled again, it reads on from where it stopped (the stream keeps 24
// hours), reports the rewrite, and signs nothing the rewrite touched.
func TestNotaryCatchesUpAfterStop(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	n := startNotarized(t)
	const tenant = "acme"
	n.orders(t, tenant, 0, 2)
	honest := n.settled(t, tenant)
	n.caughtUp(t)
	if err := n.tw.SetMappingEnabled(n.notaryMap, false); err != nil {
		t.Fatal(err)
	}
	n.orders(t, tenant, 2, 2)
	for _, e := range n.allEvents(t, tenant) {
		honest[e.Seq] = e.Hash
	}
	stopped, _ := n.tw.Poller(n.notaryMap)
	piped, _ := n.tw.Poller(n.pipe)
	last, _ := n.head(t, tenant)
	n.rewriteTail(t, tenant, last)
	// The Pipe reads the same stream: once it has read the rewrite's
	// records, a running notary would have too.
	eventually(t, 60*time.Second, "the Pipe read the rewrite", func() (bool, string) {
		st, _ := n.tw.Poller(n.pipe)
		return st.Read > piped.Read, fmt.Sprintf("Pipe %+v, was %+v", st, piped)
	})
	if lines := n.grep(n.fn[keys.FnNotary], "notary finding"); len(lines) != 0 {
		t.Fatalf("findings while the notary is stopped:\n%s", strings.Join(lines, "\n"))
	}
	if st, _ := n.tw.Poller(n.notaryMap); st.Delivered != stopped.Delivered || st.Invocations != stopped.Invocations {
		t.Fatalf("the stopped notary was invoked: %+v, was %+v", st, stopped)
	}

	if err := n.tw.SetMappingEnabled(n.notaryMap, true); err != nil {
		t.Fatal(err)
	}
	n.finding(t, "rewrite", tenant)
	n.caughtUp(t)
	n.neverSignedOver(t, tenant, honest)
	n.reconciled(t, tenant, "notary: rewrite")
}

// TestNotaryHeadShapeReportedStillSigned: the head row is put back at its
// seq and hash with an extra attribute and a dedup_id not derived from its
// last_event_id (what the emitter role may write). Nothing the chain covers
// changed: the notary reports head_shape (ERROR, EMF NotaryFinding), keeps
// the chain whole and signs the next honest append; reconcile reports the
// chain intact, with the notary's finding among its findings.
func TestNotaryHeadShapeReportedStillSigned(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	n := startNotarized(t)
	const tenant = "acme"
	n.orders(t, tenant, 0, 2)
	n.settled(t, tenant)
	h := n.item(t, n.table, tenant, keys.HeadSeq)
	h["note"] = &types.AttributeValueMemberS{Value: "odd"}
	h[keys.AttrDedupID] = &types.AttributeValueMemberS{Value: "head-forged"}
	n.put(t, h)

	line := n.finding(t, "head_shape", tenant)
	for _, want := range []string{"attributes note besides the head's", "dedup_id", "still signed"} {
		if !strings.Contains(line, want) {
			t.Errorf("the finding's line does not say %q: %s", want, line)
		}
	}
	n.orders(t, tenant, 2, 1)
	honest := n.settled(t, tenant) // the append after the odd head is signed
	n.neverSignedOver(t, tenant, honest)
	r := n.reconcile(tenant)
	if r.ChainIntact == nil || !*r.ChainIntact || r.Notary == nil || r.Notary.Broken {
		t.Errorf("reconcile: chain_intact %v, notary %+v; want intact and the notary's view whole", r.ChainIntact, r.Notary)
	}
	var reasons []string
	for _, f := range r.Findings {
		reasons = append(reasons, f.Reason)
	}
	if joined := strings.Join(reasons, "; "); !strings.Contains(joined, "leave the chain whole") || !strings.Contains(joined, "head_shape") {
		t.Errorf("reconcile findings %q, want the notary's head_shape finding", joined)
	}
}
