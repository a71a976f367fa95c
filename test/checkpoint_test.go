package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// cli runs the fourlanes CLI against the twin's DynamoDB and S3 and returns
// its exit code, standard output and standard error.
func (s *stack) cli2(args ...string) (int, string, string) {
	s.t.Helper()
	cmd := exec.CommandContext(s.t.Context(), s.cli, args...)
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_DYNAMODB="+s.ddbEndpoint(), "AWS_ENDPOINT_URL_S3="+s.tw.S3Endpoint(),
		"AWS_ENDPOINT_URL_LAMBDA="+s.tw.InvokeEndpoint(),
		"AWS_REGION="+localaws.Region, "AWS_ACCESS_KEY_ID=fourlanes", "AWS_SECRET_ACCESS_KEY=local",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

func (s *stack) ddbEndpoint() string {
	return aws.ToString(s.ddb.Options().BaseEndpoint)
}

// TestSignedCheckpointOnTwin is issue 13's "must show" for signed
// checkpoints, on the synthesized stack: the notary signs a checkpoint of
// what it saw appended with the template's KMS key into its Object Lock
// bucket; a consistent re-hash of the tail (PutItem on the events table,
// head moved) is reported by the notary and reconcile and never signed; the export of the forged log verifies alone but
// fails `verify -checkpoint`; the checkpoint object cannot be deleted or
// overwritten.
func TestSignedCheckpointOnTwin(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, nil)
	ctx := context.Background()
	const tenant = "acme"
	env, err := s.tw.FunctionEnv(s.fn[keys.FnReconcile])
	if err != nil {
		t.Fatal(err)
	}
	bucket, keyID, table := env[keys.EnvCheckpointBucket], env[keys.EnvCheckpointKey], s.env[keys.EnvEventsTable]
	origin := env[keys.EnvCheckpointLog] // the log every note of this stack is signed for
	if bucket == "" || keyID == "" || env[keys.EnvCheckpointLog] == "" {
		t.Fatalf("reconcile's environment lacks the checkpoint bucket, key or log: %v", env)
	}
	for i := range 3 {
		if _, err := s.app.Order(ctx, tenant, i); err != nil {
			t.Fatal(err)
		}
	}
	r := s.reconcile(tenant)
	if r.ChainIntact == nil || !*r.ChainIntact {
		t.Fatalf("reconcile before the forgery: %+v", r)
	}
	// The notary signs the head it saw appended; reconcile signs nothing.
	n := &notarized{stack: s, bucket: bucket, log: env[keys.EnvCheckpointLog], table: table,
		s3: s3.NewFromConfig(localaws.Config(), func(o *s3.Options) { o.BaseEndpoint = aws.String(s.tw.S3Endpoint()); o.UsePathStyle = true })}

	// The public key, as `aws kms get-public-key` would give it.
	kc := kms.NewFromConfig(localaws.Config(), func(o *kms.Options) { o.BaseEndpoint = aws.String(s.tw.KMSEndpoint()) })
	pk, err := kc.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(keyID)})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := checkpoint.ParsePublicKey(pk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	n.pub = pub
	n.settled(t, tenant)
	signedSeq, _ := n.head(t, tenant)
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "checkpoint-key.pem")
	if err := os.WriteFile(pemFile, pub.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}

	// An honest export extends the signed checkpoint.
	honest := filepath.Join(dir, "honest.jsonl")
	code, out, errOut := s.cli2("export", "-tenant", tenant, "-table", table, "-o", honest, "-checkpoint-bucket", bucket)
	if code != 0 || !strings.Contains(errOut, "signed checkpoint at seq "+strconv.FormatInt(signedSeq, 10)) || !strings.Contains(errOut, "last_hash ") {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := s.cli2("verify", "-checkpoint", honest+".checkpoint", "-origin", origin, "-key", pemFile, honest); code != 0 || !strings.Contains(out, "OK extends the checkpoint") {
		t.Fatalf("verify -checkpoint of the honest export: exit %d\n%s%s", code, out, errOut)
	}

	// More honest events, then the forgery: from seq 2 on, every event
	// re-sealed (payload edited at 2, hashes recomputed and linked) and the
	// head moved to the new last hash, by PutItem on the events table.
	if _, err := s.app.Order(ctx, tenant, 3); err != nil {
		t.Fatal(err)
	}
	honestHashes := n.settled(t, tenant)
	head := s.item(t, table, tenant, keys.HeadSeq)
	last, _ := strconv.ParseInt(head[keys.AttrLastSeq].(*types.AttributeValueMemberN).Value, 10, 64)
	var prev string
	for seq := int64(2); seq <= last; seq++ {
		e, err := envelope.FromItem(s.item(t, table, tenant, seq))
		if err != nil {
			t.Fatal(err)
		}
		if seq == 2 {
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
		if _, err := s.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	head[keys.AttrLastHash] = &types.AttributeValueMemberS{Value: prev}
	if _, err := s.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: head}); err != nil {
		t.Fatal(err)
	}

	// Reconcile reports it (the CLI exits with a finding) and does not adopt it.
	r = reconcileReport{}
	if out := s.reconcileCLI("-url", s.url, "-tenant", tenant); json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("reconcile output %q", out)
	}
	if r.ChainIntact == nil || *r.ChainIntact || !strings.Contains(string(r.FirstBreak), string(reconcile.ReasonCheckpointMismatch)) {
		t.Errorf("reconcile after the forgery: intact %v, first_break %s; want %q", r.ChainIntact, r.FirstBreak, reconcile.ReasonCheckpointMismatch)
	}
	sc := n.s3
	n.finding(t, "rewrite", tenant)
	n.caughtUp(t)
	n.neverSignedOver(t, tenant, honestHashes)

	// The forged export verifies alone (it is consistent) but not against
	// the signed checkpoint.
	forged := filepath.Join(dir, "forged.jsonl")
	if code, out, errOut := s.cli2("export", "-tenant", tenant, "-table", table, "-o", forged, "-checkpoint-bucket", bucket); code != 0 {
		t.Fatalf("export of the forged log: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := s.cli2("verify", forged); code != 0 {
		t.Fatalf("verify of the forged export without the checkpoint: exit %d %s (it is consistent: want OK)", code, out)
	}
	code, out, errOut = s.cli2("verify", "-checkpoint", forged+".checkpoint", "-origin", origin, "-key", pemFile, forged)
	if code == 0 || !strings.Contains(out, "BROKEN") || !strings.Contains(out, string(reconcile.ReasonCheckpointMismatch)) {
		t.Errorf("verify -checkpoint of the forged export: exit %d, want a checkpoint mismatch\n%s%s", code, out, errOut)
	}
	// The honest export cut after seq 1, with a head line to match (so it
	// verifies alone), fails against the checkpoint.
	b, _ := os.ReadFile(honest)
	first, _, _ := strings.Cut(string(b), "\n")
	var e1 struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(first), &e1); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.jsonl")
	os.WriteFile(truncated, []byte(first+"\n"+`{"head":{"tenant_id":"`+tenant+`","last_seq":1,"last_hash":"`+e1.Hash+`"}}`+"\n"), 0o644)
	if code, out, _ := s.cli2("verify", truncated); code != 0 {
		t.Fatalf("verify of the cut export alone: exit %d %s, want OK", code, out)
	}
	if code, out, _ := s.cli2("verify", "-checkpoint", honest+".checkpoint", "-origin", origin, "-key", pemFile, truncated); code == 0 || !strings.Contains(out, "truncated below checkpoint") {
		t.Errorf("verify -checkpoint of a one-event export: exit %d, want truncated below checkpoint\n%s", code, out)
	}
	// Pinned trust: the same note checked for another stack's log, or with
	// a key that did not sign it, is refused.
	if code, out, _ := s.cli2("verify", "-checkpoint", honest+".checkpoint", "-origin", "fourlanes/other-stack", "-key", pemFile, honest); code == 0 || !strings.Contains(out, "BROKEN checkpoint") || !strings.Contains(out, "not \"fourlanes/other-stack\"") {
		t.Errorf("verify -checkpoint -origin of another stack: exit %d, want BROKEN checkpoint naming both logs\n%s", code, out)
	}

	// A rollback: the head moved back to seq 1. The newest checkpoint is
	// the notary's of the last honest head (seq last). Export does not pick an
	// older checkpoint (there is none at or below seq 1): it exits 3, says
	// ROLLBACK, and writes the newest note beside the export, which verify
	// then proves the export falls short of.
	head = s.item(t, table, tenant, keys.HeadSeq)
	head[keys.AttrLastSeq] = &types.AttributeValueMemberN{Value: "1"}
	head[keys.AttrLastHash] = &types.AttributeValueMemberS{Value: e1.Hash}
	if _, err := s.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: head}); err != nil {
		t.Fatal(err)
	}
	rolled := filepath.Join(dir, "rolled.jsonl")
	code, out, errOut = s.cli2("export", "-tenant", tenant, "-table", table, "-o", rolled, "-checkpoint-bucket", bucket)
	if code != 3 || !strings.Contains(errOut, "ROLLBACK: tenant "+tenant+"'s head is at seq 1, behind the newest checkpoint object, at seq "+strconv.FormatInt(last, 10)) {
		t.Errorf("export after a head rollback: exit %d, want 3 and ROLLBACK\n%s%s", code, out, errOut)
	}
	if code, out, _ := s.cli2("verify", "-checkpoint", rolled+".checkpoint", "-origin", origin, "-key", pemFile, rolled); code == 0 || !strings.Contains(out, "truncated below checkpoint") {
		t.Errorf("verify -checkpoint of the rolled-back export: exit %d, want truncated below checkpoint\n%s", code, out)
	}

	// The checkpoint object cannot be deleted or overwritten.
	key := reconcile.CheckpointKey(tenant, signedSeq)
	apiCode := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return ""
	}
	if _, err := sc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); apiCode(err) != "AccessDenied" {
		t.Errorf("DeleteObject of the checkpoint: %v, want AccessDenied", err)
	}
	if _, err := sc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("forged")}); apiCode(err) != "AccessDenied" {
		t.Errorf("PutObject over the checkpoint: %v, want AccessDenied", err)
	}
	if _, err := sc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("forged"),
		IfNoneMatch: aws.String("*")}); apiCode(err) != "PreconditionFailed" {
		t.Errorf("conditional PutObject over the checkpoint: %v, want PreconditionFailed", err)
	}
}

func (s *stack) item(t *testing.T, table, tenant string, seq int64) map[string]types.AttributeValue {
	t.Helper()
	out, err := s.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
			keys.AttrSeq: &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)}}})
	if err != nil || out.Item == nil {
		t.Fatalf("%s seq %d: %v", tenant, seq, err)
	}
	return out.Item
}
