package twin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// functionURL is a Function URL served on localhost.
type functionURL struct {
	tw   *Twin
	id   string
	fn   *function
	auth string
	url  string
	srv  *http.Server

	warnOnce sync.Once
}

// createURL serves the function's URL on a loopback port. Requests get
// the Function URL payload (HTTP API format 2.0); responses are read the way
// Lambda reads them. AWS_IAM is not enforced locally (there is no IAM):
// signed and unsigned requests are both served, and the caller's access key
// from a SigV4 Authorization header is passed on in the request context.
func (tw *Twin) createURL(ctx context.Context, res *cfn.Resource) (*resource, error) {
	var p cfn.URLProps
	if err := tw.rv.Decode(res, &p); err != nil {
		return nil, err
	}
	fn := tw.functionByRef(p.TargetFunctionArn)
	if fn == nil {
		return nil, fmt.Errorf("TargetFunctionArn %s is no function of this stack", p.TargetFunctionArn)
	}
	if p.InvokeMode == "RESPONSE_STREAM" {
		return nil, errors.New("InvokeMode RESPONSE_STREAM is not supported by the twin (BUFFERED is)")
	}
	port := tw.cfg.URLPorts[res.LogicalID]
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("function URL listener: %w", err)
	}
	u := &functionURL{tw: tw, id: res.LogicalID, fn: fn, auth: p.AuthType, url: "http://" + ln.Addr().String() + "/"}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(ln) //nolint:errcheck // ends with Close
	tw.closers = append(tw.closers, func() { u.srv.Close() })
	tw.log.Info("twin: function URL", obs.KeyLogicalID, res.LogicalID, obs.KeyFunction, fn.id, obs.KeyURL, u.url, obs.KeyAuth, p.AuthType)
	return &resource{id: res.LogicalID, typ: res.Type, ref: u.url, url: u, attrs: map[string]any{"FunctionUrl": u.url, "FunctionArn": fn.arn}}, nil
}

// URL returns the local address of the Function URL with logical ID id.
func (tw *Twin) URL(id string) (string, error) {
	r, err := tw.lookup(id, cfn.TypeURL)
	if err != nil {
		return "", err
	}
	return r.url.url, nil
}

// URLs returns every Function URL by the logical ID of its function.
func (tw *Twin) URLs() map[string]string {
	out := map[string]string{}
	for _, r := range tw.resources {
		if r.url != nil {
			out[r.url.fn.id] = r.url.url
		}
	}
	return out
}

func (u *functionURL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20+1))
	if err != nil || len(body) > 6<<20 {
		writeURLError(w, http.StatusRequestEntityTooLarge, "Request must be smaller than 6291456 bytes for the InvokeFunction operation")
		return
	}
	auth := r.Header.Get("Authorization")
	if u.auth == "AWS_IAM" && auth == "" {
		u.warnOnce.Do(func() {
			u.tw.log.Warn("twin: AWS_IAM Function URL called without a SigV4 signature: served locally, AWS would answer 403", obs.KeyURL, u.id)
		})
	}
	payload, err := json.Marshal(u.request(r, body, auth))
	if err != nil {
		writeURLError(w, http.StatusInternalServerError, err.Error())
		return
	}
	summary := r.Method + " " + r.URL.RequestURI()
	// The invocation outlives a caller that hangs up, as in Lambda.
	res, err := u.tw.invoke(u.tw.ctx, u.fn, u.id, payload, []string{summary}, nil, 0)
	if err != nil {
		writeURLError(w, http.StatusServiceUnavailable, "twin stopping")
		return
	}
	if res.Err != nil {
		writeURLError(w, http.StatusBadGateway, "Internal Server Error")
		return
	}
	writeURLResponse(w, res.Payload)
}

func (u *functionURL) request(r *http.Request, body []byte, auth string) events.LambdaFunctionURLRequest {
	host := strings.Split(r.Host, ":")[0]
	headers := map[string]string{}
	for k, v := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	headers["host"] = r.Host
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = map[string]string{}
		for k, v := range q {
			query[k] = strings.Join(v, ",")
		}
	}
	now := time.Now()
	req := events.LambdaFunctionURLRequest{
		Version:               "2.0",
		RawPath:               r.URL.Path,
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID:    localaws.AccountID,
			RequestID:    uuid.NewString(),
			APIID:        u.id,
			DomainName:   r.Host,
			DomainPrefix: host,
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto,
				SourceIP: strings.Split(r.RemoteAddr, ":")[0], UserAgent: r.UserAgent(),
			},
		},
	}
	if u.auth == "AWS_IAM" {
		req.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
			IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
				AccessKey: accessKeyOf(auth), AccountID: localaws.AccountID, CallerID: "local",
				UserARN: "arn:aws:iam::" + localaws.AccountID + ":user/local", UserID: "local",
			},
		}
	}
	if len(body) > 0 {
		if utf8.Valid(body) && !isBinaryType(r.Header.Get("Content-Type")) {
			req.Body = string(body)
		} else {
			req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return req
}

// accessKeyOf reads the access key id from a SigV4 Authorization header.
func accessKeyOf(auth string) string {
	_, rest, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(rest, "/")
	return key
}

func isBinaryType(ct string) bool {
	ct = strings.ToLower(ct)
	for _, text := range []string{"text/", "json", "xml", "javascript", "x-www-form-urlencoded", "yaml"} {
		if strings.Contains(ct, text) {
			return false
		}
	}
	return ct != ""
}

// writeURLResponse turns a function's response into the HTTP response, as
// Lambda does: an object with statusCode is a structured response; any
// other JSON is the body of a 200 application/json response.
func writeURLResponse(w http.ResponseWriter, payload []byte) {
	var probe map[string]json.RawMessage
	if json.Unmarshal(payload, &probe) == nil {
		if _, ok := probe["statusCode"]; ok {
			var resp events.LambdaFunctionURLResponse
			if err := json.Unmarshal(payload, &resp); err != nil {
				writeURLError(w, http.StatusBadGateway, "Internal Server Error")
				return
			}
			for k, v := range resp.Headers {
				w.Header().Set(k, v)
			}
			for _, c := range resp.Cookies {
				w.Header().Add("Set-Cookie", c)
			}
			body := []byte(resp.Body)
			if resp.IsBase64Encoded {
				b, err := base64.StdEncoding.DecodeString(resp.Body)
				if err != nil {
					writeURLError(w, http.StatusBadGateway, "Internal Server Error")
					return
				}
				body = b
			}
			if w.Header().Get("Content-Type") == "" {
				w.Header().Set("Content-Type", "application/json")
			}
			status := resp.StatusCode
			if status == 0 {
				status = http.StatusOK
			}
			w.WriteHeader(status)
			_, _ = w.Write(body)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(payload)
}

func writeURLError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-ErrorType", http.StatusText(status))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Message": msg})
}
