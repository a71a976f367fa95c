package reconcile_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/notary"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

const checkpointBucket = "checkpoints"

// signed is a reconcile env whose checkpoints are signed by the twin's KMS
// and kept in the twin's S3 (both in-process, over their AWS protocols).
type signed struct {
	*env
	s3     *s3.Client
	state  *reconcile.SignedState
	notary *notary.Checkpoints // the notary's signer: reconcile never signs
	pub    *checkpoint.PublicKey
}

func newSigned(t *testing.T) *signed {
	t.Helper()
	return newSignedBucket(t, true)
}

// newSignedBucket is newSigned with the checkpoint bucket locked (Object
// Lock, as the stack creates it) or only versioned: what the bucket is for
// a principal who can lift its policy's denials, as an account admin can.
func newSignedBucket(t *testing.T, locked bool) *signed {
	t.Helper()
	ctx := context.Background()
	kmsSrv := httptest.NewServer(twin.NewKMS())
	t.Cleanup(kmsSrv.Close)
	fakeS3 := twin.NewS3(nil)
	s3Srv := httptest.NewServer(fakeS3)
	t.Cleanup(s3Srv.Close)
	var lock *twin.ObjectLock
	if locked {
		lock = &twin.ObjectLock{Mode: "COMPLIANCE", Days: 365}
	}
	if err := fakeS3.CreateBucket(checkpointBucket, locked, lock); err != nil {
		t.Fatal(err)
	}
	kc := kms.NewFromConfig(localaws.Config(), func(o *kms.Options) { o.BaseEndpoint = aws.String(kmsSrv.URL) })
	k, err := kc.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecEccNistP256, KeyUsage: kmstypes.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	signer := notary.KMSSigner{KMS: kc, KeyID: aws.ToString(k.KeyMetadata.Arn)}
	pub, err := signer.PublicKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc := s3.NewFromConfig(localaws.Config(), func(o *s3.Options) { o.BaseEndpoint = aws.String(s3Srv.URL); o.UsePathStyle = true })
	if !locked {
		if _, err := sc.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(checkpointBucket),
			VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
			t.Fatal(err)
		}
	}
	// Both read the public key as the functions do: in the background
	// from the start (signing.Signed).
	key := checkpoint.Prefetch(ctx, signer.PublicKey, func(err error) { t.Errorf("public key prefetch: %v", err) })
	s := &signed{s3: sc, pub: pub, notary: &notary.Checkpoints{S3: sc, Bucket: checkpointBucket, Log: "fourlanes/test", Signer: signer, Key: key.Get}}
	s.env = newEnv(t, func(cfg *reconcile.Config) {
		s.state = &reconcile.SignedState{Walks: cfg.State, S3: sc, Bucket: checkpointBucket, Log: "fourlanes/test",
			Key: key.Get, Logger: cfg.Logger, Metrics: cfg.Metrics}
		cfg.State = s.state
	})
	return s
}

// sign signs the tenant's head as the notary does once it saw it appended.
func (s *signed) sign(t *testing.T, tenant string) int64 {
	t.Helper()
	head := s.item(t, tenant, keys.HeadSeq)
	seq, err := strconv.ParseInt(head[keys.AttrLastSeq].(*types.AttributeValueMemberN).Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.notary.Sign(context.Background(), tenant, seq, head[keys.AttrLastHash].(*types.AttributeValueMemberS).Value); err != nil {
		t.Fatal(err)
	}
	return seq
}

// objects lists the checkpoint keys of tenant, newest first.
func (s *signed) objects(t *testing.T, tenant string) []string {
	t.Helper()
	out, err := s.s3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(checkpointBucket),
		Prefix: aws.String(keys.CheckpointObjectPrefix + tenant + "/")})
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, o := range out.Contents {
		ks = append(ks, aws.ToString(o.Key))
	}
	return ks
}

