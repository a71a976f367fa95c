package cli

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/fourlanes/fourlanes/pkg/awsenv/profile"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// stackHelp is the -stack flag's help.
const stackHelp = "read the resources from the outputs of this CloudFormation stack (DescribeStacks, default AWS credentials); a flag given explicitly wins"

// backboneFlag is the flag that names one backbone of a stack that holds
// several, and backboneHelp its help; a command that takes -stack declares
// it beside (openStack reads it when the command has it).
const (
	backboneFlag = "backbone"
	backboneHelp = "with -stack: the backbone to read, when the stack holds several (its construct id or output prefix, e.g. Orders; Default for one without a prefix)"
)

// stackOutputs fills a command's resource flags from the outputs of one
// backbone in a stack (-stack NAME, and -backbone ID when it holds
// several). A flag given on the command line wins over the output; without
// -stack, fill leaves every flag as it is.
type stackOutputs struct {
	name    string
	prefix  string            // the backbone's (keys.BackbonePrefix)
	outputs map[string]string // the backbone's, by keys.Output* name; nil without -stack
	given   map[string]bool   // flags set on the command line
	// unchosen is why no backbone was picked (the stack holds several and
	// the command line names none): fill reports it when it needs an output.
	unchosen error
}

// openStack reads stack's outputs through CloudFormation DescribeStacks
// (AWS_ENDPOINT_URL_CLOUDFORMATION reaches the twin's) once fs is parsed.
// -stack and -local both name the stack, so together they are a usage error.
func openStack(ctx context.Context, fs *flag.FlagSet, stack string, local bool) (*stackOutputs, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if stack == "" {
		return &stackOutputs{name: stack, given: given}, nil
	}
	if local {
		return nil, fmt.Errorf("%w: -stack and -local both name the stack; pass one", ErrUsage)
	}
	cfg, err := profile.Load(ctx, awsOptions(fs)...) // --profile, --region (aws.go)
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
	all := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		all[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return backboneOf(fs, stack, all, given)
}

// backboneOf picks the backbone whose outputs fill the command's flags: the
// one -backbone names, or the stack's only one. Without -backbone, a stack
// that holds several is an error only once an output is needed (fill).
func backboneOf(fs *flag.FlagSet, stack string, all map[string]string, given map[string]bool) (*stackOutputs, error) {
	s := &stackOutputs{name: stack, given: given}
	prefixes := keys.OutputBackbones(all)
	f := fs.Lookup(backboneFlag)
	if f != nil && f.Value.String() != "" {
		want := keys.BackbonePrefix(f.Value.String())
		if !slices.Contains(prefixes, want) {
			return nil, fmt.Errorf("%w: -backbone %s: stack %s has no backbone with the prefix %q (it has %s)", ErrUsage, f.Value.String(), stack, want, backboneList(prefixes))
		}
		s.prefix, s.outputs = want, keys.BackboneOutputs(all, want)
		return s, nil
	}
	switch len(prefixes) {
	case 0:
		s.outputs = map[string]string{} // fill names the output it lacks
	case 1:
		s.prefix, s.outputs = prefixes[0], keys.BackboneOutputs(all, prefixes[0])
	default:
		how := "pass -backbone with one of them"
		if f == nil {
			how = "this command takes no -backbone: pass its resource flags instead of -stack"
		}
		s.unchosen = fmt.Errorf("%w: stack %s holds %d backbones (%s): %s", ErrUsage, stack, len(prefixes), backboneList(prefixes), how)
	}
	return s, nil
}

// backboneList names backbones by what -backbone takes: the prefix, or
// keys.HiddenID for the one without.
func backboneList(prefixes []string) string {
	names := make([]string, len(prefixes))
	for i, p := range prefixes {
		names[i] = p
		if p == "" {
			names[i] = keys.HiddenID
		}
	}
	return strings.Join(names, ", ")
}

// fill sets *dst to the stack's output unless -flagName was given.
func (s *stackOutputs) fill(flagName string, dst *string, output string) error {
	if s.given[flagName] || (s.outputs == nil && s.unchosen == nil) {
		return nil
	}
	if s.unchosen != nil {
		return s.unchosen
	}
	v, ok := s.outputs[output]
	if !ok || v == "" {
		return fmt.Errorf("stack %s has no output %s (for -%s): pass -%s, or deploy the stack from this version", s.name, s.prefix+output, flagName, flagName)
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

// tableFlag is a flag naming a table and the stack output it defaults to.
type tableFlag struct {
	flag   string  // the flag's name, e.g. "state-table"
	dst    *string // its value
	output string  // keys.Output*, e.g. keys.OutputStateTable
}

// resolveTables fills each table flag from -stack's outputs, or with -local
// from the running twin's (replacing what the flags said), and returns the
// DynamoDB endpoint to use: the twin's with -local, "" (AWS) otherwise. A
// flag given on the command line wins over -stack. What is still empty
// afterwards is the command's to refuse, naming what to pass.
func resolveTables(ctx context.Context, fs *flag.FlagSet, stack string, local bool, tables ...tableFlag) (string, error) {
	so, err := openStack(ctx, fs, stack, local)
	if err != nil {
		return "", err
	}
	for _, t := range tables {
		if err := so.fill(t.flag, t.dst, t.output); err != nil {
			return "", err
		}
	}
	if !local {
		return "", nil
	}
	st, err := readState()
	if err != nil {
		return "", err
	}
	for _, t := range tables {
		*t.dst = st.Outputs[t.output]
		if t.output == keys.OutputEventsTable && *t.dst == "" {
			*t.dst = st.EventsTable
		}
	}
	return st.DynamoDBEndpoint, nil
}
