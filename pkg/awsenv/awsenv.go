// Package awsenv builds the AWS SDK configuration and clients every function
// uses, from the environment Lambda gives a function, so one binary runs in
// AWS and against the local twin unchanged.
//
// Load reads only the environment (no shared config files, no profiles, no
// STS, SSO or IMDS credential providers): what Lambda sets, and the SDK's
// endpoint variables, honoured as the SDK's config.LoadDefaultConfig honours
// them. A function's binary then links none of the SDK's credential-chain
// clients, whose package initialisation would otherwise be part of every
// cold start. The CLI, which needs profiles, --profile and --region, builds
// its configuration with package awsenv/profile instead.
//
// Endpoints come from the SDK's own variables: AWS_ENDPOINT_URL_DYNAMODB,
// AWS_ENDPOINT_URL_DYNAMODB_STREAMS, AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_LAMBDA (or AWS_ENDPOINT_URL for all;
// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true ignores them all). The local twin
// sets them; in AWS they are unset. Tracing is added by pkg/tracing, the one
// seam for it. Only the DynamoDB client, which every function uses, has a
// constructor here; a function that needs another builds it from Load's
// config (sqs.NewFromConfig), so no other function links it.
package awsenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// ErrMissingEnv matches every *MissingEnvError.
var ErrMissingEnv = errors.New("missing environment variables")

// MissingEnvError names every required environment variable that is unset
// or empty.
type MissingEnvError struct{ Names []string }

func (e *MissingEnvError) Error() string {
	return fmt.Sprintf("missing environment variables %s: set them (the CDK app sets them on each function; the local twin resolves them to local resources)",
		strings.Join(e.Names, ", "))
}

// Is matches ErrMissingEnv.
func (e *MissingEnvError) Is(target error) bool { return target == ErrMissingEnv }

// Require reads the named environment variables. Call it once at cold start:
// it returns every value, or a *MissingEnvError naming each one that is unset
// or empty, so a misconfigured function fails before its first invocation
// with one message that lists everything to fix.
func Require(names ...string) (map[string]string, error) {
	vals := make(map[string]string, len(names))
	var missing []string
	for _, n := range names {
		v, ok := os.LookupEnv(n)
		if !ok || v == "" {
			missing = append(missing, n)
			continue
		}
		vals[n] = v
	}
	if len(missing) > 0 {
		return nil, &MissingEnvError{Names: missing}
	}
	return vals, nil
}

// The environment variables Load reads (the SDK's names).
const (
	EnvRegion              = "AWS_REGION"
	EnvDefaultRegion       = "AWS_DEFAULT_REGION"
	EnvAccessKeyID         = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey     = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken        = "AWS_SESSION_TOKEN"
	EnvAccountID           = "AWS_ACCOUNT_ID"
	EnvContainerFullURI    = "AWS_CONTAINER_CREDENTIALS_FULL_URI"
	EnvContainerRelURI     = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
	EnvContainerToken      = "AWS_CONTAINER_AUTHORIZATION_TOKEN"
	EnvContainerTokenFile  = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"
	EnvEndpointURL         = "AWS_ENDPOINT_URL"
	EnvIgnoreEndpointURLs  = "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"
	EnvCABundle            = "AWS_CA_BUNDLE"
	EnvMaxAttempts         = "AWS_MAX_ATTEMPTS"
	EnvRetryMode           = "AWS_RETRY_MODE"
	EnvAppID               = "AWS_SDK_UA_APP_ID"
	ecsContainerCredsHost  = "169.254.170.2"
	containerCredsExpiring = 5 * time.Minute
)

