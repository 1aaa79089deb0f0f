package scan

import (
	"context"
	"errors"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cudadeps/cudadeps/internal/memo"
	"github.com/cudadeps/cudadeps/loader/bind"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// UndefinedSymbol is a reference of an object of a root's closure that no
// object in its scope defines: with RTLD_NOW (Python's imports, LD_BIND_NOW)
// the root fails to load with "OBJECT: undefined symbol: SYMBOL, version
// VERSION".
type UndefinedSymbol struct {
	Object  string `json:"object"`
	Symbol  string `json:"symbol"`
	Version string `json:"version"` // empty for an unversioned reference
	// File is the soname the version is needed from ("" when unversioned):
	// the library that should have defined the symbol.
	File string `json:"file,omitempty"`
}

// Message is the loader's words for the miss.
func (u UndefinedSymbol) Message() string {
	m := u.Object + ": undefined symbol: " + u.Symbol
	if u.Version != "" {
		m += ", version " + u.Version
	}
	return m
}

// bindRoot binds the references of root's closure. A root that is a
// Python extension module is bound as an import binds it, dlopen'ed into
// the process of the interpreter of its environment (which defines the C
// API); any other as `ldd -r` binds it, as the main program.
func bindRoot(ctx context.Context, l *ldso.Loader, b *bind.Binder, is *interpreters, root *Root, opts Options) error {
	var misses []bind.Undefined
	var err error
	if py := interpreterFor(ctx, l, root, opts); py != "" {
		misses, err = bindImported(ctx, l, b, is, py, root.Result.Main.Path)
		if err == nil {
			root.BoundIn = py
		}
	}
	if root.BoundIn == "" {
		misses, err = b.Closure(ctx, root.Result)
	}
	if errors.Is(err, bind.ErrUnreadable) {
		// A wheel's members, or a file gone since: nothing to say.
		opts.Logger.Debug("symbols not bound", "root", root.Path, "error", err)
		notBound(root, err)
		return nil
	}
	if err != nil {
		return err
	}
	setUndefined(root, misses)
	return nil
}

// notBound records on root that its references were not bound, and why
// (err is bind.ErrUnreadable's).
func notBound(root *Root, err error) {
	root.UndefinedSymbols = nil
	root.SymbolsNotBound = err.Error()
	// No file has a wheel's member's name.
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return
	}
	if _, _, member := ldso.WheelMember(pe.Path); member {
		root.SymbolsNotBound = "a wheel's member (" + pe.Path + "): its symbols are bound once it is installed"
	}
}

// setUndefined records the misses of a root; a strong reference that does
// not bind fails the load.
func setUndefined(root *Root, misses []bind.Undefined) {
	root.UndefinedSymbols = []UndefinedSymbol{}
	seen := map[UndefinedSymbol]bool{}
	for _, u := range misses {
		x := UndefinedSymbol{Object: u.Object.Path, Symbol: u.Symbol, Version: u.Version, File: u.File}
		if !seen[x] {
			seen[x] = true
			root.UndefinedSymbols = append(root.UndefinedSymbols, x)
		}
	}
	if len(root.UndefinedSymbols) > 0 {
		root.OK = false
	}
}

// bindImported binds an extension module as `import` does: dlopen'ed with
// RTLD_NOW|RTLD_LOCAL into the interpreter's process.
func bindImported(ctx context.Context, l *ldso.Loader, b *bind.Binder, is *interpreters, python, module string) ([]bind.Undefined, error) {
	p, err := is.process(ctx, l, python)
	if err != nil {
		return nil, err
	}
	o, err := p.Dlopen(ctx, module)
	if err != nil {
		return nil, err
	}
	return b.Dlopened(ctx, p, o)
}

// interpreters are the interpreters' processes of a scan, each started
// once; every extension module is bound in a fork of its own.
type interpreters struct{ started memo.Map[string, started] }

// process is a fresh process of the interpreter python, nothing imported.
func (is *interpreters) process(ctx context.Context, l *ldso.Loader, python string) (*ldso.Process, error) {
	got := is.started.Get(python, func() started {
		p, err := l.Start(ctx, python, ldso.AsExecuted)
		return started{p: p, err: err}
	})
	if got.err != nil {
		return nil, got.err
	}
	return got.p.Fork(), nil
}

