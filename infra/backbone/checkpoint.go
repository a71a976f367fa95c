package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Logical IDs of the checkpoint resources, pinned: the key signs every
// checkpoint an auditor holds, and the bucket's objects cannot be deleted,
// so neither may ever be replaced by a refactoring.
const (
	LogicalCheckpointKey    = "CheckpointSigningKey"
	LogicalCheckpointBucket = "CheckpointBucket"
	// LogicalAccessLogsBucket holds the S3 server access logs of the
	// checkpoint bucket (and of the audit trail's).
	LogicalAccessLogsBucket = "AccessLogsBucket"
)

// accessLogRetentionDays keeps a year of S3 server access logs.
const accessLogRetentionDays = 400

// CheckpointKeyAdminActions are what the account (its IAM principals with
// IAM permission for them, the deploying CloudFormation role among them) may
// do to the checkpoint key: everything that keeps it manageable, explicitly
// listed, and neither kms:Sign nor kms:CreateGrant (a grant could give Sign
// to anyone). No wildcard: kms:Create* would include CreateGrant.
var CheckpointKeyAdminActions = []string{
	"kms:DescribeKey", "kms:GetKeyPolicy", "kms:PutKeyPolicy", "kms:ListKeyPolicies",
	"kms:ListResourceTags", "kms:TagResource", "kms:UntagResource",
	"kms:ListGrants", "kms:RevokeGrant",
	"kms:EnableKey", "kms:DisableKey", "kms:UpdateKeyDescription",
	"kms:CreateAlias", "kms:UpdateAlias", "kms:DeleteAlias",
	"kms:ScheduleKeyDeletion", "kms:CancelKeyDeletion",
}

// CheckpointKeyPolicy is the checkpoint key's policy, in place of CDK's
// default, whose "Enable IAM User Permissions" statement (the account
// principal, kms:*) lets any IAM policy of the account grant kms:Sign. Here:
//
//   - only signer (the notary's role) may kms:Sign, named in the key policy
//     itself: no IAM policy can grant Sign to anyone else, since the key
//     policy delegates no Sign to the account;
//   - the account may kms:GetPublicKey (through IAM), so auditors can fetch
//     the key that verifies checkpoints;
//   - the account may administer the key (CheckpointKeyAdminActions, through
//     IAM), PutKeyPolicy included: the key stays manageable (AWS warns that
//     a key whose policy lets no principal manage it becomes unmanageable,
//     and KMS's lockout safety check refuses a policy that would not let the
//     caller, here CloudFormation's role, put the policy again).
//
// An administrator can still put a policy that grants itself Sign; that is
// an audited PutKeyPolicy call (CloudTrail management event), not a silent
// IAM grant.
func CheckpointKeyPolicy(signer awsiam.IRole) awsiam.PolicyDocument {
	account := awsiam.NewAccountRootPrincipal()
	return awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("KeyAdministrationWithoutSign"),
			Principals: &[]awsiam.IPrincipal{account},
			Actions:    jsii.Strings(CheckpointKeyAdminActions...),
			Resources:  jsii.Strings("*"),
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("AccountReadsPublicKey"),
			Principals: &[]awsiam.IPrincipal{account},
			Actions:    jsii.Strings("kms:GetPublicKey"),
			Resources:  jsii.Strings("*"),
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyTheNotarySigns"),
			Principals: &[]awsiam.IPrincipal{awsiam.NewArnPrincipal(signer.RoleArn())},
			Actions:    jsii.Strings("kms:Sign"),
			Resources:  jsii.Strings("*"),
		}),
	}})
}

// CheckpointRetentionDays is the COMPLIANCE-mode default retention of every
// signed checkpoint: no one, the account's root included, can delete or
// overwrite a checkpoint object for this long, nor shorten it.
const CheckpointRetentionDays = 365

// CheckpointsProps wires signed checkpoints to the notary, which signs
// them, and to reconcile, which reads them.
type CheckpointsProps struct {
	// Log is the log whose checkpoints these are: its LogicalIDPrefix
	// begins the key's and the bucket's pinned IDs, and names the log in
	// every checkpoint (CheckpointLog).
	Log       *EventLog
	Reconcile *Reconcile
	Notary    *Notary
}

