package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Thresholds of the projection alarms. dlq-repair sweeps the projections'
// parks and compares them with their tables after each of its runs
// (RepairEvery, hourly), so each count arrives once an hour; a one-hour
// period holds it until the next run says whether the problem stayed.
var projectionPeriod = minutes(60)

// projectionAlarms are the alarms of the projections toolkit
// (pkg/projection), on its EMF counts over every projection of the
// account (dimension Projection names the one; the ERROR lines say the
// entity and what to do).
func projectionAlarms(alarm func(name, description string, metric awscloudwatch.IMetric, threshold, periods float64)) {
	alarm("ProjectionParkAged",
		"A projection holds a parked change older than an hour (EMF ProjParkAged, by Projection): its predecessor never arrived and the table re-read did not close the gap. dlq-repair's ERROR lines 'parked change outlived its threshold' name the tenant, entity and version. Fix the item in its table and run dlq-repair (fourlanes repair), whose sweep re-reads it, or rebuild the projection (docs/projections.md).",
		emfQuery("SUM", keys.MetricProjParkAged, projectionPeriod), 1, 1)
	alarm("ProjectionParkExpiring",
		"A parked change of a projection is within a day of its TTL, unapplied (EMF ProjParkExpiring, by Projection): when it expires the change it holds is gone. Close the gap before then: the ERROR lines 'parked change about to expire unapplied' say which entity (docs/projections.md).",
		emfQuery("SUM", keys.MetricProjParkExpiring, projectionPeriod), 1, 1)
	alarm("ProjectionAhead",
		"A compare found a projection row newer than its source item, or a tombstone of a live item (EMF ProjAhead, by Projection). It is left alone: something other than the projection wrote its table, or the source was rolled back. The ERROR lines 'ahead of its source' name the row; find the writer before rebuilding.",
		emfQuery("SUM", keys.MetricProjAhead, projectionPeriod), 1, 1)
	alarm("ProjectionRunFailed",
		"dlq-repair's park sweep or compare of a projection failed (EMF ProjRunFailed, by Projection): parks and divergence go unreported until it runs again. Read dlq-repair's ERROR lines 'projection ... failed' for the cause (a table, a grant).",
		emfQuery("SUM", keys.MetricProjRunFailed, projectionPeriod), 1, 1)
}
