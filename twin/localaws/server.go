package localaws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	ilocal "github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/ddb"
)

// ErrNotInstalled reports that a server (or Java) is missing.
var ErrNotInstalled = ilocal.ErrNotInstalled

// errExited reports a server that died during start-up, typically a port taken in the meantime.
var errExited = errors.New("exited during start-up")

// startTimeout bounds one start-up when the caller's context has no earlier deadline.
// ElasticMQ answers within about three seconds on two idle cores.
const startTimeout = 90 * time.Second

// Server is one running local server: a child process (ElasticMQ) or a server in this
// process (DynamoDB).
type Server struct {
	// Name says which server this is, for messages ("DynamoDB", "ElasticMQ").
	Name string
	// Endpoint is the base URL to give an SDK client, e.g. "http://127.0.0.1:41234".
	Endpoint string

	stop     func()
	stopOnce sync.Once
}

// Stop stops the server and waits for it to go: a child process is killed with its process
// group and its scratch folder removed; an in-process server closes its listener, its
// connections and its database. It is safe to call more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(s.stop)
}

// StartDynamoDB starts a fresh in-memory DynamoDB (twin/ddb, which also serves the
// Streams API) in this process, on a free loopback port, and returns once it answers
// ListTables. It needs nothing installed.
func StartDynamoDB(ctx context.Context) (*Server, error) {
	return ServeDynamoDB(ctx, "127.0.0.1:0", ddb.Options{})
}

// ServeDynamoDB serves a DynamoDB made with opts (Region and AccountID default to this
// package's) in this process on addr ("127.0.0.1:0": a free port), and returns once it
// answers ListTables. Stop closes the listener and the database.
func ServeDynamoDB(ctx context.Context, addr string, opts ddb.Options) (*Server, error) {
	if opts.Region == "" {
		opts.Region = Region
	}
	if opts.AccountID == "" {
		opts.AccountID = AccountID
	}
	db, err := ddb.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("DynamoDB: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("DynamoDB: %w", err)
	}
	hs := &http.Server{Handler: db.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	s := &Server{Name: "DynamoDB", Endpoint: "http://" + ln.Addr().String()}
	s.stop = func() {
		// Close, not Shutdown: a long poll in flight must not hold a test's clean-up.
		_ = hs.Close()
		<-served
		if err := db.Close(); err != nil {
			// With a DataDir, Close writes the state a last time; Stop has no caller to tell.
			db.Options().Logger.Error("DynamoDB: close", obs.Err(err))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	c := NewDynamoDB(s.Endpoint, func(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} })
	if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)}); err != nil {
		s.Stop()
		return nil, fmt.Errorf("DynamoDB on %s not answering: %w", s.Endpoint, err)
	}
	return s, nil
}

// StartElasticMQ starts a fresh in-memory ElasticMQ (SQS, JSON protocol, FIFO queues,
// redrive policies) on a free loopback port and returns once it answers ListQueues. Its
// jars come from ElasticMQLibDir (installed on first use).
func StartElasticMQ(ctx context.Context) (*Server, error) {
	lib, err := ElasticMQLibDir(ctx, os.Stderr)
	if err != nil {
		return nil, err
	}
	return start(ctx, serverSpec{
		name: "ElasticMQ",
		args: func(port int, dir string) ([]string, error) {
			conf := filepath.Join(dir, "elasticmq.conf")
			if err := os.WriteFile(conf, []byte(ElasticMQConfig(port)), 0o644); err != nil {
				return nil, err
			}
			return []string{
				"-Dconfig.file=" + conf,
				"-cp", filepath.Join(lib, "*"), // java expands the wildcard itself
				"org.elasticmq.server.Main",
			}, nil
		},
		ready: func(ctx context.Context, endpoint string) error {
			c := NewSQS(endpoint, func(o *sqs.Options) { o.Retryer = aws.NopRetryer{} })
			_, err := c.ListQueues(ctx, &sqs.ListQueuesInput{})
			return err
		},
	})
}

