package twin

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// S3 is the twin's S3: gofakes3 (in memory, path-style, versioning, and
// conditional puts) behind a front that adds what gofakes3 lacks, Object
// Lock. For a bucket created with Object Lock enabled (header
// x-amz-bucket-object-lock-enabled, or ObjectLockEnabled in the template)
// the front
//
//   - turns versioning on, as S3 does;
//   - keeps the default retention (PUT/GET ?object-lock) and stamps every
//     new object with it;
//   - refuses (403 AccessDenied) a DeleteObject, with or without versionId,
//     a DeleteObjects, and a PUT ?retention or ?legal-hold on an object
//     whose retention runs;
//   - refuses a PutObject or CopyObject onto an existing key unless it asks
//     If-None-Match: * (which gofakes3 then answers 412).
//
// S3 itself lets a plain DeleteObject add a delete marker and a plain put
// add a version over a locked one; the stack's bucket policy denies both
// (infra/backbone/checkpoint.go), and the twin does not evaluate IAM, so the
// front applies those two denials itself: what a role of the stack can do
// to a checkpoint on the twin is what it can do in AWS.
type S3 struct {
	backend *s3mem.Backend
	fake    http.Handler
	now     func() time.Time

	mu    sync.Mutex
	locks map[string]*bucketLock
}

// ObjectLock is a bucket's default retention.
type ObjectLock struct {
	Mode  string // COMPLIANCE or GOVERNANCE
	Days  int
	Years int
}

func (l ObjectLock) until(t time.Time) time.Time { return t.AddDate(l.Years, 0, l.Days) }

type bucketLock struct {
	rule   *ObjectLock
	retain map[string]time.Time // key → retain-until of its newest version
}

// NewS3 returns an empty S3; now is its clock (nil: time.Now).
func NewS3(now func() time.Time) *S3 {
	if now == nil {
		now = time.Now
	}
	b := s3mem.New()
	return &S3{backend: b, fake: gofakes3.New(b).Server(), now: now, locks: map[string]*bucketLock{}}
}

// CreateBucket creates a bucket; with lock it has Object Lock enabled and
// that default retention (nil rule: enabled, no default).
func (s *S3) CreateBucket(name string, lockEnabled bool, rule *ObjectLock) error {
	if err := s.backend.CreateBucket(name); err != nil {
		return err
	}
	if !lockEnabled {
		return nil
	}
	if err := s.backend.SetVersioningConfiguration(name, gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled}); err != nil {
		return err
	}
	s.mu.Lock()
	s.locks[name] = &bucketLock{rule: rule, retain: map[string]time.Time{}}
	s.mu.Unlock()
	return nil
}

type objectLockConfiguration struct {
	XMLName           xml.Name `xml:"ObjectLockConfiguration"`
	ObjectLockEnabled string   `xml:"ObjectLockEnabled,omitempty"`
	Rule              *struct {
		DefaultRetention struct {
			Mode  string `xml:"Mode"`
			Days  int    `xml:"Days,omitempty"`
			Years int    `xml:"Years,omitempty"`
		} `xml:"DefaultRetention"`
	} `xml:"Rule,omitempty"`
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n<Error><Code>%s</Code><Message>%s</Message></Error>", code, xmlEscape(msg))
}

func xmlEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// ServeHTTP enforces Object Lock, then hands the request to gofakes3.
func (s *S3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, object, _ := strings.Cut(path, "/")
	q := r.URL.Query()
	q.Del("x-id") // the SDK names the operation in the query (?x-id=PutObject)
	if bucket != "" && object == "" && r.Method == http.MethodPut && len(q) == 0 &&
		strings.EqualFold(r.Header.Get("x-amz-bucket-object-lock-enabled"), "true") {
		if err := s.CreateBucket(bucket, true, nil); err != nil {
			s3Error(w, http.StatusConflict, "BucketAlreadyOwnedByYou", err.Error())
			return
		}
		w.Header().Set("Location", "/"+bucket)
		return
	}
	s.mu.Lock()
	lock := s.locks[bucket]
	s.mu.Unlock()
	if _, ok := q["object-lock"]; ok && object == "" {
		s.objectLockConfig(w, r, bucket, lock)
		return
	}
	if lock == nil {
		s.fake.ServeHTTP(w, r)
		return
	}
	now := s.now()
	s.mu.Lock()
	retained := now.Before(lock.retain[object])
	s.mu.Unlock()
	_, hasDelete := q["delete"]
	_, hasRetention := q["retention"]
	_, hasHold := q["legal-hold"]
	switch {
	case object == "" && r.Method == http.MethodPost && hasDelete:
		s3Error(w, http.StatusForbidden, "AccessDenied", "the twin refuses DeleteObjects in an Object Lock bucket")
		return
	case object != "" && r.Method == http.MethodDelete && retained:
		s3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied because object protected by object lock.")
		return
	case object != "" && (hasRetention || hasHold) && retained:
		s3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied because object protected by object lock.")
		return
	case object != "" && r.Method == http.MethodPut && len(q) == 0:
		if _, err := s.backend.HeadObject(bucket, object); err == nil && r.Header.Get("If-None-Match") != "*" {
			s3Error(w, http.StatusForbidden, "AccessDenied", "explicit deny in the bucket policy: a put onto an existing key must send If-None-Match: *")
			return
		}
		rec := &statusWriter{ResponseWriter: w}
		s.fake.ServeHTTP(rec, r)
		if (rec.status == 0 || rec.status/100 == 2) && lock.rule != nil { // no WriteHeader: 200
			until := lock.rule.until(now)
			s.mu.Lock()
			lock.retain[object] = until
			s.mu.Unlock()
		}
		return
	}
	s.fake.ServeHTTP(w, r)
}