func (s *signed) object(t *testing.T, key string) []byte {
	t.Helper()
	out, err := s.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(checkpointBucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	return b
}

// Reconcile never signs: an intact walk leaves the bucket as it was. The
// notary's checkpoint (one object per seq signed, readable offline with the
// KMS public key) is what reconcile trusts and reports.
func TestReconcileNeverSigns(t *testing.T) {
	s := newSigned(t)
	s.emit(t, "acme", 5)
	want(t, s.get(t, "tenant=acme"), map[string]any{"chain_intact": true, "checkpoint_seq": 0})
	if objs := s.objects(t, "acme"); len(objs) != 0 {
		t.Fatalf("objects after a walk = %v, want none: only the notary signs", objs)
	}
	s.sign(t, "acme")
	want(t, s.get(t, "tenant=acme"), map[string]any{"chain_intact": true, "checkpoint_seq": 5, "trusted_through": 5})
	objs := s.objects(t, "acme")
	if len(objs) != 1 || objs[0] != reconcile.CheckpointKey("acme", 5) {
		t.Fatalf("objects = %v, want [%s]", objs, reconcile.CheckpointKey("acme", 5))
	}
	cp, err := checkpoint.Open(s.object(t, objs[0]), "fourlanes/test", s.pub)
	if err != nil {
		t.Fatal(err)
	}
	head := s.item(t, "acme", keys.HeadSeq)[keys.AttrLastHash].(*types.AttributeValueMemberS).Value
	if cp.Tenant != "acme" || cp.Seq != 5 || cp.Hash != head {
		t.Errorf("checkpoint = %+v, want acme seq 5 hash %s", cp, head)
	}
	// More events: the walk trusts the notary's checkpoint and signs nothing;
	// the notary's next one is listed first.
	s.emit(t, "acme", 2)
	want(t, s.get(t, "tenant=acme"), map[string]any{"chain_intact": true, "checkpoint_seq": 5, "trusted_through": 5})
	if objs := s.objects(t, "acme"); len(objs) != 1 {
		t.Errorf("objects = %v, want only the notary's seq 5", objs)
	}
	s.sign(t, "acme")
	if objs := s.objects(t, "acme"); len(objs) != 2 || objs[0] != reconcile.CheckpointKey("acme", 7) {
		t.Errorf("objects = %v, want seq 7 then 5", objs)
	}
}

// The forgery issue 13 describes: after a signed checkpoint at seq 5, the
// tail from seq 3 is rewritten consistently (every hash recomputed and
// linked, the head moved). Reconcile reports it, in both modes, and does not
// adopt it: no checkpoint is signed for the forged log.
func TestConsistentRewriteAfterSignedCheckpoint(t *testing.T) {
	s := newSigned(t)
	s.emit(t, "acme", 5)
	s.sign(t, "acme")
	want(t, s.get(t, "tenant=acme"), map[string]any{"chain_intact": true, "checkpoint_seq": 5})
	s.emit(t, "acme", 3)
	s.rewrite(t, "acme", 3, 8)
	for _, q := range []string{"tenant=acme", "tenant=acme&full=true"} {
		body := s.get(t, q)
		want(t, body, map[string]any{"chain_intact": false, "checkpoint_seq": 5})
		if seq, reason := breakOf(t, body); seq != 5 || reason != string(reconcile.ReasonCheckpointMismatch) {
			t.Errorf("%s: break at %d (%s), want 5 (%s)", q, seq, reason, reconcile.ReasonCheckpointMismatch)
		}
	}
	if objs := s.objects(t, "acme"); len(objs) != 1 {
		t.Errorf("objects after the forgery = %v, want only the seq 5 checkpoint", objs)
	}
}

// A forged state-table checkpoint row (what a writer of that table could do)
// changes nothing: the rewritten log still breaks at the signed checkpoint.
func TestForgedStateRowIgnored(t *testing.T) {
	s := newSigned(t)
	s.emit(t, "acme", 5)
	s.sign(t, "acme")
	s.rewrite(t, "acme", 2, 5)
	forgedHead := s.item(t, "acme", keys.HeadSeq)[keys.AttrLastHash].(*types.AttributeValueMemberS).Value
	if _, err := s.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(s.stateTable), Item: map[string]types.AttributeValue{
		keys.AttrPK:  &types.AttributeValueMemberS{Value: keys.StateCheckpointPrefix + "acme"},
		keys.AttrSK:  &types.AttributeValueMemberS{Value: keys.StateCheckpointSK},
		keys.AttrSeq: &types.AttributeValueMemberN{Value: "5"}, keys.AttrHash: &types.AttributeValueMemberS{Value: forgedHead},
	}}); err != nil {
		t.Fatal(err)
	}
	body := s.get(t, "tenant=acme")
	if seq, reason := breakOf(t, body); seq != 5 || reason != string(reconcile.ReasonCheckpointMismatch) {
		t.Errorf("break at %d (%s), want 5 (%s)", seq, reason, reconcile.ReasonCheckpointMismatch)
	}
}

