package cfn

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// AssetDir returns the folder of the staged code asset of a function
// resource in a cloud assembly: the aws:asset:path metadata when the CDK CLI
// wrote it, else the asset whose hash the function's Code.S3Key names (via
// the assembly's *.assets.json, or the asset.<hash> naming convention).
func (t *Template) AssetDir(r *Resource) (string, error) {
	if t.Dir == "" {
		return "", fmt.Errorf("%s: code asset: template was not read from a cloud assembly", r.LogicalID)
	}
	if p, ok := r.Metadata["aws:asset:path"].(string); ok && p != "" {
		return t.existingDir(r, p)
	}
	key, _ := r.Prop("Code", "S3Key")
	s, ok := key.(string)
	if !ok || s == "" {
		return "", fmt.Errorf("%s: code asset: no Code.S3Key and no aws:asset:path metadata (inline or image code is not supported by the twin)", r.LogicalID)
	}
	hash := strings.TrimSuffix(filepath.Base(s), filepath.Ext(s))
	if p, ok := t.assetFromManifest(hash); ok {
		return t.existingDir(r, p)
	}
	return t.existingDir(r, "asset."+hash)
}

func (t *Template) existingDir(r *Resource, rel string) (string, error) {
	p := rel
	if !filepath.IsAbs(p) {
		p = filepath.Join(t.Dir, rel)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%s: code asset: %w", r.LogicalID, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s: code asset %s is not a folder", r.LogicalID, p)
	}
	return p, nil
}

// assetFromManifest looks the hash up in the assembly's asset manifests.
func (t *Template) assetFromManifest(hash string) (string, bool) {
	manifests, _ := filepath.Glob(filepath.Join(t.Dir, "*.assets.json"))
	for _, m := range manifests {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var doc struct {
			Files map[string]struct {
				Source struct {
					Path string `json:"path"`
				} `json:"source"`
			} `json:"files"`
		}
		if json.Unmarshal(b, &doc) != nil {
			continue
		}
		if f, ok := doc.Files[hash]; ok && f.Source.Path != "" {
			return f.Source.Path, true
		}
	}
	return "", false
}
