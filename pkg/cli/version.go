package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Version is the fourlanes release this source is, which 'fourlanes
// version' reports when the build recorded no version of the runtime module
// (a build in a checkout or a workspace: go build, go run, or a replace
// directive to a folder). The release process sets it in the commit it tags.
const Version = "v0.1.0"

// runtimeModule is the module pkg/cli is in: its version is the CLI's.
const runtimeModule = "github.com/fourlanes/fourlanes"

const versionSynopsis = "[-json]"

// versionInfo is what version prints; with -json, as is: its members are
// the documented output (docs/cli.md).
type versionInfo struct {
	// Version is the runtime module's version as the build recorded it
	// (go install …@v0.1.0, or a module requiring v0.1.0), else Version.
	Version string `json:"version"`
	// Recorded says which: false for a build from source.
	Recorded bool `json:"recorded"`
	// Main is the module of the binary: cmd/fourlanes, or an
	// application's own build of the CLI.
	Main        moduleVersion `json:"main"`
	VCSRevision string        `json:"vcs_revision,omitempty"`
	VCSModified bool          `json:"vcs_modified,omitempty"`
	Go          string        `json:"go"`
	OS          string        `json:"os"`
	Arch        string        `json:"arch"`
}

type moduleVersion struct {
	Path    string `json:"path"`
	Version string `json:"version"` // "(devel)" for a build from source
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("version", versionSynopsis, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	bi, _ := debug.ReadBuildInfo()
	v := versionOf(bi)
	if *asJSON {
		return ExitOK, json.NewEncoder(stdout).Encode(v)
	}
	fmt.Fprintf(stdout, "fourlanes %s", v.Version)
	if !v.Recorded {
		fmt.Fprint(stdout, " (built from source: the build recorded no module version)")
	}
	fmt.Fprintf(stdout, " %s %s/%s\n", v.Go, v.OS, v.Arch)
	if v.Main.Path != "" {
		fmt.Fprintf(stdout, "  binary %s %s", v.Main.Path, v.Main.Version)
		if v.VCSRevision != "" {
			fmt.Fprintf(stdout, ", revision %s", v.VCSRevision)
			if v.VCSModified {
				fmt.Fprint(stdout, " (modified)")
			}
		}
		fmt.Fprintln(stdout)
	}
	return ExitOK, nil
}

// versionOf reads the CLI's version from the build information (nil: none).
func versionOf(bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: Version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi == nil {
		return v
	}
	v.Main = moduleVersion{Path: bi.Main.Path, Version: bi.Main.Version}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.VCSRevision = s.Value
		case "vcs.modified":
			v.VCSModified = s.Value == "true"
		}
	}
	m := &bi.Main
	if m.Path != runtimeModule {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == runtimeModule {
				m = d
				break
			}
		}
	}
	if m == nil {
		return v
	}
	version := m.Version
	if r := m.Replace; r != nil {
		// Replaced by another module's version, or by a folder (no version:
		// the code is whatever the folder held).
		version = r.Version
	}
	if version != "" && version != "(devel)" {
		v.Version, v.Recorded = version, true
	}
	return v
}