// Truncating the log below the signed checkpoint (rows deleted, head moved
// back) breaks, in both modes.
func TestTruncatedBelowSignedCheckpoint(t *testing.T) {
	s := newSigned(t)
	s.emit(t, "acme", 5)
	s.sign(t, "acme")
	h3 := s.item(t, "acme", 3)[keys.AttrHash]
	s.deleteRow(t, "acme", 5)
	s.deleteRow(t, "acme", 4)
	head := s.item(t, "acme", keys.HeadSeq)
	head[keys.AttrLastSeq] = &types.AttributeValueMemberN{Value: "3"}
	head[keys.AttrLastHash] = h3
	s.put(t, head)
	for _, q := range []string{"tenant=acme", "tenant=acme&full=true"} {
		body := s.get(t, q)
		want(t, body, map[string]any{"chain_intact": false, "last_seq": 3})
		if seq, _ := breakOf(t, body); seq > 5 || seq < 4 {
			t.Errorf("%s: break at %d, want at seq 4 or 5 (below the checkpoint at 5)", q, seq)
		}
	}
}

// An object in the checkpoint prefix that is not signed by the key (here: a
// note for a higher seq, signed by another key) is passed over and counted;
// the real checkpoint still holds.
func TestUnsignedCheckpointObjectIgnored(t *testing.T) {
	s := newSigned(t)
	s.emit(t, "acme", 5)
	s.sign(t, "acme")
	fake := "fourlanes/test/acme\n9\n" + strings.Repeat("A", 43) + "=\ntime 2026-11-30T00:00:00Z\n\n— fourlanes/test AAAAAAAA\n"
	if _, err := s.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(checkpointBucket),
		Key: aws.String(reconcile.CheckpointKey("acme", 9)), Body: strings.NewReader(fake), IfNoneMatch: aws.String("*")}); err != nil {
		t.Fatal(err)
	}
	s.rewrite(t, "acme", 2, 5)
	body := s.get(t, "tenant=acme")
	want(t, body, map[string]any{"trusted_through": 5})
	if seq, reason := breakOf(t, body); seq != 5 || reason != string(reconcile.ReasonCheckpointMismatch) {
		t.Errorf("break at %d (%s), want 5 (%s)", seq, reason, reconcile.ReasonCheckpointMismatch)
	}
	if n := emfCount(t, s.emf, keys.MetricCheckpointInvalid); n < 1 {
		t.Errorf("%s = %d, want >= 1", keys.MetricCheckpointInvalid, n)
	}
	// The walk's answer names the object it passed over.
	fs, _ := body["findings"].([]any)
	if len(fs) != 1 || fs[0].(map[string]any)["kind"] != reconcile.FindingCheckpointInvalid || fs[0].(map[string]any)["key"] != reconcile.CheckpointKey("acme", 9) {
		t.Errorf("findings: got %v, want one %s for %s", body["findings"], reconcile.FindingCheckpointInvalid, reconcile.CheckpointKey("acme", 9))
	}
	// The alarm's query (infra/backbone) reads it from a directive with a
	// dimension set: the signing log.
	for _, m := range lines(t, s.emf) {
		if _, ok := m[keys.MetricCheckpointInvalid]; ok && m["Log"] == nil {
			t.Errorf("%s line without its Log dimension: %v", keys.MetricCheckpointInvalid, m)
		}
	}
}

