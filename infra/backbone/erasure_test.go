package backbone

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/infra/backbone/backbonetest"
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// memberJoinedV1 carries personal data: the member's email, sealed under
// the member's data key.
type memberJoinedV1 struct {
	MemberID string `json:"member_id" fourlanes:"subject"`
	Email    string `json:"email" fourlanes:"personal"`
}

var membersModule = catalog.Module[catalog.NoHandlers]{
	Name:  "members",
	Emits: []catalog.EventType{{Name: "members.joined", Versions: []catalog.Version{catalog.V[memberJoinedV1](1)}}},
}

// personalLibrary is the library with a module whose events carry personal
// fields.
func personalLibrary(_ awscdk.Stack, p *Props) {
	p.App = app.Application{Name: libraryApp.Name, Modules: append(slices.Clone(libraryApp.Modules), app.Module{Spec: membersModule.Spec()})}
}

// TestErasureResources: a catalog with personal fields gets the subject-keys
// table (no point-in-time recovery: a backup would outlive an erasure), a
// rotating data key, the environment on every function that decodes or
// emits, and grants that let sealers add data keys but never write a
// tombstone, openers only unwrap, and only the eraser policy erase.
func TestErasureResources(t *testing.T) {
	ls := synthLibrary(t, personalLibrary)
	if len(ls.errors) > 0 {
		t.Fatalf("synthesis errors: %v", ls.errors)
	}
	e := ls.stack.Erasure
	if e == nil {
		t.Fatal("no Erasure for a catalog with personal fields")
	}
	s := ls.synthesized()
	tableID, keyID := ls.id(e.Keys), ls.id(e.Key)
	tp := props(s.resources("AWS::DynamoDB::Table")[tableID])
	if pitr, _ := tp["PointInTimeRecoverySpecification"].(map[string]any); pitr != nil && pitr["PointInTimeRecoveryEnabled"] == true {
		t.Error("the subject-keys table has point-in-time recovery: an erased key would survive in backups for 35 days")
	}
	if tp["DeletionProtectionEnabled"] != true {
		t.Error("the subject-keys table lacks deletion protection")
	}
	if kp := props(s.resources("AWS::KMS::Key")[keyID]); kp["EnableKeyRotation"] != true {
		t.Errorf("the data key does not rotate: %v", kp)
	}

	fns := s.resources("AWS::Lambda::Function")
	for _, fn := range []Function{ls.stack.Durable.DurableConsumer, ls.stack.Repair.Function, ls.stack.ChangeFeed.Changefeed} {
		env := envOf(fns[ls.id(fn.Fn)])
		if env[keys.EnvSubjectKeysTable] == nil || env[keys.EnvDataKeyID] == nil {
			t.Errorf("%s lacks %s/%s: %v", ls.id(fn.Fn), keys.EnvSubjectKeysTable, keys.EnvDataKeyID, env)
		}
	}

	gs := grants(s.Doc)
	sealer := access(gs, ls.id(ls.stack.Durable.DurableConsumer.Role))
	if got := sealer[keyID+".Arn"]; !slices.Equal(got, []string{"kms:Decrypt", "kms:GenerateDataKey"}) {
		t.Errorf("durable-consumer on the data key: %v; want Decrypt and GenerateDataKey", got)
	}
	if got := sealer[tableID+".Arn"]; !slices.Equal(got, []string{"dynamodb:GetItem", "dynamodb:PutItem"}) {
		t.Errorf("durable-consumer on the subject keys: %v; want GetItem and PutItem", got)
	}
	opener := access(gs, ls.id(ls.stack.ChangeFeed.Changefeed.Role))
	if got := opener[keyID+".Arn"]; !slices.Equal(got, []string{"kms:Decrypt"}) {
		t.Errorf("changefeed on the data key: %v; want Decrypt only", got)
	}
	if got := opener[tableID+".Arn"]; !slices.Equal(got, []string{"dynamodb:GetItem"}) {
		t.Errorf("changefeed on the subject keys: %v; want GetItem only", got)
	}
	// Every PutItem on the subject keys outside the eraser policy may write
	// only a data key's attributes; every KMS use is bound to a subject.
	eraser := ls.id(e.EraserPolicy)
	for _, g := range gs {
		for _, res := range g.Resources {
			b := strings.Contains(jsonString(res), tableID)
			k := strings.Contains(jsonString(res), keyID)
			switch {
			case b && slices.Contains(g.Actions, "dynamodb:PutItem") && g.Policy != eraser:
				if !strings.Contains(jsonString(g.Condition), `"dynamodb:Attributes"`) || strings.Contains(jsonString(g.Condition), keys.AttrErasedAt) {
					t.Errorf("%s may PutItem on the subject keys without the data-key-only condition: %v", g.Policy, g.Condition)
				}
			case k && g.Policy != eraser:
				if !strings.Contains(jsonString(g.Condition), "kms:EncryptionContextKeys") {
					t.Errorf("%s may use the data key without the subject encryption context: %v", g.Policy, g.Condition)
				}
			}
		}
	}
	emitter := jsonString(props(s.resources("AWS::IAM::ManagedPolicy")[ls.id(ls.stack.Log.EmitterPolicy)]))
	if !strings.Contains(emitter, "kms:GenerateDataKey") || !strings.Contains(emitter, tableID) {
		t.Errorf("the emitter policy cannot seal: %s", emitter)
	}
	outs := backbonetest.Template(s.Doc).Outputs()
	for _, name := range []string{OutputSubjectKeysTable, OutputDataKey, OutputEraserPolicy} {
		if outs[name] == nil {
			t.Errorf("no output %s", name)
		}
	}
}

// TestNoErasureWithoutPersonalFields: no personal fields, no erasure
// resources, and GrantErase says why it cannot be.
func TestNoErasureWithoutPersonalFields(t *testing.T) {
	ls := synthLibrary(t, nil)
	if ls.stack.Erasure != nil {
		t.Fatal("Erasure made for a catalog without personal fields")
	}
	if outs := backbonetest.Template(ls.doc).Outputs(); outs[OutputSubjectKeysTable] != nil {
		t.Fatal("a subject-keys output without personal fields")
	}
	st := newLibraryStack(t, nil, func(b *Backbone) {
		b.GrantErase(awsiam.NewRole(awscdk.Stack_Of(b.Construct), jsii.String("DPO"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()}))
	})
	msgs := errorsOf(st)
	if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "GrantErase") && strings.Contains(m, "personal") }) {
		t.Fatalf("GrantErase without personal fields: errors %v; want one naming GrantErase and personal fields", msgs)
	}
}

func envOf(fn map[string]any) map[string]any { return backbonetest.Env(fn) }

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
