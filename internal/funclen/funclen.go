// Package funclen measures the functions of Go source files, so that a test can hold the packages that must stay readable to a length limit.
package funclen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Func is one function or method and its length in lines, from the line of
// its func keyword to that of its closing brace.
type Func struct {
	File  string // the file's path as given
	Name  string // "Name" or "Recv.Name"
	Line  int
	Lines int
}

// Dir measures every function of the Go files of dir, test files included
// when tests is set, sorted by file and line; generated files are left out.
func Dir(dir string, tests bool) ([]Func, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []Func
	fset := token.NewFileSet()
	for _, name := range names {
		if !tests && strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if ast.IsGenerated(f) {
			continue // written by a program, read by none
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
			out = append(out, Func{File: name, Name: funcName(fd), Line: start, Lines: end - start + 1})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	return out, nil
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}