// A signed checkpoint cannot be deleted or overwritten on the twin's S3.
func TestSignedCheckpointLocked(t *testing.T) {
	s := newSigned(t)
	s.emit(t, "acme", 3)
	s.sign(t, "acme")
	key := reconcile.CheckpointKey("acme", 3)
	before := s.object(t, key)
	ctx := context.Background()
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return ""
	}
	_, err := s.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(checkpointBucket), Key: aws.String(key)})
	if code(err) != "AccessDenied" {
		t.Errorf("DeleteObject: %v, want AccessDenied", err)
	}
	_, err = s.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(checkpointBucket), Key: aws.String(key), Body: bytes.NewReader([]byte("forged"))})
	if code(err) != "AccessDenied" {
		t.Errorf("PutObject over it: %v, want AccessDenied", err)
	}
	_, err = s.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(checkpointBucket), Key: aws.String(key), Body: bytes.NewReader([]byte("forged")), IfNoneMatch: aws.String("*")})
	if code(err) != "PreconditionFailed" {
		t.Errorf("conditional PutObject over it: %v, want PreconditionFailed", err)
	}
	if after := s.object(t, key); !bytes.Equal(after, before) {
		t.Errorf("checkpoint changed:\n%s\nwas\n%s", after, before)
	}
}

// An object nobody signed at the key a tenant's next checkpoint belongs at
// (anyone who may write the bucket can put one, and Object Lock keeps it a
// year) is a CheckpointInvalid finding, logged and counted: the walk answers
// 200 with its verdict, for that tenant and for the all-tenant walk, and
// the tenant's next seq is signed at a key of its own.
func TestInvalidObjectAtNextCheckpointKey(t *testing.T) {
	s := newSigned(t)
	s.emit(t, "acme", 5)
	s.emit(t, "beta", 2)
	key := reconcile.CheckpointKey("acme", 5)
	fake := "fourlanes/test/acme\n5\n" + strings.Repeat("A", 43) + "=\ntime 2026-11-30T00:00:00Z\n\n— fourlanes/test AAAAAAAA\n"
	for _, body := range []string{fake, "not a note at all"} {
		k := key
		if body != fake {
			k = reconcile.CheckpointKey("beta", 2)
		}
		if _, err := s.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(checkpointBucket),
			Key: aws.String(k), Body: strings.NewReader(body), IfNoneMatch: aws.String("*")}); err != nil {
			t.Fatal(err)
		}
	}
	finding := func(t *testing.T, body map[string]any, key string) {
		t.Helper()
		fs, _ := body["findings"].([]any)
		if len(fs) != 1 {
			t.Fatalf("findings: got %v, want one %s for %s", body["findings"], reconcile.FindingCheckpointInvalid, key)
		}
		f := fs[0].(map[string]any)
		if f["kind"] != reconcile.FindingCheckpointInvalid || f["key"] != key || f["reason"] == "" {
			t.Errorf("finding: got %v, want kind %s key %s and a reason", f, reconcile.FindingCheckpointInvalid, key)
		}
	}
	body := s.get(t, "tenant=acme")
	want(t, body, map[string]any{"chain_intact": true, "complete": true, "checkpoint_seq": 0})
	finding(t, body, key)

	// The all-tenant walk the schedule runs: every tenant answered, 200.
	all := s.get(t, "")
	ts, _ := all["tenants"].([]any)
	if len(ts) != 2 {
		t.Fatalf("tenants: got %v, want acme and beta", all["tenants"])
	}
	for _, x := range ts {
		r := x.(map[string]any)
		want(t, r, map[string]any{"chain_intact": true, "checkpoint_seq": 0})
		finding(t, r, reconcile.CheckpointKey(r["tenant"].(string), num(t, r, "last_seq")))
	}
	if n := emfCount(t, s.emf, keys.MetricCheckpointInvalid); n < 3 {
		t.Errorf("%s = %d, want >= 3 (one per walk that met an invalid object)", keys.MetricCheckpointInvalid, n)
	}
	logged := false
	for _, l := range lines(t, s.logs) {
		if l["level"] == "ERROR" && l["key"] == key {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no ERROR log line names %s:\n%s", key, s.logs)
	}

	// The next seq has a key of its own: the notary signs it. The walk
	// then starts at the signed seq 7 and finds nothing newer that does
	// not verify.
	s.emit(t, "acme", 2)
	if seq := s.sign(t, "acme"); seq != 7 {
		t.Fatalf("signed seq %d, want 7", seq)
	}
	body = s.get(t, "tenant=acme")
	want(t, body, map[string]any{"chain_intact": true, "checkpoint_seq": 7, "trusted_through": 7})
	if body["findings"] != nil {
		t.Errorf("findings: got %v, want none once seq 7 is signed", body["findings"])
	}
}

