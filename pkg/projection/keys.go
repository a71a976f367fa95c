package projection

// Log keys of this package's lines (besides obs.KeyTenant and obs.KeyErr).
const (
	KeyProjection = "projection"
	KeyEntity     = "entity"
	KeyID         = "id"
	KeyVersion    = "version"
	KeyProjected  = "projected" // the version the projection holds
	KeyParkedAt   = "parked_at"
	KeyExpiresAt  = "expires_at"
	KeyAge        = "age"
	KeyFault      = "fault" // what Compare found: missing, behind, divergent, orphaned, ahead
)
