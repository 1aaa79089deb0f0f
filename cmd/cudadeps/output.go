package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/cudadeps/cudadeps/internal/shquote"
	"github.com/cudadeps/cudadeps/internal/tty"
)

// JSON schemas: every top-level JSON object names its own, so that a
// consumer can tell the documents apart and notice a change of format.
const (
	schemaScan           = "cudadeps.scan/v1"
	schemaWhy            = "cudadeps.why/v1"
	schemaResolve        = "cudadeps.resolve/v1"
	schemaUndo           = "cudadeps.undo/v1"
	schemaFetch          = "cudadeps.fetch/v1"
	schemaStoreList      = "cudadeps.store.list/v1"
	schemaStoreRemove    = "cudadeps.store.remove/v1"
	schemaDoctor         = "cudadeps.doctor/v1"
	schemaCatalogList    = "cudadeps.catalog.list/v1"
	schemaCatalogShow    = "cudadeps.catalog.show/v1"
	schemaCatalogWhich   = "cudadeps.catalog.which/v1"
	schemaCatalogCheck   = "cudadeps.catalog.validate/v1"
	schemaCatalogImport  = "cudadeps.catalog.import/v1"
	schemaCatalogUnknown = "cudadeps.catalog.unknown/v1"
	schemaCatalogUpdate  = "cudadeps.catalog.update/v1"
)

// writeJSON prints v, a struct or a pointer to one, as an indented JSON
// object whose first field is "schema". Lists print as [] even when empty,
// never as null.
func writeJSON(w io.Writer, schema string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(emptyLists(v)); err != nil {
		return err
	}
	body := bytes.TrimSpace(buf.Bytes())
	if len(body) < 2 || body[0] != '{' {
		return fmt.Errorf("internal error: %T is not a JSON object", v)
	}
	var doc bytes.Buffer
	fmt.Fprintf(&doc, `{"schema":%q`, schema)
	if rest := bytes.TrimSpace(body[1:]); len(rest) > 0 && rest[0] != '}' {
		doc.WriteByte(',')
	}
	doc.Write(body[1:])
	var out bytes.Buffer
	if err := json.Indent(&out, doc.Bytes(), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// emptyLists returns v with every nil slice reachable through exported
// fields, pointers and elements replaced by an empty one. v is changed in
// place where it is a pointer; a struct value is copied first.
func emptyLists(v any) any {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return v
	}
	if rv.Kind() != reflect.Pointer {
		p := reflect.New(rv.Type())
		p.Elem().Set(rv)
		rv = p
	}
	fillLists(rv, map[uintptr]bool{})
	return rv.Interface()
}

func fillLists(v reflect.Value, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		fillLists(v.Elem(), seen)
	case reflect.Interface:
		if !v.IsNil() && v.Elem().Kind() == reflect.Pointer {
			fillLists(v.Elem(), seen)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if (!sf.IsExported() && !sf.Anonymous) || sf.Tag.Get("json") == "-" {
				continue
			}
			f := v.Field(i)
			if f.Kind() == reflect.Slice && f.IsNil() && f.CanSet() {
				f.Set(reflect.MakeSlice(f.Type(), 0, 0))
				continue
			}
			fillLists(f, seen)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			e := v.Index(i)
			if e.Kind() == reflect.Slice && e.IsNil() && e.CanSet() {
				e.Set(reflect.MakeSlice(e.Type(), 0, 0))
				continue
			}
			fillLists(e, seen)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if e := iter.Value(); e.Kind() == reflect.Pointer {
				fillLists(e, seen)
			}
		}
	}
}

// painter colours the words that say something failed, on a terminal only
// and never when NO_COLOR is set (https://no-color.org).
type painter struct{ on bool }

func newPainter(w io.Writer) painter {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return painter{}
	}
	return painter{on: tty.Is(w)}
}

// bad paints s bold red.
func (p painter) bad(s string) string {
	if !p.on {
		return s
	}
	return "\x1b[1;31m" + s + "\x1b[0m"
}

// commandLine is a cudadeps command a user can paste: each argument quoted
// for the shell, and --prefix added when the store is not the default one.
func (a *app) commandLine(args ...string) string {
	words := []string{"cudadeps"}
	for _, s := range args {
		words = append(words, shquote.Quote(s))
	}
	if a.opts.root != "" {
		if r, err := filepath.Abs(a.opts.root); err == nil {
			words = append(words, "--root", shquote.Quote(r))
		}
	}
	if a.opts.prefix != "" {
		if p, err := a.prefix(); err == nil {
			words = append(words, "--prefix", shquote.Quote(p))
		}
	}
	return strings.Join(words, " ")
}
