package herald_test

import (
	"bufio"
	"bytes"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitecture holds ARCHITECTURE.md to the code: its import rules to
// the import graph that `go list` reports, and every test it cites to a
// test that exists. A package added, an import added against a rule, or a
// cited test renamed fails it until the map says so.
//
// The rules cover the imports of non-test files only (go list's Imports):
// tests open real backends and test helpers by design, and the one rule
// about tests, that test helpers are imported by tests only, is a rule
// about the non-test files that must not import them.
func TestArchitecture(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ImportRules", func(t *testing.T) { checkImportRules(t, doc) })
	t.Run("CitedTests", func(t *testing.T) { checkCitedTests(t, "ARCHITECTURE.md", doc) })
}

// importRules is the ```imports block of ARCHITECTURE.md. Paths are those
// of the module's packages relative to the module ("herald" is the module
// root), or import paths outside the module, which also allow the paths
// beneath them. The standard library is always allowed.
type importRules struct {
	// mayImport holds, for every package of the module, what its non-test
	// files may import: "pkg: a b c", on one line or several.
	mayImport map[string][]string
	// onlyFrom holds, for a package, the only packages whose non-test
	// files may import it: "pkg < a b".
	onlyFrom map[string][]string
}

func parseImportRules(t *testing.T, doc []byte) importRules {
	t.Helper()
	r := importRules{mayImport: map[string][]string{}, onlyFrom: map[string][]string{}}
	in, found := false, false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```imports":
			in, found = true, true
			continue
		case !in:
			continue
		case line == "```":
			in = false
			continue
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		}
		if pkg, rest, ok := strings.Cut(line, ":"); ok && !strings.Contains(pkg, " ") {
			r.mayImport[pkg] = append(r.mayImport[pkg], strings.Fields(rest)...)
			continue
		}
		if pkg, rest, ok := strings.Cut(line, "<"); ok && len(strings.Fields(pkg)) == 1 {
			pkg = strings.TrimSpace(pkg)
			r.onlyFrom[pkg] = append(r.onlyFrom[pkg], strings.Fields(rest)...)
			continue
		}
		t.Errorf("ARCHITECTURE.md:%d: %q is neither \"pkg: may import...\" nor \"pkg < only from...\"", n, line)
	}
	if !found {
		t.Fatal("ARCHITECTURE.md has no ```imports block")
	}
	return r
}

// restriction finds the "only from" line that covers path: its own, or,
// for a path outside the module, that of a path above it.
func (r importRules) restriction(path string, inModule bool) (key string, only []string, ok bool) {
	for k, only := range r.onlyFrom {
		if k == path || (!inModule && strings.HasPrefix(path, k+"/")) {
			return k, only, true
		}
	}
	return "", nil, false
}

// external reports whether a path of the imports block is outside the
// module: its first element has a dot, as a module path's host does.
func external(path string) bool { return strings.Contains(strings.Split(path, "/")[0], ".") }

func orNone(pkgs []string) string {
	if len(pkgs) == 0 {
		return "no package (tests only)"
	}
	return strings.Join(pkgs, ", ")
}

// allows reports whether path matches one of entries: the same path, or,
// for a path outside the module, a path beneath an entry.
func allows(entries []string, path string, inModule bool) bool {
	for _, e := range entries {
		if e == path || (!inModule && strings.HasPrefix(path, e+"/")) {
			return true
		}
	}
	return false
}

