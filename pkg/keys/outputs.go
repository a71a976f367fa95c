package keys

import (
	"slices"
	"strings"
)

// Stack output names of a backbone: the construct (infra/backbone) declares
// each as its prefix (BackbonePrefix) and the name, and the CLI reads them
// (`fourlanes -stack`, and the twin's for -local), so neither spells them
// twice.
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

// OutputNames lists every output a backbone declares.
var OutputNames = []string{
	OutputReconcileURL, OutputReconcileCallerPolicy, OutputEmitterPolicy, OutputRepairFunction,
	OutputEventsTable, OutputStateTable, OutputDashboard, OutputDurableDLQ, OutputPipeDLQ,
	OutputChangeFeedDLQ, OutputAlarmTopic, OutputCheckpointBucket, OutputCheckpointKey,
}

// OptionalOutputNames are the outputs a backbone declares only with what
// they name: the erasure resources, when the catalog declares personal
// fields (erasure.go).
var OptionalOutputNames = []string{OutputSubjectKeysTable, OutputDataKey, OutputEraserPolicy}

// HiddenID is the construct id that CDK leaves out of logical IDs, and so
// does BackbonePrefix: a backbone added as New(stack, HiddenID, …) keeps the
// logical IDs and output names of a stack deployed before backbones had an
// id.
const HiddenID = "Default"

// BackbonePrefix is what the output names and the pinned logical IDs of the
// backbone at path begin with: the letters and digits of its construct path
// below its stack ("Orders", or "Team/Orders"), without the components named
// HiddenID. New(stack, "Orders", …) declares OrdersEventsTableName;
// New(stack, "Default", …) declares EventsTableName. The CLI takes either the
// path or the prefix itself (-backbone Orders).
func BackbonePrefix(path string) string {
	var b strings.Builder
	for _, id := range strings.Split(path, "/") {
		if id == HiddenID {
			continue
		}
		for _, r := range id {
			if ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// OutputBackbones returns the prefixes of the backbones whose outputs a
// stack's outputs hold, sorted: each backbone declares <prefix>EventsTableName.
// A stack deployed before backbones had an id has one, with the prefix "".
func OutputBackbones(outputs map[string]string) []string {
	var out []string
	for name := range outputs {
		if p, ok := strings.CutSuffix(name, OutputEventsTable); ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// BackboneOutputs returns the outputs of the backbone with prefix, by the
// names above (OutputEventsTable, …); a name the stack lacks is absent.
func BackboneOutputs(outputs map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for _, name := range slices.Concat(OutputNames, OptionalOutputNames) {
		if v, ok := outputs[prefix+name]; ok {
			out[name] = v
		}
	}
	return out
}
