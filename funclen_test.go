package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The limits on a function's length, counted from its func line to its
// closing brace: none longer than maxFuncLines, at most maxLongFuncs longer
// than longFuncLines.
const (
	maxFuncLines  = 150
	longFuncLines = 80
	maxLongFuncs  = 30
)

// funcLen is one function's length and where it is.
type funcLen struct {
	pos   string // file:line of its func line
	name  string // Type.Method or Func
	lines int
}

func (f funcLen) String() string { return fmt.Sprintf("%4d lines  %s  %s", f.lines, f.name, f.pos) }

// TestFunctionLengths keeps functions short enough to read: no non-test
// function of the module over maxFuncLines lines, at most maxLongFuncs over
// longFuncLines. A function that passes a limit is split where a reader
// would (by section or phase), not raised.
func TestFunctionLengths(t *testing.T) {
	fns, err := moduleFuncLengths(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) < 500 {
		t.Fatalf("only %d functions found: is the walk reading the module?", len(fns))
	}
	var tooLong, long []funcLen
	for _, f := range fns {
		if f.lines > maxFuncLines {
			tooLong = append(tooLong, f)
		}
		if f.lines > longFuncLines {
			long = append(long, f)
		}
	}
	if len(tooLong) > 0 {
		t.Errorf("%d functions over %d lines (none may be); split them:\n%s",
			len(tooLong), maxFuncLines, listFuncs(tooLong))
	}
	if len(long) > maxLongFuncs {
		t.Errorf("%d functions over %d lines (the limit is %d); split %d of them:\n%s",
			len(long), longFuncLines, maxLongFuncs, len(long)-maxLongFuncs, listFuncs(long))
	}
}

// listFuncs lists fns one a line, longest first.
func listFuncs(fns []funcLen) string {
	lines := make([]string, len(fns))
	for i, f := range fns {
		lines[i] = "\t" + f.String()
	}
	return strings.Join(lines, "\n")
}

// moduleFuncLengths measures every function with a body in the non-test Go
// files under root, skipping third_party, testdata, hidden directories and
// nested modules; longest first.
func moduleFuncLengths(root string) ([]funcLen, error) {
	fset := token.NewFileSet()
	var fns []funcLen
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		for _, decl := range file.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			fns = append(fns, funcLen{
				pos:   fmt.Sprintf("%s:%d", filepath.ToSlash(path), start.Line),
				name:  funcName(fd),
				lines: end.Line - start.Line + 1,
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	sort.SliceStable(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
	return fns, nil
}

// skipDir reports whether the walk leaves the directory at path: vendored
// code, test data, hidden directories and other modules.
func skipDir(path, name string) bool {
	if name == "third_party" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// funcName is fd's name with its receiver's type: Type.Method or Func.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// TestFunctionLengthsCountsFromFuncToBrace checks the measure itself on a
// file it writes: a function's length runs from its func line to its
// closing brace, methods carry their type, and test files, testdata and
// third_party are left out.
func TestFunctionLengthsCountsFromFuncToBrace(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go", "package a\n\n// F is three lines.\nfunc F() {\n\t_ = 1\n}\n\ntype T[K any] struct{}\n\nfunc (t *T[K]) M() {}\n")
	write("a_test.go", "package a\n\nfunc G() {\n}\n")
	write("testdata/b.go", "package b\n\nfunc H() {\n}\n")
	write("third_party/c/c.go", "package c\n\nfunc I() {\n}\n")
	fns, err := moduleFuncLengths(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, f := range fns {
		got[f.name] = f.lines
	}
	want := map[string]int{"F": 3, "T.M": 1}
	if len(got) != len(want) || got["F"] != 3 || got["T.M"] != 1 {
		t.Fatalf("lengths = %v, want %v", got, want)
	}
}
