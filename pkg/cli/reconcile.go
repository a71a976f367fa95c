package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// EnvReconcileURL is the default for reconcile's -url.
const EnvReconcileURL = "FOURLANES_RECONCILE_URL"

const reconcileSynopsis = "[-url URL | -stack NAME [-backbone ID] | -local] [-tenant T] [-full] [-limit N] [-max-events N] [-cursor C] [-json]"

// runReconcile asks the reconcile Function URL about one tenant or, page
// after page, every tenant, prints each answer, and exits ExitFinding when
// any answer reports a finding (findings).
func runReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("reconcile", reconcileSynopsis, stderr)
	u := fs.String("url", os.Getenv(EnvReconcileURL), "reconcile's Function URL (the stack output ReconcileUrl; default $"+EnvReconcileURL+")")
	local := fs.Bool("local", false, "use the URL of the twin 'fourlanes dev' is running")
	stack := fs.String("stack", "", stackHelp+" (ReconcileUrl)")
	fs.String(backboneFlag, "", backboneHelp)
	tenant := fs.String("tenant", "", "one tenant (every chain of a tenant with chain shards) or one chain (<tenant>~<k>); without it every tenant, page after page")
	full := fs.Bool("full", false, "walk every chain from genesis instead of from its checkpoint (?full=true)")
	cursor := fs.String("cursor", "", "resume from a cursor an earlier answer returned")
	limit := fs.Int("limit", 0, "tenants per page without -tenant (1-100; default: the function's, 20)")
	maxEvents := fs.Int64("max-events", 0, "events verified per call before the function answers with a cursor (default: no limit)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	asJSON := fs.Bool("json", false, "print each answer on one line (JSON Lines) instead of indented; the members are the same")
	addAWSFlags(fs)
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if err := checkLocal(fs, *local); err != nil {
		return 0, err
	}
	if *limit != 0 && *tenant != "" {
		return 0, fmt.Errorf("%w: -limit pages the list of tenants; it does not apply with -tenant", ErrUsage)
	}
	if *limit < 0 || *maxEvents < 0 {
		return 0, fmt.Errorf("%w: -limit and -max-events must be positive", ErrUsage)
	}
	so, err := openStack(ctx, fs, *stack, *local)
	if err != nil {
		return 0, err
	}
	if err := so.fill("url", u, keys.OutputReconcileURL); err != nil {
		return 0, err
	}
	if *local {
		st, err := readState()
		if err != nil {
			return 0, err
		}
		*u = st.ReconcileURL
	}
	if *u == "" {
		return 0, fmt.Errorf("%w: no URL: pass -url (the stack output ReconcileUrl), -stack NAME, set $%s, or -local for the twin", ErrUsage, EnvReconcileURL)
	}
	base, err := url.Parse(*u)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return 0, fmt.Errorf("%w: -url %q is not an absolute URL", ErrUsage, *u)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c := &reconcileClient{http: &http.Client{Timeout: *timeout}}
	if !isLoopback(base.Hostname()) {
		// AWS_IAM: sign with the default credential chain (or --profile's),
		// service lambda, in the URL's region: the function's, whatever
		// --region says; --region counts for a URL without one.
		cfg, err := config.LoadDefaultConfig(ctx, awsOptions(fs)...)
		if err != nil {
			return 0, fmt.Errorf("AWS configuration: %w", err)
		}
		region := regionOfURL(base.Hostname())
		if region == "" {
			region = cfg.Region
		}
		if region == "" {
			return 0, fmt.Errorf("cannot tell the region of %s: set AWS_REGION", base.Host)
		}
		c.creds, c.region = cfg.Credentials, region
	}
	var found findings
	next := *cursor
	for {
		q := url.Values{}
		if *tenant != "" {
			q.Set("tenant", *tenant)
		}
		// The names are the handler's (pkg/reconcile parseParams); TestReconcileFlagsReachHandler
		// sends every flag to the real handler.
		if *full {
			q.Set("full", "true")
		}
		if *limit > 0 {
			q.Set("limit", strconv.Itoa(*limit))
		}
		if *maxEvents > 0 {
			q.Set("max_events", strconv.FormatInt(*maxEvents, 10))
		}
		if next != "" {
			q.Set("cursor", next)
		}
		body, err := c.get(ctx, base, q)
		if err != nil {
			return 0, err
		}
		var page reconcilePage
		if err := json.Unmarshal(body, &page); err != nil {
			return 0, fmt.Errorf("reconcile answered something that is not JSON: %w: %s", err, clip(body))
		}
		found.add(page)
		var out bytes.Buffer
		if *asJSON {
			err = json.Compact(&out, body)
		} else {
			err = json.Indent(&out, body, "", "  ")
		}
		if err != nil {
			out.Reset()
			out.Write(bytes.TrimSpace(body))
		}
		fmt.Fprintln(stdout, out.String())
		if page.Cursor == nil || *page.Cursor == "" {
			break
		}
		next = *page.Cursor
	}
	if found.any() {
		found.write(stderr)
		return ExitFinding, nil
	}
	return ExitOK, nil
}

// reconcilePage is the part of an answer of reconcile (a TenantResult or an
// AllResult of pkg/reconcile) that says whether it found anything.
type reconcilePage struct {
	reconcileReport
	Cursor  *string           `json:"cursor"`
	Tenants []reconcileReport `json:"tenants"`
}

