package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/cudadeps/cudadeps/examples/internal/demoset"
	"github.com/cudadeps/cudadeps/internal/testkit/redistwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/wheelwrite"
)

// layout is what prepare wrote.
type layout struct {
	site    string // site-packages with the package installed
	mirror  string // the directory the server serves
	catalog string // the catalog layer naming the mirror's archives
	lib     string // the package's library
}

// prepare writes the installed package and what the server serves.
func prepare(set demoset.Set, dir string) (layout, error) {
	d := layout{site: filepath.Join(dir, "site-packages"), mirror: filepath.Join(dir, "mirror")}
	d.lib = filepath.Join(d.site, "demo", "lib", "libdemo_cuda.so")
	pkg, err := set.Package()
	if err != nil {
		return d, err
	}
	runtime, err := set.Runtime()
	if err != nil {
		return d, err
	}
	cublas, err := set.Cublas()
	if err != nil {
		return d, err
	}
	for _, w := range []wheelwrite.Wheel{pkg, runtime, cublas} {
		if err := install(w, d.site); err != nil {
			return d, err
		}
	}
	// nvidia-cublas is installed, but its library is gone, as in an image
	// slimmed by deleting large files: pip still lists it.
	if err := os.Remove(filepath.Join(d.site, "nvidia", "cu13", "lib", "libcublas.so.13")); err != nil {
		return d, err
	}
	if d.catalog, err = redistwrite.Write(d.mirror, set.Archives()); err != nil {
		return d, err
	}
	return d, publish(cublas, d.mirror)
}

// install unpacks the wheel into site as pip does (its RECORD says what
// it installed) and marks who installed it.
func install(w wheelwrite.Wheel, site string) error {
	data, err := w.Build()
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	for _, f := range zr.File {
		if err := unpack(f, site); err != nil {
			return fmt.Errorf("install %s: %w", w.Filename(), err)
		}
	}
	return os.WriteFile(filepath.Join(site, w.DistInfo(), "INSTALLER"), []byte("cudadeps-demo\n"), 0o644)
}

func unpack(f *zip.File, site string) error {
	p := filepath.Join(site, filepath.FromSlash(f.Name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	r, err := f.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	body, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return os.WriteFile(p, body, f.Mode().Perm())
}

// publish puts the wheel on the mirror's PEP 503 simple index:
// simple/<project>/<wheel>, listed with its sha256 in that directory's
// index.html.
func publish(w wheelwrite.Wheel, mirror string) error {
	data, err := w.Build()
	if err != nil {
		return err
	}
	project := filepath.Join(mirror, "simple", w.Project)
	if err := os.MkdirAll(project, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(project, w.Filename()), data, 0o644); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	name := html.EscapeString(w.Filename())
	page := fmt.Sprintf("<!DOCTYPE html>\n<html><body>\n<a href=\"%s#sha256=%s\">%s</a><br>\n</body></html>\n", name, hex.EncodeToString(sum[:]), name)
	return os.WriteFile(filepath.Join(project, "index.html"), []byte(page), 0o644)
}

// server serves a directory on 127.0.0.1 until closed.
type server struct {
	URL string // ends in "/"
	l   net.Listener
}

func serve(dir string) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{URL: "http://" + l.Addr().String() + "/", l: l}
	go func() { _ = http.Serve(l, http.FileServer(http.Dir(dir))) }()
	return s, nil
}

func (s *server) Close() { s.l.Close() }
