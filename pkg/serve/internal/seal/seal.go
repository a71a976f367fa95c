// Package seal gives the entry points that decode or emit events the
// application's vault (pkg/erasure) when its catalog declares personal
// fields. It is apart from package wire because it links the KMS client,
// which only those functions use.
package seal

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/erasure"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
)

// Vault gives cat the application's vault (pkg/erasure) when its catalog
// declares personal fields, so handlers read them opened (or erased) and
// follow-on emits seal them; without its environment the function fails.
// Only then does the function use KMS.
func Vault(b *boot.Boot, cat *catalog.Catalog, cfg aws.Config, db *dynamodb.Client) {
	if !cat.Personal() {
		return
	}
	env := boot.Get(awsenv.Require(keys.EnvSubjectKeysTable, keys.EnvDataKeyID)).Or(b, "environment (the catalog declares personal fields)")
	v := boot.Get(erasure.New(db, kms.NewFromConfig(cfg), erasure.Config{Table: env[keys.EnvSubjectKeysTable], KeyID: env[keys.EnvDataKeyID]})).Or(b, "vault")
	cat.UseVault(v)
}
