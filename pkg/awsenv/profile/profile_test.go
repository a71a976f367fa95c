package profile_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/fourlanes/fourlanes/pkg/awsenv/profile"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	if _, err := profile.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Errorf("Load without a region: got %v, want an error naming AWS_REGION", err)
	}
	cfg, err := profile.Load(t.Context(), config.WithRegion("eu-west-1"))
	if err != nil || cfg.Region != "eu-west-1" {
		t.Errorf("Load with WithRegion: got %q, %v; want eu-west-1", cfg.Region, err)
	}
}
