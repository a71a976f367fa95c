package twin_test

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

// freePorts returns n distinct loopback ports free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// TestPinnedPorts: Config.Ports puts the twin's own endpoints on the ports
// it names (so a restart keeps the URLs), even for a stack with no queue,
// key or bucket; a port another process holds fails Up, naming the
// endpoint and the port.
func TestPinnedPorts(t *testing.T) {
	ddbEP, sqsEP := twintest.Endpoints(t)
	tmpl, err := cfn.Parse([]byte(`{"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := freePorts(t, 4)
	ports := twin.Ports{Lambda: p[0], SQS: p[1], S3: p[2], KMS: p[3]}
	cfg := twin.Config{Template: tmpl, StackName: fmt.Sprintf("ports%08x", rand.Uint32()), DynamoDBEndpoint: ddbEP, SQSEndpoint: sqsEP,
		Code:   func(*cfn.Template, *cfn.Resource) (string, error) { return "", fmt.Errorf("no functions here") },
		Logger: twintest.Logger(t), Ports: ports}
	tw, err := twin.Up(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tw.Close)
	for what, got := range map[string]string{
		"Lambda": tw.InvokeEndpoint(), "CloudFormation": tw.CloudFormationEndpoint(), "SQS": tw.SQSEndpoint(), "S3": tw.S3Endpoint(), "KMS": tw.KMSEndpoint(),
	} {
		want := map[string]int{"Lambda": ports.Lambda, "CloudFormation": ports.Lambda, "SQS": ports.SQS, "S3": ports.S3, "KMS": ports.KMS}[what]
		if got != "http://127.0.0.1:"+strconv.Itoa(want) {
			t.Errorf("%s endpoint %s, want port %d", what, got, want)
		}
	}

	for _, tc := range []struct {
		what  string
		port  int
		ports twin.Ports
	}{
		{"Lambda (and CloudFormation)", ports.Lambda, twin.Ports{Lambda: ports.Lambda}},
		{"SQS", ports.SQS, twin.Ports{SQS: ports.SQS}},
		{"S3", ports.S3, twin.Ports{S3: ports.S3}},
		{"KMS", ports.KMS, twin.Ports{KMS: ports.KMS}},
	} {
		again := cfg
		again.StackName, again.Ports = fmt.Sprintf("ports%08x", rand.Uint32()), tc.ports
		tw2, err := twin.Up(t.Context(), again)
		if err == nil {
			tw2.Close()
			t.Errorf("a second twin on the %s port came up; want an error", tc.what)
			continue
		}
		if want := fmt.Sprintf("%s endpoint on port %d", tc.what, tc.port); !strings.Contains(err.Error(), want) {
			t.Errorf("a second twin on the %s port: %v; want %q", tc.what, err, want)
		}
	}
}
