package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudtrail"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Pinned logical IDs of the audit trail and its bucket: the bucket holds the
// record of who touched the log.
const (
	LogicalAuditTrail       = "AuditTrail"
	LogicalAuditTrailBucket = "AuditTrailBucket"
)

// AuditTrailProps names what the trail records.
type AuditTrailProps struct {
	Log         *EventLog
	Checkpoints *Checkpoints
}

// AuditTrail is a CloudTrail trail of the data events (item-level and
// object-level API calls) on the events table, the state table and the
// checkpoint bucket's objects, with log file validation, delivered to a
// bucket of its own. It records no management events: CloudTrail's event
// history keeps those 90 days at no charge, and an account trail usually
// keeps them longer. It answers the question the tamper and checkpoint
// alarms ask: which principal wrote, deleted or read the row or object.
type AuditTrail struct {
	constructs.Construct
	Trail  awscloudtrail.CfnTrail
	Bucket awss3.Bucket
}

// NewAuditTrail creates the trail and its bucket. The bucket policy lets
// only this trail write (aws:SourceArn, AWS CloudTrail User Guide, "Amazon
// S3 bucket policy for CloudTrail"), so the trail has a name derived from the
// stack and the backbone's prefix: its ARN must be known before it exists.
func NewAuditTrail(scope constructs.Construct, id string, props *AuditTrailProps) *AuditTrail {
	c := constructs.NewConstruct(scope, jsii.String(id))
	prefix := props.Log.LogicalIDPrefix()
	bucket := awss3.NewBucket(c, jsii.String("Bucket"), &awss3.BucketProps{
		Versioned:         jsii.Bool(true),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
	})
	pin(bucket, prefix, LogicalAuditTrailBucket)
	logAccessTo(bucket, props.Checkpoints.AccessLogs, "audit-trail/")

	name := awscdk.Fn_Join(jsii.String("-"), jsii.Strings("fourlanes", *awscdk.Aws_STACK_NAME(), "audit"+prefix))
	trailArn := awscdk.Fn_Join(jsii.String(""), jsii.Strings(
		"arn:", *awscdk.Aws_PARTITION(), ":cloudtrail:", *awscdk.Aws_REGION(), ":", *awscdk.Aws_ACCOUNT_ID(), ":trail/", *name))
	cloudtrail := awsiam.NewServicePrincipal(jsii.String("cloudtrail.amazonaws.com"), nil)
	fromThisTrail := map[string]any{"aws:SourceArn": trailArn}
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudTrailAclCheck"),
		Principals: &[]awsiam.IPrincipal{cloudtrail},
		Actions:    jsii.Strings("s3:GetBucketAcl"),
		Resources:  &[]*string{bucket.BucketArn()},
		Conditions: &map[string]any{"StringEquals": fromThisTrail},
	}))
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudTrailWrite"),
		Principals: &[]awsiam.IPrincipal{cloudtrail},
		Actions:    jsii.Strings("s3:PutObject"),
		Resources:  &[]*string{bucket.ArnForObjects(jsii.String("AWSLogs/" + *awscdk.Aws_ACCOUNT_ID() + "/*"))},
		Conditions: &map[string]any{"StringEquals": map[string]any{
			"aws:SourceArn": trailArn, "s3:x-amz-acl": "bucket-owner-full-control",
		}},
	}))
	// A trail's record is evidence: no one deletes it.
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("DenyTrailDeletes"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("s3:DeleteObject", "s3:DeleteObjectVersion", "s3:PutLifecycleConfiguration"),
		Resources:  &[]*string{bucket.BucketArn(), bucket.ArnForObjects(jsii.String("*"))},
	}))

	selector := func(name, typ, op string, arn *string) *awscloudtrail.CfnTrail_AdvancedEventSelectorProperty {
		f := &awscloudtrail.CfnTrail_AdvancedFieldSelectorProperty{Field: jsii.String("resources.ARN")}
		if op == "StartsWith" {
			f.StartsWith = &[]*string{arn}
		} else {
			f.EqualTo = &[]*string{arn}
		}
		return &awscloudtrail.CfnTrail_AdvancedEventSelectorProperty{
			Name: jsii.String(name),
			FieldSelectors: []any{
				&awscloudtrail.CfnTrail_AdvancedFieldSelectorProperty{Field: jsii.String("eventCategory"), EqualTo: jsii.Strings("Data")},
				&awscloudtrail.CfnTrail_AdvancedFieldSelectorProperty{Field: jsii.String("resources.type"), EqualTo: jsii.Strings(typ)},
				f,
			},
		}
	}
	trail := awscloudtrail.NewCfnTrail(c, jsii.String("Trail"), &awscloudtrail.CfnTrailProps{
		TrailName:                  name,
		IsLogging:                  jsii.Bool(true),
		S3BucketName:               bucket.BucketName(),
		EnableLogFileValidation:    jsii.Bool(true),
		IncludeGlobalServiceEvents: jsii.Bool(false),
		IsMultiRegionTrail:         jsii.Bool(false),
		AdvancedEventSelectors: []any{
			selector("fourlanes events table", "AWS::DynamoDB::Table", "Equals", props.Log.Events.TableArn()),
			selector("fourlanes state table", "AWS::DynamoDB::Table", "Equals", props.Log.State.TableArn()),
			selector("fourlanes checkpoint objects", "AWS::S3::Object", "StartsWith", awscdk.Fn_Join(jsii.String(""), &[]*string{props.Checkpoints.Bucket.BucketArn(), jsii.String("/")})),
		},
	})
	trail.OverrideLogicalId(jsii.String(prefix + LogicalAuditTrail))
	// CloudTrail checks the bucket policy when the trail is created.
	if pol := bucket.Policy(); pol != nil {
		trail.Node().AddDependency(pol)
	}
	return &AuditTrail{Construct: c, Trail: trail, Bucket: bucket}
}
