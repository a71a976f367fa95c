package keys

// Subject keys (pkg/erasure): one item per data subject of a tenant in the
// subject-keys table, holding the subject's data key wrapped by KMS, or,
// once the subject is erased, a tombstone without it.
//
//	subject key  pk <tenant>   sk subject#<subject>
//
// Attributes: AttrDataKey (B: KMS's CiphertextBlob of the 256-bit data key;
// absent in a tombstone), AttrCreatedAt, AttrErasedAt, AttrErasedBy,
// AttrErasedReason. The table has no stream and no point-in-time recovery:
// a deleted data key must not outlive the erasure in a backup.
const (
	SubjectKeyPrefix = "subject#"

	AttrDataKey      = "data_key"
	AttrCreatedAt    = "created_at"    // S: RFC 3339
	AttrErasedAt     = "erased_at"     // S: RFC 3339
	AttrErasedBy     = "erased_by"     // S: who erased the subject (an IAM principal)
	AttrErasedReason = "erased_reason" // S: why (a request reference, say)
)

// Environment of the functions and services that seal or open personal
// fields: the subject-keys table and the symmetric KMS key that wraps data
// keys. The backbone sets them when the catalog declares personal fields.
const (
	EnvSubjectKeysTable = "SUBJECT_KEYS_TABLE"
	EnvDataKeyID        = "DATA_KEY_ID"
)

// Output names of the subject-keys table and the data-key KMS key.
const (
	OutputSubjectKeysTable = "SubjectKeysTableName"
	OutputDataKey          = "DataKeyArn"
	OutputEraserPolicy     = "EraserPolicyArn"
)
