package catalog

import (
	"testing"

	"github.com/fourlanes/fourlanes/pkg/internal/ident/identtest"
)

// validModule answers as the regular expression it replaced.
func TestValidModuleForm(t *testing.T) {
	identtest.Agree(t, `^[a-z][a-z0-9_-]*$`, "abz09_-", "A.é/", 40, validModule)
}

// validSubscription answers as the regular expression it replaced.
func TestValidSubscriptionForm(t *testing.T) {
	identtest.Agree(t, `^[a-z][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)*$`, "ab09_-..", "A/é", 40, validSubscription)
}

// ValidOwner answers as the regular expression it replaced.
func TestValidOwnerForm(t *testing.T) {
	identtest.Agree(t, `^[a-z][a-z0-9-]{0,62}$`, "abz09-", "_A.é", 63, ValidOwner)
}

// ValidEntity answers as the regular expression it replaced.
func TestValidEntityForm(t *testing.T) {
	identtest.Agree(t, `^[A-Z][A-Z0-9_]{0,63}$`, "AZ09_", "a-.é", 64, ValidEntity)
}
