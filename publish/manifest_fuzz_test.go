package publish

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseManifest: any bytes give an error or a manifest whose every path stays inside the
// directory it is joined to.
func FuzzParseManifest(f *testing.F) {
	sha := strings.Repeat("c", 64)
	files := []File{
		{Path: "a/b.safetensors", Size: 9, SHA256: sha, Compression: CompressionZipNN, Key: "a/b.safetensors.zipnn", StoredSize: 5, StoredSHA256: sha},
		{Path: "config.json", Size: 2, SHA256: sha, Compression: CompressionNone, Key: "config.json", StoredSize: 2},
	}
	b, _ := json.Marshal(Manifest{Format: ManifestFormatV1, Files: files, ContentSHA256: contentSHA256(files)})
	f.Add(b)
	content := contentSHA256(files)
	for i := range files {
		files[i].Key = ObjectKey(ManifestFormatV2, content, files[i].Path, files[i].Compression == CompressionZipNN)
	}
	b, _ = json.Marshal(Manifest{Format: ManifestFormatV2, Files: files, ContentSHA256: content})
	f.Add(b)
	folder := strings.Repeat("0", folderLen)
	for i := range files {
		files[i].Key = ObjectKey(ManifestFormat, folder, files[i].Path, files[i].Compression == CompressionZipNN)
	}
	b, _ = json.Marshal(Manifest{Format: ManifestFormat, Files: files, ContentSHA256: content, Folder: folder})
	f.Add(b)
	f.Add([]byte(`{"format":"pdq-publish/1","files":[{"path":"../x"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err != nil {
			return
		}
		for _, fl := range m.Files {
			for _, p := range []string{fl.Path, fl.Key} {
				if !filepath.IsLocal(filepath.FromSlash(p)) || strings.Contains(p, `\`) {
					t.Fatalf("accepted path %q", p)
				}
			}
		}
	})
}