// Load returns the SDK configuration from the environment Lambda gives a
// function, with tracing added when FOURLANES_TRACING asks for it:
//
//   - region: AWS_REGION, else AWS_DEFAULT_REGION; neither is an error
//     naming AWS_REGION (here rather than on the first call);
//   - credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
//     AWS_SESSION_TOKEN (what Lambda sets), else the container credentials
//     endpoint AWS_CONTAINER_CREDENTIALS_FULL_URI (or _RELATIVE_URI) with
//     AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE), cached; neither is an error;
//   - endpoints: AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> (the
//     service's SDK ID upper-cased, spaces as '_'), unless
//     AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true;
//   - AWS_CA_BUNDLE, AWS_MAX_ATTEMPTS, AWS_RETRY_MODE and AWS_SDK_UA_APP_ID
//     as the SDK reads them.
//
// Other SDK settings that are set (a profile, FIPS or dual-stack endpoints,
// a defaults mode: Ignored) are logged at WARN as not read.
func Load(ctx context.Context) (aws.Config, error) {
	cfg, err := fromEnv(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	if set := ignoredSet(); len(set) > 0 {
		slog.WarnContext(ctx, "AWS SDK settings in the environment that functions do not read (they read only what Lambda sets; see awsenv.Load)",
			slog.String(obs.KeyEnv, strings.Join(set, ",")))
	}
	tracing.Instrument(&cfg)
	return cfg, nil
}

func fromEnv(context.Context) (aws.Config, error) {
	src, err := readEndpoints()
	if err != nil {
		return aws.Config{}, err
	}
	cfg := aws.Config{
		Logger:        logging.NewStandardLogger(os.Stderr),
		ConfigSources: []any{src},
		Region:        firstEnv(EnvRegion, EnvDefaultRegion),
		AppID:         os.Getenv(EnvAppID),
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no region; set " + EnvRegion + " (Lambda sets it; the local twin sets it too)")
	}
	if src.base != "" && !src.ignore {
		cfg.BaseEndpoint = aws.String(src.base)
	}
	if v := os.Getenv(EnvMaxAttempts); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return aws.Config{}, fmt.Errorf("%s=%q: want a whole number of at least 1", EnvMaxAttempts, v)
		}
		cfg.RetryMaxAttempts = n
	}
	if v := os.Getenv(EnvRetryMode); v != "" {
		m, err := aws.ParseRetryMode(v)
		if err != nil {
			return aws.Config{}, fmt.Errorf("%s: %w", EnvRetryMode, err)
		}
		cfg.RetryMode = m
	}
	if path := os.Getenv(EnvCABundle); path != "" {
		if cfg.HTTPClient, err = caBundleClient(path); err != nil {
			return aws.Config{}, err
		}
	}
	if cfg.Credentials, err = credentialsFromEnv(cfg.HTTPClient); err != nil {
		return aws.Config{}, err
	}
	return cfg, nil
}

// Ignored are the SDK's environment settings Load does not read: the
// shared config files and profiles, the credential chain's other sources,
// and endpoint variants. None is set in Lambda.
var Ignored = []string{"AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ROLE_ARN",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_DEFAULTS_MODE",
	"AWS_ACCOUNT_ID_ENDPOINT_MODE", "AWS_REQUEST_CHECKSUM_CALCULATION", "AWS_RESPONSE_CHECKSUM_VALIDATION",
	"AWS_EC2_METADATA_DISABLED"}