func (s *S3) objectLockConfig(w http.ResponseWriter, r *http.Request, bucket string, lock *bucketLock) {
	switch {
	case lock == nil:
		s3Error(w, http.StatusNotFound, "ObjectLockConfigurationNotFoundError", "Object Lock configuration does not exist for this bucket")
	case r.Method == http.MethodGet:
		c := objectLockConfiguration{ObjectLockEnabled: "Enabled"}
		s.mu.Lock()
		if rule := lock.rule; rule != nil {
			c.Rule = &struct {
				DefaultRetention struct {
					Mode  string `xml:"Mode"`
					Days  int    `xml:"Days,omitempty"`
					Years int    `xml:"Years,omitempty"`
				} `xml:"DefaultRetention"`
			}{}
			c.Rule.DefaultRetention.Mode, c.Rule.DefaultRetention.Days, c.Rule.DefaultRetention.Years = rule.Mode, rule.Days, rule.Years
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/xml")
		xml.NewEncoder(w).Encode(c)
	case r.Method == http.MethodPut:
		var c objectLockConfiguration
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		if err := xml.Unmarshal(body, &c); err != nil {
			s3Error(w, http.StatusBadRequest, "MalformedXML", err.Error())
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if old := lock.rule; old != nil && old.Mode == "COMPLIANCE" && (c.Rule == nil || c.Rule.DefaultRetention.Mode != "COMPLIANCE") {
			// Existing objects keep their retention either way; the twin
			// also keeps a COMPLIANCE default from being dropped.
			s3Error(w, http.StatusForbidden, "AccessDenied", "the twin refuses to drop a COMPLIANCE default retention")
			return
		}
		if c.Rule != nil {
			d := c.Rule.DefaultRetention
			lock.rule = &ObjectLock{Mode: d.Mode, Days: d.Days, Years: d.Years}
		}
	default:
		s3Error(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method)
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// S3Endpoint is the twin's S3, started on first use; functions get it as
// AWS_ENDPOINT_URL_S3 (path-style: the SDK uses it for an IP endpoint).
func (tw *Twin) S3Endpoint() string {
	tw.startLocalAWS()
	return tw.local.s3URL
}

// S3 returns the twin's S3 server.
func (tw *Twin) S3() *S3 {
	tw.startLocalAWS()
	return tw.local.s3
}

// localAWS is the twin's KMS and S3, in this process on loopback.
type localAWS struct {
	once          sync.Once
	kms           *KMS
	s3            *S3
	kmsURL, s3URL string
	err           error
}

func (tw *Twin) startLocalAWS() {
	tw.local.once.Do(func() {
		tw.local.kms, tw.local.s3 = NewKMS(), NewS3(tw.cfg.Now)
		if tw.local.kmsURL, tw.local.err = tw.serve("KMS", tw.cfg.Ports.KMS, tw.local.kms); tw.local.err != nil {
			return
		}
		tw.local.s3URL, tw.local.err = tw.serve("S3", tw.cfg.Ports.S3, tw.local.s3)
	})
}

// createBucket creates an AWS::S3::Bucket: BucketName, ObjectLockEnabled and
// ObjectLockConfiguration.Rule.DefaultRetention (Mode, Days, Years).
// Encryption, public access blocks, versioning (on anyway with Object
// Lock) and policies are AWS-side only. Ref: name. GetAtt: Arn, DomainName,
// RegionalDomainName.
func (tw *Twin) createBucket(_ context.Context, res *cfn.Resource) (*resource, error) {
	name := strings.ToLower(tw.name(res.LogicalID, 63))
	if v, ok, err := tw.rv.Prop(res, "BucketName"); err != nil {
		return nil, err
	} else if ok {
		name = fmt.Sprint(v)
	}
	enabled, _, err := tw.rv.Prop(res, "ObjectLockEnabled")
	if err != nil {
		return nil, err
	}
	var rule *ObjectLock
	if d, ok, err := tw.rv.Prop(res, "ObjectLockConfiguration", "Rule", "DefaultRetention"); err != nil {
		return nil, err
	} else if m, isMap := d.(map[string]any); ok && isMap {
		rule = &ObjectLock{Mode: fmt.Sprint(m["Mode"])}
		for k, dst := range map[string]*int{"Days": &rule.Days, "Years": &rule.Years} {
			if v, ok := m[k]; ok {
				if *dst, err = toIntAny(v); err != nil {
					return nil, fmt.Errorf("ObjectLockConfiguration DefaultRetention %s: %w", k, err)
				}
			}
		}
	}
	tw.startLocalAWS()
	if tw.local.err != nil {
		return nil, tw.local.err
	}
	locked := enabled == true || enabled == "true"
	if err := tw.local.s3.CreateBucket(name, locked, rule); err != nil {
		return nil, err
	}
	tw.log.Info("twin: S3 bucket", obs.KeyLogicalID, res.LogicalID, obs.KeyName, name, obs.KeyObjectLock, locked, obs.KeyRetention, rule)
	return &resource{id: res.LogicalID, typ: res.Type, ref: name, attrs: map[string]any{
		"Arn": "arn:aws:s3:::" + name, "DomainName": name + ".s3.amazonaws.com",
		"RegionalDomainName": name + ".s3." + localaws.Region + ".amazonaws.com"}}, nil
}

func toIntAny(v any) (int, error) {
	switch x := v.(type) {
	case float64:
		return int(x), nil
	case int:
		return x, nil
	case string:
		var n int
		_, err := fmt.Sscan(x, &n)
		return n, err
	}
	return 0, fmt.Errorf("not a number: %v", v)
}
