package k8stest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

const manifestDir = "../k8s"

// TestManifests decodes every YAML file in deploy/k8s strictly and checks the pdq rules.
func TestManifests(t *testing.T) {
	ms, err := Load(manifestDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ms.Check(); err != nil {
		t.Fatal(err)
	}
	for key, file := range ms.File {
		t.Logf("%s: %s", file, key)
	}
	// The files hold exactly the objects the docs name.
	for _, key := range []string{"Job/pdq-convert-parts", "Job/pdq-convert-merge", "PersistentVolumeClaim/pdq-data"} {
		if _, ok := ms.File[key]; !ok {
			t.Errorf("no %s in %s", key, manifestDir)
		}
	}
	var parts *batchv1.Job
	for _, j := range ms.Jobs {
		if j.Name == "pdq-convert-parts" {
			parts = j
		}
	}
	if parts == nil {
		t.Fatal("no parts Job")
	}
	if got := parts.Spec.CompletionMode; got == nil || *got != batchv1.IndexedCompletion {
		t.Errorf("completionMode %v", got)
	}
	if pvc := ms.pvc("pdq-data"); pvc == nil || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("claim pdq-data is not ReadWriteMany")
	}
}

// TestDockerfile checks deploy/Dockerfile against the Jobs' command.
func TestDockerfile(t *testing.T) {
	text, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Load(manifestDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range ms.Jobs {
		bin := j.Spec.Template.Spec.Containers[0].Command[0]
		if err := CheckDockerfile(text, bin); err != nil {
			t.Errorf("%s: %v", j.Name, err)
		}
	}
}

// TestManifestsRejected mutates one manifest at a time and expects Load or Check to refuse it,
// so the checks above can fail.
func TestManifestsRejected(t *testing.T) {
	tests := []struct {
		name, file, old, new string
		want                 error
		msg                  string
	}{
		{"misspelled field", "job-parts.yaml", "completionMode: Indexed", "completionMod: Indexed", ErrDecode, "unknown field"},
		{"field given twice", "job-parts.yaml", "  completions: 8\n", "  completions: 8\n  completions: 9\n", ErrDecode, "completions"},
		{"wrong type", "job-parts.yaml", "backoffLimitPerIndex: 3", "backoffLimitPerIndex: three", ErrDecode, ""},
		{"unknown kind", "pvc.yaml", "kind: PersistentVolumeClaim", "kind: PersistentVolume", ErrUnknownKind, ""},
		{"not indexed", "job-parts.yaml", "completionMode: Indexed", "completionMode: NonIndexed", ErrInvalid, "one Indexed parts Job"},
		{"PDQ_PARTS differs from completions", "job-parts.yaml", "value: \"8\"", "value: \"7\"", ErrInvalid, "PDQ_PARTS"},
		{"parallelism above completions", "job-parts.yaml", "parallelism: 8", "parallelism: 9", ErrInvalid, "parallelism"},
		{"no per-index backoff", "job-parts.yaml", "  backoffLimitPerIndex: 3\n", "", ErrInvalid, "backoffLimitPerIndex"},
		{"replacement while running", "job-parts.yaml", "podReplacementPolicy: Failed", "podReplacementPolicy: TerminatingOrFailed", ErrInvalid, "podReplacementPolicy"},
		{"restart in place", "job-parts.yaml", "restartPolicy: Never", "restartPolicy: OnFailure", ErrInvalid, "restartPolicy"},
		{"part from elsewhere", "job-parts.yaml", "$(JOB_COMPLETION_INDEX)/$(PDQ_PARTS)", "0/8", ErrInvalid, "--part"},
		{"controller's index overridden", "job-parts.yaml", "            - name: PDQ_PARTS\n", "            - name: JOB_COMPLETION_INDEX\n              value: \"0\"\n            - name: PDQ_PARTS\n", ErrInvalid, "JOB_COMPLETION_INDEX"},
		{"memory below --max-memory", "job-parts.yaml", "              memory: 5Gi\n            limits:", "              memory: 4Gi\n            limits:", ErrInvalid, "memory request"},
		{"limit below request", "job-parts.yaml", "            limits:\n              memory: 5Gi", "            limits:\n              memory: 4800Mi", ErrInvalid, "memory limit"},
		{"GOMEMLIMIT above limit", "job-parts.yaml", "value: 4800MiB", "value: 6GiB", ErrInvalid, "GOMEMLIMIT"},
		{"workers without CPUs", "job-parts.yaml", "              cpu: \"8\"", "              cpu: \"4\"", ErrInvalid, "--workers"},
		{"root user", "job-parts.yaml", "runAsUser: 65532", "runAsUser: 0", ErrInvalid, "runAsUser"},
		{"root allowed", "job-merge.yaml", "runAsNonRoot: true", "runAsNonRoot: false", ErrInvalid, "runAsNonRoot"},
		{"privilege escalation", "job-merge.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", ErrInvalid, "allowPrivilegeEscalation"},
		{"single-writer volume", "pvc.yaml", "- ReadWriteMany", "- ReadWriteOnce", ErrInvalid, "ReadWriteMany"},
		{"claim not in manifests", "job-merge.yaml", "claimName: pdq-data", "claimName: other", ErrInvalid, "not among the manifests"},
		{"merge does not merge", "job-merge.yaml", "            - --merge\n", "", ErrInvalid, "--merge"},
		{"merge with other options", "job-merge.yaml", "            - 4GiB", "            - 2GiB", ErrInvalid, "convert options"},
		{"merge of another output", "job-merge.yaml", "            - /data/out", "            - /data/out2", ErrInvalid, "into"},
		{"merge with another image", "job-merge.yaml", "image: pdq:latest", "image: pdq:old", ErrInvalid, "image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyManifests(t, tt.file, tt.old, tt.new)
			ms, err := Load(dir)
			if err == nil {
				err = ms.Check()
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not mention %q", err, tt.msg)
			}
		})
	}
}