// ignoredSet is which of Ignored are set, not empty.
func ignoredSet() []string {
	var set []string
	for _, n := range Ignored {
		if os.Getenv(n) != "" {
			set = append(set, n)
		}
	}
	return set
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// credentialsFromEnv is the environment's part of the SDK's default chain,
// in its order: the access key variables, then a container endpoint.
func credentialsFromEnv(client aws.HTTPClient) (aws.CredentialsProvider, error) {
	id, secret := firstEnv(EnvAccessKeyID, "AWS_ACCESS_KEY"), firstEnv(EnvSecretAccessKey, "AWS_SECRET_KEY")
	if id != "" && secret != "" {
		return aws.NewCredentialsCache(credentials.StaticCredentialsProvider{Value: aws.Credentials{
			AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv(EnvSessionToken),
			AccountID: os.Getenv(EnvAccountID),
		}, Source: []aws.CredentialSource{aws.CredentialSourceEnvVars}}), nil
	}
	endpoint := os.Getenv(EnvContainerFullURI)
	if rel := os.Getenv(EnvContainerRelURI); rel != "" {
		endpoint = "http://" + ecsContainerCredsHost + rel // the SDK prefers the relative URI too
	} else if endpoint != "" {
		if err := checkContainerEndpoint(endpoint); err != nil {
			return nil, fmt.Errorf("%s=%q: %w", EnvContainerFullURI, endpoint, err)
		}
	}
	if endpoint == "" {
		return nil, fmt.Errorf("no credentials; set %s and %s (Lambda sets them, with %s), or %s",
			EnvAccessKeyID, EnvSecretAccessKey, EnvSessionToken, EnvContainerFullURI)
	}
	p := endpointcreds.New(endpoint, func(o *endpointcreds.Options) {
		o.HTTPClient = client
		o.AuthorizationToken = os.Getenv(EnvContainerToken)
		if path := os.Getenv(EnvContainerTokenFile); path != "" {
			o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
				b, err := os.ReadFile(path)
				if err != nil {
					return "", fmt.Errorf("read %s: %w", EnvContainerTokenFile, err)
				}
				return string(b), nil
			})
		}
	})
	return aws.NewCredentialsCache(p, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = containerCredsExpiring }), nil
}

// checkContainerEndpoint allows, as the SDK does, an https endpoint
// anywhere and an http one only on loopback or the ECS and EKS agents'
// addresses.
func checkContainerEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("no host")
	}
	if u.Scheme != "http" {
		return nil
	}
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		if addrs, err = net.LookupHost(host); err != nil {
			return fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil || !(ip.IsLoopback() || ip.Equal(net.ParseIP(ecsContainerCredsHost)) ||
			ip.Equal(net.ParseIP("169.254.170.23")) || ip.Equal(net.ParseIP("fd00:ec2::23"))) {
			return fmt.Errorf("http endpoint on %s: only loopback and the ECS and EKS credential agents may serve credentials over http", host)
		}
	}
	return nil
}

// caBundleClient is the SDK's HTTP client trusting the PEM bundle at path.
func caBundleClient(path string) (aws.HTTPClient, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvCABundle, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s=%s: no PEM certificate in it", EnvCABundle, path)
	}
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.RootCAs = pool
	}), nil
}

// endpoints is the configuration source the service clients ask for
// AWS_ENDPOINT_URL_<SERVICE> (internal/configsources'
// ServiceBaseEndpointProvider and IgnoreConfiguredEndpointsProvider, as the
// SDK's EnvConfig answers them).
type endpoints struct {
	base      string
	ignore    bool
	ignoreSet bool
}

func readEndpoints() (*endpoints, error) {
	e := &endpoints{base: os.Getenv(EnvEndpointURL)}
	switch v := os.Getenv(EnvIgnoreEndpointURLs); {
	case v == "":
	case strings.EqualFold(v, "true"):
		e.ignore, e.ignoreSet = true, true
	case strings.EqualFold(v, "false"):
		e.ignoreSet = true
	default:
		return nil, fmt.Errorf("%s=%q: want true or false", EnvIgnoreEndpointURLs, v)
	}
	return e, nil
}

// GetIgnoreConfiguredEndpoints reports AWS_IGNORE_CONFIGURED_ENDPOINT_URLS.
func (e *endpoints) GetIgnoreConfiguredEndpoints(context.Context) (bool, bool, error) {
	return e.ignore, e.ignoreSet, nil
}

// GetServiceBaseEndpoint returns AWS_ENDPOINT_URL_<SERVICE> for the SDK ID
// sdkID ("DynamoDB Streams": AWS_ENDPOINT_URL_DYNAMODB_STREAMS).
func (e *endpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	if v := os.Getenv(EnvEndpointURL + "_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_")); v != "" {
		return v, true, nil
	}
	return "", false, nil
}

// DynamoDB returns a DynamoDB client.
func DynamoDB(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, optFns...)
}
