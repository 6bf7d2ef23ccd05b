package analyzer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestKindsListsEveryKind: Kinds holds every Kind constant of the package,
// so a kind added without its place in Kinds (and so without its metrics
// series) fails here.
func TestKindsListsEveryKind(t *testing.T) {
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Kind") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						consts = append(consts, s)
					}
				}
			}
		}
	}
	got := slices.Sorted(slices.Values(Kinds))
	slices.Sort(consts)
	if len(consts) < 10 || !slices.Equal(got, consts) {
		t.Errorf("Kinds %v\nKind constants %v", got, consts)
	}
}