// copyManifests copies deploy/k8s into a temporary directory, replacing old by new in file;
// the test fails if old is not in file exactly once.
func copyManifests(t *testing.T, file, old, new string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(manifestDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(manifestDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == file {
			if n := strings.Count(string(data), old); n != 1 {
				t.Fatalf("%q occurs %d times in %s, want once", old, n, file)
			}
			data = []byte(strings.Replace(string(data), old, new, 1))
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDockerfileRejected(t *testing.T) {
	good := "FROM golang:1.26 AS build\nRUN CGO_ENABLED=0 GOEXPERIMENT=simd go build \\\n\t-o /out/pdq ./cmd/pdq\nFROM scratch\nCOPY --from=build /out/pdq /usr/local/bin/pdq\nUSER 65532:65532\n"
	if err := CheckDockerfile([]byte(good), "/usr/local/bin/pdq"); err != nil {
		t.Fatalf("good Dockerfile refused: %v", err)
	}
	tests := []struct{ name, old, new string }{
		{"cgo", "CGO_ENABLED=0 ", ""},
		{"no simd", "GOEXPERIMENT=simd ", ""},
		{"root", "USER 65532:65532", "USER root"},
		{"named user", "USER 65532:65532", "USER nobody"},
		{"user only in the build stage", "FROM scratch\n", "USER 65532\nFROM scratch\n"},
		{"binary elsewhere", "/usr/local/bin/pdq\n", "/pdq\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(good, tt.old, tt.new, 1)
			if tt.name == "user only in the build stage" {
				bad = strings.Replace(bad, "USER 65532:65532\n", "", 1)
			}
			if bad == good {
				t.Fatal("mutation changed nothing")
			}
			if err := CheckDockerfile([]byte(bad), "/usr/local/bin/pdq"); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

func TestParseConvert(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr bool
		opts    string
	}{
		{[]string{"convert", "/s", "--out", "/o", "--group-size=128", "--merge", "--workers", "2"}, false, "--group-size=128"},
		{[]string{"convert", "/s", "--out", "/o", "--quiet", "--method", "rtn"}, false, "--method=rtn"},
		{[]string{"convert", "/s", "/t", "--out", "/o"}, true, ""},
		{[]string{"plan", "/s"}, true, ""},
		{[]string{"convert", "/s", "--out"}, true, ""},
		{[]string{"convert", "/s", "--group-size", "32"}, true, ""},
		{[]string{"convert", "/s", "--out", "/o", "--out", "/p"}, true, ""},
	}
	for _, tt := range tests {
		c, err := parseConvert(tt.args)
		if (err != nil) != tt.wantErr {
			t.Errorf("%q: err %v", tt.args, err)
			continue
		}
		if err == nil && strings.Join(c.options(), " ") != tt.opts {
			t.Errorf("%q: options %q, want %q", tt.args, c.options(), tt.opts)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4GiB": 4 << 30, "512MiB": 512 << 20, "5GB": 5e9, "1.5G": 3 << 29, "4096": 4096} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1GiB", "4 parsecs"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

func TestSplitDocuments(t *testing.T) {
	docs := splitDocuments([]byte("# only a comment\n---\na: 1\n---\n\n---\nb: 2\n"))
	if len(docs) != 2 || string(docs[0]) != "a: 1\n" || string(docs[1]) != "b: 2\n" {
		t.Fatalf("got %q", docs)
	}
}

// TestFlagsExist runs the pdq binary named by PDQ_BIN (make test-deploy sets it) and checks that
// every flag the Jobs pass is one `pdq convert` has, so a renamed flag fails here and not in a
// cluster.
func TestFlagsExist(t *testing.T) {
	bin := os.Getenv("PDQ_BIN")
	if bin == "" {
		t.Skip("PDQ_BIN is not set (make test-deploy sets it to bin/pdq)")
	}
	help, err := exec.Command(bin, "convert", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s convert --help: %v\n%s", bin, err, help)
	}
	ms, err := Load(manifestDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range ms.Jobs {
		conv, err := parseConvert(j.Spec.Template.Spec.Containers[0].Args)
		if err != nil {
			t.Fatal(err)
		}
		for flag := range conv.flags {
			if !regexp.MustCompile(`(?m)^\s+(-\w, )?` + regexp.QuoteMeta(flag) + `\b`).Match(help) {
				t.Errorf("%s passes %s, which pdq convert does not have", j.Name, flag)
			}
		}
	}
}

// TestNoManifestOutsideK8s keeps every YAML file of deploy/ under deploy/k8s, where Load reads.
func TestNoManifestOutsideK8s(t *testing.T) {
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		ext := filepath.Ext(path)
		if !d.IsDir() && (ext == ".yaml" || ext == ".yml") && filepath.Dir(path) != filepath.Clean(manifestDir) {
			t.Errorf("%s is outside %s, so no test decodes it", path, manifestDir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
