package delivery

import "github.com/fourlanes/fourlanes/pkg/lanes"

// PermanentError marks a handler error that retrying cannot fix (a malformed
// payload, a refused business rule): the subscription is dead-lettered at
// once instead of after Config.Attempts runs. It is lanes.PermanentError,
// named here too because DURABLE handlers are where it matters.
type PermanentError = lanes.PermanentError

// Permanent marks err permanent (lanes.Permanent). Permanent(nil) is nil.
func Permanent(err error) error { return lanes.Permanent(err) }

// IsPermanent reports whether err is, or wraps, a permanent error
// (lanes.IsPermanent).
func IsPermanent(err error) bool { return lanes.IsPermanent(err) }
