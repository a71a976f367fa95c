package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Request limits.
const (
	DefaultLimit = 20
	MaxLimit     = 100
	MaxEvents    = 10_000_000
)

// ParamError is a request the caller must change: a 400 naming the
// parameter and what to do.
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Msg }

// Handler serves reconcile behind a Lambda Function URL (payload format 2.0,
// BUFFERED invoke mode).
type Handler struct {
	r      *Reconciler
	log    *slog.Logger
	access *TenantAccess
}

// WithAccess makes h answer each verified caller of the Function URL only
// about the tenants a lets it see (a 403 otherwise); nil lets every caller
// see every tenant. It returns h.
func (h *Handler) WithAccess(a *TenantAccess) *Handler {
	h.access = a
	return h
}

// NewHandler returns the Function URL handler for r.
func NewHandler(r *Reconciler, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.Default()
	}
	return &Handler{r: r, log: log}
}

var accepted = []string{"cursor", "full", "limit", "max_events", "resume", "scheduled", "tenant"}

type params struct {
	tenant    string
	hasTenant bool
	mode      Mode
	cursor    string
	limit     int
	maxEvents int64
	scheduled bool
	resume    bool
}

// Handle answers GET ?tenant=T (one tenant) or GET (every tenant, paged),
// and, for EventBridge Scheduler's direct invoke only, GET ?scheduled=true
// (the next share of a scheduled round, Reconciler.Scheduled).
//
// tenant is a tenant id or a chain shard's name (T~1 … T~31: that chain
// alone). For a tenant id with chain shards the answer is the tenant's own
// chain's report, as for any tenant, plus "shards" (the reports of the other
// chains this call walked, in shard order), "chains" (how many chains the
// tenant has), "chains_intact" (false: a chain is broken; true: every chain
// walked to its end unbroken, this call and the earlier calls of its cursor;
// null: chains remain, pass cursor back) and "broken_chains" (their names).
// The chains share the call's max_events and time; the cursor resumes at
// the chain in progress, and a resumed call reports only the chains it
// walked, the first of them at the top level (see the package doc).
// It never returns an error: a bad request is a 400, a failure a 500 with
// the request id, both as JSON.
func (h *Handler) Handle(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	if obs.RequestID(ctx) == "" && req.RequestContext.RequestID != "" {
		ctx = obs.WithRequestID(ctx, req.RequestContext.RequestID)
	}
	h.logCaller(ctx, req)
	method := req.RequestContext.HTTP.Method
	if method != http.MethodGet {
		resp := h.fail(ctx, http.StatusMethodNotAllowed, fmt.Sprintf("method %s: reconcile answers GET only", method))
		resp.Headers["Allow"] = http.MethodGet
		return resp, nil
	}
	if p := req.RawPath; p != "" && p != "/" {
		return h.fail(ctx, http.StatusNotFound, fmt.Sprintf("path %s: reconcile is served at / (GET /?tenant=T, or GET / for every tenant)", p)), nil
	}
	p, err := parseParams(req)
	if err != nil {
		return h.fail(ctx, http.StatusBadRequest, err.Error()), nil
	}
	if rc := req.RequestContext; h.access != nil && !p.scheduled && rc.Authorizer != nil && rc.Authorizer.IAM != nil {
		if why := h.access.check(rc.Authorizer.IAM.UserARN, p.tenant, !p.hasTenant); why != "" {
			return h.fail(ctx, http.StatusForbidden, why), nil
		}
	}
	var body any
	switch {
	case p.scheduled:
		// A scheduled round moves state every tenant's scheduled coverage
		// depends on: only EventBridge Scheduler's direct invoke may ask for
		// it. A Function URL request always carries the URL's domain name and
		// (AWS_IAM auth) the IAM caller its SigV4 signature verified; the
		// schedule's input carries neither (and callers of the URL may not
		// invoke the function directly: CallerPolicy).
		if rc := req.RequestContext; rc.DomainName != "" || rc.APIID != "" || rc.Authorizer != nil && rc.Authorizer.IAM != nil {
			return h.fail(ctx, http.StatusForbidden, "scheduled: only EventBridge Scheduler's direct invoke runs scheduled rounds; "+
				"through the Function URL omit it (GET / pages every tenant with a cursor you pass back)"), nil
		}
		body, err = h.r.Scheduled(ctx, ScheduledRequest{Mode: p.mode, Limit: p.limit, ResumeOnly: p.resume})
	case p.hasTenant:
		body, err = h.r.Tenant(ctx, TenantRequest{Tenant: p.tenant, Mode: p.mode, Cursor: p.cursor, MaxEvents: p.maxEvents})
	default:
		body, err = h.r.All(ctx, AllRequest{Mode: p.mode, Cursor: p.cursor, Limit: p.limit, MaxEvents: p.maxEvents})
	}
	switch {
	case errors.Is(err, ErrBadCursor), errors.Is(err, ErrCursorExpired):
		return h.fail(ctx, http.StatusBadRequest, (&ParamError{Param: "cursor", Msg: err.Error()}).Error()), nil
	case err != nil:
		h.log.ErrorContext(ctx, "reconcile failed", obs.Err(err), slog.String(obs.KeyTenant, p.tenant))
		return h.fail(ctx, http.StatusInternalServerError,
			"internal error; the function's log has it under request_id "+obs.RequestID(ctx)+"; retry, or pass the cursor of the last response to resume"), nil
	}
	return respond(http.StatusOK, body), nil
}

