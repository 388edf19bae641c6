package kernels

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestNoLegacySSEInVectorCode reads the code the compiler makes of this package (the listing
// of go build -gcflags=-S: the instructions as the assembler encodes them), and the listing of
// its assembly files (-asmflags=-S, the same form), and fails on any
// legacy-SSE instruction (an xmm operand without the VEX/EVEX form: MOVQ r64, X; XORPS; MOVSS;
// CVTSL2SS; ADDSS; UCOMISS; MOVUPS ...) run while the upper halves of the vector registers may
// be dirty. On Intel cores each of those pays an AVX-SSE transition or a merge with the dirty
// upper bits (the AVX-512 loops ran slower than the scalar ones); AMD cores don't pay, so this
// test, not a timing, keeps the penalty from coming back on any CPU.
//
// Each function is followed along its branches from its entry, entered clean: an instruction
// with a ymm/zmm operand, or a call of a function that can return with dirty upper halves,
// makes the state dirty; VZEROUPPER (archsimd.ClearAVXUpperBits), or a call of a function
// that always returns through one, cleans it. While dirty, a legacy-SSE instruction, or a call of a
// function that, entered dirty, would run one, or that the listing doesn't show (other than the
// runtime's panics and stack growth), is a failure. The stack-growth path at the end of a function (spills before
// runtime.morestack, before any instruction of the body) is left out.
func TestNoLegacySSEInVectorCode(t *testing.T) {
	if !simdBuild || runtime.GOARCH != "amd64" {
		t.Skip("built without GOEXPERIMENT=simd on amd64: no vector code to read")
	}
	if testing.Short() {
		t.Skip("compiles the package again; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to compile the listing with: %v", err)
	}
	cmd := exec.Command(goBin, "build", "-gcflags=-S", "-asmflags=-S", ".")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build -gcflags=-S: %v\n%s", err, out.Bytes())
	}
	funcs := parseListing(t, out.Bytes())
	checkAsmListed(t, funcs)
	nVector := 0
	for _, f := range funcs {
		if f.vector {
			nVector++
		}
	}
	if nVector == 0 {
		t.Fatal("no function uses ymm/zmm registers: the listing was not read right")
	}
	// A function returns dirty when a RET is reached dirty; calls of it make the caller dirty,
	// which can make the caller return dirty in turn.
	for changed := true; changed; {
		changed = false
		for _, f := range funcs {
			if _, rd := f.scan(funcs, false, false); rd && !f.returnsDirty {
				f.returnsDirty, changed = true, true
			}
			if _, rd := f.scan(funcs, true, false); rd && !f.returnsDirtyFromDirty {
				f.returnsDirtyFromDirty, changed = true, true
			}
		}
	}
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(funcs)) {
		p, _ := funcs[name].scan(funcs, false, true)
		for _, l := range p {
			bad = append(bad, name+": "+l)
		}
	}
	t.Logf("%d functions use ymm/zmm registers", nVector)
	if len(bad) > 0 {
		var dirty []string
		for _, name := range slices.Sorted(maps.Keys(funcs)) {
			if funcs[name].returnsDirty {
				dirty = append(dirty, name)
			}
		}
		var unsafeClosures []string
		for _, name := range slices.Sorted(maps.Keys(funcs)) {
			if vectorClosure(name, funcs) && !safeCall(name, funcs) {
				unsafeClosures = append(unsafeClosures, name)
			}
		}
		t.Errorf("%d legacy-SSE instructions or calls with dirty upper halves:\n%s\n(functions that can return with dirty upper halves: %s; closures not safe to call dirty: %s)",
			len(bad), strings.Join(bad, "\n"), strings.Join(dirty, ", "), strings.Join(unsafeClosures, ", "))
	}
}

type listedInsn struct {
	pc       int
	line     string // file:line
	op, args string
}

type listedFunc struct {
	insns  []listedInsn
	vector bool // some operand is a ymm or zmm register
	// returnsDirty: some RET is reached with dirty upper halves, the function entered clean;
	// returnsDirtyFromDirty: the same, entered dirty
	returnsDirty, returnsDirtyFromDirty bool
	// dirtySafe: 1 when the function, entered dirty, runs no legacy-SSE instruction before a
	// VZEROUPPER; -1 when it does; 0 until decided (safeCall)
	dirtySafe int
	legacy    int // legacy-SSE instructions outside the stack-growth path
	growAt    int // pc of the stack-growth path, or -1
}

