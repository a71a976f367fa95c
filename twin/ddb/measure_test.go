package ddb

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestRestartAndMemoryAt100k loads 100,000 items of about 1 KB into a server process
// with a DataDir (BatchWriteItem over HTTP), reads its resident memory, SIGKILLs it
// (restart from the log alone), then Closes a second one (restart from a snapshot),
// and checks the bounds: a restart from a snapshot in at most 0.5 s.
// It takes a minute of both cores, so it runs only with FOURLANES_DDB_MEASURE=1.
func TestRestartAndMemoryAt100k(t *testing.T) {
	if os.Getenv("FOURLANES_DDB_MEASURE") != "1" {
		t.Skip("set FOURLANES_DDB_MEASURE=1 to measure (about a minute of both cores)")
	}
	dir := t.TempDir()
	ctx := context.Background()
	sp := startProcess(t, dir)
	c := newDDBClient(sp.endpoint)
	if _, err := c.CreateTable(ctx, pkTableInput("big")); err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("p", 1000)
	const items = 100000
	dataBytes := 0
	for i := 0; i < items; i += 25 {
		var reqs []types.WriteRequest
		for k := i; k < i+25; k++ {
			pk := fmt.Sprintf("item-%07d", k)
			dataBytes += len("pk") + len(pk) + len("payload") + len(payload) + len("n") + 3
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]av{"pk": s(pk), "payload": s(payload), "n": ni(k)}}})
		}
		if _, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"big": reqs}}); err != nil {
			t.Fatal(err)
		}
	}
	rss := func(sp *serverProcess) int {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", sp.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
				kb, _ := strconv.Atoi(f[1])
				return kb * 1024
			}
		}
		t.Fatal("no VmRSS")
		return 0
	}
	// settled is the RSS once the process has handed back its start-up garbage
	// (in the background): the lowest reading until two in a row agree.
	settled := func(sp *serverProcess) int {
		last := rss(sp)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			now := rss(sp)
			if now >= last-1<<20 {
				return min(now, last)
			}
			last = now
		}
		return last
	}
	t.Logf("item data (AWS's size rule): %.1f MB", float64(dataBytes)/1e6)
	t.Logf("RSS after loading through HTTP: %.1f MB (%.2fx the item data)", float64(rss(sp))/1e6, float64(rss(sp))/float64(dataBytes))
	sp.kill(t)
	sp = startProcess(t, dir)
	r := settled(sp)
	t.Logf("restart after SIGKILL (log replay, no snapshot): %s; RSS %.1f MB (%.2fx)", sp.opened, float64(r)/1e6, float64(r)/float64(dataBytes))
	if _, err := newDDBClient(sp.endpoint).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("big")}); err != nil {
		t.Fatal(err)
	}
	// A clean stop writes a snapshot: SIGTERM is not handled by the helper, so the
	// snapshot is taken by an in-process DB on the same folder instead.
	sp.kill(t)
	db, err := Open(Options{DataDir: dir, TTLSweep: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	sp = startProcess(t, dir)
	r = settled(sp)
	t.Logf("restart from a snapshot: %s; RSS %.1f MB (%.2fx)", sp.opened, float64(r)/1e6, float64(r)/float64(dataBytes))
	if float64(r) > 1.5*float64(dataBytes) {
		t.Errorf("RSS after a restart from a snapshot: %.2fx the item data, want at most 1.5x", float64(r)/float64(dataBytes))
	}
	if sp.opened > 500*time.Millisecond {
		t.Errorf("restart of %d items from a snapshot took %s, want at most 0.5 s", items, sp.opened)
	}
	out, err := newDDBClient(sp.endpoint).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("big")})
	if err != nil || aws.ToInt64(out.Table.ItemCount) != items {
		t.Fatalf("after the restarts: %v, %d items", err, aws.ToInt64(out.Table.ItemCount))
	}
}
