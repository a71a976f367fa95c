package localaws

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ElasticMQVersion is the ElasticMQ server the twin runs
// (org.elasticmq:elasticmq-server_2.13 on Maven Central).
const ElasticMQVersion = "1.7.1"

// EnvElasticMQ names a folder that holds ElasticMQ's jars (elasticmq-server_*.jar and
// its dependencies), overriding the per-user cache.
const EnvElasticMQ = "FOURLANES_ELASTICMQ"

// ElasticMQLibDir returns the folder of ElasticMQ's jars: $FOURLANES_ELASTICMQ when
// set, else the per-user cache (<user cache dir>/fourlanes/elasticmq-<version>/lib,
// e.g. ~/.cache/fourlanes/... on Linux), which it installs with Maven on first use,
// saying so on progress. It never writes into the application's own tree.
func ElasticMQLibDir(ctx context.Context, progress io.Writer) (string, error) {
	if dir := os.Getenv(EnvElasticMQ); dir != "" {
		if !hasServerJar(dir) {
			return "", fmt.Errorf("ElasticMQ: $%s=%s holds no elasticmq-server_*.jar: point it at the folder of ElasticMQ's jars, or unset it to use the per-user cache: %w",
				EnvElasticMQ, dir, ErrNotInstalled)
		}
		return dir, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("ElasticMQ: no per-user cache folder (%v); set $%s to a folder of ElasticMQ's jars: %w", err, EnvElasticMQ, ErrNotInstalled)
	}
	home := filepath.Join(cache, "fourlanes", "elasticmq-"+ElasticMQVersion)
	lib := filepath.Join(home, "lib")
	if hasServerJar(lib) {
		return lib, nil
	}
	return lib, installElasticMQ(ctx, home, progress)
}

func hasServerJar(dir string) bool {
	jars, _ := filepath.Glob(filepath.Join(dir, "elasticmq-server_*.jar"))
	return len(jars) > 0
}

// installElasticMQ resolves the server's runtime closure with Maven (Maven Central has
// no all-in-one ElasticMQ jar) into home/lib, atomically: a failed or interrupted
// install leaves nothing that looks installed.
func installElasticMQ(ctx context.Context, home string, progress io.Writer) error {
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("ElasticMQ %s is not in the per-user cache and Maven (mvn) is not on PATH to install it: install Maven, or set $%s to a folder of ElasticMQ's jars: %w",
			ElasticMQVersion, EnvElasticMQ, ErrNotInstalled)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return fmt.Errorf("ElasticMQ: %w", err)
	}
	tmp, err := os.MkdirTemp(home, "install-")
	if err != nil {
		return fmt.Errorf("ElasticMQ: %w", err)
	}
	defer os.RemoveAll(tmp)
	pom := `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.fourlanes</groupId>
  <artifactId>elasticmq-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.elasticmq</groupId>
      <artifactId>elasticmq-server_2.13</artifactId>
      <version>` + ElasticMQVersion + `</version>
    </dependency>
  </dependencies>
</project>
`
	if err := os.WriteFile(filepath.Join(tmp, "pom.xml"), []byte(pom), 0o644); err != nil {
		return fmt.Errorf("ElasticMQ: %w", err)
	}
	fmt.Fprintf(progress, "fourlanes: installing ElasticMQ %s (Maven, once) into %s ...\n", ElasticMQVersion, home)
	out, err := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", filepath.Join(tmp, "pom.xml"), "dependency:copy-dependencies",
		"-DincludeScope=runtime", "-DoutputDirectory="+filepath.Join(tmp, "lib")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ElasticMQ: mvn could not resolve org.elasticmq:elasticmq-server_2.13:%s: %v\n%s", ElasticMQVersion, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(filepath.Join(tmp, "lib"), filepath.Join(home, "lib")); err != nil && !hasServerJar(filepath.Join(home, "lib")) {
		return fmt.Errorf("ElasticMQ: %w", err)
	}
	fmt.Fprintf(progress, "fourlanes: ElasticMQ %s ready\n", ElasticMQVersion)
	return nil
}
