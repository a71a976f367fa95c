package cfn

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Resource types the local twin brings up.
const (
	TypeTable       = "AWS::DynamoDB::Table"
	TypeGlobalTable = "AWS::DynamoDB::GlobalTable"
	TypeQueue       = "AWS::SQS::Queue"
	TypeFunction    = "AWS::Lambda::Function"
	TypeURL         = "AWS::Lambda::Url"
	TypeMapping     = "AWS::Lambda::EventSourceMapping"
	TypePipe        = "AWS::Pipes::Pipe"
)

// Bool is a CloudFormation boolean: JSON true/false or the strings "true"/"false".
type Bool bool

// UnmarshalJSON accepts a boolean or its string form.
func (b *Bool) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch t := v.(type) {
	case bool:
		*b = Bool(t)
	case string:
		x, err := strconv.ParseBool(t)
		if err != nil {
			return fmt.Errorf("%q is not a boolean", t)
		}
		*b = Bool(x)
	default:
		return fmt.Errorf("%s is not a boolean", data)
	}
	return nil
}

// Int is a CloudFormation integer: a JSON number or its string form.
type Int int

// UnmarshalJSON accepts a number or its string form.
func (n *Int) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch t := v.(type) {
	case float64:
		*n = Int(t)
	case string:
		x, err := strconv.Atoi(strings.TrimSpace(t))
		if err != nil {
			return fmt.Errorf("%q is not an integer", t)
		}
		*n = Int(x)
	default:
		return fmt.Errorf("%s is not an integer", data)
	}
	return nil
}

// IntOr returns *p, or def when p is nil.
func IntOr(p *Int, def int) int {
	if p == nil {
		return def
	}
	return int(*p)
}

// KeyElement is one element of a KeySchema.
type KeyElement struct {
	AttributeName string
	KeyType       string
}

// AttributeDefinition names a key attribute's type.
type AttributeDefinition struct {
	AttributeName string
	AttributeType string
}

// Projection of a secondary index.
type Projection struct {
	ProjectionType   string
	NonKeyAttributes []string
}

// Index is a global or local secondary index.
type Index struct {
	IndexName  string
	KeySchema  []KeyElement
	Projection Projection
}

// TableProps are the properties of AWS::DynamoDB::Table and
// AWS::DynamoDB::GlobalTable that the twin reproduces. Encryption, point-in-
// time recovery, tags, replicas' settings and capacity are AWS-side concerns
// the twin's DynamoDB has no use for.
type TableProps struct {
	TableName               string
	KeySchema               []KeyElement
	AttributeDefinitions    []AttributeDefinition
	GlobalSecondaryIndexes  []Index
	LocalSecondaryIndexes   []Index
	StreamSpecification     *StreamSpecification
	TimeToLiveSpecification *TimeToLiveSpecification
}

// StreamSpecification of a table. A GlobalTable's has no StreamEnabled.
type StreamSpecification struct {
	StreamEnabled  *Bool
	StreamViewType string
}

// TimeToLiveSpecification of a table.
type TimeToLiveSpecification struct {
	AttributeName string
	Enabled       Bool
}

// RedrivePolicy of a queue. CloudFormation accepts it as an object or as a
// JSON string.
type RedrivePolicy struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	MaxReceiveCount     Int    `json:"maxReceiveCount"`
}

// UnmarshalJSON accepts the object or its JSON string form.
func (r *RedrivePolicy) UnmarshalJSON(data []byte) error {
	type plain RedrivePolicy
	var s string
	if json.Unmarshal(data, &s) == nil {
		data = []byte(s)
	}
	return json.Unmarshal(data, (*plain)(r))
}

// QueueProps are the properties of AWS::SQS::Queue the twin reproduces.
// Encryption and policies are AWS-side concerns.
type QueueProps struct {
	QueueName                     string
	FifoQueue                     Bool
	ContentBasedDeduplication     Bool
	DeduplicationScope            string
	FifoThroughputLimit           string
	VisibilityTimeout             *Int
	MessageRetentionPeriod        *Int
	DelaySeconds                  *Int
	ReceiveMessageWaitTimeSeconds *Int
	MaximumMessageSize            *Int
	RedrivePolicy                 *RedrivePolicy
}

// FunctionProps are the properties of AWS::Lambda::Function the twin uses.
type FunctionProps struct {
	FunctionName string
	Handler      string
	Runtime      string
	Environment  *struct {
		Variables map[string]any
	}
	Timeout                      *Int
	MemorySize                   *Int
	ReservedConcurrentExecutions *Int
	// LoggingConfig is Lambda's advanced logging controls.
	LoggingConfig *struct {
		LogFormat           string // JSON or Text
		ApplicationLogLevel string // TRACE, DEBUG, INFO, WARN, ERROR, FATAL
		SystemLogLevel      string
	}
	Code struct {
		S3Bucket string
		S3Key    string
		ZipFile  string
		ImageUri string
	}
}

// URLProps are the properties of AWS::Lambda::Url.
type URLProps struct {
	TargetFunctionArn string
	AuthType          string
	InvokeMode        string
	Qualifier         string
}

// FilterCriteria of an event source mapping or a Pipe source.
type FilterCriteria struct {
	Filters []struct {
		Pattern string
	}
}

// MappingProps are the properties of AWS::Lambda::EventSourceMapping.
type MappingProps struct {
	FunctionName                   string
	EventSourceArn                 string
	Enabled                        *Bool
	BatchSize                      *Int
	StartingPosition               string
	BisectBatchOnFunctionError     Bool
	MaximumRetryAttempts           *Int
	MaximumRecordAgeInSeconds      *Int
	MaximumBatchingWindowInSeconds *Int
	ParallelizationFactor          *Int
	TumblingWindowInSeconds        *Int
	FunctionResponseTypes          []string
	FilterCriteria                 *FilterCriteria
	DestinationConfig              *struct {
		OnFailure *struct {
			Destination string
		}
	}
	ScalingConfig *struct {
		MaximumConcurrency *Int
	}
}

// PipeStreamParameters are a Pipe's DynamoDBStreamParameters.
type PipeStreamParameters struct {
	StartingPosition               string
	BatchSize                      *Int
	MaximumBatchingWindowInSeconds *Int
	MaximumRecordAgeInSeconds      *Int
	MaximumRetryAttempts           *Int
	OnPartialBatchItemFailure      string
	ParallelizationFactor          *Int
	DeadLetterConfig               *struct {
		Arn string
	}
}

// PipeProps are the properties of AWS::Pipes::Pipe the twin reproduces.
type PipeProps struct {
	Name             string
	DesiredState     string
	Source           string
	SourceParameters *struct {
		DynamoDBStreamParameters *PipeStreamParameters
		FilterCriteria           *FilterCriteria
		// Other source kinds are refused by the twin, by name.
		SqsQueueParameters      any
		KinesisStreamParameters any
	}
	Enrichment           string
	EnrichmentParameters *struct {
		InputTemplate  string
		HttpParameters any
	}
	Target           string
	TargetParameters *struct {
		InputTemplate      string
		SqsQueueParameters *struct {
			MessageGroupId         string
			MessageDeduplicationId string
		}
	}
}