// ElasticMQConfig is the ElasticMQ configuration this package and scripts/with-servers.sh use:
// bound to loopback on port, queue URLs that point back at it, and ARNs in Region with
// AccountID, so redrive policies read like AWS's.
func ElasticMQConfig(port int) string {
	// The include keeps the defaults ElasticMQ ships (HTTP timeouts, header parsing) that
	// -Dconfig.file would otherwise replace.
	return fmt.Sprintf(`include classpath("application.conf")
node-address { protocol = "http", host = "127.0.0.1", port = %[1]d, context-path = "" }
rest-sqs { enabled = true, bind-hostname = "127.0.0.1", bind-port = %[1]d, sqs-limits = strict }
aws { region = %[2]q, accountId = %[3]q }
`, port, Region, AccountID)
}

// ModuleRoot returns the folder whose module the working directory is in: the
// nearest folder at or above it holding go.work (a workspace of several modules,
// as this repository is), else go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("module root: %w", err)
	}
	nearestMod := ""
	for {
		if isFile(filepath.Join(dir, "go.work")) {
			return dir, nil
		}
		if nearestMod == "" && isFile(filepath.Join(dir, "go.mod")) {
			nearestMod = dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			if nearestMod == "" {
				return "", errors.New("module root: no go.mod at or above the working directory")
			}
			return nearestMod, nil
		}
		dir = parent
	}
}

type serverSpec struct {
	name  string
	args  func(port int, dir string) ([]string, error) // java arguments; dir is the scratch folder
	ready func(ctx context.Context, endpoint string) error
}

func start(ctx context.Context, sp serverSpec) (*Server, error) {
	java, err := javaPath()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp.name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	// A free port can be taken between our probe and the server's bind; try a fresh one.
	for attempt := 1; ; attempt++ {
		s, err := startOnce(ctx, java, sp)
		if err == nil || !errors.Is(err, errExited) || attempt == 3 {
			return s, err
		}
	}
}

func startOnce(ctx context.Context, java string, sp serverSpec) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp.name, err)
	}
	dir, err := os.MkdirTemp("", "fourlanes-localaws-")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp.name, err)
	}
	args, err := sp.args(port, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %w", sp.name, err)
	}
	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %w", sp.name, err)
	}

	cmd := exec.Command(java, args...)
	cmd.Dir = dir
	// A file, not a pipe: a pipe held open by a stray JVM would keep `go test` waiting.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// The server dies with us even when we exit without Stop (a test timeout, a panic).
		Pdeathsig: syscall.SIGKILL,
	}
	exited := make(chan struct{})
	var waitErr error
	s := &Server{Name: sp.name, Endpoint: "http://127.0.0.1:" + strconv.Itoa(port)}
	s.stop = func() {
		// Negative pid: the whole process group (the JVM is its leader). Nothing to flush: in memory.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		_ = os.RemoveAll(dir)
	}

	started := make(chan error, 1)
	go func() {
		// Linux sends Pdeathsig when the *thread* that forked the child ends. Keep this goroutine,
		// and so its thread, alive and to itself for as long as the child runs.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waitErr = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	if err := <-started; err != nil {
		logFile.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: start %s: %w", sp.name, java, err)
	}

	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := sp.ready(attemptCtx, s.Endpoint)
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-exited:
			out := logTail(logPath)
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%s on port %d %w (%v); its output:\n%s", sp.name, port, errExited, waitErr, out)
		case <-ctx.Done():
			out := logTail(logPath)
			s.Stop()
			return nil, fmt.Errorf("%s on %s not ready: %w (last answer: %v); its output:\n%s", sp.name, s.Endpoint, ctx.Err(), err, out)
		case <-tick.C:
		}
	}
}

func javaPath() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		if p := filepath.Join(home, "bin", "java"); isFile(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("java (17+) not found on PATH: %w", ErrNotInstalled)
	}
	return p, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no output: " + err.Error() + ")"
	}
	const max = 4000
	if len(b) > max {
		b = append([]byte("…"), b[len(b)-max:]...)
	}
	return string(b)
}
