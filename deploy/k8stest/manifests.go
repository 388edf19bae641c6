package k8stest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Sentinel errors; every error of Load and Check wraps one of them.
var (
	// ErrDecode marks a document that is not valid YAML for its type (unknown or duplicate fields
	// included).
	ErrDecode = errors.New("manifest does not decode")
	// ErrUnknownKind marks a document of an apiVersion and kind this package does not check.
	ErrUnknownKind = errors.New("unsupported apiVersion/kind")
	// ErrInvalid marks a manifest that decodes but breaks a rule of a pdq deployment.
	ErrInvalid = errors.New("invalid pdq deployment")
)

// PartFlag is the --part value the parts Job must pass: the index the Job controller sets in each
// pod and the number of parts from the container's own environment.
const PartFlag = "$(JOB_COMPLETION_INDEX)/$(PDQ_PARTS)"

// memoryOverhead is what pdq needs beyond --max-memory (its --help: "peak memory stays near this
// plus about 256 MiB").
const memoryOverhead = 256 << 20

// Manifests are the decoded objects of a deploy/k8s directory.
type Manifests struct {
	Jobs []*batchv1.Job
	PVCs []*corev1.PersistentVolumeClaim
	// File names the file each object came from, by kind/name.
	File map[string]string
}

// Load decodes every *.yaml and *.yml file in dir; a file may hold several documents separated
// by "---" lines.
func Load(dir string) (*Manifests, error) {
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no YAML files in %s", ErrInvalid, dir)
	}
	sort.Strings(files)
	ms := &Manifests{File: map[string]string{}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for i, doc := range splitDocuments(data) {
			obj, err := Decode(doc)
			if err != nil {
				return nil, fmt.Errorf("%s, document %d: %w", filepath.Base(f), i+1, err)
			}
			var key string
			switch o := obj.(type) {
			case *batchv1.Job:
				ms.Jobs = append(ms.Jobs, o)
				key = "Job/" + o.Name
			case *corev1.PersistentVolumeClaim:
				ms.PVCs = append(ms.PVCs, o)
				key = "PersistentVolumeClaim/" + o.Name
			}
			if prev, dup := ms.File[key]; dup {
				return nil, fmt.Errorf("%w: %s in both %s and %s", ErrInvalid, key, prev, filepath.Base(f))
			}
			ms.File[key] = filepath.Base(f)
		}
	}
	return ms, nil
}

// splitDocuments splits a YAML stream at "---" lines and drops documents that hold only
// comments and blank lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	content := false
	flush := func() {
		if content {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
		content = false
	}
	for line := range bytes.Lines(data) {
		t := bytes.TrimSpace(line)
		if bytes.Equal(bytes.TrimRight(line, "\r\n"), []byte("---")) {
			flush()
			continue
		}
		if len(t) > 0 && t[0] != '#' {
			content = true
		}
		cur.Write(line)
	}
	flush()
	return docs
}

// Decode strictly decodes one YAML document into the k8s.io/api type its apiVersion and kind
// name: a field the type does not have, or a field given twice, is an error.
func Decode(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	var obj any
	switch tm.APIVersion + "/" + tm.Kind {
	case "batch/v1/Job":
		obj = &batchv1.Job{}
	case "v1/PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{}
	default:
		return nil, fmt.Errorf("%w: %q %q", ErrUnknownKind, tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDecode, tm.Kind, err)
	}
	return obj, nil
}

// invalid returns an ErrInvalid error about the named object.
func invalid(what, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, what, fmt.Sprintf(format, args...))
}

// Check applies the rules of a pdq deployment: exactly one Indexed parts Job, one merge Job with
// the same source, output, convert options, image and volume, and ReadWriteMany claims.
func (ms *Manifests) Check() error {
	var parts, merges []*batchv1.Job
	for _, j := range ms.Jobs {
		if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion {
			parts = append(parts, j)
		} else {
			merges = append(merges, j)
		}
	}
	if len(parts) != 1 || len(merges) != 1 {
		return invalid("deploy/k8s", "want one Indexed parts Job and one merge Job, have %d and %d", len(parts), len(merges))
	}
	var errs []error
	p, perr := ms.checkJob(parts[0], true)
	m, merr := ms.checkJob(merges[0], false)
	errs = append(errs, perr, merr)
	if perr == nil && merr == nil {
		errs = append(errs, sameConversion(p, m))
	}
	for _, c := range ms.PVCs {
		if !slices.Contains(c.Spec.AccessModes, corev1.ReadWriteMany) {
			errs = append(errs, invalid("PersistentVolumeClaim/"+c.Name, "access modes %v lack ReadWriteMany: every part's pod mounts it at once", c.Spec.AccessModes))
		}
		if _, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
			errs = append(errs, invalid("PersistentVolumeClaim/"+c.Name, "no storage request"))
		}
	}
	return errors.Join(errs...)
}

// pdqRun is what a Job's pdq container does.
type pdqRun struct {
	job       string
	image     string
	command   []string
	conv      conversion
	claim     string
	mountPath string
}

