package lddtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestEverySkipGoesThroughNeed keeps coverage from disappearing quietly: a
// test that cannot run for want of a tool or data skips through Need, which
// fails it under CUDADEPS_REQUIRE_ORACLES=1 (CI). Any other call of Skip,
// Skipf or SkipNow in the module must say on the line above why it is no
// missing oracle ("// Not an oracle: ...").
func TestEverySkipGoesThroughNeed(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || filepath.Base(p) == "oracles.go" && filepath.Base(filepath.Dir(p)) == "lddtest" {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		notes := map[int]bool{} // lines that carry the note
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.Contains(c.Text, "Not an oracle:") {
					notes[fset.Position(c.End()).Line] = true
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Skip" && sel.Sel.Name != "Skipf" && sel.Sel.Name != "SkipNow") {
				return true
			}
			if pos := fset.Position(call.Pos()); !notes[pos.Line-1] {
				bad = append(bad, pos.String())
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: a skip that does not go through lddtest.Need (nor says \"// Not an oracle: why\" on the line above)", b)
	}
}
