package cli_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	example "github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/demo"
	"github.com/fourlanes/fourlanes/pkg/cli"
	"github.com/fourlanes/fourlanes/twin/devcli"
)

var (
	// commandLine is a command's first line in the usage text.
	commandLine = regexp.MustCompile(`(?m)^  fourlanes (\S+) +(.*)$`)
	// flagLine is a flag's first line in a command's -h: its name, then its
	// argument's name, which the flag package takes from a back-quoted word
	// of the flag's usage, else from its type.
	flagLine = regexp.MustCompile(`^  -(\S+)(?: (.*))?$`)
	// argName is what an argument's name may be: a placeholder in capitals
	// or the flag package's word for the type.
	argName = regexp.MustCompile(`^([A-Z][A-Z0-9_.]*|string|int|int64|uint|uint64|float|duration|value)$`)
)

// TestEveryCommandsHelp renders the usage and every command's -h, in the
// orders example's build of the CLI (every command, dev with its demo
// flags): each command listed has help that exits 0 and names it, and no
// flag shows a word of its description as its argument (the flag package
// reads a back-quoted word in a usage string as the argument's name, so
// `fourlanes dev` in one once printed "-local fourlanes dev").
func TestEveryCommandsHelp(t *testing.T) {
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := cli.Run(context.Background(), &example.App, args, &out, &errb, devcli.Commands(demo.Dev())...)
		return code, out.String() + errb.String()
	}
	code, usage := run("help")
	if code != cli.ExitOK {
		t.Fatalf("help: exit %d", code)
	}
	cmds := commandLine.FindAllStringSubmatch(usage, -1)
	want := []string{"dev", "dynamodb", "init", "reconcile", "repair", "backfill", "export", "verify", "schema", "gate", "emit", "watermarks", "deadletters", "effects", "restore-state", "erase", "env", "version"}
	var names []string
	for _, c := range cmds {
		names = append(names, c[1])
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("usage lists %v; want %v", names, want)
	}
	for _, c := range cmds {
		name, synopsis := c[1], c[2]
		t.Run(name, func(t *testing.T) {
			code, help := run(name, "-h")
			if code != cli.ExitOK {
				t.Fatalf("%s -h: exit %d\n%s", name, code, help)
			}
			first, rest, _ := strings.Cut(help, "\n")
			if first != "Usage: fourlanes "+name+" "+synopsis {
				t.Errorf("%s -h starts %q; want the usage's synopsis, %q", name, first, "Usage: fourlanes "+name+" "+synopsis)
			}
			flags := 0
			for _, l := range strings.Split(rest, "\n") {
				m := flagLine.FindStringSubmatch(l)
				if m == nil {
					continue
				}
				flags++
				if m[2] != "" && !argName.MatchString(m[2]) {
					t.Errorf("%s -h: flag -%s shows %q as its argument (a back-quoted word in its usage?)", name, m[1], m[2])
				}
			}
			if flags == 0 {
				t.Errorf("%s -h lists no flags:\n%s", name, help)
			}
		})
	}
}
