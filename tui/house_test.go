package tui

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestStylesOnlyFromTheme holds a rule of the house (README.md): the
// console's code builds no style of its own; every style comes from theme/.
func TestStylesOnlyFromTheme(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	styling := map[string]bool{"Bold": true, "Foreground": true, "Background": true, "Reverse": true, "Italic": true,
		"Underline": true, "Faint": true, "DefaultStyles": true, "NewStyle": true}
	fs := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, im := range f.Imports {
			if strings.Contains(im.Path.Value, "lipgloss") {
				t.Errorf("%s imports %s: styles come from theme/", name, im.Path.Value)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && styling[sel.Sel.Name] {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "context" {
					return true // context.Background
				}
				t.Errorf("%s: %s builds a style: add it to theme.Styles", fs.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked only %d files", checked)
	}
}
