package main

import (
	"os"
	"strings"
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
	os.Exit(m.Run())
}