// reconcileReport is the part of a pkg/reconcile Report, and of a sharded
// tenant's summary, that findings reads.
type reconcileReport struct {
	Tenant          string `json:"tenant"`
	ChainIntact     *bool  `json:"chain_intact"`
	ChainsIntact    *bool  `json:"chains_intact"` // a tenant with chain shards: false when any of its chains broke
	DeadLetterCount int    `json:"dead_letter_count"`
	Subscriptions   []struct {
		Subscription   string `json:"subscription"`
		Unsettled      int64  `json:"unsettled"`
		EffectsUnknown int    `json:"effects_unknown"`
	} `json:"subscriptions"`
	Shards []reconcileReport `json:"shards"`
}

// findings are what reconcile's answers report wrong, each kind by chain
// (and subscription) in the order first seen: the reason reconcile exits
// ExitFinding. A later page about the same chain (a walk resumed from its
// cursor) replaces the earlier count.
type findings struct {
	broken, deadLetters, unsettled, unknown orderedCounts
}

func (f *findings) add(p reconcilePage) {
	f.report(p.reconcileReport)
	for _, t := range p.Tenants {
		f.report(t)
	}
}

func (f *findings) report(r reconcileReport) {
	if r.Tenant == "" {
		return // a page of tenants: its reports are in Tenants
	}
	if r.ChainIntact != nil && !*r.ChainIntact || r.ChainsIntact != nil && !*r.ChainsIntact {
		f.broken.set(r.Tenant, 0)
	}
	if r.DeadLetterCount > 0 {
		f.deadLetters.set(r.Tenant, int64(r.DeadLetterCount))
	}
	for _, s := range r.Subscriptions {
		if s.Unsettled > 0 {
			f.unsettled.set(r.Tenant+" "+s.Subscription, s.Unsettled)
		}
		if s.EffectsUnknown > 0 {
			f.unknown.set(r.Tenant+" "+s.Subscription, int64(s.EffectsUnknown))
		}
	}
	for _, s := range r.Shards {
		f.report(s)
	}
}

func (f *findings) any() bool {
	return len(f.broken.keys)+len(f.deadLetters.keys)+len(f.unsettled.keys)+len(f.unknown.keys) > 0
}

// write says on stderr which findings make the exit status 3, one line per kind.
func (f *findings) write(w io.Writer) {
	for _, k := range []struct {
		what string
		c    *orderedCounts
		then string
	}{
		{"a chain is broken", &f.broken, "see first_break; for a tenant with chain shards, broken_chains and each report in shards"},
		{"dead letters", &f.deadLetters, "fourlanes repair replays them; dead_letters lists them"},
		{"unsettled events", &f.unsettled, "events past the subscription's watermark, in flight or stuck; see subscriptions"},
		{"effects of unknown outcome", &f.unknown, "fourlanes effects lists them and takes the decision on each"},
	} {
		if len(k.c.keys) > 0 {
			fmt.Fprintf(w, "fourlanes reconcile: %s: %s (%s)\n", k.what, k.c.String(), k.then)
		}
	}
}

// orderedCounts is a count per key, in the order the keys came.
type orderedCounts struct {
	keys []string
	n    map[string]int64
}

func (c *orderedCounts) set(key string, n int64) {
	if c.n == nil {
		c.n = map[string]int64{}
	}
	if _, ok := c.n[key]; !ok {
		c.keys = append(c.keys, key)
	}
	c.n[key] = n
}

// String lists the first ten keys, each with its count if it has one.
func (c *orderedCounts) String() string {
	const show = 10
	var b strings.Builder
	for i, k := range c.keys {
		if i == show {
			fmt.Fprintf(&b, " and %d more", len(c.keys)-show)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		if n := c.n[k]; n > 0 {
			fmt.Fprintf(&b, " (%d)", n)
		}
	}
	return b.String()
}

type reconcileClient struct {
	http   *http.Client
	creds  aws.CredentialsProvider // nil: unsigned (the local twin)
	region string
}

// emptySHA256 is the payload hash of a GET.
var emptySHA256 = func() string { h := sha256.Sum256(nil); return hex.EncodeToString(h[:]) }()

func (c *reconcileClient) get(ctx context.Context, base *url.URL, q url.Values) ([]byte, error) {
	u := *base
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.creds != nil {
		creds, err := c.creds.Retrieve(ctx)
		if err != nil {
			return nil, fmt.Errorf("AWS credentials: %w", err)
		}
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, emptySHA256, "lambda", c.region, time.Now()); err != nil {
			return nil, fmt.Errorf("sign the request: %w", err)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	switch {
	case resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("GET %s: 403 Forbidden: the caller needs lambda:InvokeFunctionUrl and lambda:InvokeFunction on the function (attach the stack output ReconcileCallerPolicyArn): %s", u.Redacted(), clip(body))
	case resp.StatusCode >= 400:
		return nil, fmt.Errorf("GET %s: %s: %s", u.Redacted(), resp.Status, clip(body))
	}
	return body, nil
}

// regionOfURL reads the region from a Function URL host,
// <url-id>.lambda-url.<region>.on.aws.
func regionOfURL(host string) string {
	parts := strings.Split(host, ".")
	for i, p := range parts {
		if p == "lambda-url" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
