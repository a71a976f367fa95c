package app

import (
	"testing"

	"github.com/fourlanes/fourlanes/pkg/internal/ident/identtest"
)

// validName answers as the regular expression it replaced.
func TestValidNameForm(t *testing.T) {
	identtest.Agree(t, `^[a-z][a-z0-9-]{0,31}$`, "abz09-", "_A.é", 32, validName)
}
