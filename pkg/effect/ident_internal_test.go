package effect

import (
	"testing"

	"github.com/fourlanes/fourlanes/pkg/internal/ident/identtest"
)

// validName answers as the regular expression it replaced.
func TestValidNameForm(t *testing.T) {
	identtest.Agree(t, `^[a-z0-9][a-z0-9._-]{0,63}$`, "az09._-", "A/é", 64, validName)
}
