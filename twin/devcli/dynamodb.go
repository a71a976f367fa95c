package devcli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/fourlanes/fourlanes/pkg/cli"
	"github.com/fourlanes/fourlanes/twin/ddb"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

const dynamoDBSynopsis = "-listen ADDR [-data DIR] [-conflicts] [-partition-wcu N] [-stream-retention D] [-shard-records N]"

// runDynamoDB serves the project's own DynamoDB (twin/ddb): the DynamoDB and
// DynamoDB Streams JSON 1.0 APIs on one port, until SIGINT or SIGTERM.
func runDynamoDB(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := cli.Flags("dynamodb", dynamoDBSynopsis, stderr)
	listen := fs.String("listen", "127.0.0.1:8000", "address to listen on (port 0: any free port; the endpoint printed is the real one)")
	data := fs.String("data", "", "keep tables, items and streams in this folder, so they survive a restart (default: in memory)")
	conflicts := fs.Bool("conflicts", false, "fail concurrent transactions on one item with TransactionConflict, as AWS does, instead of queueing them")
	wcu := fs.Float64("partition-wcu", 0, "per-partition-key write budget in WCU per second, over which writes are throttled (AWS: 1000; 0: no limit)")
	window := fs.Duration("conflict-window", 0, "with -conflicts: how long a transaction holds its items before it commits (0: 2ms)")
	retention := fs.Duration("stream-retention", 24*time.Hour, "how long stream records stay readable")
	shardRecords := fs.Int("shard-records", 0, "roll a stream's open shard over after this many records (0: 10000)")
	if err := cli.Parse(fs, args); err != nil {
		return 0, err
	}
	switch {
	case fs.NArg() > 0:
		return 0, fmt.Errorf("%w: unexpected argument %q", cli.ErrUsage, fs.Arg(0))
	case *window < 0:
		return 0, fmt.Errorf("%w: -conflict-window %v: want 0 or more", cli.ErrUsage, *window)
	case *wcu < 0:
		return 0, fmt.Errorf("%w: -partition-wcu %v: want 0 or more", cli.ErrUsage, *wcu)
	case *retention <= 0:
		return 0, fmt.Errorf("%w: -stream-retention %v: want more than 0", cli.ErrUsage, *retention)
	case *shardRecords < 0:
		return 0, fmt.Errorf("%w: -shard-records %d: want 0 or more", cli.ErrUsage, *shardRecords)
	}
	if *data != "" {
		if err := os.MkdirAll(*data, 0o755); err != nil {
			return 0, err
		}
	}
	db, err := ddb.Open(ddb.Options{
		Region:          localaws.Region,
		AccountID:       localaws.AccountID,
		Logger:          slog.New(slog.NewJSONHandler(stderr, nil)),
		DataDir:         *data,
		Conflicts:       *conflicts,
		ConflictWindow:  *window,
		PartitionWCU:    *wcu,
		StreamRetention: *retention,
		ShardRecords:    *shardRecords,
	})
	if err != nil {
		return 0, err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		db.Close()
		return 0, err
	}
	hs := &http.Server{Handler: db.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	where := "in memory"
	if *data != "" {
		where = "state in " + *data
	}
	// One line, endpoint first: scripts read it to learn the port of -listen ADDR:0.
	fmt.Fprintf(stdout, "http://%s DynamoDB and DynamoDB Streams (%s); Ctrl-C stops\n", ln.Addr(), where)

	var serveErr error
	select {
	case <-ctx.Done():
		// Calls in flight get a moment to finish; then the rest are cut off.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
		cancel()
		<-served
	case serveErr = <-served:
	}
	// Close writes the state a last time (with -data), so it runs however serving ended.
	if err := db.Close(); err != nil {
		return 0, fmt.Errorf("close: %w", err)
	}
	if serveErr != nil {
		return 0, fmt.Errorf("serve: %w", serveErr)
	}
	return cli.ExitOK, nil
}
