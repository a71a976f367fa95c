package erasure_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/erasure"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

func TestMain(m *testing.M) { localaws.Main(m) }

type SignedUpV1 struct {
	CustomerID string `json:"customer_id" fourlanes:"subject"`
	Email      string `json:"email" fourlanes:"personal"`
	Name       string `json:"name,omitempty" fourlanes:"personal"`
	Plan       string `json:"plan"`
}

type handlers struct{}

var customers = catalog.Module[handlers]{
	Name: "customers",
	Emits: []catalog.EventType{
		{Name: "customer.signed_up", Versions: []catalog.Version{catalog.V[SignedUpV1](1)}},
	},
}

// fakeKMS wraps data keys with one AES key, bound to the encryption
// context, and counts calls: the unit tests' stand-in for KMS (the twin's
// KMS serves the end-to-end test in test/).
type fakeKMS struct {
	mu        sync.Mutex
	gcm       cipher.AEAD
	generated int
	decrypted int
}

func newFakeKMS(t *testing.T) *fakeKMS {
	secret := make([]byte, 32)
	rand.Read(secret)
	block, err := aes.NewCipher(secret)
	if err != nil {
		t.Fatal(err)
	}
	gcm, _ := cipher.NewGCM(block)
	return &fakeKMS{gcm: gcm}
}

func ctxBytes(ec map[string]string) []byte {
	return []byte(ec["fourlanes:tenant"] + "\x00" + ec["fourlanes:subject"])
}

func (k *fakeKMS) GenerateDataKey(_ context.Context, in *kms.GenerateDataKeyInput, _ ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	k.mu.Lock()
	k.generated++
	k.mu.Unlock()
	plain := make([]byte, 32)
	rand.Read(plain)
	nonce := make([]byte, 12)
	rand.Read(nonce)
	return &kms.GenerateDataKeyOutput{Plaintext: plain, CiphertextBlob: k.gcm.Seal(nonce, nonce, plain, ctxBytes(in.EncryptionContext)), KeyId: in.KeyId}, nil
}

func (k *fakeKMS) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	k.mu.Lock()
	k.decrypted++
	k.mu.Unlock()
	plain, err := k.gcm.Open(nil, in.CiphertextBlob[:12], in.CiphertextBlob[12:], ctxBytes(in.EncryptionContext))
	if err != nil {
		return nil, errors.New("InvalidCiphertextException")
	}
	return &kms.DecryptOutput{Plaintext: plain}, nil
}

type fixture struct {
	db     *dynamodb.Client
	keys   string
	events string
	kms    *fakeKMS
	vault  *erasure.Vault
	store  *eventstore.Store
	cat    *catalog.Catalog
}

