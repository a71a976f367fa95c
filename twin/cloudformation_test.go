package twin_test

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/smithy-go"

	"github.com/fourlanes/fourlanes/twin/localaws"
)

// TestDescribeStacks: the SDK's CloudFormation client, pointed at the twin,
// reads the stack it runs with every output resolved as Outputs resolves
// it, by name, by stack ID and without a name; an unknown stack is AWS's
// ValidationError.
func TestDescribeStacks(t *testing.T) {
	f := upFixture(t, nil)
	c := cloudformation.New(cloudformation.Options{
		Region:       localaws.Region,
		BaseEndpoint: aws.String(f.tw.CloudFormationEndpoint()),
		Credentials:  credentials.NewStaticCredentialsProvider("fourlanes", "local", ""),
	})
	want := f.tw.Outputs()
	if len(want) != 4 {
		t.Fatalf("fixture outputs: got %v, want its 4", want)
	}
	name := f.tw.StackName()
	all, err := c.DescribeStacks(t.Context(), &cloudformation.DescribeStacksInput{})
	if err != nil {
		t.Fatalf("DescribeStacks without a name: %v", err)
	}
	if len(all.Stacks) != 1 {
		t.Fatalf("DescribeStacks without a name: got %d stacks, want the twin's one", len(all.Stacks))
	}
	id := aws.ToString(all.Stacks[0].StackId)
	if want := "arn:aws:cloudformation:us-east-1:000000000000:stack/" + name + "/"; !strings.HasPrefix(id, want) {
		t.Errorf("StackId: got %q, want prefix %q", id, want)
	}
	for _, ref := range []string{name, id} {
		out, err := c.DescribeStacks(t.Context(), &cloudformation.DescribeStacksInput{StackName: aws.String(ref)})
		if err != nil {
			t.Fatalf("DescribeStacks %s: %v", ref, err)
		}
		if len(out.Stacks) != 1 {
			t.Fatalf("DescribeStacks %s: got %d stacks, want 1", ref, len(out.Stacks))
		}
		s := out.Stacks[0]
		if aws.ToString(s.StackName) != name || s.StackStatus != "CREATE_COMPLETE" || s.CreationTime == nil || s.CreationTime.IsZero() {
			t.Errorf("DescribeStacks %s: got name %q status %q created %v", ref, aws.ToString(s.StackName), s.StackStatus, s.CreationTime)
		}
		got := map[string]string{}
		for _, o := range s.Outputs {
			got[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
		}
		if len(got) != len(want) {
			t.Errorf("DescribeStacks %s: got outputs %v, want %v", ref, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("DescribeStacks %s: output %s: got %q, want %q", ref, k, got[k], v)
			}
		}
	}

	_, err = c.DescribeStacks(t.Context(), &cloudformation.DescribeStacksInput{StackName: aws.String("NoSuchStack")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" || ae.ErrorMessage() != "Stack with id NoSuchStack does not exist" {
		t.Errorf("unknown stack: got %v, want ValidationError: Stack with id NoSuchStack does not exist", err)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.ServiceRequestID() == "" || re.HTTPStatusCode() != 400 {
		t.Errorf("unknown stack: got %v, want HTTP 400 with a request ID", err)
	}

	// Any other action is refused as AWS refuses an unknown one.
	resp, err := http.PostForm(f.tw.CloudFormationEndpoint()+"/", url.Values{"Action": {"DeleteStack"}, "StackName": {name}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "<Code>InvalidAction</Code>") {
		t.Errorf("DeleteStack: got %d %s, want 400 InvalidAction", resp.StatusCode, body)
	}
}