// checkJob checks one Job; parts selects the rules of the Indexed parts Job or of the merge Job.
func (ms *Manifests) checkJob(j *batchv1.Job, parts bool) (pdqRun, error) {
	what := "Job/" + j.Name
	spec := j.Spec
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, invalid(what, format, args...)) }

	pod := spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		bad("restartPolicy is %q, want Never (a failed pod is replaced, and the replacement resumes)", pod.RestartPolicy)
	}
	if spec.PodReplacementPolicy == nil || *spec.PodReplacementPolicy != batchv1.Failed {
		bad("podReplacementPolicy must be Failed: a replacement pod must not start while the old one still writes")
	}
	if parts {
		switch {
		case spec.Completions == nil || *spec.Completions < 1:
			bad("completions must be set to the number of parts")
		case spec.Parallelism == nil || *spec.Parallelism < 1 || *spec.Parallelism > *spec.Completions:
			bad("parallelism must be between 1 and completions (%d)", *spec.Completions)
		}
		if spec.BackoffLimitPerIndex == nil || *spec.BackoffLimitPerIndex < 1 {
			bad("backoffLimitPerIndex must be at least 1: a failed part is retried on its own")
		}
	} else {
		if spec.Completions != nil && *spec.Completions != 1 || spec.Parallelism != nil && *spec.Parallelism != 1 {
			bad("the merge runs once: completions and parallelism 1")
		}
	}

	run := pdqRun{job: what}
	var c *corev1.Container
	for i := range pod.Containers {
		if len(pod.Containers[i].Command) > 0 && filepath.Base(pod.Containers[i].Command[0]) == "pdq" {
			if c != nil {
				bad("more than one pdq container")
			}
			c = &pod.Containers[i]
		}
	}
	if c == nil {
		bad("no container whose command is pdq")
		return run, errors.Join(errs...)
	}
	run.image, run.command = c.Image, c.Command
	conv, err := parseConvert(c.Args)
	if err != nil {
		bad("%v", err)
		return run, errors.Join(errs...)
	}
	run.conv = conv

	_, hasPart := conv.flags["--part"]
	_, hasMerge := conv.flags["--merge"]
	if parts {
		if got := conv.flags["--part"]; got != PartFlag {
			bad("--part is %q, want %q", got, PartFlag)
		}
		if hasMerge {
			bad("a part must not run --merge")
		}
		if spec.Completions != nil {
			if v, ok := envValue(c, "PDQ_PARTS"); !ok || v != strconv.Itoa(int(*spec.Completions)) {
				bad("env PDQ_PARTS is %q, want completions (%d)", v, *spec.Completions)
			}
		}
		if _, ok := envValue(c, "JOB_COMPLETION_INDEX"); ok {
			bad("env JOB_COMPLETION_INDEX is the Job controller's to set")
		}
	} else {
		if !hasMerge || conv.flags["--merge"] != "" {
			bad("the merge Job must run convert --merge")
		}
		if hasPart {
			bad("the merge Job must not pass --part")
		}
	}
	errs = append(errs, checkResources(what, c, conv))
	errs = append(errs, checkSecurity(what, pod, c))

	// The volume holding SRC and DIR must be a ReadWriteMany claim of these manifests.
	for _, vm := range c.VolumeMounts {
		if !under(conv.src, vm.MountPath) || !under(conv.out, vm.MountPath) {
			continue
		}
		run.mountPath = vm.MountPath
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.PersistentVolumeClaim != nil {
				run.claim = v.PersistentVolumeClaim.ClaimName
			}
		}
	}
	switch {
	case run.mountPath == "":
		bad("no volume mount holds both %s and %s", conv.src, conv.out)
	case run.claim == "":
		bad("the volume at %s is not a PersistentVolumeClaim", run.mountPath)
	case ms.pvc(run.claim) == nil:
		bad("claim %q is not among the manifests", run.claim)
	}
	return run, errors.Join(errs...)
}

// checkResources checks that the container requests CPUs for --workers and memory for
// --max-memory plus pdq's overhead, and that GOMEMLIMIT stays inside the memory limit.
func checkResources(what string, c *corev1.Container, conv conversion) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, invalid(what, format, args...)) }
	req, lim := c.Resources.Requests, c.Resources.Limits
	cpu, ok := req[corev1.ResourceCPU]
	if !ok {
		bad("no CPU request")
	} else if w := conv.flags["--workers"]; w != "" && strconv.FormatInt(cpu.Value(), 10) != w {
		bad("--workers %s does not match the CPU request %s", w, cpu.String())
	}
	mem, ok := req[corev1.ResourceMemory]
	if !ok {
		return errors.Join(append(errs, invalid(what, "no memory request"))...)
	}
	maxMem, err := parseSize(conv.flags["--max-memory"])
	if err != nil {
		bad("--max-memory: %v", err)
	} else if need := maxMem + memoryOverhead; mem.Value() < need {
		bad("memory request %s is below --max-memory %s plus 256Mi", mem.String(), conv.flags["--max-memory"])
	}
	if l, ok := lim[corev1.ResourceMemory]; ok && l.Cmp(mem) < 0 {
		bad("memory limit %s is below the request %s", l.String(), mem.String())
	}
	if v, ok := envValue(c, "GOMEMLIMIT"); ok {
		gl, err := resource.ParseQuantity(strings.TrimSuffix(v, "B"))
		l, hasLimit := lim[corev1.ResourceMemory]
		switch {
		case err != nil:
			bad("GOMEMLIMIT %q: %v", v, err)
		case hasLimit && gl.Cmp(l) >= 0:
			bad("GOMEMLIMIT %s is not below the memory limit %s", v, l.String())
		}
	}
	return errors.Join(errs...)
}

