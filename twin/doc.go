// Package twin runs a synthesized CloudFormation stack on one machine: the
// local twin behind `fourlanes dev` and the end-to-end tests. It reads the
// template (package cfn), creates what the template declares on our own
// DynamoDB (package ddb) and ElasticMQ, runs each function's real bootstrap against a local
// Lambda Runtime API (package lambdart), and reproduces the AWS services in
// between — EventBridge Pipes and Lambda event source mappings — with the
// semantics AWS documents. Because it is driven by the template, a missing
// filter or a JSON path that does not resolve fails here as in AWS.
//
// # What the twin reads from the template
//
//	AWS::DynamoDB::Table, AWS::DynamoDB::GlobalTable
//	    KeySchema, AttributeDefinitions, Global/LocalSecondaryIndexes,
//	    StreamSpecification.StreamViewType, TimeToLiveSpecification, TableName.
//	    Ref: name. GetAtt: Arn, StreamArn (= LatestStreamArn, the real stream
//	    ARN the local DynamoDB assigns). Billing, encryption, PITR: AWS-side
//	    only. A table already there with the same keys, indexes and stream
//	    (a DynamoDB that keeps its state, as `fourlanes dev`'s does) is kept.
//	AWS::SQS::Queue
//	    FifoQueue, ContentBasedDeduplication, VisibilityTimeout,
//	    MessageRetentionPeriod, DelaySeconds, ReceiveMessageWaitTimeSeconds,
//	    MaximumMessageSize, RedrivePolicy (ElasticMQ applies it),
//	    DeduplicationScope (see below), FifoThroughputLimit, QueueName.
//	    Ref: URL. GetAtt: Arn, QueueName, QueueUrl.
//	AWS::Lambda::Function
//	    Environment.Variables (references resolved to local names, URLs and
//	    ARNs), Timeout, MemorySize, ReservedConcurrentExecutions (caps the
//	    environments), LoggingConfig (AWS_LAMBDA_LOG_FORMAT and, with JSON,
//	    AWS_LAMBDA_LOG_LEVEL, as Lambda sets them), Runtime (provided.*
//	    only), Handler, FunctionName, and
//	    the code asset (Code.S3Key or aws:asset:path) that Config.Code maps
//	    to a host binary. Ref: name. GetAtt: Arn.
//	AWS::Lambda::Url
//	    TargetFunctionArn, AuthType, InvokeMode (BUFFERED). Served on
//	    127.0.0.1. GetAtt: FunctionUrl, FunctionArn.
//	AWS::Lambda::EventSourceMapping
//	    FunctionName, EventSourceArn (a table stream or a queue of the
//	    stack), Enabled, BatchSize, StartingPosition, BisectBatchOnFunctionError,
//	    MaximumRetryAttempts, MaximumRecordAgeInSeconds,
//	    MaximumBatchingWindowInSeconds, FunctionResponseTypes
//	    (ReportBatchItemFailures), FilterCriteria, DestinationConfig.OnFailure
//	    (a standard queue), ScalingConfig.MaximumConcurrency.
//	    ParallelizationFactor > 1 runs as 1 (warned); TumblingWindowInSeconds
//	    is refused.
//	AWS::Pipes::Pipe
//	    Source (a table stream of the stack), SourceParameters.
//	    DynamoDBStreamParameters (StartingPosition, BatchSize,
//	    MaximumBatchingWindowInSeconds, MaximumRetryAttempts,
//	    MaximumRecordAgeInSeconds, OnPartialBatchItemFailure, DeadLetterConfig),
//	    SourceParameters.FilterCriteria (compiled by twin/eventpattern with
//	    Pipes' restrictions), Enrichment (a function of the stack), Target (a
//	    queue of the stack), TargetParameters.SqsQueueParameters
//	    (MessageGroupId, MessageDeduplicationId: static or JSON paths),
//	    DesiredState. InputTemplate and other sources and targets are refused.
//	AWS::Scheduler::Schedule
//	    Only those Config.Schedules names (by the target function's code
//	    folder) run: ScheduleExpression (rate() only, unless the period is
//	    given), State, Target.Arn (a function of the stack), Target.Input.
//	    The first run is one period after Up; RetryPolicy is not
//	    reproduced (a failed run is journaled and logged).
//
//	AWS::KMS::Key
//	    KeySpec ECC_NIST_P256 with KeyUsage SIGN_VERIFY only (others are
//	    refused), on the twin's in-process KMS (kms.go: CreateKey,
//	    DescribeKey, GetPublicKey, Sign, Verify over the KMS JSON protocol).
//	    Ref: key ID. GetAtt: Arn, KeyId. Functions get AWS_ENDPOINT_URL_KMS.
//	AWS::S3::Bucket
//	    BucketName, ObjectLockEnabled, ObjectLockConfiguration.Rule.
//	    DefaultRetention, on the twin's in-process S3 (s3.go: gofakes3 behind
//	    a front that enforces Object Lock retention and the checkpoint
//	    bucket policy's denials). Ref: name. GetAtt: Arn, DomainName,
//	    RegionalDomainName. Functions get AWS_ENDPOINT_URL_S3 (path-style).
//
//	AWS::CloudWatch::Alarm, AWS::SNS::Topic
//	    Placeholders (an SNS topic's Ref is its ARN), but EvaluateAlarms
//	    evaluates each alarm from its properties over the EMF metrics the
//	    functions printed (a metric alarm, or one Metrics Insights query),
//	    and Notifications returns what each change of state published to
//	    the topics of its actions (alarms.go).
//
// Every other resource (IAM, logs, dashboards…) gets a placeholder
// name and ARN so outputs that mention it resolve. Intrinsics: Ref,
// Fn::GetAtt, Fn::Join, Fn::Select, Fn::Split, Fn::Sub, Fn::If and the
// condition functions, Fn::FindInMap, Fn::Base64, pseudo parameters.
//
// # Semantics
//
// Stream sources (Pipes and mappings alike) read every shard in sequence
// order, a child shard only after its parent is read to the end, one batch
// in flight per shard. A batch that fails (function error, Runtime exit,
// timeout, an invalid partial response, an enrichment failure, a target
// parameter that does not resolve, a refused send) is split in two when
// bisect is on — splitting does not consume retries — until a failing batch
// cannot be split; that one is retried up to MaximumRetryAttempts, then its
// metadata (DDBStreamBatchInfo, never the records) goes to the on-failure
// destination or the Pipe's DLQ — one message for the whole run of records
// (batchSize above 1 without bisect). Records older than
// MaximumRecordAgeInSeconds (-1, or 60 to 604800; 0 to 59 are refused, as
// Lambda refuses them) skip to the destination. ReportBatchItemFailures
// checkpoints before the lowest failed sequence number. Filters drop non-matching records before
// batching. The Pipe's enrichment gets the batch as a JSON array; an empty
// answer skips the target, more than 10 events fail the batch.
//
// SQS sources receive up to BatchSize messages; SQS itself keeps one batch
// in flight per message group. Messages the function reports failed (or all,
// on a function error) are left to reappear after the visibility timeout;
// ElasticMQ applies the redrive policy. AWS refuses a mapping whose function
// timeout exceeds the queue's visibility timeout; so does the twin. On a
// FIFO queue, a partial batch response that reports a message failed but
// not the later messages of its group is logged at WARN.
//
// Deduplication: SQS accepts a duplicate send and drops the message; the
// twin reports each such drop (KindDuplicate). ElasticMQ ignores
// DeduplicationScope=messageGroup and deduplicates across the queue, so the
// twin gives ElasticMQ group-scoped ids for such a queue and gives receivers
// the ids as sent. Functions (AWS_ENDPOINT_URL_SQS) and tests reach SQS
// through the twin's endpoint (Twin.SQSEndpoint, a loopback proxy in front
// of ElasticMQ) so that every sender's messages are scoped.
//
// Every invocation and every delivery, retry, split and dead-lettering is an
// Entry in the Journal, logged as it happens; CheckBisectRule checks a
// source's entries against the rule above.
//
// Differences from AWS, deliberate: retries back off for milliseconds to
// seconds (Config.RetryDelay), not AWS's longer schedule; every failure
// counts against the retry limit (AWS does not count its own internal
// errors); a batch that the target partly refused is retried whole (FIFO
// deduplication makes the re-sent part a no-op); AWS_IAM is not enforced
// on Function URLs; ApproximateCreationDateTime is whole seconds (AWS
// rounds it down to the second), too coarse for batching windows and ages
// in milliseconds, so record ages use when the twin first read a record
// (within a poll interval of its write).
package twin
