package scan

import (
	"io/fs"
	"strings"
)

// The files a directory walk reads as ELF. Opening a file to look at its
// first bytes costs three system calls, and a Python environment is mostly
// other files (68,849 in the PyTorch one, 859 of them ELF), so the walk
// decides by name, and by mode where the name does not tell:
//
//   - a name that contains ".so" is read (libfoo.so, libfoo.so.1.2,
//     mod.cpython-312-x86_64-linux-gnu.so, mod.abi3.so, libc.so the linker
//     script);
//   - a name that ends in an extension no loadable object has in practice
//     (Python sources and byte code, C and CUDA headers, text, data and
//     archive formats: see notObjectExtension) is not read, nor stat'ed;
//   - any other file is read when its mode has an execute bit (programs:
//     torch/bin/torch_shm_manager, triton's ptxas), which costs one stat.
//
// Directories named __pycache__ hold the interpreter's byte-code caches
// (NAME.TAG.pyc, PEP 3147) and are not listed.
//
// What the rule misses: a shared object named without ".so" and without an
// execute bit (ld.so loads whatever file a DT_NEEDED path or dlopen names,
// whatever its name), or one with a source's or a data file's extension.
// Options.AllFiles (scan --all-files) reads every regular file of every
// directory instead.

// candidacy is what the walk does with a regular file, by its name.
type candidacy uint8

const (
	skipFile         candidacy = iota // not an object: not read
	readFile                          // read to see whether it is ELF
	readIfExecutable                  // stat'ed, then read if executable
)

// candidate applies the rule to a file's name.
func candidate(name string) candidacy {
	if strings.Contains(name, ".so") {
		return readFile
	}
	if notObjectName[name] {
		return skipFile
	}
	if i := strings.LastIndexByte(name, '.'); i > 0 && notObjectExtension[name[i+1:]] {
		return skipFile
	}
	return readIfExecutable
}

// MayBeObject applies the rule to a regular file outside a walk: false
// when its name says it is no loadable object, else true when the name
// says it is one, else whether mode (asked for only then: a stat) has an
// execute bit.
func MayBeObject(name string, mode func() fs.FileMode) bool {
	switch candidate(name) {
	case skipFile:
		return false
	case readIfExecutable:
		return mode()&0o111 != 0
	}
	return true
}

// skipDir reports a directory the walk does not list.
func skipDir(name string) bool { return name == "__pycache__" }

// notObjectExtension are the extensions of files that are not loadable
// objects: sources, headers, byte code, text and data formats, archives
// (an .o or a .cubin is ELF but never loaded by ld.so; a .a, .bc or .pyd is
// not ELF).
var notObjectExtension = setOf(
	// Python
	"py", "pyc", "pyo", "pyi", "pyx", "pxd", "pxi", "pyd", "pth", "typed", "ipynb",
	// C, C++, CUDA sources and headers
	"h", "hh", "hpp", "hxx", "inl", "inc", "ipp", "tcc", "cuh", "cu", "c", "cc", "cpp", "cxx", "def",
	// build, templates, configuration
	"cmake", "in", "am", "ac", "mk", "bzl", "bazel", "jinja", "jinja2", "j2", "tmpl", "tpl",
	"cfg", "ini", "toml", "yaml", "yml", "json", "xml", "conf", "lock", "proto", "thrift", "fbs",
	// text and documents
	"txt", "md", "rst", "html", "htm", "css", "js", "mjs", "cjs", "ts", "map", "svg", "pdf",
	"csv", "tsv", "log", "license", "po", "pot", "mo",
	// images and fonts
	"png", "jpg", "jpeg", "gif", "ico", "bmp", "ttf", "otf", "afm", "pfb", "woff", "woff2",
	// scripts
	"sh", "bash", "zsh", "fish", "csh", "bat", "ps1", "pl", "rb", "lua", "r", "m",
	// data, models, archives, other objects
	"npy", "npz", "pkl", "pickle", "pt", "onnx", "safetensors", "gz", "bz2", "xz", "zst", "zip", "tar", "whl", "egg",
	"a", "o", "bc", "ll", "ptx", "cubin", "fatbin", "pem", "crt", "dll", "dylib", "lib", "pdb",
)

// notObjectName are file names without an extension that are never objects:
// a distribution's metadata (dist-info) and a project's notices.
var notObjectName = setOf("METADATA", "RECORD", "WHEEL", "INSTALLER", "REQUESTED", "LICENSE", "NOTICE", "AUTHORS", "COPYING", "README", "PKG-INFO")

func setOf(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, s := range items {
		m[s] = true
	}
	return m
}
