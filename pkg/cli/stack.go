package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
)

// stackHelp is the -stack flag's help.
const stackHelp = "read the resources from the outputs of this CloudFormation stack (DescribeStacks, default AWS credentials); a flag given explicitly wins"

// stackOutputs fills a command's resource flags from a stack's outputs
// (-stack NAME). A flag given on the command line wins over the output;
// without -stack, fill leaves every flag as it is.
type stackOutputs struct {
	name    string
	outputs map[string]string // nil without -stack
	given   map[string]bool   // flags set on the command line
}

// openStack reads stack's outputs through CloudFormation DescribeStacks
// (AWS_ENDPOINT_URL_CLOUDFORMATION reaches the twin's) once fs is parsed.
// -stack and -local both name the stack, so together they are a usage error.
func openStack(ctx context.Context, fs *flag.FlagSet, stack string, local bool) (*stackOutputs, error) {
	s := &stackOutputs{name: stack, given: map[string]bool{}}
	fs.Visit(func(f *flag.Flag) { s.given[f.Name] = true })
	if stack == "" {
		return s, nil
	}
	if local {
		return nil, fmt.Errorf("%w: -stack and -local both name the stack; pass one", ErrUsage)
	}
	cfg, err := awsenv.Load(ctx, awsOptions(fs)...) // --profile, --region (aws.go)
	if err != nil {
		return nil, err
	}
	out, err := cloudformation.NewFromConfig(cfg).DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		return nil, fmt.Errorf("-stack %s: %w", stack, err)
	}
	if len(out.Stacks) != 1 {
		return nil, fmt.Errorf("-stack %s: DescribeStacks answered %d stacks, want 1", stack, len(out.Stacks))
	}
	s.outputs = map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		s.outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return s, nil
}

// fill sets *dst to the stack's output unless -flagName was given.
func (s *stackOutputs) fill(flagName string, dst *string, output string) error {
	if s.outputs == nil || s.given[flagName] {
		return nil
	}
	v, ok := s.outputs[output]
	if !ok || v == "" {
		return fmt.Errorf("stack %s has no output %s (for -%s): pass -%s, or deploy the stack from this version", s.name, output, flagName, flagName)
	}
	*dst = v
	return nil
}

// fillOptional is fill for a resource a command can do without (a stack
// deployed before it had none): a missing output leaves *dst as it is.
func (s *stackOutputs) fillOptional(flagName string, dst *string, output string) {
	if s.outputs == nil || s.given[flagName] {
		return
	}
	if v := s.outputs[output]; v != "" {
		*dst = v
	}
}
