package tracing

import "go.opentelemetry.io/otel/attribute"

// Attr is one attribute of a span.
type Attr struct{ k, v string }

// String is the attribute k = v.
func String(k, v string) Attr { return Attr{k, v} }

func (a Attr) kv() attribute.KeyValue { return attribute.String(a.k, a.v) }

// Attribute names (OpenTelemetry semantic conventions where one exists).
const (
	attrInvocationID = attribute.Key("faas.invocation_id")
	attrRPCSystem    = attribute.Key("rpc.system")
	attrRPCService   = attribute.Key("rpc.service")
	attrRPCMethod    = attribute.Key("rpc.method")
	attrRegion       = attribute.Key("cloud.region")
	attrRequestID    = attribute.Key("aws.request_id")
	attrServiceName  = attribute.Key("service.name")
	attrFaaSName     = attribute.Key("faas.name")
	attrCloud        = attribute.Key("cloud.provider")
)