// CheckpointLog is the name of the log that every checkpoint's note carries
// (its origin line and key name): fourlanes/<stack name>, and
// /<prefix> after it for a backbone with a prefix (keys.BackbonePrefix), so
// two backbones in one stack sign checkpoints of two different logs.
func CheckpointLog(stackName, prefix string) string {
	if prefix == "" {
		return "fourlanes/" + stackName
	}
	return "fourlanes/" + stackName + "/" + prefix
}

// Checkpoints is where the notary records what it saw appended and what
// reconcile trusts: a KMS signing key (ECC_NIST_P256, SIGN_VERIFY; the
// private key never leaves KMS) and an S3 bucket with Object Lock in
// COMPLIANCE mode. Only the notary may sign (the key policy) and put
// checkpoints (never overwrite: the bucket policy requires If-None-Match,
// and denies PutObject to every other principal); reconcile may only read
// the public key, get and list them; nothing in the stack may delete them.
type Checkpoints struct {
	constructs.Construct
	Key    awskms.Key
	Bucket awss3.Bucket
	// AccessLogs receives the checkpoint bucket's S3 server access logs
	// (prefix checkpoints/): every get, put and denied delete, by whom.
	AccessLogs awss3.Bucket
}

// NewCheckpoints creates the key and the bucket; grants the notary exactly
// kms:Sign and kms:GetPublicKey on the key and s3:PutObject, s3:GetObject,
// s3:ListBucket on the bucket, and reconcile kms:GetPublicKey,
// s3:GetObject and s3:ListBucket; and gives both CHECKPOINT_BUCKET,
// CHECKPOINT_KEY_ID and CHECKPOINT_LOG (CheckpointLog).
func NewCheckpoints(scope constructs.Construct, id string, props *CheckpointsProps) *Checkpoints {
	c := constructs.NewConstruct(scope, jsii.String(id))
	fn := props.Reconcile.Function
	signer := props.Notary.Function
	prefix := props.Log.LogicalIDPrefix()
	key := awskms.NewKey(c, jsii.String("SigningKey"), &awskms.KeyProps{
		Policy:        CheckpointKeyPolicy(signer.Role),
		Description:   jsii.String("fourlanes: signs the notary's checkpoints (ECDSA P-256, C2SP signed notes)"),
		KeySpec:       awskms.KeySpec_ECC_NIST_P256,
		KeyUsage:      awskms.KeyUsage_SIGN_VERIFY,
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
		PendingWindow: awscdk.Duration_Days(jsii.Number(30)),
	})
	pin(key, prefix, LogicalCheckpointKey)

	accessLogs := awss3.NewBucket(c, jsii.String("AccessLogs"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		Versioned:         jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Expiration:                  awscdk.Duration_Days(jsii.Number(accessLogRetentionDays)),
			NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(1)),
		}},
	})
	pin(accessLogs, prefix, LogicalAccessLogsBucket)
	cdknag.NagSuppressions_AddResourceSuppressions(accessLogs, &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String("AwsSolutions-S1"),
		Reason: jsii.String("It is the server access log bucket of the checkpoint and audit-trail buckets; S3 cannot log a log bucket into itself, and a second log bucket would only move the question."),
	}}, jsii.Bool(true))

	bucket := awss3.NewBucket(c, jsii.String("Bucket"), &awss3.BucketProps{
		ObjectLockEnabled:          jsii.Bool(true),
		ObjectLockDefaultRetention: awss3.ObjectLockRetention_Compliance(awscdk.Duration_Days(jsii.Number(CheckpointRetentionDays))),
		Versioned:                  jsii.Bool(true),
		Encryption:                 awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:                 jsii.Bool(true),
		BlockPublicAccess:          awss3.BlockPublicAccess_BLOCK_ALL(),
		ObjectOwnership:            awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:              awscdk.RemovalPolicy_RETAIN,
	})
	pin(bucket, prefix, LogicalCheckpointBucket)
	logAccessTo(bucket, accessLogs, "checkpoints/")
	objects := bucket.ArnForObjects(jsii.String("*"))
	// Object Lock keeps every version; these two denials keep the key space
	// too: no delete marker can hide a checkpoint, and no new version can
	// stand over one (S3 conditional writes: s3:if-none-match).
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("DenyCheckpointDeletes"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("s3:DeleteObject", "s3:DeleteObjectVersion"),
		Resources:  jsii.Strings(*objects),
	}))
	// A lifecycle rule is a delete nobody calls: an expiration would put a
	// delete marker over every checkpoint once its retention ends.
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("DenyLifecycleRules"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("s3:PutLifecycleConfiguration"),
		Resources:  jsii.Strings(*bucket.BucketArn()),
	}))
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("DenyOverwrites"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("s3:PutObject"),
		Resources:  jsii.Strings(*objects),
		Conditions: &map[string]interface{}{"Null": map[string]interface{}{"s3:if-none-match": "true"}},
	}))
	// Only the notary writes checkpoints: a principal allowed s3:PutObject
	// by an IAM policy of the account still cannot plant an object where
	// reconcile and export look for the newest checkpoint.
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyTheNotaryWrites"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("s3:PutObject"),
		Resources:  jsii.Strings(*objects),
		Conditions: &map[string]interface{}{"ArnNotEquals": map[string]interface{}{"aws:PrincipalArn": signer.Role.RoleArn()}},
	}))

	checkpointObjects := bucket.ArnForObjects(jsii.String(keys.CheckpointObjectPrefix + "*"))
	allow(signer.Role, []string{"kms:Sign", "kms:GetPublicKey"}, key.KeyArn())
	// Versions, not only current objects: reconcile and the notary read
	// under a delete marker (pkg/reconcile, CheckpointS3).
	allow(signer.Role, []string{"s3:PutObject", "s3:GetObject", "s3:GetObjectVersion"}, checkpointObjects)
	allow(signer.Role, []string{"s3:ListBucket", "s3:ListBucketVersions"}, bucket.BucketArn()) // its first checkpoint of a chain starts from the newest signed one
	allow(fn.Role, []string{"kms:GetPublicKey"}, key.KeyArn())
	allow(fn.Role, []string{"s3:GetObject", "s3:GetObjectVersion"}, checkpointObjects)
	allow(fn.Role, []string{"s3:ListBucket", "s3:ListBucketVersions"}, bucket.BucketArn())
	for _, f := range []Function{fn, signer} {
		f.Fn.AddEnvironment(jsii.String(keys.EnvCheckpointBucket), bucket.BucketName(), nil)
		f.Fn.AddEnvironment(jsii.String(keys.EnvCheckpointKey), key.KeyArn(), nil)
		f.Fn.AddEnvironment(jsii.String(keys.EnvCheckpointLog), jsii.String(CheckpointLog(*awscdk.Aws_STACK_NAME(), prefix)), nil)
	}

	cdknag.NagSuppressions_AddResourceSuppressions(signer.Role, &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String("the notary writes one object per signed checkpoint under checkpoints/ (keys named by chain and seq); it may put (never overwrite: the bucket policy requires If-None-Match) and get there, nothing else."),
		AppliesTo: &[]interface{}{cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<` + prefix + LogicalCheckpointBucket + `\.Arn>\/checkpoints\/\*$/g`)}},
	}}, jsii.Bool(true))
	cdknag.NagSuppressions_AddResourceSuppressions(fn.Role, &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String("reconcile reads the checkpoints under checkpoints/ (keys named by tenant and seq), and nothing else of the bucket."),
		AppliesTo: &[]interface{}{cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<` + prefix + LogicalCheckpointBucket + `\.Arn>\/checkpoints\/\*$/g`)}},
	}}, jsii.Bool(true))
	return &Checkpoints{Construct: c, Key: key, Bucket: bucket, AccessLogs: accessLogs}
}

// logAccessTo turns on S3 server access logging of bucket into logs under
// prefix, delivered by the logging service principal, which logs' policy
// lets write only there and only for bucket (AWS S3 User Guide, "Enabling
// Amazon S3 server access logging": the bucket-policy method, not the
// log-delivery ACL, which BucketOwnerEnforced buckets refuse).
func logAccessTo(bucket, logs awss3.Bucket, prefix string) {
	bucket.Node().DefaultChild().(awss3.CfnBucket).SetLoggingConfiguration(&awss3.CfnBucket_LoggingConfigurationProperty{
		DestinationBucketName: logs.BucketName(),
		LogFilePrefix:         jsii.String(prefix),
	})
	logs.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("AccessLogs" + alnum(prefix)),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("logging.s3.amazonaws.com"), nil)},
		Actions:    jsii.Strings("s3:PutObject"),
		Resources:  &[]*string{logs.ArnForObjects(jsii.String(prefix + "*"))},
		Conditions: &map[string]any{
			"ArnLike":      map[string]any{"aws:SourceArn": bucket.BucketArn()},
			"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()},
		},
	}))
}
