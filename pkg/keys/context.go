package keys

// CDK context values that every fourlanes application's CDK app reads (the
// examples', and the one `fourlanes init` writes): `cdk deploy -c
// alarmEmail=ops@example.com`. The backbone refuses to synthesize until one
// of the three names where its alarms go; the local twin, which delivers no
// alarms, passes ContextNoAlarmDestination when none is given.
const (
	// ContextAlarmEmail is an address to subscribe to the alarm topic.
	ContextAlarmEmail = "alarmEmail"
	// ContextAlarmTopicArn is an existing SNS topic every alarm notifies.
	ContextAlarmTopicArn = "alarmTopicArn"
	// ContextNoAlarmDestination is the reason the alarms may reach no one
	// (a sandbox account, the twin); the template records it.
	ContextNoAlarmDestination = "noAlarmDestination"
)

// MetadataNoAlarmDestination is the metadata key under which the template
// records, on the alarm topic the backbone creates, why no one is subscribed
// to it (backbone Props.NoAlarmDestination).
const MetadataNoAlarmDestination = "fourlanes:noAlarmDestination"
