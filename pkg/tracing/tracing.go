package tracing

import (
	"log/slog"
	"os"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// ModeXRay is the value of FOURLANES_TRACING that turns X-Ray on.
const ModeXRay = "xray"

// Mode returns what FOURLANES_TRACING asks for: "xray", or "off" for
// anything else (unset included).
func Mode() string {
	if os.Getenv(keys.EnvTracing) == ModeXRay {
		return ModeXRay
	}
	return "off"
}

// Enabled reports whether Instrument adds tracing: FOURLANES_TRACING asks for
// X-Ray and this binary was built with it (see Available).
func Enabled() bool { return Mode() == ModeXRay && Available }

// Instrument adds X-Ray tracing to every client built from cfg when
// FOURLANES_TRACING is "xray"; otherwise it does nothing. Call it once per
// aws.Config, before creating clients (awsenv.Load does).
func Instrument(cfg *aws.Config) {
	v := os.Getenv(keys.EnvTracing)
	switch {
	case v == ModeXRay && Available:
		instrument(cfg)
	case v == ModeXRay:
		warnOnce.Do(func() {
			slog.Warn("tracing requested but this binary was built with -tags notrace; AWS SDK calls are not traced",
				slog.String("env", keys.EnvTracing))
		})
	case v != "" && v != "off":
		warnOnce.Do(func() {
			slog.Warn("unknown tracing mode; AWS SDK calls are not traced (use \"xray\" or \"off\")",
				slog.String("env", keys.EnvTracing), slog.String("value", v))
		})
	}
}

var warnOnce sync.Once
