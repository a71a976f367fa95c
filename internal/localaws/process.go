package localaws

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// EnvDynamoDBBin names the `fourlanes` binary whose `dynamodb` command
// DynamoDBProcess runs; scripts/with-servers.sh builds it and sets it.
const EnvDynamoDBBin = "FOURLANES_DYNAMODB_BIN"

// DynamoDBProcess starts a DynamoDB of the test's own, in a process of its
// own (`fourlanes dynamodb -listen 127.0.0.1:0` with flags, e.g.
// "-conflicts", "-partition-wcu", "1000"), for a test that needs the
// server's options or moves its clock (SetClock), which the run's shared
// server must keep for every other test. It is killed when the test ends.
// Without $FOURLANES_DYNAMODB_BIN the test is skipped, or fails when CI=true.
func DynamoDBProcess(t testing.TB, flags ...string) *dynamodb.Client {
	t.Helper()
	bin := os.Getenv(EnvDynamoDBBin)
	if bin == "" {
		err := fmt.Errorf("no DynamoDB binary to start: set %s to a fourlanes binary (scripts/with-servers.sh does): %w", EnvDynamoDBBin, ErrNotInstalled)
		if InCI() {
			t.Fatalf("integration test cannot run and CI=true forbids skipping it: %v", err)
		}
		t.Skipf("skipping integration test: %v", err)
	}
	cmd := exec.Command(bin, append([]string{"dynamodb", "-listen", "127.0.0.1:0"}, flags...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s dynamodb: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	// Its first line starts with the endpoint it listens on.
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		endpoint, _, _ := strings.Cut(l, " ")
		if !ok || !strings.HasPrefix(endpoint, "http://") {
			t.Fatalf("%s dynamodb %s printed %q, not its endpoint; stderr: %s", bin, strings.Join(flags, " "), l, stderr.String())
		}
		return NewDynamoDB(endpoint)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s dynamodb %s did not start within 30 s; stderr: %s", bin, strings.Join(flags, " "), stderr.String())
	}
	return nil
}

// SetClock moves the clock of the DynamoDB db talks to skew ahead of real
// time (its admin API, POST /_fourlanes/clock): TTLs, stream records and
// transaction tokens then expire as if that time had passed. The skew is the
// whole server's: use it on a DynamoDBProcess of the test's own.
func SetClock(t testing.TB, db *dynamodb.Client, skew time.Duration) {
	t.Helper()
	body, _ := json.Marshal(map[string]int64{"skewMs": skew.Milliseconds()})
	admin := strings.TrimRight(aws.ToString(db.Options().BaseEndpoint), "/") + "/_fourlanes/clock"
	res, err := http.Post(admin, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("set the DynamoDB's clock: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(res.Body)
		t.Fatalf("set the DynamoDB's clock: %s: %s", res.Status, msg)
	}
}