// logCaller logs who asked, for every call, before anything is checked: the
// identity the Function URL's AWS_IAM auth verified from the SigV4 signature
// (requestContext.authorizer.iam of payload format 2.0), or, when there is
// none, that the function was invoked directly (EventBridge Scheduler, or
// anyone with lambda:InvokeFunction), whose request names no verified caller.
func (h *Handler) logCaller(ctx context.Context, req events.LambdaFunctionURLRequest) {
	rc := req.RequestContext
	ua := rc.HTTP.UserAgent
	if ua == "" {
		ua = req.Headers["user-agent"]
	}
	attrs := []any{
		slog.String(obs.KeyMethod, rc.HTTP.Method), slog.String(obs.KeyQuery, req.RawQueryString),
		slog.String(obs.KeySourceIP, rc.HTTP.SourceIP), slog.String(obs.KeyUserAgent, ua),
	}
	if a := rc.Authorizer; a != nil && a.IAM != nil {
		attrs = append(attrs, slog.String(obs.KeyCallerARN, a.IAM.UserARN), slog.String(obs.KeyCallerAccount, a.IAM.AccountID),
			slog.String(obs.KeyCallerID, a.IAM.CallerID))
		h.log.InfoContext(ctx, "reconcile called by "+a.IAM.UserARN, attrs...)
		return
	}
	attrs = append(attrs, slog.String(obs.KeyCallerARN, ""))
	h.log.InfoContext(ctx, "reconcile invoked directly, not through its Function URL: no verified caller (EventBridge Scheduler or lambda:InvokeFunction)", attrs...)
}

func (h *Handler) fail(ctx context.Context, status int, msg string) events.LambdaFunctionURLResponse {
	if status < 500 {
		h.log.WarnContext(ctx, "reconcile request refused", slog.Int(obs.KeyStatus, status), slog.String(obs.KeyErr, msg))
	}
	body := map[string]string{"error": msg}
	if id := obs.RequestID(ctx); id != "" {
		body["request_id"] = id
	}
	return respond(status, body)
}

func respond(status int, body any) events.LambdaFunctionURLResponse {
	raw, err := json.Marshal(body)
	if err != nil {
		status, raw = http.StatusInternalServerError, []byte(`{"error":"internal error: response does not encode"}`)
	}
	return events.LambdaFunctionURLResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"},
		Body:       string(raw),
	}
}

