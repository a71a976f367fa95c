package erasure

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Prefix starts every sealed value (SPEC.md, "Personal fields").
const Prefix = "fl:pii:1:"

// ErrNotSealed is returned by Open for a value that is not in the sealed
// form although it starts with Prefix (damaged or forged).
var ErrNotSealed = errors.New("not a sealed value")

// DynamoDB is the subset of the DynamoDB client a Vault uses.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// KMS is the subset of the KMS client a Vault uses.
type KMS interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// Config configures a Vault.
type Config struct {
	// Table is the subject-keys table (keys.PKSKTable schema; the backbone's
	// output SubjectKeysTableName, $SUBJECT_KEYS_TABLE in its functions).
	Table string
	// KeyID is the symmetric KMS key that wraps data keys (output DataKeyArn,
	// $DATA_KEY_ID). Open needs it only to check that a wrapped key is its.
	KeyID string
	// CacheTTL bounds how long an unwrapped data key is used without reading
	// the subject's row again: how long after an erasure a warm function may
	// still open the subject's fields. Zero means one minute; negative, no
	// cache.
	CacheTTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Vault seals and opens personal fields (catalog.Vault) and erases
// subjects. It is safe for concurrent use.
type Vault struct {
	db  DynamoDB
	kms KMS
	cfg Config

	mu    sync.Mutex
	cache map[string]cached // by tenant \x00 subject
}

type cached struct {
	key []byte // nil: erased
	at  time.Time
}

var _ catalog.Vault = (*Vault)(nil)

// New returns a Vault over the subject-keys table and KMS key of cfg.
func New(db DynamoDB, k KMS, cfg Config) (*Vault, error) {
	switch {
	case db == nil || k == nil:
		return nil, errors.New("erasure: a DynamoDB and a KMS client are required")
	case cfg.Table == "":
		return nil, fmt.Errorf("erasure: Config.Table is empty: give the subject-keys table ($%s)", keys.EnvSubjectKeysTable)
	case cfg.KeyID == "":
		return nil, fmt.Errorf("erasure: Config.KeyID is empty: give the KMS key that wraps data keys ($%s)", keys.EnvDataKeyID)
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Vault{db: db, kms: k, cfg: cfg, cache: map[string]cached{}}, nil
}

// Seal seals plaintext for tenant's subject, making the subject's data key
// on first use. It returns catalog.ErrErased for an erased subject.
func (v *Vault) Seal(ctx context.Context, tenant, subject, aad, plaintext string) (string, error) {
	key, err := v.dataKey(ctx, tenant, subject, true)
	if err != nil {
		return "", err
	}
	return seal(key, aad, plaintext)
}

// Open opens a sealed value of tenant's subject. A value without Prefix was
// stored before its field was marked personal and is returned as it is. It
// returns catalog.ErrErased once the subject is erased.
func (v *Vault) Open(ctx context.Context, tenant, subject, aad, sealed string) (string, error) {
	if !strings.HasPrefix(sealed, Prefix) {
		return sealed, nil
	}
	key, err := v.dataKey(ctx, tenant, subject, false)
	if err != nil {
		return "", err
	}
	return open(key, aad, sealed)
}

// Erasure is what Erase records in the subject's tombstone.
type Erasure struct {
	By     string // who erases (an IAM principal or a person's name)
	Reason string // why: a request reference, say
}

// Erase erases tenant's subject (Subjects.Erase) and forgets the subject's
// key in this vault's cache at once.
func (v *Vault) Erase(ctx context.Context, tenant, subject string, e Erasure) error {
	if err := v.subjects().Erase(ctx, tenant, subject, e); err != nil {
		return err
	}
	v.mu.Lock()
	v.cache[tenant+"\x00"+subject] = cached{at: v.cfg.Now()}
	v.mu.Unlock()
	return nil
}

// Status reads tenant's subject's row (Subjects.Status).
func (v *Vault) Status(ctx context.Context, tenant, subject string) (Status, error) {
	return v.subjects().Status(ctx, tenant, subject)
}

func (v *Vault) subjects() *Subjects { return &Subjects{db: v.db, table: v.cfg.Table, now: v.cfg.Now} }

// Subjects erases subjects and reads their state: what an operator needs
// (fourlanes erase), without KMS. A function that still holds a subject's
// key in its Vault's cache stops using it within Config.CacheTTL.
type Subjects struct {
	db    DynamoDB
	table string
	now   func() time.Time
}

// NewSubjects returns the Subjects of the subject-keys table.
func NewSubjects(db DynamoDB, table string) (*Subjects, error) {
	if db == nil || table == "" {
		return nil, fmt.Errorf("erasure: a DynamoDB client and the subject-keys table ($%s, the stack output %s) are required", keys.EnvSubjectKeysTable, keys.OutputSubjectKeysTable)
	}
	return &Subjects{db: db, table: table, now: time.Now}, nil
}

// Erase erases tenant's subject: its data key is replaced by a tombstone
// recording when, by whom and why. Erasing an erased subject, or one never
// seen, leaves (or writes) a tombstone; either way no value of the subject
// can be opened or sealed again.
func (s *Subjects) Erase(ctx context.Context, tenant, subject string, e Erasure) error {
	if err := checkSubject(tenant, subject); err != nil {
		return err
	}
	if e.By == "" || e.Reason == "" {
		return errors.New("erase: say who erases (By) and why (Reason): the tombstone records both")
	}
	item := keyOf(tenant, subject)
	item[keys.AttrErasedAt] = &types.AttributeValueMemberS{Value: s.now().UTC().Format(time.RFC3339)}
	item[keys.AttrErasedBy] = &types.AttributeValueMemberS{Value: e.By}
	item[keys.AttrErasedReason] = &types.AttributeValueMemberS{Value: e.Reason}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("erase subject %q of tenant %s: %w", subject, tenant, err)
	}
	return nil
}

// Status is a subject's state in the subject-keys table.
type Status struct {
	Known    bool   `json:"known"`  // the subject has a row (a key or a tombstone)
	Erased   bool   `json:"erased"` // the row is a tombstone
	ErasedAt string `json:"erased_at,omitempty"`
	ErasedBy string `json:"erased_by,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Status reads tenant's subject's row.
func (s *Subjects) Status(ctx context.Context, tenant, subject string) (Status, error) {
	if err := checkSubject(tenant, subject); err != nil {
		return Status{}, err
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: keyOf(tenant, subject), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Status{}, fmt.Errorf("subject %q of tenant %s: %w", subject, tenant, err)
	}
	if out.Item == nil {
		return Status{}, nil
	}
	_, hasKey := out.Item[keys.AttrDataKey]
	return Status{Known: true, Erased: !hasKey, ErasedAt: str(out.Item, keys.AttrErasedAt),
		ErasedBy: str(out.Item, keys.AttrErasedBy), Reason: str(out.Item, keys.AttrErasedReason)}, nil
}

// dataKey returns tenant's subject's unwrapped data key, making one when
// create is set and the subject has none. A tombstone is catalog.ErrErased;
// so is a missing row when not creating (the key of a sealed value is gone).
func (v *Vault) dataKey(ctx context.Context, tenant, subject string, create bool) ([]byte, error) {
	if err := checkSubject(tenant, subject); err != nil {
		return nil, err
	}
	ck := tenant + "\x00" + subject
	v.mu.Lock()
	c, ok := v.cache[ck]
	v.mu.Unlock()
	if ok && v.cfg.CacheTTL > 0 && v.cfg.Now().Sub(c.at) < v.cfg.CacheTTL {
		if c.key == nil {
			return nil, erased(tenant, subject)
		}
		return c.key, nil
	}
	for attempt := 0; ; attempt++ {
		out, err := v.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(v.cfg.Table), Key: keyOf(tenant, subject), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("read the data key of subject %q of tenant %s: %w", subject, tenant, err)
		}
		if out.Item != nil {
			b, ok := out.Item[keys.AttrDataKey].(*types.AttributeValueMemberB)
			if !ok {
				v.remember(ck, nil)
				return nil, erased(tenant, subject)
			}
			key, err := v.unwrap(ctx, tenant, subject, b.Value)
			if err != nil {
				return nil, err
			}
			v.remember(ck, key)
			return key, nil
		}
		if !create {
			return nil, fmt.Errorf("%w: subject %q of tenant %s has no data key (erased, or the subject-keys table was restored without it)", catalog.ErrErased, subject, tenant)
		}
		if attempt > 0 {
			return nil, fmt.Errorf("make the data key of subject %q of tenant %s: it vanished after another writer made it", subject, tenant)
		}
		gen, err := v.kms.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{KeyId: aws.String(v.cfg.KeyID),
			KeySpec: kmstypes.DataKeySpecAes256, EncryptionContext: encryptionContext(tenant, subject)})
		if err != nil {
			return nil, fmt.Errorf("make the data key of subject %q of tenant %s (kms:GenerateDataKey on %s): %w", subject, tenant, v.cfg.KeyID, err)
		}
		item := keyOf(tenant, subject)
		item[keys.AttrDataKey] = &types.AttributeValueMemberB{Value: gen.CiphertextBlob}
		item[keys.AttrCreatedAt] = &types.AttributeValueMemberS{Value: v.cfg.Now().UTC().Format(time.RFC3339)}
		_, err = v.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(v.cfg.Table), Item: item,
			ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": keys.AttrPK}})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &ccf):
			continue // another writer made it first, or erased the subject: read theirs
		case err != nil:
			return nil, fmt.Errorf("store the data key of subject %q of tenant %s: %w", subject, tenant, err)
		}
		v.remember(ck, gen.Plaintext)
		return gen.Plaintext, nil
	}
}

func (v *Vault) unwrap(ctx context.Context, tenant, subject string, blob []byte) ([]byte, error) {
	out, err := v.kms.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: blob, KeyId: aws.String(v.cfg.KeyID),
		EncryptionContext: encryptionContext(tenant, subject)})
	if err != nil {
		return nil, fmt.Errorf("unwrap the data key of subject %q of tenant %s (kms:Decrypt on %s): %w", subject, tenant, v.cfg.KeyID, err)
	}
	if len(out.Plaintext) != 32 {
		return nil, fmt.Errorf("the data key of subject %q of tenant %s is %d bytes, not 32", subject, tenant, len(out.Plaintext))
	}
	return out.Plaintext, nil
}

func (v *Vault) remember(ck string, key []byte) {
	if v.cfg.CacheTTL < 0 {
		return
	}
	v.mu.Lock()
	v.cache[ck] = cached{key: key, at: v.cfg.Now()}
	v.mu.Unlock()
}

func erased(tenant, subject string) error {
	return fmt.Errorf("%w: subject %q of tenant %s", catalog.ErrErased, subject, tenant)
}

func checkSubject(tenant, subject string) error {
	switch {
	case tenant == "":
		return errors.New("erasure: the tenant is empty")
	case subject == "":
		return errors.New("erasure: the subject is empty")
	case len(subject) > 1024:
		return fmt.Errorf("erasure: the subject is %d bytes; at most 1024", len(subject))
	}
	return nil
}

func keyOf(tenant, subject string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: tenant},
		keys.AttrSK: &types.AttributeValueMemberS{Value: keys.SubjectKeyPrefix + subject},
	}
}

func encryptionContext(tenant, subject string) map[string]string {
	return map[string]string{"fourlanes:tenant": tenant, "fourlanes:subject": subject}
}

func str(item map[string]types.AttributeValue, name string) string {
	if s, ok := item[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// seal is the sealed form of SPEC.md: Prefix, then base64url (unpadded) of
// nonce || AES-256-GCM(key, nonce, plaintext, aad), where nonce is the first
// 12 bytes of HMAC-SHA256(key, "fourlanes/pii-nonce" 0x00 aad 0x00 plaintext).
func seal(key []byte, aad, plaintext string) (string, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("fourlanes/pii-nonce\x00"))
	mac.Write([]byte(aad))
	mac.Write([]byte{0})
	mac.Write([]byte(plaintext))
	nonce := mac.Sum(nil)[:gcm.NonceSize()]
	out := gcm.Seal(append([]byte(nil), nonce...), nonce, []byte(plaintext), []byte(aad))
	return Prefix + base64.RawURLEncoding.EncodeToString(out), nil
}

func open(key []byte, aad, sealed string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(sealed, Prefix))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotSealed, err)
	}
	gcm, err := newGCM(key)
	if err != nil {
		return "", err
	}
	if len(raw) < gcm.NonceSize()+gcm.Overhead() {
		return "", fmt.Errorf("%w: %d bytes", ErrNotSealed, len(raw))
	}
	plain, err := gcm.Open(nil, raw[:gcm.NonceSize()], raw[gcm.NonceSize():], []byte(aad))
	if err != nil {
		return "", fmt.Errorf("%w: it does not open with its subject's key here (moved from another event, field or subject, or altered): %v", ErrNotSealed, err)
	}
	return string(plain), nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// FromEnv returns a Vault over the subject-keys table and KMS key the
// backbone gives its functions and the application's services
// ($SUBJECT_KEYS_TABLE, $DATA_KEY_ID: the stack outputs SubjectKeysTableName
// and DataKeyArn).
func FromEnv(db DynamoDB, k KMS) (*Vault, error) {
	env, err := awsenv.Require(keys.EnvSubjectKeysTable, keys.EnvDataKeyID)
	if err != nil {
		return nil, fmt.Errorf("erasure: %w", err)
	}
	return New(db, k, Config{Table: env[keys.EnvSubjectKeysTable], KeyID: env[keys.EnvDataKeyID]})
}

// Use gives an event store's catalog the vault, so Emit seals personal
// fields: app.EventStore(db, table, erasure.Use(v)).
func Use(v *Vault) func(*eventstore.Config) {
	return func(cfg *eventstore.Config) {
		if c, ok := cfg.Catalog.(interface{ UseVault(catalog.Vault) }); ok {
			c.UseVault(v)
		}
	}
}