// BindImported records on root, computed from p.Reach(o) for an object o
// dlopen'ed into process p (an extension module imported by the process's
// interpreter), the references that would not bind. b may be shared by
// the roots of one scan; nil uses a fresh one.
func BindImported(ctx context.Context, b *bind.Binder, p *ldso.Process, o *ldso.Object, root *Root) error {
	if b == nil {
		b = bind.New()
	}
	misses, err := b.Dlopened(ctx, p, o)
	if errors.Is(err, bind.ErrUnreadable) {
		notBound(root, err)
		return nil
	}
	if err != nil {
		return err
	}
	root.BoundIn = p.Main().Path
	setUndefined(root, misses)
	return nil
}

// moduleName is the module a file name CPython imports extension modules
// from names (NAME.cpython-312-x86_64-linux-gnu.so, NAME.abi3.so,
// NAME.so), and whether it is such a name: NAME an identifier, the tag
// letters, digits, '_' and '-'. Asked of every file of a scan: no
// regular expression, which allocated its matcher's state each time.
func moduleName(base string) (string, bool) {
	stem, ok := strings.CutSuffix(base, ".so")
	if !ok {
		return "", false
	}
	name, tag, tagged := strings.Cut(stem, ".")
	if name == "" || name[0] >= '0' && name[0] <= '9' || !allBytes(name, isIdentByte) {
		return "", false
	}
	if tagged && (tag == "" || !allBytes(tag, func(c byte) bool { return isIdentByte(c) || c == '-' })) {
		return "", false
	}
	return name, true
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func allBytes(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// interpreterFor returns the interpreter that imports root when root is a
// Python extension module, and "" when it is not one or no interpreter is
// found (pythonOf).
func interpreterFor(ctx context.Context, l *ldso.Loader, root *Root, opts Options) string {
	file := root.Result.Main.Path
	if !IsExtensionModule(l, file) {
		return ""
	}
	return pythonOf(ctx, l, filepath.Dir(file), opts)
}

// pythonOf returns the interpreter whose process the files under dir are
// loaded into: Options.Python, else the one of the installation dir lies
// in (PREFIX/lib/pythonX.Y/... → PREFIX/bin/pythonX.Y), else python3 on
// PATH (the host) or /usr/bin/python3 of the root, when it is a dynamic
// ELF program; "" when there is none.
func pythonOf(ctx context.Context, l *ldso.Loader, dir string, opts Options) string {
	if opts.Python != "" {
		return opts.Python
	}
	for dir := l.HostPath(dir); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		ver, lib := filepath.Base(dir), filepath.Base(filepath.Dir(dir))
		if !pythonDir.MatchString(ver) || (lib != "lib" && lib != "lib64") {
			continue
		}
		prefix := filepath.Dir(filepath.Dir(dir))
		for _, name := range []string{ver, "python3", "python"} {
			if p := filepath.Join(prefix, "bin", name); isProgram(l, p) {
				return p
			}
		}
	}
	if l.Root() != "" {
		if p := filepath.Join(l.Root(), "usr/bin/python3"); isProgram(l, p) {
			return p
		}
		return ""
	}
	if p := opts.defaultPython(ctx); p != "" {
		return p
	}
	if p, err := exec.LookPath("python3"); err == nil && isProgram(l, p) {
		return p
	}
	return ""
}

// pythonDir is the directory of a Python installation's library
// (PREFIX/lib/python3.12, free-threaded python3.13t).
var pythonDir = regexp.MustCompile(`^python[0-9]+\.[0-9]+t?$`)

// isProgram reports an ELF program with dynamic linking (not a shell
// wrapper such as pyenv's shims, nor a static build). Under a root, the
// links on its way resolve inside the root (a venv's bin/python3 is an
// absolute link to the system's interpreter).
func isProgram(l *ldso.Loader, p string) bool {
	in, err := l.HostInfo(l.OpenPath(p)) // read once for every root that asks
	return err == nil && in.Dynamic
}
