package keys

// Stack output names: the backbone's CDK stack (infra/backbone) declares
// them and the CLI reads them by name (`fourlanes -stack`, and the twin's
// for -local), so neither spells them twice.
const (
	OutputReconcileURL          = "ReconcileUrl"
	OutputReconcileCallerPolicy = "ReconcileCallerPolicyArn"
	OutputEmitterPolicy         = "EmitterPolicyArn"
	OutputRepairFunction        = "RepairFunctionName"
	OutputEventsTable           = "EventsTableName"
	OutputStateTable            = "StateTableName"
	OutputDashboard             = "DashboardName"
	OutputDurableDLQ            = "DurableDLQUrl"
	OutputPipeDLQ               = "PipeDLQUrl"
	OutputChangeFeedDLQ         = "ChangeFeedDLQUrl"
	OutputAlarmTopic            = "AlarmTopicArn"
	OutputCheckpointBucket      = "CheckpointBucketName"
	OutputCheckpointKey         = "CheckpointKeyArn"
)
