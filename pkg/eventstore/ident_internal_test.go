package eventstore

import (
	"testing"

	"github.com/fourlanes/fourlanes/pkg/internal/ident/identtest"
)

// validFollowOnName answers as the regular expression it replaced.
func TestValidFollowOnNameForm(t *testing.T) {
	identtest.Agree(t, `^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`, "aZ09._/-", ":é \n", 128, validFollowOnName)
}
