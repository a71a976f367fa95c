package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// permission is one Allow statement, from which both a managed policy's
// statement and a grant to a principal are made, so the two cannot differ.
type permission struct {
	sid        string
	actions    []string
	resources  []*string
	conditions map[string]map[string]any
}

// statement is p as a policy statement (a managed policy's).
func (p permission) statement() awsiam.PolicyStatement {
	props := &awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(p.actions...),
		Resources: &p.resources,
	}
	if p.sid != "" {
		props.Sid = jsii.String(p.sid)
	}
	if p.conditions != nil {
		c := map[string]any{}
		for op, kv := range p.conditions {
			c[op] = kv
		}
		props.Conditions = &c
	}
	return awsiam.NewPolicyStatement(props)
}

// grant adds p to grantee's identity policy, as CDK's own GrantX methods do.
func (p permission) grant(grantee awsiam.IGrantable) awsiam.Grant {
	opts := &awsiam.GrantOnPrincipalOptions{
		Grantee:      grantee,
		Actions:      jsii.Strings(p.actions...),
		ResourceArns: &p.resources,
	}
	if p.conditions != nil {
		c := map[string]*map[string]any{}
		for op, kv := range p.conditions {
			c[op] = &kv
		}
		opts.Conditions = &c
	}
	return awsiam.Grant_AddToPrincipal(opts)
}

// grantAll grants every permission to grantee, as one Grant.
func grantAll(grantee awsiam.IGrantable, perms []permission) awsiam.Grant {
	var g awsiam.Grant
	for _, p := range perms {
		if g == nil {
			g = p.grant(grantee)
			continue
		}
		g = g.Combine(p.grant(grantee))
	}
	return g
}

// statements is perms as policy statements.
func statements(perms []permission) *[]awsiam.PolicyStatement {
	out := make([]awsiam.PolicyStatement, len(perms))
	for i, p := range perms {
		out[i] = p.statement()
	}
	return &out
}

// teamWrite are the writes an Emit's transaction carries on a team's table
// (eventstore.EmitInput.Extra: Put, Update, Delete and ConditionCheck
// items).
var teamWrite = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"}

// logRead is what the read-only tools need of the log and the state table:
// export reads a chain (Query) and finds a tenant's chain shards
// (BatchGetItem), watermarks lists tenants (Scan) and reads heads and
// watermarks (GetItem, Query).
var logRead = []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:Scan"}

// logEmitPermissions are exactly what Emit needs on the log: the
// conditional head and event Puts and the caller's condition checks, only
// inside TransactWriteItems, and the head read and read path.
func logEmitPermissions(events *string) []permission {
	return []permission{
		{sid: "AppendInsideTransactWriteItems", actions: logAppendWrite, resources: []*string{events}, conditions: transactionOnly()},
		{sid: "ReadTheHeadAndTheLog", actions: logAppendRead, resources: []*string{events}},
	}
}

// followOnPermission is what a DURABLE handler's follow-on emit needs on
// the log beyond the lane's reads: the conditional head, event and
// idempotency-row Puts and the caller's condition checks, only inside
// TransactWriteItems (the transaction shape Emit uses). The reads Emit
// makes (GetItem, Query) the functions already have.
func followOnPermission(events *string) permission {
	return permission{sid: "AppendFollowOnEventsInsideTransactWriteItems", actions: logAppendWrite, resources: []*string{events}, conditions: transactionOnly()}
}

// trackedWritePermission is what Emit's transaction writes on the tracked
// tables (the team's own, written in the same transaction as the event):
// Put, Update, Delete and ConditionCheck, only inside TransactWriteItems.
func trackedWritePermission(tracked []*string) permission {
	return permission{sid: "WriteTrackedTablesInsideTransactWriteItems", actions: teamWrite, resources: tracked, conditions: transactionOnly()}
}

// emitPermissions are what GrantEmit grants: logEmitPermissions, and
// trackedWritePermission when the application tracks a table.
func emitPermissions(events *string, tracked []*string) []permission {
	perms := logEmitPermissions(events)
	if len(tracked) > 0 {
		perms = append(perms, trackedWritePermission(tracked))
	}
	return perms
}

