package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// ErasureProps configures the erasure resources.
type ErasureProps struct {
	RemovalPolicy awscdk.RemovalPolicy
}

// Erasure holds what crypto-shredding needs (pkg/erasure), made when the
// application's catalog declares personal fields: the subject-keys table (one
// wrapped data key or tombstone per data subject) and the symmetric KMS key
// that wraps the data keys, and the policy of whoever erases subjects.
type Erasure struct {
	constructs.Construct
	Keys         awsdynamodb.Table
	Key          awskms.Key
	EraserPolicy awsiam.ManagedPolicy
}

// subjectKeyAttrs are the attributes a sealer may write to a subject's row:
// a new data key, never a tombstone (only the eraser writes those).
var subjectKeyAttrs = []string{keys.AttrPK, keys.AttrSK, keys.AttrDataKey, keys.AttrCreatedAt}

// NewErasure creates the subject-keys table, the data-key KMS key and the
// eraser policy.
//
// The table has no point-in-time recovery, on purpose: a backup would keep a
// subject's data key for 35 days after the erasure. A lost table loses every
// subject's data keys, so each personal field reads as erased: the events
// themselves and their chain are untouched.
func NewErasure(scope constructs.Construct, id string, props *ErasureProps) *Erasure {
	c := constructs.NewConstruct(scope, jsii.String(id))
	table := awsdynamodb.NewTable(c, jsii.String("SubjectKeys"), &awsdynamodb.TableProps{
		PartitionKey:       &awsdynamodb.Attribute{Name: jsii.String(keys.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:            &awsdynamodb.Attribute{Name: jsii.String(keys.AttrSK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:        awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:         awsdynamodb.TableEncryption_AWS_MANAGED,
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      props.RemovalPolicy,
	})
	cdknag.NagSuppressions_AddResourceSuppressions(table, &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String("AwsSolutions-DDB3"),
		Reason: jsii.String("Crypto-shredding: a point-in-time backup would keep an erased subject's data key for 35 days. Losing the table erases every subject; the log is untouched."),
	}}, jsii.Bool(false))
	key := awskms.NewKey(c, jsii.String("DataKey"), &awskms.KeyProps{
		Description:       jsii.String("fourlanes: wraps the per-subject data keys of personal fields (erasure by crypto-shredding)"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     props.RemovalPolicy,
	})
	e := &Erasure{Construct: c, Keys: table, Key: key}
	e.EraserPolicy = awsiam.NewManagedPolicy(c, jsii.String("EraserPolicy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("fourlanes: erase data subjects (fourlanes erase): write tombstones to the subject-keys table and read it."),
		Statements:  statements(e.eraserPermissions()),
	})
	return e
}

func (e *Erasure) kmsContext() map[string]map[string]any {
	return map[string]map[string]any{"ForAllValues:StringEquals": {
		"kms:EncryptionContextKeys": []string{"fourlanes:tenant", "fourlanes:subject"},
	}}
}

// sealPermissions are what sealing and opening need: read a subject's row,
// add a data key (never a tombstone), and have KMS make and unwrap data keys
// bound to a tenant and subject.
func (e *Erasure) sealPermissions() []permission {
	return []permission{
		{sid: "ReadSubjectKeys", actions: []string{"dynamodb:GetItem"}, resources: []*string{e.Keys.TableArn()}},
		{sid: "AddSubjectKeys", actions: []string{"dynamodb:PutItem"}, resources: []*string{e.Keys.TableArn()},
			conditions: map[string]map[string]any{"ForAllValues:StringEquals": {"dynamodb:Attributes": subjectKeyAttrs}}},
		{sid: "MakeAndUnwrapDataKeys", actions: []string{"kms:GenerateDataKey", "kms:Decrypt"}, resources: []*string{e.Key.KeyArn()},
			conditions: e.kmsContext()},
	}
}

// openPermissions are what reading personal fields needs.
func (e *Erasure) openPermissions() []permission {
	return []permission{
		{sid: "ReadSubjectKeys", actions: []string{"dynamodb:GetItem"}, resources: []*string{e.Keys.TableArn()}},
		{sid: "UnwrapDataKeys", actions: []string{"kms:Decrypt"}, resources: []*string{e.Key.KeyArn()}, conditions: e.kmsContext()},
	}
}

// eraserPermissions are what `fourlanes erase` needs: a tombstone replaces
// the row (PutItem), and the status is read back.
func (e *Erasure) eraserPermissions() []permission {
	return []permission{
		{sid: "WriteTombstones", actions: []string{"dynamodb:PutItem", "dynamodb:GetItem"}, resources: []*string{e.Keys.TableArn()}},
	}
}

// seal gives fn the environment and permissions to seal and open.
func (e *Erasure) seal(fn Function) {
	e.env(fn)
	grantAll(fn.Role, e.sealPermissions())
}

// open gives fn the environment and permissions to open.
func (e *Erasure) open(fn Function) {
	e.env(fn)
	grantAll(fn.Role, e.openPermissions())
}

func (e *Erasure) env(fn Function) {
	fn.Fn.AddEnvironment(jsii.String(keys.EnvSubjectKeysTable), e.Keys.TableName(), nil)
	fn.Fn.AddEnvironment(jsii.String(keys.EnvDataKeyID), e.Key.KeyArn(), nil)
}

// GrantErase lets grantee erase data subjects (fourlanes erase). The backbone
// has no Erasure, and GrantErase fails the synthesis, when the catalog
// declares no personal fields.
func (b *Backbone) GrantErase(grantee awsiam.IGrantable) awsiam.Grant {
	if b.Erasure == nil {
		awscdk.Annotations_Of(b.Construct).AddError(jsii.String("GrantErase: the application's catalog declares no personal fields (`fourlanes:\"personal\"`), so the backbone keeps no subject keys to erase"))
		return nil
	}
	return grantAll(grantee, b.Erasure.eraserPermissions())
}
