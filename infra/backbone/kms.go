package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// keyUse is what a principal of the stack needs of a customer-managed key
// that encrypts a table, a stream or a queue it reads or writes: DynamoDB
// and SQS call KMS on its behalf, with its permissions.
var keyUse = []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"}

// tableEncryption is a table's encryption: key, or the AWS managed key.
func tableEncryption(key awskms.IKey) (awsdynamodb.TableEncryption, awskms.IKey) {
	if key == nil {
		return awsdynamodb.TableEncryption_AWS_MANAGED, nil
	}
	return awsdynamodb.TableEncryption_CUSTOMER_MANAGED, key
}

// queueEncryption is a queue's encryption: key, or SQS-managed SSE.
func queueEncryption(key awskms.IKey) (awssqs.QueueEncryption, awskms.IKey) {
	if key == nil {
		return awssqs.QueueEncryption_SQS_MANAGED, nil
	}
	return awssqs.QueueEncryption_KMS, key
}

// allowLogsService lets CloudWatch Logs use key for this account's log
// groups in this region (CloudWatch Logs User Guide, "Encrypt log data in
// CloudWatch Logs using AWS KMS"): only a key created in the stack has a
// policy the backbone can add to; an imported key's policy must say it
// already.
func allowLogsService(key awskms.IKey) {
	k, ok := key.(awskms.Key)
	if !ok {
		return
	}
	k.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchLogsEncryptsTheBackbonesLogs"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("logs."+*awscdk.Aws_REGION()+".amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"ArnLike": map[string]any{
			"kms:EncryptionContext:aws:logs:arn": "arn:" + *awscdk.Aws_PARTITION() + ":logs:" + *awscdk.Aws_REGION() + ":" + *awscdk.Aws_ACCOUNT_ID() + ":log-group:*",
		}},
	}), jsii.Bool(true))
}

// grantKeys gives every role of the backbone use of the customer-managed
// keys that encrypt what it touches, and the emitter policy use of the
// table key (Emit writes the log). Coarse on purpose: a key serves the
// backbone, and each role's table and queue grants still decide what it
// may read or write.
func (b *Backbone) grantKeys(p *Props) {
	roles := []awsiam.IRole{b.Durable.PipeRole}
	for _, f := range []Function{b.Durable.StreamFilter, b.Durable.DurableConsumer, b.ChangeFeed.Changefeed,
		b.Reconcile.Function, b.Repair.Function, b.Tamper.Function, b.Notary.Function} {
		roles = append(roles, f.Role)
	}
	for _, key := range []awskms.IKey{p.TableKey, p.QueueKey} {
		if key == nil {
			continue
		}
		for _, r := range roles {
			allow(r, keyUse, key.KeyArn())
		}
	}
	if p.TableKey != nil {
		b.Log.EmitterPolicy.AddStatements(statement(keyUse, p.TableKey.KeyArn()))
	}
	if p.QueueKey != nil {
		// CDK's own queue grants (the mappings' on-failure queues, the
		// DURABLE queue's event source) add these two with a wildcard.
		for _, r := range roles {
			cdknag.NagSuppressions_AddResourceSuppressions(r, &[]*cdknag.NagPackSuppression{{
				Id:        jsii.String("AwsSolutions-IAM5"),
				Reason:    jsii.String("CDK's grants on a queue encrypted with Props.QueueKey add kms:GenerateDataKey* and kms:ReEncrypt*, on that one key only (SQS calls KMS with the sender's or receiver's permissions)."),
				AppliesTo: &[]interface{}{jsii.String("Action::kms:GenerateDataKey*"), jsii.String("Action::kms:ReEncrypt*")},
			}}, jsii.Bool(true))
		}
	}
	if p.LogKey != nil {
		allowLogsService(p.LogKey)
	}
}
