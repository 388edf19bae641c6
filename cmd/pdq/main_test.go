package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// mainArgsEnv, when set, makes the test binary run pdq's main with these arguments (separated by
// newlines) instead of the tests: the terminal tests start pdq as a child process this way.
const mainArgsEnv = "PDQ_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(mainArgsEnv); ok {
		os.Args = append([]string{"pdq"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	// publish keeps a record of file sums under the user's cache directory: the tests' go to a
	// directory of their own, removed afterwards, never to the user's.
	cache, err := os.MkdirTemp("", "pdq-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	code := m.Run()
	os.RemoveAll(cache)
	os.Exit(code)
}

// TestReviewIOErrorIsNotUsage: an operating-system error whose text contains "invalid
// argument" (EINVAL from a write, a link or a truncate) is a failure (exit status 1), not bad
// usage; cobra's own argument errors still are.
func TestIOErrorIsNotUsage(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("convert: write /data/out/decode/x.safetensors: %w", syscall.EINVAL),
		fmt.Errorf("publish: %w", &os.PathError{Op: "open", Path: "/x", Err: syscall.EINVAL}),
		fmt.Errorf("calib: the file requires a Hessian"),
	} {
		if isCobraUsage(err) {
			t.Errorf("%v: taken for bad usage", err)
		}
	}
	for _, args := range [][]string{{"frobnicate"}, {"inspect", "--bogus", "x"}, {"inspect", "-Z", "x"}, {"convert", "x", "--workers", "many"}} {
		if _, code, err := runPDQ(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}
