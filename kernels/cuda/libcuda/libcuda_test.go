//go:build cuda || cudaemu

package libcuda

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The child mode: report Status and DeviceCount for the library PDQ_LIBCUDA names.
func TestMain(m *testing.M) {
	if os.Getenv("PDQ_LIBCUDA_CHILD") == "1" {
		err := Status()
		n, cerr := DeviceCount()
		fmt.Printf("status=%v|noDriver=%v|init=%v|count=%d|countErr=%v\n", err,
			errors.Is(err, ErrNoDriver), errors.Is(err, ErrInit), n, cerr)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeDriver compiles a shared library from src and returns its path.
func fakeDriver(t *testing.T, name, src string) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build the fake drivers")
	}
	dir := t.TempDir()
	c := filepath.Join(dir, name+".c")
	so := filepath.Join(dir, name+".so")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", so, c).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return so
}

// TestLoad runs the loader in a child process per driver (it loads once per process): no
// library, a driver whose cuInit fails, one without cuDeviceGetCount, and a working one whose
// cuDeviceGetCount is reached through the trampoline.
func TestLoad(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"missing", "", "noDriver=true|init=false|count=0|countErr=cuda: cuDeviceGetCount: CUresult 3"},
		{"initfails", "int cuInit(unsigned f) { return 100; }\nint cuDeviceGetCount(int *n) { *n = 7; return 0; }\n",
			"noDriver=false|init=true|count=0|countErr=cuda: cuDeviceGetCount: CUresult 3"},
		{"nocount", "int cuInit(unsigned f) { return 0; }\n",
			"status=<nil>|noDriver=false|init=false|count=0|countErr=cuda: cuDeviceGetCount: CUresult 500"},
		{"three", "static unsigned seen = 99;\nint cuInit(unsigned f) { seen = f; return 0; }\n" +
			"int cuDeviceGetCount(int *n) { *n = 3 + seen; return 0; }\n",
			"status=<nil>|noDriver=false|init=false|count=3|countErr=<nil>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lib := filepath.Join(t.TempDir(), "absent", "libcuda.so.1")
			if c.src != "" {
				lib = fakeDriver(t, c.name, c.src)
			}
			cmd := exec.Command(os.Args[0], "-test.run", "^$")
			cmd.Env = append(os.Environ(), "PDQ_LIBCUDA_CHILD=1", "PDQ_LIBCUDA="+lib)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); !strings.HasSuffix(got, c.want) {
				t.Errorf("got %q\nwant suffix %q", got, c.want)
			}
		})
	}
}

// TestSymbols checks that the trampoline table and the symbol list agree with what the
// loader reports.
func TestSymbols(t *testing.T) {
	src, err := os.ReadFile("symbols.h")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), "\nS("); n != Symbols() || n < 100 {
		t.Errorf("symbols.h lists %d functions, the loader has %d", n, Symbols())
	}
}
