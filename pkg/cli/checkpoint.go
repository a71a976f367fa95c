package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
)

// checkpointSource says where export finds signed checkpoints: a bucket
// and, for the twin, its S3 endpoint.
type checkpointSource struct {
	bucket, endpoint string
}

func localCheckpointSource() (checkpointSource, error) {
	st, err := readState()
	if err != nil {
		return checkpointSource{}, err
	}
	return checkpointSource{bucket: st.Outputs[keys.OutputCheckpointBucket], endpoint: st.S3Endpoint}, nil
}

// latestCheckpoint returns the newest checkpoint object of tenant,
// unverified: `fourlanes verify -checkpoint` verifies it, offline. nil if
// none. Its seq may be above the head the export reached: the caller says
// so, rather than pick an older one.
func latestCheckpoint(ctx context.Context, fs *flag.FlagSet, src checkpointSource, tenant string) ([]byte, string, error) {
	cfg, err := awsConfig(ctx, fs, src.endpoint != "")
	if err != nil {
		return nil, "", err
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if src.endpoint != "" {
			o.BaseEndpoint = aws.String(src.endpoint)
		}
		// A local endpoint (the twin) serves buckets by path.
		o.UsePathStyle = src.endpoint != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != ""
		// A response without a checksum (the twin's S3 keeps none) is
		// still read; the SDK's DEBUG line about it would only interrupt
		// the command's own output, and the note is verified by its
		// signature, not by a transport checksum.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	// Keys list newest first (reconcile.CheckpointKey).
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(src.bucket),
		Prefix: aws.String(reconcile.CheckpointPrefix(tenant))})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("list checkpoints in %s: %w", src.bucket, err)
		}
		for _, o := range page.Contents {
			if _, ok := reconcile.CheckpointSeqOfKey(aws.ToString(o.Key)); !ok {
				continue
			}
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(src.bucket), Key: o.Key})
			if err != nil {
				return nil, "", fmt.Errorf("read checkpoint %s: %w", aws.ToString(o.Key), err)
			}
			b, err := io.ReadAll(io.LimitReader(out.Body, 64<<10))
			out.Body.Close()
			return b, aws.ToString(o.Key), err
		}
	}
	return nil, "", nil
}

// checkCheckpoint proves that the export in file (already verified from
// genesis, so its lines are well formed and unambiguous) extends the signed
// checkpoint: same tenant, the event at the checkpoint's seq present with
// the checkpoint's hash. It returns a break, or nil.
func checkCheckpoint(file string, cp checkpoint.Checkpoint, sum chain.ExportSummary) (*chain.BreakError, error) {
	brk := func(seq int64, reason chain.Reason, expected, got string) *chain.BreakError {
		return &chain.BreakError{Tenant: sum.Tenant, Seq: seq, Reason: reason, Expected: expected, Got: got}
	}
	if cp.Tenant != sum.Tenant {
		return brk(1, chain.ReasonWrongTenant, "tenant "+cp.Tenant+" (the checkpoint's)", "tenant "+sum.Tenant), nil
	}
	if cp.Seq == 0 {
		return nil, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 9<<20)
	for sc.Scan() {
		var e struct {
			Seq  int64  `json:"seq"`
			Hash string `json:"hash"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Seq != cp.Seq {
			continue
		}
		if e.Hash != cp.Hash {
			return brk(cp.Seq, reconcile.ReasonCheckpointMismatch, "hash "+cp.Hash+" (signed at "+cp.Time.Format("2006-01-02T15:04:05Z")+")", "hash "+e.Hash), nil
		}
		return nil, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return brk(sum.Events+1, "truncated below checkpoint", fmt.Sprintf("events through seq %d (the signed checkpoint)", cp.Seq),
		fmt.Sprintf("the export ends at seq %d", sum.Events)), nil
}
