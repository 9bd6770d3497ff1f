package proxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The proxy builds no retry.Engine of its own: every proxied call runs on
// the engine it is given (Options.Engine, the commands' own from calls/),
// so the breaker, pacer, cooldowns, fleet state and history apply to it.
// A composite literal of retry.Engine, or a retry.New* constructor of an
// engine, in the package's non-test sources fails this test.
func TestProxyBuildsNoEngine(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen++
		ast.Inspect(f, func(n ast.Node) bool {
			var sel *ast.SelectorExpr
			switch x := n.(type) {
			case *ast.CompositeLit:
				sel, _ = x.Type.(*ast.SelectorExpr)
			case *ast.CallExpr:
				if s, ok := x.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(s.Sel.Name, "New") && strings.Contains(s.Sel.Name, "Engine") {
					sel = s
				}
				if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "new" && len(x.Args) == 1 {
					sel, _ = x.Args[0].(*ast.SelectorExpr)
				}
			}
			if sel == nil {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "retry" && strings.Contains(sel.Sel.Name, "Engine") {
				t.Errorf("%s: the proxy builds a retry engine (%s.%s); it must run on Options.Engine", fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name)
			}
			return true
		})
	}
	if seen < 5 {
		t.Fatalf("only %d source files scanned", seen)
	}
}