var (
	funcHeader = regexp.MustCompile(`^(\S+) STEXT`)
	insnLine   = regexp.MustCompile(`^\t0x[0-9a-f]+ (\d+) \(([^)]*)\)\t(\S+)(?:\t(.*))?$`)
	wideReg    = regexp.MustCompile(`\b[YZ]([0-9]|[12][0-9]|3[01])\b`)
	xmmReg     = regexp.MustCompile(`\bX([0-9]|1[0-5])\b`)
	indirect   = regexp.MustCompile(`^[A-Z][A-Z0-9]*$`) // CALL AX, CALL R12
	closure    = regexp.MustCompile(`\.func\d+(\.\d+)*$`)
	asmHeader  = regexp.MustCompile(`^\S+ STEXT .*\basm\b`)
	asmText    = regexp.MustCompile(`(?m)^TEXT\s+·(\w+)\(SB\)`)
)

// abi0 marks the listed body of an assembly function (ABI0), apart from its wrapper.
const abi0 = "<ABI0>"

// checkAsmListed fails unless every function of the package's amd64 assembly files is in the
// listing, so that the test reads them too.
func checkAsmListed(t *testing.T, funcs map[string]*listedFunc) {
	t.Helper()
	files, err := filepath.Glob("*_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range asmText.FindAllSubmatch(src, -1) {
			found := false
			for name := range funcs {
				if strings.HasSuffix(name, "."+string(m[1])+abi0) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: %s is not in the assembler's listing", file, m[1])
			}
		}
	}
}

// parseListing splits a -S listing into this package's functions.
func parseListing(t *testing.T, listing []byte) map[string]*listedFunc {
	t.Helper()
	funcs := map[string]*listedFunc{}
	var cur *listedFunc
	var wrappers []*listedFunc
	sc := bufio.NewScanner(bytes.NewReader(listing))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := funcHeader.FindStringSubmatch(l); m != nil {
			cur = &listedFunc{growAt: -1}
			name := m[1]
			if asmHeader.MatchString(l) {
				name += abi0 // the body of an assembly function, called through its wrapper
			}
			funcs[name] = cur
			continue
		}
		m := insnLine.FindStringSubmatch(l)
		if m == nil || cur == nil {
			continue
		}
		pc, _ := strconv.Atoi(m[1])
		in := listedInsn{pc: pc, line: m[2], op: m[3], args: m[4]}
		if in.op == "PCDATA" || in.op == "FUNCDATA" {
			continue
		}
		if in.op == "TEXT" && strings.Contains(in.args, "ABIWRAPPER") {
			wrappers = append(wrappers, cur)
		}
		cur.insns = append(cur.insns, in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// Go code calls an assembly function through the compiler's ABI wrapper of the same name
	// (which restores X15 with a legacy-SSE XORPS after the call); the wrapper calls the body.
	for _, w := range wrappers {
		for i, in := range w.insns {
			if target, ok := strings.CutSuffix(in.args, "(SB)"); ok && in.op == "CALL" {
				if _, asm := funcs[target+abi0]; asm {
					w.insns[i].args = target + abi0 + "(SB)"
				}
			}
		}
	}
	for _, f := range funcs {
		f.classify()
	}
	return funcs
}

// classify finds the stack-growth path (the target of the jump after the prologue's stack
// bound check) and counts the legacy-SSE instructions outside it.
func (f *listedFunc) classify() {
	for i, in := range f.insns {
		if strings.HasPrefix(in.op, "CMP") && strings.Contains(in.args, "16(R14)") && i+1 < len(f.insns) {
			if j := f.insns[i+1]; strings.HasPrefix(j.op, "J") {
				f.growAt, _ = strconv.Atoi(j.args)
			}
			break
		}
	}
	for _, in := range f.insns {
		if f.growAt >= 0 && in.pc >= f.growAt {
			break
		}
		if wideReg.MatchString(in.args) {
			f.vector = true
		}
		if isLegacySSE(in) {
			f.legacy++
		}
	}
}

// isLegacySSE reports an instruction with an xmm operand that is not a VEX or EVEX one.
func isLegacySSE(in listedInsn) bool {
	return !strings.HasPrefix(in.op, "V") && xmmReg.MatchString(in.args)
}

// scan lists f's legacy-SSE instructions and calls made with dirty upper halves, and reports
// whether a RET can be reached dirty. The state flows along the function's branches: an
// instruction may run dirty when some path from the entry (entered clean) reaches it dirty.
func (f *listedFunc) scan(funcs map[string]*listedFunc, entryDirty, report bool) (out []string, retDirty bool) {
	body := f.insns
	for i, in := range body {
		if f.growAt >= 0 && in.pc >= f.growAt {
			body = body[:i]
			break
		}
	}
	at := make(map[int]int, len(body)) // pc to index
	for i, in := range body {
		if _, ok := at[in.pc]; !ok {
			at[in.pc] = i
		}
	}
	// dirtyIn[i]: instruction i may start with dirty upper halves.
	if len(body) == 0 {
		return nil, false
	}
	dirtyIn := make([]bool, len(body))
	reached := make([]bool, len(body))
	work := []int{0}
	reached[0], dirtyIn[0] = true, entryDirty
	flow := func(j int, d bool) {
		if j < 0 || j >= len(body) {
			return
		}
		if !reached[j] || d && !dirtyIn[j] {
			reached[j], dirtyIn[j] = true, dirtyIn[j] || d
			work = append(work, j)
		}
	}
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		in := body[i]
		d := f.dirtyAfter(in, dirtyIn[i], funcs)
		switch {
		case in.op == "RET" || in.op == "UD2":
			continue
		case strings.HasPrefix(in.op, "J"):
			if t, err := strconv.Atoi(in.args); err == nil {
				if j, ok := at[t]; ok {
					flow(j, d)
				}
			}
			if in.op == "JMP" {
				continue
			}
		case in.op == "CALL" && strings.HasPrefix(in.args, "runtime.panic"):
			continue
		}
		flow(i+1, d)
	}
	for i, in := range body {
		if !reached[i] || !dirtyIn[i] {
			continue
		}
		where := filepath.Base(in.line)
		switch {
		case in.op == "RET":
			retDirty = true
		case !report:
		case isLegacySSE(in):
			out = append(out, fmt.Sprintf("%s\t%s %s", where, in.op, in.args))
		case in.op == "CALL":
			if target := strings.TrimSuffix(in.args, "(SB)"); !safeCall(target, funcs) {
				out = append(out, fmt.Sprintf("%s\tCALL %s with dirty upper halves", where, target))
			}
		}
	}
	return out, retDirty
}