// checkSecurity checks that the pod runs as a non-root user without privilege escalation.
func checkSecurity(what string, pod corev1.PodSpec, c *corev1.Container) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, invalid(what, format, args...)) }
	psc, csc := pod.SecurityContext, c.SecurityContext
	nonRoot := psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	if csc != nil && csc.RunAsNonRoot != nil {
		nonRoot = *csc.RunAsNonRoot
	}
	if !nonRoot {
		bad("runAsNonRoot must be true")
	}
	uid := (*int64)(nil)
	if psc != nil {
		uid = psc.RunAsUser
	}
	if csc != nil && csc.RunAsUser != nil {
		uid = csc.RunAsUser
	}
	if uid == nil || *uid == 0 {
		bad("runAsUser must name a non-root user (the image's USER is numeric)")
	}
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		bad("allowPrivilegeEscalation must be false")
	}
	return errors.Join(errs...)
}

// sameConversion checks that the merge Job converts what the parts Job converts.
func sameConversion(p, m pdqRun) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, invalid(m.job, format, args...)) }
	if p.image != m.image || !slices.Equal(p.command, m.command) {
		bad("image or command differ from %s", p.job)
	}
	if p.conv.src != m.conv.src || p.conv.out != m.conv.out {
		bad("converts %s into %s, the parts %s into %s", m.conv.src, m.conv.out, p.conv.src, p.conv.out)
	}
	if a, b := p.conv.options(), m.conv.options(); !slices.Equal(a, b) {
		bad("convert options %q differ from the parts' %q", b, a)
	}
	if p.claim != m.claim || p.mountPath != m.mountPath {
		bad("mounts claim %q at %s, the parts %q at %s", m.claim, m.mountPath, p.claim, p.mountPath)
	}
	return errors.Join(errs...)
}

func (ms *Manifests) pvc(name string) *corev1.PersistentVolumeClaim {
	for _, c := range ms.PVCs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// under reports whether path is dir or lies below it.
func under(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// conversion is a parsed `pdq convert SRC --out DIR ...` argument list.
type conversion struct {
	src, out string
	// flags maps each flag to its value ("" for a boolean flag).
	flags map[string]string
}

// boolFlags are pdq convert's flags that take no value.
var boolFlags = map[string]bool{
	"--merge": true, "--resume": true, "--force": true, "--quiet": true, "-q": true, "--json": true,
	"--signed-scales": true, "--calib-act-order": true, "--verbose": true, "-v": true,
}

// parseConvert parses a container's args: "convert", SRC, then flags as "--f v", "--f=v" or a
// boolean "--f".
func parseConvert(args []string) (conversion, error) {
	conv := conversion{flags: map[string]string{}}
	if len(args) < 2 || args[0] != "convert" || strings.HasPrefix(args[1], "-") {
		return conv, fmt.Errorf("args %q do not start with convert SRC", args)
	}
	conv.src = args[1]
	for i := 2; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return conv, fmt.Errorf("argument %q after SRC is not a flag (one source only)", a)
		}
		name, val, hasVal := strings.Cut(a, "=")
		if !hasVal && !boolFlags[name] {
			if i+1 >= len(args) {
				return conv, fmt.Errorf("flag %s has no value", name)
			}
			i++
			val = args[i]
		}
		if _, dup := conv.flags[name]; dup {
			return conv, fmt.Errorf("flag %s given twice", name)
		}
		conv.flags[name] = val
	}
	conv.out = conv.flags["--out"]
	if conv.out == "" {
		return conv, fmt.Errorf("no --out")
	}
	return conv, nil
}

// options lists the flags that define the conversion (and so its plan), sorted: all but the ones
// that say which part of it a process does and how many CPUs it uses.
func (c conversion) options() []string {
	var opts []string
	for k, v := range c.flags {
		switch k {
		case "--part", "--parts", "--merge", "--workers", "--out", "--quiet", "-q", "--verbose", "-v":
			continue
		}
		opts = append(opts, k+"="+v)
	}
	sort.Strings(opts)
	return opts
}

// sizeUnits are the suffixes pdq's size flags accept, longest first.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
}

// parseSize reads a pdq size flag value such as "4GiB" or "512MiB" (pdq's own rules).
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("not given (pdq's default of 4GiB would be invisible here)")
	}
	t, mult := s, int64(1)
	for _, u := range sizeUnits {
		if len(t) > len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			t, mult = t[:len(t)-len(u.suffix)], u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return int64(f * float64(mult)), nil
}