// A delete marker over the newest checkpoint (S3 lets a plain DeleteObject
// add one; the stack's bucket policy denies it, but whoever can lift that
// policy can add it) hides the key from a listing of objects, not from a
// listing of versions. Reconcile reads the versions: the hidden checkpoint
// still anchors the walk, a rollback below it is still a break, and the
// marker is reported.
func TestCheckpointHiddenByDeleteMarker(t *testing.T) {
	s := newSignedBucket(t, false)
	s.emit(t, "acme", 5)
	s.sign(t, "acme")
	s.emit(t, "acme", 3)
	s.sign(t, "acme")
	want(t, s.get(t, "tenant=acme"), map[string]any{"chain_intact": true, "checkpoint_seq": 8})
	if _, err := s.s3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(checkpointBucket),
		Key: aws.String(reconcile.CheckpointKey("acme", 8))}); err != nil {
		t.Fatal(err)
	}
	if objs := s.objects(t, "acme"); len(objs) != 1 || objs[0] != reconcile.CheckpointKey("acme", 5) {
		t.Fatalf("objects listed after the delete marker = %v, want only seq 5's (the marker hides seq 8's)", objs)
	}
	// A consistent rewrite of seq 6..8: hidden behind the marker, the seq 8
	// checkpoint must still catch it.
	s.rewrite(t, "acme", 6, 8)
	body := s.get(t, "tenant=acme")
	want(t, body, map[string]any{"chain_intact": false, "checkpoint_seq": 8})
	if seq, reason := breakOf(t, body); seq != 8 || reason != string(reconcile.ReasonCheckpointMismatch) {
		t.Errorf("break at %d (%s), want 8 (%s)", seq, reason, reconcile.ReasonCheckpointMismatch)
	}
	if n := emfCount(t, s.emf, keys.MetricCheckpointInvalid); n < 1 {
		t.Errorf("%s = %d, want >= 1 for the delete marker", keys.MetricCheckpointInvalid, n)
	}
}

// The notary's signer writes each checkpoint once: signing the same
// (seq, hash) again (a retried batch) is success; a key already holding
// another hash, or an object that does not verify, is ErrOccupied, and the
// object there is left as it was.
func TestNotarySignsOnce(t *testing.T) {
	s := newSigned(t)
	ctx := context.Background()
	s.emit(t, "acme", 3)
	seq := s.sign(t, "acme")
	if seq != 3 {
		t.Fatalf("signed seq %d, want 3", seq)
	}
	key := reconcile.CheckpointKey("acme", 3)
	before := s.object(t, key)
	head := s.item(t, "acme", keys.HeadSeq)[keys.AttrLastHash].(*types.AttributeValueMemberS).Value
	if err := s.notary.Sign(ctx, "acme", 3, head); err != nil {
		t.Errorf("signing the same checkpoint again: %v, want nil", err)
	}
	if err := s.notary.Sign(ctx, "acme", 3, strings.Repeat("ab", 32)); !errors.Is(err, notary.ErrOccupied) {
		t.Errorf("signing another hash at seq 3: %v, want ErrOccupied", err)
	}
	if _, err := s.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(checkpointBucket), Key: aws.String(reconcile.CheckpointKey("acme", 4)),
		Body: strings.NewReader("not a note"), IfNoneMatch: aws.String("*")}); err != nil {
		t.Fatal(err)
	}
	if err := s.notary.Sign(ctx, "acme", 4, strings.Repeat("cd", 32)); !errors.Is(err, notary.ErrOccupied) {
		t.Errorf("signing over an object that does not verify: %v, want ErrOccupied", err)
	}
	if after := s.object(t, key); !bytes.Equal(after, before) {
		t.Errorf("checkpoint at seq 3 changed:\n%s\nwas\n%s", after, before)
	}
}