func checkImportRules(t *testing.T, doc []byte) {
	rules := parseImportRules(t, doc)
	module := modulePath(t)
	rel := func(p string) string {
		if p == module {
			return "herald"
		}
		return strings.TrimPrefix(p, module+"/")
	}
	inModule := func(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	listed := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := rel(fields[0])
		listed[pkg] = true
		allowed, ok := rules.mayImport[pkg]
		if !ok {
			t.Errorf("package %s is not in ARCHITECTURE.md's imports block: add a line \"%s: ...\" (and a line to the codemap)", pkg, pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !external(imp) {
				continue // the standard library: its paths have no dot up front
			}
			name := imp
			if inModule(imp) {
				name = rel(imp)
			}
			if !allows(allowed, name, inModule(imp)) {
				t.Errorf("%s imports %s, which its line \"%s: ...\" in ARCHITECTURE.md does not allow", pkg, name, pkg)
			}
			if key, only, ok := rules.restriction(name, inModule(imp)); ok && !slices.Contains(only, pkg) {
				t.Errorf("%s imports %s, which the line \"%s < ...\" in ARCHITECTURE.md allows only %s to import", pkg, name, key, orNone(only))
			}
		}
	}
	// The block names only packages that exist, and its two kinds of rule
	// agree: no "may import" line allows what an "only from" line forbids.
	for _, pkg := range slices.Sorted(maps.Keys(rules.mayImport)) {
		if !listed[pkg] {
			t.Errorf("ARCHITECTURE.md's imports block names %s, which go list does not list", pkg)
		}
		for _, imp := range rules.mayImport[pkg] {
			if key, only, ok := rules.restriction(imp, !external(imp)); ok && !slices.Contains(only, pkg) {
				t.Errorf("ARCHITECTURE.md lets %s import %s, which its line \"%s < ...\" allows only %s to import", pkg, imp, key, orNone(only))
			}
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(rules.onlyFrom)) {
		if !external(pkg) && !listed[pkg] {
			t.Errorf("ARCHITECTURE.md's imports block restricts %s, which go list does not list", pkg)
		}
	}
}

// A cited test is a backticked Go test (`TestX`, `TestX/Sub/...`; also
// Benchmark, Fuzz and Example functions), or a backticked case of the
// conformance suite, `Group/Case` (internal/store/storetest), which each
// backend runs as a subtest of its own test.
var (
	citedGoTest = regexp.MustCompile("`((?:Test|Benchmark|Fuzz|Example)[A-Z0-9_][A-Za-z0-9_]*(?:/[^`\\s]+)*)`")
	citedCase   = regexp.MustCompile("`([A-Z][A-Za-z0-9]*/[A-Z][A-Za-z0-9_]*)`")
	testFunc    = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)[A-Za-z0-9_]*)\(`)
	// {"Claim", claimCases()} in storetest.go, and {"ExpiredLeaseIsClaimedAgain", ...} in claimCases.
	suiteGroup = regexp.MustCompile(`\{"([A-Za-z0-9]+)", ([a-zA-Z0-9]+Cases)\(\)\}`)
	suiteCase  = regexp.MustCompile(`\{"([A-Za-z0-9_]+)", `)
)

const storetestDir = "internal/store/storetest"

// checkCitedTests fails for every test the document called name (doc)
// cites that does not exist.
func checkCitedTests(t *testing.T, name string, doc []byte) {
	funcs := map[string][]string{} // test function name -> directories
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			funcs[string(m[1])] = append(funcs[string(m[1])], filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := suiteCases(t)

	cited := 0
	for _, m := range citedGoTest.FindAllSubmatch(doc, -1) {
		cited++
		cite := string(m[1])
		parts := strings.Split(cite, "/")
		dirs, ok := funcs[parts[0]]
		if !ok {
			t.Errorf("%s cites %s, but no _test.go file has func %s(", name, cite, parts[0])
			continue
		}
		// A subtest's name is a string literal in its test's package, or
		// a case of the conformance suite the test runs.
		for _, sub := range parts[1:] {
			if sub == "*" {
				continue
			}
			if !literalIn(t, append(slices.Clone(dirs), storetestDir), sub) {
				t.Errorf("%s cites %s, but no subtest %q is named in %s or %s", name, cite, sub, strings.Join(dirs, ", "), storetestDir)
			}
		}
	}
	for _, m := range citedCase.FindAllSubmatch(doc, -1) {
		cited++
		cite := string(m[1])
		if _, isFunc := funcs[strings.Split(cite, "/")[0]]; isFunc {
			continue // a Go test, checked above
		}
		group, c, _ := strings.Cut(cite, "/")
		groupCases, ok := cases[group]
		switch {
		case !ok:
			t.Errorf("%s cites %s, but the conformance suite (%s) has no group %s", name, cite, storetestDir, group)
		case !slices.Contains(groupCases, c):
			t.Errorf("%s cites %s, but group %s of the conformance suite has no case %s", name, cite, group, c)
		}
	}
	t.Logf("%s cites %d tests", name, cited)
	if cited == 0 {
		t.Errorf("%s cites no test: each claim names the tests that hold it", name)
	}
}

// suiteCases reads the conformance suite's groups (storetest.Run's list)
// and the cases each group's function lists.
func suiteCases(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(storetestDir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("read %s: %v", storetestDir, err)
	}
	bodies := map[string]string{} // cases function name -> its body
	groups := map[string]string{} // group -> cases function name
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range suiteGroup.FindAllSubmatch(src, -1) {
			groups[string(m[1])] = string(m[2])
		}
		for _, chunk := range strings.Split(string(src), "\nfunc ")[1:] {
			name, _, _ := strings.Cut(chunk, "(")
			if strings.HasSuffix(name, "Cases") {
				bodies[name], _, _ = strings.Cut(chunk, "\n}\n")
			}
		}
	}
	cases := map[string][]string{}
	for group, fn := range groups {
		body, ok := bodies[fn]
		if !ok {
			t.Errorf("%s: group %s names %s(), which is not found", storetestDir, group, fn)
		}
		for _, m := range suiteCase.FindAllStringSubmatch(body, -1) {
			cases[group] = append(cases[group], m[1])
		}
	}
	if len(cases) == 0 {
		t.Fatalf("found no case of the conformance suite in %s", storetestDir)
	}
	return cases
}

// literalIn reports whether a Go file of one of dirs holds name as a string
// literal ("name"), as t.Run and test tables name subtests; an underscore
// in a subtest's name may stand for a space.
func literalIn(t *testing.T, dirs []string, name string) bool {
	t.Helper()
	want := [][]byte{[]byte(`"` + name + `"`), []byte(`"` + strings.ReplaceAll(name, "_", " ") + `"`)}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range want {
				if bytes.Contains(src, w) {
					return true
				}
			}
		}
	}
	return false
}

func modulePath(t *testing.T) string {
	t.Helper()
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mod)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(p)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}
