package backbone

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestCheckpointKey: an asymmetric P-256 signing key, kept on stack deletion.
func TestCheckpointKey(t *testing.T) {
	s := synth(t)
	k, ok := s.resources("AWS::KMS::Key")[LogicalCheckpointKey]
	if !ok {
		t.Fatalf("no KMS key %s", LogicalCheckpointKey)
	}
	p := props(k)
	if p["KeySpec"] != "ECC_NIST_P256" || p["KeyUsage"] != "SIGN_VERIFY" {
		t.Errorf("key %s: KeySpec %v KeyUsage %v, want ECC_NIST_P256 SIGN_VERIFY", LogicalCheckpointKey, p["KeySpec"], p["KeyUsage"])
	}
	if k["DeletionPolicy"] != "Retain" {
		t.Errorf("key DeletionPolicy = %v, want Retain", k["DeletionPolicy"])
	}
}

// TestCheckpointBucket: Object Lock with a COMPLIANCE default retention,
// versioned, encrypted, no public access, TLS only, and a policy denying
// every principal deletes and unconditional puts.
func TestCheckpointBucket(t *testing.T) {
	s := synth(t)
	b, ok := s.resources("AWS::S3::Bucket")[LogicalCheckpointBucket]
	if !ok {
		t.Fatalf("no bucket %s", LogicalCheckpointBucket)
	}
	p := props(b)
	want := map[string]any{
		"ObjectLockEnabled": true,
		"ObjectLockConfiguration": map[string]any{"ObjectLockEnabled": "Enabled",
			"Rule": map[string]any{"DefaultRetention": map[string]any{"Mode": "COMPLIANCE", "Days": float64(CheckpointRetentionDays)}}},
		"VersioningConfiguration": map[string]any{"Status": "Enabled"},
		"PublicAccessBlockConfiguration": map[string]any{"BlockPublicAcls": true, "BlockPublicPolicy": true,
			"IgnorePublicAcls": true, "RestrictPublicBuckets": true},
		"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{
			map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}}}},
	}
	for k, w := range want {
		if diff := cmp.Diff(w, p[k]); diff != "" {
			t.Errorf("bucket %s (-want +got):\n%s", k, diff)
		}
	}
	if b["DeletionPolicy"] != "Retain" {
		t.Errorf("bucket DeletionPolicy = %v, want Retain", b["DeletionPolicy"])
	}
	var policy string
	for _, bp := range s.resources("AWS::S3::BucketPolicy") {
		if cmp.Equal(props(bp)["Bucket"], ref(LogicalCheckpointBucket)) {
			raw, _ := json.Marshal(props(bp)["PolicyDocument"])
			policy = string(raw)
		}
	}
	for _, w := range []string{
		`"aws:SecureTransport":"false"`,
		`"Action":["s3:DeleteObject","s3:DeleteObjectVersion"],"Effect":"Deny","Principal":{"AWS":"*"}`,
		`"Action":"s3:PutObject","Condition":{"Null":{"s3:if-none-match":"true"}},"Effect":"Deny","Principal":{"AWS":"*"}`,
		`"Action":"s3:PutObject","Condition":{"ArnNotEquals":{"aws:PrincipalArn":{"Fn::GetAtt":["` + s.id(s.stack.Notary.Function.Role) + `","Arn"]}}},"Effect":"Deny","Principal":{"AWS":"*"}`,
	} {
		if !strings.Contains(policy, w) {
			t.Errorf("bucket policy lacks %s:\n%s", w, policy)
		}
	}
}

