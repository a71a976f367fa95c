package delivery

import "errors"

// PermanentError marks a handler error that retrying cannot fix (a malformed
// payload, a refused business rule): the subscription is dead-lettered at
// once instead of after Config.Attempts runs.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err permanent. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err is, or wraps, a permanent error.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}