// reconcileCallerPermissions let a principal call reconcile's Function URL:
// since October 2025 a URL with AWS_IAM auth needs both
// lambda:InvokeFunctionUrl and lambda:InvokeFunction (the latter only via
// the URL here).
func reconcileCallerPermissions(fnArn *string) []permission {
	return []permission{
		{actions: []string{"lambda:InvokeFunctionUrl"}, resources: []*string{fnArn},
			conditions: map[string]map[string]any{"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}},
		{actions: []string{"lambda:InvokeFunction"}, resources: []*string{fnArn},
			conditions: map[string]map[string]any{"Bool": {"lambda:InvokedViaFunctionUrl": "true"}}},
	}
}

// GrantEmit lets grantee (a team's service, say) emit events: what Emit
// needs on the log (Put and ConditionCheck only inside TransactWriteItems,
// GetItem and Query; never Update, Delete, BatchWrite or PartiQL) and the
// writes Emit's transaction carries on each tracked table of Props.Tracked
// (Put, Update, Delete and ConditionCheck, only inside TransactWriteItems).
// Anything else grantee does with its own tables it grants with those
// tables' Grant methods. EmitterPolicyArn (the stack output) holds the same,
// for principals outside the CDK app.
//
// When the catalog declares personal fields, GrantEmit also grants sealing
// them (Backbone.Erasure): GetItem and a data-key PutItem on the
// subject-keys table, kms:GenerateDataKey and kms:Decrypt on the data key.
func (b *Backbone) GrantEmit(grantee awsiam.IGrantable) awsiam.Grant {
	perms := append(emitPermissions(b.Log.Events.TableArn(), b.trackedArns()), b.tableKeyUse()...)
	if b.Erasure != nil {
		perms = append(perms, b.Erasure.sealPermissions()...)
	}
	return grantAll(grantee, perms)
}

// GrantReconcile lets grantee call reconcile's Function URL (SigV4, AWS_IAM
// auth): lambda:InvokeFunctionUrl, and lambda:InvokeFunction only through
// the URL. ReconcileCallerPolicyArn (the stack output) holds the same.
func (b *Backbone) GrantReconcile(grantee awsiam.IGrantable) awsiam.Grant {
	return grantAll(grantee, reconcileCallerPermissions(b.Reconcile.Function.Fn.FunctionArn()))
}

// GrantRead lets grantee read what the read-only tools read (fourlanes
// export, verify, watermarks without -set-to-head, effects without a
// decision, deadletters): GetItem, BatchGetItem, Query and Scan on the
// events and state tables, Query on the state table's dead-letter index,
// the signed checkpoints (s3:GetObject under checkpoints/,
// s3:ListBucket) and the public half of their signing key
// (kms:GetPublicKey). It writes nothing.
func (b *Backbone) GrantRead(grantee awsiam.IGrantable) awsiam.Grant {
	cp := b.Checkpoints
	return grantAll(grantee, append([]permission{
		{actions: logRead, resources: []*string{b.Log.Events.TableArn(), b.Log.State.TableArn()}},
		{actions: []string{"dynamodb:Query"}, resources: []*string{b.Log.DeadLetterIndexArn()}},
		{actions: []string{"s3:GetObject"}, resources: []*string{cp.Bucket.ArnForObjects(jsii.String(keys.CheckpointObjectPrefix + "*"))}},
		{actions: []string{"s3:ListBucket"}, resources: []*string{cp.Bucket.BucketArn()}},
		{actions: []string{"kms:GetPublicKey"}, resources: []*string{cp.Key.KeyArn()}},
	}, b.tableKeyUse()...))
}

// tableKeyUse is use of Props.TableKey, for whoever reads or writes the
// log; none without one.
func (b *Backbone) tableKeyUse() []permission {
	if b.tableKey == nil {
		return nil
	}
	return []permission{{actions: []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"}, resources: []*string{b.tableKey.KeyArn()}}}
}

// trackedArns are the tracked tables' ARNs, in the application's order.
func (b *Backbone) trackedArns() []*string {
	arns := make([]*string, len(b.tracked))
	for i, t := range b.tracked {
		arns[i] = t.table.TableArn()
	}
	return arns
}