// TestCheckpointGrants: the notary may sign and read the public key, put,
// get and list checkpoints; reconcile may only read the public key, get and
// list them; nothing more on either; both environments name both. The
// team's auditor (GrantRead) may read the public key, get and list
// checkpoints. No other role of the stack is granted anything on them.
func TestCheckpointGrants(t *testing.T) {
	s := synth(t)
	reconcile, auditor, notary := s.id(s.stack.Reconcile.Function.Role), s.id(s.stack.Auditor), s.id(s.stack.Notary.Function.Role)
	got := map[string][]string{} // by role
	for id, pol := range s.resources("AWS::IAM::Policy") {
		roles, _ := json.Marshal(props(pol)["Roles"])
		for _, st := range list(props(pol)["PolicyDocument"].(map[string]any)["Statement"]) {
			m := st.(map[string]any)
			res, _ := json.Marshal(m["Resource"])
			if !strings.Contains(string(res), LogicalCheckpointKey) && !strings.Contains(string(res), LogicalCheckpointBucket) {
				continue
			}
			var role string
			for _, r := range []string{reconcile, auditor, notary} {
				if strings.Contains(string(roles), `"`+r+`"`) {
					role = r
				}
			}
			if role == "" {
				t.Errorf("policy %s grants %v on a checkpoint resource to %s, not the notary, reconcile or the auditor", id, m["Action"], roles)
				continue
			}
			got[role] = append(got[role], strs(m["Action"])...)
		}
	}
	for role, want := range map[string][]string{
		notary:    {"kms:GetPublicKey", "kms:Sign", "s3:GetObject", "s3:GetObjectVersion", "s3:ListBucket", "s3:ListBucketVersions", "s3:PutObject"},
		reconcile: {"kms:GetPublicKey", "s3:GetObject", "s3:GetObjectVersion", "s3:ListBucket", "s3:ListBucketVersions"},
		auditor:   {"kms:GetPublicKey", "s3:GetObject", "s3:ListBucket"},
	} {
		if diff := cmp.Diff(want, sorted(got[role])); diff != "" {
			t.Errorf("actions granted to %s on the checkpoint key and bucket (-want +got):\n%s", role, diff)
		}
	}
	for name, fn := range map[string]Function{"reconcile": s.stack.Reconcile.Function, "notary": s.stack.Notary.Function} {
		env := props(s.resources("AWS::Lambda::Function")[s.id(fn.Fn)])["Environment"].(map[string]any)["Variables"].(map[string]any)
		for _, k := range []string{keys.EnvCheckpointBucket, keys.EnvCheckpointKey, keys.EnvCheckpointLog} {
			if env[k] == nil {
				t.Errorf("%s's environment lacks %s", name, k)
			}
		}
		if diff := cmp.Diff(ref(LogicalCheckpointBucket), env[keys.EnvCheckpointBucket]); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", name, keys.EnvCheckpointBucket, diff)
		}
	}
}

// TestCheckpointKeyPolicy: the key policy, not CDK's default, decides who
// signs. Only the notary's role may kms:Sign; the account (through IAM) may
// read the public key and administer the key, PutKeyPolicy included so the
// key stays manageable, but neither sign nor create grants; no statement
// delegates kms:* or any wildcard.
func TestCheckpointKeyPolicy(t *testing.T) {
	s := synth(t)
	k := s.resources("AWS::KMS::Key")[LogicalCheckpointKey]
	doc, ok := props(k)["KeyPolicy"].(map[string]any)
	if !ok {
		t.Fatalf("key %s has no KeyPolicy", LogicalCheckpointKey)
	}
	signerRole := getAtt(s.id(s.stack.Notary.Function.Role), "Arn")
	isRoot := func(p any) bool {
		raw, _ := json.Marshal(p)
		return strings.Contains(string(raw), `":root"`) && strings.Contains(string(raw), `"AWS::AccountId"`)
	}
	var signers []any
	var rootActions []string
	for _, st := range list(doc["Statement"]) {
		m := st.(map[string]any)
		if m["Effect"] != "Allow" {
			continue
		}
		if _, ok := m["NotAction"]; ok {
			t.Errorf("statement %v uses NotAction", m["Sid"])
		}
		if _, ok := m["NotPrincipal"]; ok {
			t.Errorf("statement %v uses NotPrincipal", m["Sid"])
		}
		principal := m["Principal"].(map[string]any)["AWS"]
		var actions []string
		for _, a := range list(m["Action"]) { // list wraps a single action
			actions = append(actions, a.(string))
		}
		for _, a := range actions {
			if strings.Contains(a, "*") {
				t.Errorf("statement %v allows %s: wildcards would delegate Sign or CreateGrant", m["Sid"], a)
			}
			if a == "kms:CreateGrant" {
				t.Errorf("statement %v allows kms:CreateGrant: a grant can give Sign to anyone", m["Sid"])
			}
			if a == "kms:Sign" {
				signers = append(signers, principal)
			}
		}
		if isRoot(principal) {
			rootActions = append(rootActions, actions...)
		}
	}
	if diff := cmp.Diff([]any{signerRole}, signers); diff != "" {
		t.Errorf("principals allowed kms:Sign (-want +got):\n%s", diff)
	}
	for _, a := range append([]string{"kms:GetPublicKey"}, CheckpointKeyAdminActions...) {
		if !slices.Contains(rootActions, a) {
			t.Errorf("the account may not %s on the key (through IAM): %v", a, rootActions)
		}
	}
	for _, must := range []string{"kms:PutKeyPolicy", "kms:GetKeyPolicy", "kms:DescribeKey", "kms:ScheduleKeyDeletion"} {
		if !slices.Contains(CheckpointKeyAdminActions, must) {
			t.Errorf("administration lacks %s: the key could become unmanageable", must)
		}
	}
	if slices.Contains(rootActions, "kms:Sign") {
		t.Error("the account may kms:Sign: any IAM policy could grant it")
	}
}