// parseParams reads the query string. Function URLs join repeated keys with
// commas in queryStringParameters, so the raw query string is the source.
func parseParams(req events.LambdaFunctionURLRequest) (params, error) {
	var q url.Values
	if req.RawQueryString != "" {
		var err error
		if q, err = url.ParseQuery(req.RawQueryString); err != nil {
			return params{}, &ParamError{Param: "query", Msg: fmt.Sprintf("%v; encode it as application/x-www-form-urlencoded", err)}
		}
	} else {
		q = url.Values{}
		for k, v := range req.QueryStringParameters {
			q.Set(k, v)
		}
	}
	var unknown []string
	for k, vs := range q {
		if !contains(accepted, k) {
			unknown = append(unknown, strconv.Quote(k))
			continue
		}
		if len(vs) > 1 {
			return params{}, &ParamError{Param: k, Msg: fmt.Sprintf("given %d times; pass it once", len(vs))}
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return params{}, &ParamError{Param: "query", Msg: fmt.Sprintf("unknown parameter %s; accepted: %s", strings.Join(unknown, ", "), strings.Join(accepted, ", "))}
	}

	var p params
	if _, p.hasTenant = q["tenant"]; p.hasTenant {
		p.tenant = q.Get("tenant")
		switch {
		case p.tenant == "":
			return p, &ParamError{Param: "tenant", Msg: "is empty; pass tenant=<tenant id> (or a chain shard's name, <tenant id>~<k>), or omit it to reconcile every tenant"}
		default:
			// The one tenant id rule (pkg/tenancy), or a chain shard's name
			// (<tenant>~1 … ~31): a chain that could never have been emitted
			// is a caller's mistake, said as such, not an empty report.
			if err := tenancy.CheckChain(p.tenant); err != nil {
				msg := err.Error()
				if strings.ContainsRune(p.tenant, tenancy.ShardSep) {
					msg += fmt.Sprintf("; a chain shard's name is <tenant id>~1 to ~%d", tenancy.MaxShards-1)
				}
				return p, &ParamError{Param: "tenant", Msg: msg}
			}
		}
	}
	if v, ok := q["full"]; ok {
		full, err := strconv.ParseBool(v[0])
		if err != nil {
			return p, &ParamError{Param: "full", Msg: fmt.Sprintf("%q is not a boolean; full=true walks from genesis, full=false (the default) from the checkpoint", v[0])}
		}
		p.mode = Incremental
		if full {
			p.mode = Full
		}
	}
	if v, ok := q["cursor"]; ok {
		if v[0] == "" {
			return p, &ParamError{Param: "cursor", Msg: "is empty; pass back the cursor of the previous response, or omit it"}
		}
		p.cursor = v[0]
	}
	p.limit = DefaultLimit
	if v, ok := q["limit"]; ok {
		if p.hasTenant {
			return p, &ParamError{Param: "limit", Msg: "pages the list of tenants and applies only without tenant; remove it"}
		}
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > MaxLimit {
			return p, &ParamError{Param: "limit", Msg: fmt.Sprintf("%q: use an integer from 1 to %d (tenants per page; default %d)", v[0], MaxLimit, DefaultLimit)}
		}
		p.limit = n
	}
	if v, ok := q["max_events"]; ok {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || n < 1 || n > MaxEvents {
			return p, &ParamError{Param: "max_events", Msg: fmt.Sprintf("%q: use an integer from 1 to %d (events verified per call before it answers with a cursor)", v[0], MaxEvents)}
		}
		p.maxEvents = n
	}
	if v, ok := q["scheduled"]; ok {
		var err error
		if p.scheduled, err = strconv.ParseBool(v[0]); err != nil {
			return p, &ParamError{Param: "scheduled", Msg: fmt.Sprintf("%q is not a boolean; scheduled=true is sent by EventBridge Scheduler only", v[0])}
		}
		if p.scheduled {
			for _, other := range []string{"tenant", "cursor", "max_events"} {
				if _, ok := q[other]; ok {
					return p, &ParamError{Param: other, Msg: "does not apply to a scheduled round, which resumes from the cursor it stores and is bounded by the function's deadline; remove it"}
				}
			}
		}
	}
	if v, ok := q["resume"]; ok {
		var err error
		if p.resume, err = strconv.ParseBool(v[0]); err != nil || !p.scheduled {
			return p, &ParamError{Param: "resume", Msg: fmt.Sprintf("%q: resume=true (continue a scheduled round in progress, never start one) applies with scheduled=true only", v[0])}
		}
	}
	return p, nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
