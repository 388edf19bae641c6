package k8stest

import (
	"bufio"
	"bytes"
	"iter"
	"strings"
)

// CheckDockerfile checks deploy/Dockerfile against the Jobs' pdq command: the binary is built
// static (CGO_ENABLED=0) with the SIMD kernels (GOEXPERIMENT=simd), copied to binPath, and the
// final stage runs as a numeric non-root user (runAsNonRoot needs a numeric USER to verify).
func CheckDockerfile(text []byte, binPath string) error {
	var build, copied bool
	user := ""
	for line := range joinedLines(text) {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			user, copied = "", false // a new stage starts with the base image's user
		case "RUN":
			if strings.Contains(line, "CGO_ENABLED=0") && strings.Contains(line, "GOEXPERIMENT=simd") &&
				strings.Contains(line, "go build") && strings.Contains(line, "./cmd/pdq") {
				build = true
			}
		case "COPY":
			if f[len(f)-1] == binPath {
				copied = true
			}
		case "USER":
			if len(f) > 1 {
				user = f[1]
			}
		}
	}
	switch uid, _, _ := strings.Cut(user, ":"); {
	case !build:
		return invalid("Dockerfile", "no RUN step builds ./cmd/pdq with CGO_ENABLED=0 GOEXPERIMENT=simd go build")
	case !copied:
		return invalid("Dockerfile", "the final stage does not COPY the binary to %s, the Jobs' command", binPath)
	case uid == "" || uid == "0" || uid == "root" || strings.Trim(uid, "0123456789") != "":
		return invalid("Dockerfile", "the final stage's USER %q is not a numeric non-root user", user)
	}
	return nil
}

// joinedLines yields the Dockerfile's logical lines, with backslash continuations joined.
func joinedLines(text []byte) iter.Seq[string] {
	return func(yield func(string) bool) {
		sc := bufio.NewScanner(bytes.NewReader(text))
		var cur strings.Builder
		for sc.Scan() {
			l := strings.TrimRight(sc.Text(), " \t")
			if s, ok := strings.CutSuffix(l, "\\"); ok {
				cur.WriteString(s + " ")
				continue
			}
			cur.WriteString(l)
			if !yield(cur.String()) {
				return
			}
			cur.Reset()
		}
		if cur.Len() > 0 {
			yield(cur.String())
		}
	}
}