// dirtyAfter is the state after in, started in state d.
func (f *listedFunc) dirtyAfter(in listedInsn, d bool, funcs map[string]*listedFunc) bool {
	switch {
	case in.op == "VZEROUPPER":
		return false
	case wideReg.MatchString(in.args):
		return true
	case in.op == "CALL":
		if g, ok := funcs[strings.TrimSuffix(in.args, "(SB)")]; ok {
			if d {
				return g.returnsDirtyFromDirty
			}
			return g.returnsDirty
		}
	}
	return d
}

// safeCall reports whether calling target with dirty upper halves costs no transition: a
// function of this package that, entered dirty, runs no legacy-SSE instruction before a
// VZEROUPPER, or a runtime function that only panics or grows the stack. (A function being
// decided, reached again through recursion, is not safe.)
func safeCall(target string, funcs map[string]*listedFunc) bool {
	if indirect.MatchString(target) {
		// A call through a register: in vector code these are the closures of the package's
		// vector functions (the loop sets' function values are called from scalar code), so
		// all of those must be safe.
		for name := range funcs {
			if vectorClosure(name, funcs) && !safeCall(name, funcs) {
				return false
			}
		}
		return true
	}
	if g, ok := funcs[target]; ok {
		if g.dirtySafe == 0 {
			g.dirtySafe = -1
			if p, _ := g.scan(funcs, true, true); len(p) == 0 {
				g.dirtySafe = 1
			}
		}
		return g.dirtySafe == 1
	}
	// (math/bits.OnesCount* is a table look-up where GOAMD64=v1 has no POPCNT: integer code.)
	for _, p := range []string{"runtime.panic", "runtime.morestack", "runtime.goPanic", "runtime.gcWriteBarrier", "math/bits.OnesCount"} {
		if strings.HasPrefix(target, p) {
			return true
		}
	}
	return false
}

// vectorClosure reports whether name is a closure defined in a function that uses ymm/zmm
// registers (package initialisers aside).
func vectorClosure(name string, funcs map[string]*listedFunc) bool {
	loc := closure.FindStringIndex(name)
	if loc == nil {
		return false
	}
	parent, ok := funcs[name[:loc[0]]]
	return ok && parent.vector && !strings.HasSuffix(name[:loc[0]], ".init")
}