func setup(t *testing.T, ttl time.Duration) *fixture {
	t.Helper()
	db := localaws.DynamoDB(t)
	f := &fixture{db: db, kms: newFakeKMS(t)}
	f.keys = aws.ToString(localaws.CreateTable(t, db, keys.PKSKTable(localaws.UniqueName(t, "subject-keys"))).TableName)
	f.events = aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	v, err := erasure.New(db, f.kms, erasure.Config{Table: f.keys, KeyID: "alias/data", CacheTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	f.vault = v
	f.cat, err = catalog.New(customers.Spec())
	if err != nil {
		t.Fatal(err)
	}
	f.cat.UseVault(v)
	f.store, err = eventstore.New(db, eventstore.Config{Table: f.events, Catalog: f.cat})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestErasureEndToEnd: personal fields are stored sealed and covered by the
// hash; readers open them; after Erase they read as Erased, the chain still
// verifies, and a new emit for the subject is refused with nothing written.
func TestErasureEndToEnd(t *testing.T) {
	f := setup(t, -1) // no cache: every read sees the table
	ctx := tenancy.MustWithTenant(context.Background(), "acme")

	e1, err := f.store.Emit(ctx, "customer.signed_up", SignedUpV1{CustomerID: "c-1", Email: "ada@example.com", Name: "Ada", Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Emit(ctx, "customer.signed_up", SignedUpV1{CustomerID: "c-2", Email: "bob@example.com", Plan: "free"}); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"email", "name"} {
		s, _ := e1.Payload[field].(string)
		if !strings.HasPrefix(s, erasure.Prefix) {
			t.Fatalf("emitted payload.%s = %q; want it sealed (%s...)", field, s, erasure.Prefix)
		}
	}
	if e1.Payload["plan"] != "pro" || e1.Payload["customer_id"] != "c-1" {
		t.Fatalf("non-personal fields changed: %v", e1.Payload)
	}

	page, err := f.store.Events(ctx, "acme", 0, 10)
	if err != nil || len(page.Events) != 2 {
		t.Fatalf("read back: %d events, %v", len(page.Events), err)
	}
	verify := func() {
		t.Helper()
		page, err := f.store.Events(ctx, "acme", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		v := chain.NewVerifier("acme")
		for i := range page.Events {
			if err := v.Next(&page.Events[i]); err != nil {
				t.Fatalf("chain: %v", err)
			}
		}
		if strings.Contains(string(mustJSON(t, page.Raw)), "ada@example.com") {
			t.Fatal("the stored rows hold the plaintext email")
		}
	}
	verify()

	p, err := f.cat.Decode(page.Events[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := *p.(*SignedUpV1); got.Email != "ada@example.com" || got.Name != "Ada" || got.Plan != "pro" {
		t.Fatalf("decoded %+v; want the plaintext", got)
	}

	if err := f.vault.Erase(ctx, "acme", "c-1", erasure.Erasure{}); err == nil {
		t.Fatal("Erase without who and why: want an error")
	}
	if err := f.vault.Erase(ctx, "acme", "c-1", erasure.Erasure{By: "dpo@example.com", Reason: "request 42"}); err != nil {
		t.Fatal(err)
	}
	st, err := f.vault.Status(ctx, "acme", "c-1")
	if err != nil || !st.Erased || st.ErasedBy != "dpo@example.com" || st.Reason != "request 42" || st.ErasedAt == "" {
		t.Fatalf("status after erase: %+v %v", st, err)
	}

	p, err = f.cat.Decode(page.Events[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := *p.(*SignedUpV1); got.Email != catalog.Erased || got.Name != catalog.Erased || got.CustomerID != "c-1" || got.Plan != "pro" {
		t.Fatalf("decoded after erase %+v; want personal fields %q, the rest intact", got, catalog.Erased)
	}
	p, err = f.cat.Decode(page.Events[1])
	if err != nil || p.(*SignedUpV1).Email != "bob@example.com" {
		t.Fatalf("another subject after the erase: %+v %v; want it readable", p, err)
	}
	verify()

	_, err = f.store.Emit(ctx, "customer.signed_up", SignedUpV1{CustomerID: "c-1", Email: "ada@new.example.com", Plan: "pro"})
	if !errors.Is(err, catalog.ErrErased) || !strings.Contains(err.Error(), "payload.email") {
		t.Fatalf("emit for an erased subject: %v; want ErrErased naming payload.email", err)
	}
	if page, _ := f.store.Events(ctx, "acme", 0, 10); len(page.Events) != 2 {
		t.Fatalf("%d events after the refused emit; want 2", len(page.Events))
	}
}

// TestSealedValueBoundToItsPlace: a sealed value copied to another subject,
// field or tenant does not open there: the copy is an error, not plaintext.
func TestSealedValueBoundToItsPlace(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	s, err := f.vault.Seal(ctx, "acme", "c-1", "acme\x00c-1\x00customer.signed_up\x00email", "ada@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.vault.Open(ctx, "acme", "c-1", "acme\x00c-1\x00customer.signed_up\x00email", s); err != nil || got != "ada@example.com" {
		t.Fatalf("open in place: %q %v", got, err)
	}
	if _, err := f.vault.Seal(ctx, "acme", "c-2", "x", "y"); err != nil {
		t.Fatal(err)
	}
	for _, aad := range []string{"acme\x00c-1\x00customer.signed_up\x00name", "acme\x00c-1\x00customer.other\x00email"} {
		if _, err := f.vault.Open(ctx, "acme", "c-1", aad, s); !errors.Is(err, erasure.ErrNotSealed) {
			t.Fatalf("open with aad %q: %v; want ErrNotSealed", aad, err)
		}
	}
	if _, err := f.vault.Open(ctx, "acme", "c-2", "acme\x00c-1\x00customer.signed_up\x00email", s); !errors.Is(err, erasure.ErrNotSealed) {
		t.Fatalf("open under another subject's key: %v; want ErrNotSealed", err)
	}
	if _, err := f.vault.Open(ctx, "acme", "c-1", "a", s[:len(s)-3]+"AAA"); !errors.Is(err, erasure.ErrNotSealed) {
		t.Fatalf("open an altered value: %v; want ErrNotSealed", err)
	}
	// Stored before the field was marked personal: returned as it is.
	if got, err := f.vault.Open(ctx, "acme", "c-1", "a", "plain@example.com"); err != nil || got != "plain@example.com" {
		t.Fatalf("open a plain value: %q %v", got, err)
	}
	// A subject with no row: its key is gone (a restore without it).
	if _, err := f.vault.Open(ctx, "acme", "c-9", "a", s); !errors.Is(err, catalog.ErrErased) {
		t.Fatalf("open with no key row: %v; want ErrErased", err)
	}
}

// TestIdempotentRetrySealsAlike: sealing is deterministic per subject key,
// so an Emit retried with its idempotency key matches the first attempt
// instead of failing as a different payload.
func TestIdempotentRetrySealsAlike(t *testing.T) {
	f := setup(t, 0)
	ctx := tenancy.MustWithTenant(context.Background(), "acme")
	in := eventstore.EmitInput{Type: "customer.signed_up", IdempotencyKey: "signup-c-1",
		Payload: SignedUpV1{CustomerID: "c-1", Email: "ada@example.com", Plan: "pro"}}
	first, err := f.store.EmitWith(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.store.EmitWith(ctx, in)
	if err != nil || again.ID != first.ID {
		t.Fatalf("retry: %v %v; want the first event %s", again.ID, err, first.ID)
	}
	in.Payload = SignedUpV1{CustomerID: "c-1", Email: "other@example.com", Plan: "pro"}
	if _, err := f.store.EmitWith(ctx, in); !errors.Is(err, eventstore.ErrIdempotencyKeyMismatch) {
		t.Fatalf("same key, other email: %v; want ErrIdempotencyKeyMismatch", err)
	}
}

// TestConcurrentFirstSealsAgreeOnOneKey: writers sealing a new subject's
// first values at once end with one data key, all values opening under it.
func TestConcurrentFirstSealsAgreeOnOneKey(t *testing.T) {
	f := setup(t, -1)
	ctx := context.Background()
	var wg sync.WaitGroup
	sealed := make([]string, 8)
	errs := make([]error, 8)
	for i := range sealed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := erasure.New(f.db, f.kms, erasure.Config{Table: f.keys, KeyID: "k", CacheTTL: -1})
			if err != nil {
				errs[i] = err
				return
			}
			sealed[i], errs[i] = v.Seal(ctx, "acme", "c-1", "a", "v")
		}()
	}
	wg.Wait()
	for i := range sealed {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got, err := f.vault.Open(ctx, "acme", "c-1", "a", sealed[i]); err != nil || got != "v" {
			t.Fatalf("writer %d's value: %q %v", i, got, err)
		}
	}
	out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(f.keys)})
	if err != nil || len(out.Items) != 1 {
		t.Fatalf("%d key rows, %v; want 1", len(out.Items), err)
	}
}

// TestCacheBoundsHowLongAnErasureTakes: a warm vault keeps opening an
// erased subject's values until its cache entry expires, never after.
func TestCacheBoundsHowLongAnErasureTakes(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	warm, err := erasure.New(f.db, f.kms, erasure.Config{Table: f.keys, KeyID: "k", CacheTTL: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := warm.Seal(ctx, "acme", "c-1", "a", "v")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.vault.Erase(ctx, "acme", "c-1", erasure.Erasure{By: "dpo", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if got, err := warm.Open(ctx, "acme", "c-1", "a", s); err != nil || got != "v" {
		t.Fatalf("within the cache TTL: %q %v; want still open (documented)", got, err)
	}
	now = now.Add(61 * time.Second)
	if _, err := warm.Open(ctx, "acme", "c-1", "a", s); !errors.Is(err, catalog.ErrErased) {
		t.Fatalf("after the cache TTL: %v; want ErrErased", err)
	}
	if f.kms.decrypted != 0 {
		t.Fatalf("%d KMS decrypts; the sealing vault had the key and the eraser never unwraps", f.kms.decrypted)
	}
}

// TestEmitRefusesPersonalDataWithoutVault: a catalog with personal fields
// and no vault refuses to store them in the clear.
func TestEmitRefusesPersonalDataWithoutVault(t *testing.T) {
	f := setup(t, 0)
	cat, err := catalog.New(customers.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if !cat.Personal() {
		t.Fatal("Personal() = false for a catalog with personal fields")
	}
	st, err := eventstore.New(f.db, eventstore.Config{Table: f.events, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenancy.MustWithTenant(context.Background(), "acme")
	_, err = st.Emit(ctx, "customer.signed_up", SignedUpV1{CustomerID: "c-1", Email: "ada@example.com", Plan: "pro"})
	if err == nil || !strings.Contains(err.Error(), "no vault") {
		t.Fatalf("emit without a vault: %v; want a refusal naming the vault", err)
	}
	_, err = f.store.Emit(ctx, "customer.signed_up", SignedUpV1{CustomerID: "", Email: "ada@example.com", Plan: "pro"})
	if err == nil || !strings.Contains(err.Error(), "payload.customer_id") {
		t.Fatalf("emit with an empty subject: %v; want an error naming payload.customer_id", err)
	}
	if page, _ := st.Events(ctx, "acme", 0, 10); len(page.Events) != 0 {
		t.Fatalf("%d events written; want none", len(page.Events))
	}
}

func TestDeclarationProblems(t *testing.T) {
	type noSubject struct {
		Email string `json:"email" fourlanes:"personal"`
	}
	type twoSubjects struct {
		A     string `json:"a" fourlanes:"subject"`
		B     string `json:"b" fourlanes:"subject"`
		Email string `json:"email" fourlanes:"personal"`
	}
	type notString struct {
		ID  string `json:"id" fourlanes:"subject"`
		Age int    `json:"age" fourlanes:"personal"`
	}
	type typo struct {
		ID    string `json:"id" fourlanes:"subject"`
		Email string `json:"email" fourlanes:"private"`
	}
	type optionalSubject struct {
		ID    string `json:"id,omitempty" fourlanes:"subject"`
		Email string `json:"email" fourlanes:"personal"`
	}
	for name, c := range map[string]struct {
		v    catalog.Version
		want string
	}{
		"no subject":       {catalog.V[noSubject](1), "no subject"},
		"two subjects":     {catalog.V[twoSubjects](1), "one data subject"},
		"not a string":     {catalog.V[notString](1), "must be a string"},
		"unknown mark":     {catalog.V[typo](1), `"private"`},
		"optional subject": {catalog.V[optionalSubject](1), "omitempty"},
	} {
		t.Run(name, func(t *testing.T) {
			m := catalog.Module[handlers]{Name: "customers", Emits: []catalog.EventType{{Name: "customer.x", Versions: []catalog.Version{c.v}}}}
			_, err := catalog.New(m.Spec())
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "customer.x") {
				t.Fatalf("catalog.New: %v; want an error naming customer.x and %q", err, c.want)
			}
		})
	}
}

func mustJSON(t *testing.T, raw []map[string]types.AttributeValue) []byte {
	t.Helper()
	var b strings.Builder
	var walk func(v types.AttributeValue)
	walk = func(v types.AttributeValue) {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			b.WriteString(v.Value)
		case *types.AttributeValueMemberB:
			b.Write(v.Value)
		case *types.AttributeValueMemberM:
			for _, e := range v.Value {
				walk(e)
			}
		case *types.AttributeValueMemberL:
			for _, e := range v.Value {
				walk(e)
			}
		}
	}
	for _, item := range raw {
		for _, v := range item {
			walk(v)
		}
	}
	if b.Len() == 0 {
		t.Fatal("the stored rows hold no strings: the plaintext check would see nothing")
	}
	return []byte(b.String())
}
