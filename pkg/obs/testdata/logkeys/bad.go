// Package logkeys holds one log call of each form TestLogKeysAreObsConstants
// refuses, each marked "want", beside the forms it accepts.
package logkeys

import (
	"context"
	"errors"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/obs"
)

const localKey = "tenant"

func calls(ctx context.Context, log *slog.Logger) {
	err := errors.New("boom")
	k := obs.KeyTenant

	// Accepted.
	log.InfoContext(ctx, "ok", slog.String(obs.KeyTenant, "acme"), obs.Err(err), obs.ErrAt(obs.KeyDLQError, err))
	log.Info("ok", obs.KeyTenant, "acme")
	log.LogAttrs(ctx, slog.LevelInfo, "ok", slog.Int(obs.KeyCount, 1), obs.NonEmpty(obs.KeyVia, ""))
	_ = slog.Attr{Key: obs.KeySeq, Value: slog.Int64Value(1)}

	// Refused.
	log.InfoContext(ctx, "x", slog.String("tenant", "acme"))  // want literal
	slog.Info("x", "tenant", "acme")                          // want literal
	log.With("tenant", "acme").Info("x")                      // want literal
	log.Info("x", slog.Group("grp"))                          // want literal
	_ = slog.Attr{Key: "tenant"}                              // want literal
	log.Info("x", slog.String(localKey, "acme"))              // want constant of
	log.Info("x", slog.String(k, "acme"))                     // want not a constant
	log.Info("x", obs.ErrAt("dlq_error", err))                // want literal
	log.Error("x", slog.Any(obs.KeyErr, err))                 // want slog.Any
	log.Error("x", obs.KeyErr, err)                           // want key-value
	log.Error("x", slog.String(obs.KeyErr, err.Error()))      // want as text
	log.Error("failed: " + err.Error())                       // want as text
	slog.ErrorContext(ctx, "x", slog.Any(obs.KeyReason, err)) // want slog.Any
}
