package keys

// Signed checkpoints (pkg/checkpoint, pkg/reconcile): the environment the
// CDK app gives reconcile, and the object layout in the checkpoint bucket.
const (
	// EnvCheckpointBucket names the Object Lock bucket holding signed checkpoints.
	EnvCheckpointBucket = "CHECKPOINT_BUCKET"
	// EnvCheckpointKey is the KMS key (ID or ARN) that signs them.
	EnvCheckpointKey = "CHECKPOINT_KEY_ID"
	// EnvCheckpointLog is the signing log's name: the note's key name and
	// the prefix of each checkpoint's origin line (fourlanes/<stack>).
	EnvCheckpointLog = "CHECKPOINT_LOG"
	// EnvReconcileAccess optionally maps reconcile's callers to the tenants
	// they may see (pkg/reconcile, TenantAccess): a JSON object of IAM role
	// name (or user/<name>) to tenant ids or ["*"].
	EnvReconcileAccess = "RECONCILE_ACCESS"

	// CheckpointObjectPrefix starts every checkpoint object key:
	// checkpoints/<path-escaped tenant>/<19 digits: 9999999999999999999 - seq>.note,
	// so a tenant's newest checkpoint is the first key S3 lists.
	CheckpointObjectPrefix = "checkpoints/"

	// MetricCheckpointInvalid counts checkpoint objects that do not verify.
	MetricCheckpointInvalid = "CheckpointInvalid"
)
