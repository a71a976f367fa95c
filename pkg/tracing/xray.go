//go:build !notrace

package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-xray-sdk-go/instrumentation/awsv2"
	"github.com/aws/aws-xray-sdk-go/strategy/ctxmissing"
	"github.com/aws/aws-xray-sdk-go/xray"
	"github.com/aws/aws-xray-sdk-go/xraylog"
)

// Available reports whether this binary contains the X-Ray SDK (it does
// unless built with -tags notrace).
const Available = true

var configureOnce sync.Once

func instrument(cfg *aws.Config) {
	configureOnce.Do(configure)
	awsv2.AWSV2Instrumentor(&cfg.APIOptions)
}

// configure sets the X-Ray SDK's process-wide options once: its log lines go
// to slog, and a missing segment is logged, never a panic.
func configure() {
	xray.SetLogger(slogLogger{})
	if err := xray.Configure(xray.Config{ContextMissingStrategy: &logOnce{}}); err != nil {
		slog.Warn("configure X-Ray", slog.String("err", err.Error()))
	}
	if os.Getenv("AWS_XRAY_CONTEXT_MISSING") == ctxmissing.RuntimeErrorStrategy {
		slog.Warn("AWS_XRAY_CONTEXT_MISSING=RUNTIME_ERROR: an AWS SDK call without an X-Ray segment in its context will panic; unset it or use LOG_ERROR")
	}
}

// logOnce is the context-missing strategy: the first call without a segment
// logs a warning, later ones log at debug, so a process without tracing
// context (tests, the CLI, a local run) is told once and then left quiet.
type logOnce struct{ seen atomic.Bool }

func (s *logOnce) ContextMissing(v any) {
	msg := fmt.Sprint(v)
	if s.seen.CompareAndSwap(false, true) {
		slog.Warn("X-Ray: no segment in the context; AWS SDK calls go through untraced (normal outside Lambda)",
			slog.String("detail", msg))
		return
	}
	slog.Debug("X-Ray: no segment in the context", slog.String("detail", msg))
}

// slogLogger sends the X-Ray SDK's log lines to slog.
type slogLogger struct{}

func (slogLogger) Log(level xraylog.LogLevel, msg fmt.Stringer) {
	// The SDK's info lines (daemon address, emitter) are start-up chatter.
	lv := slog.LevelDebug
	switch level {
	case xraylog.LogLevelWarn:
		lv = slog.LevelWarn
	case xraylog.LogLevelError:
		lv = slog.LevelError
	}
	// The SDK passes no context; its lines carry no request attributes.
	ctx := context.Background()
	if !slog.Default().Enabled(ctx, lv) {
		return
	}
	slog.Log(ctx, lv, "X-Ray SDK: "+msg.String())
}
