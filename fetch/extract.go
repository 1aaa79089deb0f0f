package fetch

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/cudadeps/cudadeps/internal/humansize"
)

// Layouts of an extracted archive, recorded in Entry.Layout.
const (
	// LayoutRedist: a tar archive whose entries all sit in one top-level
	// directory (NVIDIA's NAME-archive/), stripped: Dir/lib/libfoo.so.1.
	LayoutRedist = "redist"
	// LayoutTree: a tar archive without a single top-level directory, kept
	// as it is.
	LayoutTree = "tree"
	// LayoutWheel: a .whl or .zip, kept as it is, which for a wheel is the
	// site-packages layout: Dir/nvidia/cu13/lib/libcublas.so.13.
	LayoutWheel = "wheel"
)

// extracted describes what an extraction wrote.
type extracted struct {
	root   string   // the component directory, relative to the extraction directory ("" or the stripped top directory)
	layout string   // one of the Layout constants
	files  []string // regular files, hard links and symlinks, relative to root, slash-separated, sorted
}

// decoder says how .xz streams are decompressed.
type decoder struct {
	xz string // path of the system xz program; "" means the pure-Go decoder
	// goSlots, when set, bounds the pure-Go decoders running at once: each
	// holds the archive's whole dictionary (8 MiB for xz -6) in this
	// process, while system xz runs in processes of its own.
	goSlots chan struct{}
}

func autoDecoder() decoder {
	p, err := exec.LookPath("xz")
	if err != nil {
		return decoder{}
	}
	return decoder{xz: p}
}

// Extract unpacks a verified .tar.xz, .tar.gz, .tar.zst, .tar, .whl or .zip
// into destDir, which must not exist or be an empty directory. The format
// comes from the file's first bytes. A tar archive whose entries share one
// top-level directory (NVIDIA's NAME-archive/, TensorRT's
// TensorRT-VERSION/) has it stripped, so that destDir/lib/... exists; a .whl
// or .zip keeps its layout.
//
// Entries that could write outside destDir are refused with an error naming
// the entry: absolute paths, ".." components, symbolic or hard links whose
// target leaves the component directory, paths through a link, devices and
// fifos, names with control characters. setuid, setgid and sticky bits are
// dropped; directories are 0755. lim bounds the bytes, entries, name bytes
// and expansion ratio; the free space is checked against what the archive
// declares (an .xz or zip index) before anything is written, and before each
// file. On error destDir is left as it was: the archive is unpacked beside it
// and renamed into place at the end.
//
// .xz is decoded by the system xz when it is on PATH, else in pure Go.
func Extract(ctx context.Context, archivePath, destDir string, lim Limits) error {
	return extractTo(ctx, archivePath, destDir, lim.withDefaults(), autoDecoder())
}

// Extract is the package's Extract with the client's limits and xz decoder.
func (c *Client) Extract(ctx context.Context, archivePath, destDir string) error {
	return extractTo(ctx, archivePath, destDir, c.lim, c.dec)
}

func extractTo(ctx context.Context, archivePath, destDir string, lim Limits, dec decoder) error {
	return intoNewDir(destDir, func(tmp string) (extracted, error) {
		return extractFile(ctx, archivePath, tmp, lim, dec, archivePath)
	})
}

// intoNewDir runs fill on an empty directory beside destDir (so that the
// final rename stays on one file system) and renames the component it
// extracted to destDir.
func intoNewDir(destDir string, fill func(dir string) (extracted, error)) error {
	dest, err := filepath.Abs(destDir)
	if err != nil {
		return fmt.Errorf("destination %s: %w", destDir, err)
	}
	empty, err := isEmptyDir(dest)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("destination %s: %w", dest, err)
	} else if exists && !empty {
		return fmt.Errorf("destination %s exists and is not empty", dest)
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("destination %s: %w", dest, err)
	}
	stage, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+".partial-")
	if err != nil {
		return fmt.Errorf("destination %s: %w", dest, err)
	}
	defer os.RemoveAll(stage)
	tree := filepath.Join(stage, "t")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return err
	}
	res, err := fill(tree)
	if err != nil {
		return err
	}
	if exists {
		// os.Rename will not replace a directory, even an empty one.
		if err := os.Remove(dest); err != nil {
			return fmt.Errorf("destination %s: %w", dest, err)
		}
	}
	if err := os.Rename(filepath.Join(tree, filepath.FromSlash(res.root)), dest); err != nil {
		return fmt.Errorf("move into place: %w", err)
	}
	return nil
}

func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

// format is an archive format, recognised by its first bytes.
type format int

const (
	formatUnknown format = iota
	formatXZ
	formatGzip
	formatTar
	formatZip
	formatZstd
)

func sniff(head []byte) format {
	switch {
	case bytes.HasPrefix(head, []byte{0xFD, '7', 'z', 'X', 'Z', 0}):
		return formatXZ
	case bytes.HasPrefix(head, []byte{0x1F, 0x8B}):
		return formatGzip
	case bytes.HasPrefix(head, []byte{0x28, 0xB5, 0x2F, 0xFD}):
		return formatZstd
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return formatZip
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return formatTar
	}
	return formatUnknown
}

// formatOfName guesses the format from a URL or file name, to decide before
// the first byte arrives whether the archive can be extracted as it streams.
func formatOfName(name string) format {
	name = strings.ToLower(name)
	if i := strings.IndexAny(name, "?#"); i >= 0 {
		name = name[:i]
	}
	switch {
	case strings.HasSuffix(name, ".tar.xz"), strings.HasSuffix(name, ".txz"):
		return formatXZ
	case strings.HasSuffix(name, ".tar.gz"), strings.HasSuffix(name, ".tgz"):
		return formatGzip
	case strings.HasSuffix(name, ".tar.zst"), strings.HasSuffix(name, ".tzst"):
		return formatZstd
	case strings.HasSuffix(name, ".tar"):
		return formatTar
	case strings.HasSuffix(name, ".whl"), strings.HasSuffix(name, ".zip"):
		return formatZip
	}
	return formatUnknown
}

// extractFile unpacks the archive at path into dir (existing, empty).
func extractFile(ctx context.Context, path, dir string, lim Limits, dec decoder, label string) (extracted, error) {
	f, err := os.Open(path)
	if err != nil {
		return extracted{}, fmt.Errorf("extract: %w", shortPathError(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return extracted{}, fmt.Errorf("extract %s: %w", clip(label), err)
	}
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return extracted{}, fmt.Errorf("extract %s: %w", clip(label), err)
	}
	if sniff(head[:n]) == formatZip {
		zr, err := zip.NewReader(f, fi.Size())
		if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
			return extracted{}, extractError(ctx, label, err)
		}
		t := newTree(dir, lim, false, fi.Size())
		if err := t.unzip(ctx, zr); err != nil {
			return extracted{}, extractError(ctx, label, err)
		}
		return t.result(), nil
	}
	declared := int64(-1)
	if d, ok := declaredSize(path); ok {
		declared = d
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return extracted{}, fmt.Errorf("extract %s: %w", clip(label), err)
	}
	return extractStream(ctx, f, dir, lim, dec, label, archiveSize{compressed: fi.Size(), declared: declared})
}

// archiveSize is what is known of an archive's size before it is read.
type archiveSize struct {
	compressed int64 // its bytes (0: unknown)
	declared   int64 // what its index says it unpacks to (-1: unknown)
}

// extractStream unpacks a tar stream (plain, .xz, .gz or .zst) from r into
// dir (existing, empty) as the bytes come. Closing r aborts a read in
// progress.
func extractStream(ctx context.Context, r io.ReadCloser, dir string, lim Limits, dec decoder, label string, size archiveSize) (extracted, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	head, _ := br.Peek(512)
	t := newTree(dir, lim, true, size.compressed)
	var err error
	if size.declared >= 0 {
		err = t.declare(size.declared)
	}
	switch f := sniff(head); {
	case err != nil:
	case f == formatXZ:
		if dec.xz != "" {
			err = runXZ(ctx, dec.xz, br, r, func(out io.Reader) error { return t.untar(ctx, out) })
		} else {
			err = dec.untarGoXZ(ctx, br, t)
		}
	case f == formatGzip:
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(br); err == nil {
			err = t.untar(ctx, bufio.NewReaderSize(zr, 256<<10))
		}
	case f == formatZstd:
		err = untarZstd(ctx, br, t)
	case f == formatTar:
		err = t.untar(ctx, br)
	case f == formatZip:
		err = errors.New("a zip archive can only be read once it is complete")
	default:
		err = errors.New("not a .tar.xz, .tar.gz, .tar.zst, .tar, .whl or .zip archive")
	}
	if err != nil {
		return extracted{}, extractError(ctx, label, err)
	}
	return t.result(), nil
}

// archiveFault is an extraction that failed because of the archive itself:
// an entry refused, a format broken. Another try with the same bytes
// fails the same way.
type archiveFault struct{ err error }

func (e *archiveFault) Error() string { return e.err.Error() }
func (e *archiveFault) Unwrap() error { return e.err }

// extractError names the archive in err, and marks it as the archive's
// fault unless it came from elsewhere: the context, a full file system,
// the source of the bytes, a decompressor stopped by a signal.
func extractError(ctx context.Context, label string, err error) error {
	err = fmt.Errorf("extract %s: %w", clip(label), err)
	var space *SpaceError
	var source *sourceError
	if ctx.Err() != nil || isNoSpace(err) || errors.As(err, &space) || errors.As(err, &source) || errors.Is(err, errDecoderStopped) {
		return err
	}
	return &archiveFault{err}
}

// zstdMaxWindow is the largest window a .zst stream may ask for: what the
// zstd program allows without --long (128 MiB). A hostile stream cannot
// make the decoder hold more.
const zstdMaxWindow = 128 << 20

// untarZstd decodes a .tar.zst in this process, on one goroutine.
func untarZstd(ctx context.Context, br *bufio.Reader, t *tree) error {
	zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdMaxWindow))
	if err != nil {
		return fmt.Errorf("zstd: %w", err)
	}
	defer zr.Close()
	if err := t.untar(ctx, bufio.NewReaderSize(zr, 256<<10)); err != nil {
		return err
	}
	// Read to the end, so that a damaged last frame is an error.
	return readTrailer(zr)
}

// maxTrailer bounds what may follow a tar archive's end marker (tar pads
// its output to 10 KiB records): a stream that goes on is refused rather
// than decoded for nothing.
const maxTrailer = 1 << 20

func readTrailer(r io.Reader) error {
	n, err := io.CopyN(io.Discard, r, maxTrailer+1)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("more than %d bytes after the end of the tar archive (%d read)", maxTrailer, n)
}

// shortPathError clips the paths an os error names.
func shortPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && len(pe.Path) > maxShown {
		return &fs.PathError{Op: pe.Op, Path: clip(pe.Path), Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) && (len(le.Old) > maxShown || len(le.New) > maxShown) {
		return &os.LinkError{Op: le.Op, Old: clip(le.Old), New: clip(le.New), Err: le.Err}
	}
	return err
}

// untarGoXZ decodes with the pure-Go decoder (always behind a bufio.Reader:
// it reads byte by byte) and turns a decoder panic on hostile input into an
// error.
func (d decoder) untarGoXZ(ctx context.Context, br *bufio.Reader, t *tree) (err error) {
	if d.goSlots != nil {
		select {
		case d.goSlots <- struct{}{}:
			defer func() { <-d.goSlots }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("xz decoder failed: %v", p)
		}
	}()
	xr, err := xz.NewReader(br)
	if err != nil {
		return fmt.Errorf("xz: %w", err)
	}
	return t.untar(ctx, bufio.NewReaderSize(xr, 256<<10))
}

// runXZ pipes in through the system xz and hands its output to fn. It
// returns only once xz and the goroutine feeding it have finished.
func runXZ(ctx context.Context, xzPath string, in io.Reader, inCloser io.Closer, fn func(io.Reader) error) error {
	// The memory limit refuses a stream that asks for a huge dictionary
	// (NVIDIA's archives need at most 64 MiB).
	cmd := exec.CommandContext(ctx, xzPath, "--decompress", "--stdout", "--memlimit-decompress=1GiB")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr := &headBuffer{max: 2048}
	cmd.Stderr = stderr
	// A process group of its own: Ctrl-C at a terminal signals the whole
	// foreground group, and xz dying of it before we notice the signal
	// would read as a broken archive. Cancelling ctx stops it instead.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", xzPath, err)
	}
	fed := make(chan error, 1)
	go func() {
		_, err := io.Copy(stdin, in)
		if cerr := stdin.Close(); err == nil {
			err = cerr
		}
		fed <- err
	}()
	out := bufio.NewReaderSize(stdout, 256<<10)
	err = fn(out)
	if err == nil {
		// Let xz finish: the tar end marker may precede padding.
		err = readTrailer(out)
	}
	killed := err != nil
	if killed {
		_ = cmd.Process.Kill()
		_ = inCloser.Close() // unblocks the feeder if it waits for input
	}
	ferr := <-fed
	werr := cmd.Wait()
	switch sig := signalOf(cmd.ProcessState); {
	case ctx.Err() != nil:
		return ctx.Err()
	case sig != 0 && !(killed && sig == syscall.SIGKILL):
		// Stopped by a signal we did not send (SIGTERM to the group, a
		// hangup): that says nothing about the archive.
		return fmt.Errorf("xz: %w (%v)", errDecoderStopped, sig)
	case werr != nil && stderr.Len() > 0:
		return fmt.Errorf("xz: %s", strings.TrimSpace(stderr.String()))
	case err != nil:
		return err
	case werr != nil:
		return fmt.Errorf("xz: %w", werr)
	case ferr != nil:
		return fmt.Errorf("xz input: %w", ferr)
	}
	return nil
}

// errDecoderStopped marks a decompressor stopped from outside, by a signal
// we did not send: the bytes it read were not refused.
var errDecoderStopped = errors.New("stopped by a signal")

// signalOf is the signal that ended a process, 0 when it exited.
func signalOf(ps *os.ProcessState) syscall.Signal {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	bytes.Buffer
	max int
}

func (b *headBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Entry kinds a tree writes.
const (
	kindDir  = 'd'
	kindFile = 'f'
	kindLink = 'l' // symbolic link
	kindHard = 'h' // hard link (recorded as kindFile once written)
)

// archiveEntry is one member of a tar or zip archive.
type archiveEntry struct {
	name string // as in the archive, for messages
	kind byte
	perm fs.FileMode
	size int64
	link string // symlink target, or hard link target path
}

// tree writes archive entries under dir and enforces the safety rules.
// Every path is checked against what this tree wrote itself, so no entry is
// ever written through a link: the directory starts empty and nothing else
// writes into it.
type tree struct {
	dir string
	lim Limits
	// strict (tar) confines links to their entry's top-level directory,
	// which becomes the component directory when it turns out to be the
	// only one.
	strict bool
	kinds  map[string]byte // slash path → kind written
	bytes  int64
	count  int
	names  int64 // bytes of names, link targets and directories made
	cap    int64 // the bytes of files this archive may write
	// compressed is the archive's size (0: unknown), for the ratio bound.
	compressed int64
	room       room
	top        string // the top-level directory all entries shared so far
	mixed      bool   // entries do not share one top-level directory
	files      []string
	buf        []byte
}

// newTree writes into dir an archive of compressed bytes (0: unknown).
func newTree(dir string, lim Limits, strict bool, compressed int64) *tree {
	return &tree{dir: dir, lim: lim, strict: strict, kinds: map[string]byte{},
		cap: lim.byteCap(compressed), compressed: compressed, room: room{dir: dir}}
}

// declare checks what an archive says it unpacks to (its index or central
// directory) before anything is written: against the bounds, and against the
// free space.
func (t *tree) declare(size int64) error {
	if size > t.cap {
		return t.lim.capError(size, t.compressed)
	}
	if ok, free := t.room.take(size); !ok {
		return &SpaceError{Dir: t.dir, What: "the archive unpacks to", Need: size, Free: free}
	}
	t.room.free += blockSize(size) // each file is counted as it is written

	return nil
}

func (t *tree) untar(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return fmt.Errorf("read tar: %w", err)
		}
		e := archiveEntry{name: hdr.Name, perm: fs.FileMode(hdr.Mode).Perm(), size: hdr.Size, link: hdr.Linkname}
		switch hdr.Typeflag {
		case tar.TypeReg:
			e.kind = kindFile
		case tar.TypeDir:
			e.kind = kindDir
		case tar.TypeSymlink:
			e.kind = kindLink
		case tar.TypeLink:
			e.kind = kindHard
		case tar.TypeXGlobalHeader:
			continue
		case tar.TypeChar:
			return fmt.Errorf("entry %s: character devices are refused", quote(hdr.Name))
		case tar.TypeBlock:
			return fmt.Errorf("entry %s: block devices are refused", quote(hdr.Name))
		case tar.TypeFifo:
			return fmt.Errorf("entry %s: fifos are refused", quote(hdr.Name))
		default:
			return fmt.Errorf("entry %s: unsupported tar entry type %q", quote(hdr.Name), hdr.Typeflag)
		}
		if err := t.add(e, tr); err != nil {
			return err
		}
	}
}

func (t *tree) unzip(ctx context.Context, zr *zip.Reader) error {
	// The central directory declares every size up front: refuse a bomb
	// before writing anything. The writes are bounded again as they happen,
	// since declarations can lie.
	if len(zr.File) > t.lim.MaxEntries {
		return fmt.Errorf("%d entries: more than the limit of %d entries", len(zr.File), t.lim.MaxEntries)
	}
	var names int64
	for _, f := range zr.File {
		if names += int64(len(f.Name)); names > t.lim.MaxNameBytes {
			return t.namesError()
		}
	}
	total, _ := zipDeclaredSize(zr)
	if err := t.declare(total); err != nil {
		return err
	}
	for _, f := range zr.File {
		if err := ctx.Err(); err != nil {
			return err
		}
		mode := f.Mode()
		e := archiveEntry{name: f.Name, perm: mode.Perm(), size: int64(f.UncompressedSize64)}
		switch {
		case mode.IsDir():
			e.kind = kindDir
		case mode&fs.ModeSymlink != 0:
			return fmt.Errorf("entry %s: symbolic links in zip archives are refused", quote(f.Name))
		case mode.Type() != 0:
			return fmt.Errorf("entry %s: special files (%s) are refused", quote(f.Name), mode.Type())
		default:
			e.kind = kindFile
		}
		if err := t.addZip(f, e); err != nil {
			return err
		}
	}
	return nil
}

func (t *tree) addZip(f *zip.File, e archiveEntry) error {
	if e.kind != kindFile {
		return t.add(e, nil)
	}
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("entry %s: %w", quote(f.Name), err)
	}
	defer rc.Close()
	return t.add(e, rc)
}

func (t *tree) namesError() error {
	return fmt.Errorf("the archive's names take more than the limit of %d bytes", t.lim.MaxNameBytes)
}

// add writes one entry; body holds a regular file's bytes.
func (t *tree) add(e archiveEntry, body io.Reader) error {
	t.count++
	if t.count > t.lim.MaxEntries {
		return fmt.Errorf("more than the limit of %d entries", t.lim.MaxEntries)
	}
	if len(e.link) > maxNameLen {
		return fmt.Errorf("entry %s: link target longer than %d bytes", quote(e.name), maxNameLen)
	}
	t.names += int64(len(e.name) + len(e.link))
	if t.names > t.lim.MaxNameBytes {
		return t.namesError()
	}
	parts, err := splitName(e.name)
	if err != nil {
		return fmt.Errorf("entry %s: %w", quote(e.name), err)
	}
	if len(parts) == 0 {
		if e.kind == kindDir {
			return nil // "./"
		}
		return fmt.Errorf("entry %s: empty path", quote(e.name))
	}
	t.noteTop(parts, e.kind)
	if err := t.makeParents(parts); err != nil {
		return fmt.Errorf("entry %s: %w", quote(e.name), shortPathError(err))
	}
	rel := strings.Join(parts, "/")
	full := filepath.Join(t.dir, filepath.FromSlash(rel))
	if e.kind == kindDir {
		switch t.kinds[rel] {
		case 0:
			if err := os.Mkdir(full, 0o755); err != nil {
				return fmt.Errorf("entry %s: %w", quote(e.name), shortPathError(err))
			}
			t.kinds[rel] = kindDir
		case kindDir:
		default:
			return fmt.Errorf("entry %s: a directory where an earlier entry is a file or link", quote(e.name))
		}
		return nil
	}
	if _, dup := t.kinds[rel]; dup {
		return fmt.Errorf("entry %s: duplicate path", quote(e.name))
	}
	switch e.kind {
	case kindFile:
		err = t.writeFile(full, e, body)
	case kindLink:
		if err = t.checkSymlink(parts, e.link); err == nil {
			err = os.Symlink(e.link, full)
		}
	case kindHard:
		var target string
		if target, err = t.checkHardLink(parts, e.link); err == nil {
			err = os.Link(filepath.Join(t.dir, filepath.FromSlash(target)), full)
		}
	}
	if err != nil {
		return fmt.Errorf("entry %s: %w", quote(e.name), shortPathError(err))
	}
	if e.kind == kindLink {
		t.kinds[rel] = kindLink
	} else {
		t.kinds[rel] = kindFile
	}
	t.files = append(t.files, rel)
	return nil
}

// splitName turns an archive path into its components, refusing anything
// that is not a plain relative path.
func splitName(name string) ([]string, error) {
	c, ctl := controlChar(name)
	switch {
	case len(name) > maxNameLen:
		return nil, fmt.Errorf("path longer than %d bytes", maxNameLen)
	case c == 0 && ctl:
		return nil, errors.New("NUL byte in path")
	case ctl:
		return nil, fmt.Errorf("control character %#02x in path", c)
	case strings.HasPrefix(name, "/"):
		return nil, errors.New("absolute path")
	case strings.ContainsRune(name, '\\'):
		return nil, errors.New(`backslash in path`)
	}
	var parts []string
	for _, p := range strings.Split(name, "/") {
		switch p {
		case "", ".":
		case "..":
			return nil, errors.New(`".." in path`)
		default:
			parts = append(parts, p)
		}
	}
	return parts, nil
}

func (t *tree) noteTop(parts []string, kind byte) {
	switch {
	case t.mixed:
	case len(parts) == 1 && kind != kindDir:
		t.mixed = true
	case t.top == "":
		t.top = parts[0]
	case t.top != parts[0]:
		t.mixed = true
	}
}

// makeParents creates the directories above an entry. Each must be a
// directory this tree made, never a link or a file.
func (t *tree) makeParents(parts []string) error {
	for i := 1; i < len(parts); i++ {
		p := strings.Join(parts[:i], "/")
		switch t.kinds[p] {
		case kindDir:
		case 0:
			// Each directory is a key of kinds: deep names whose
			// directories all differ cost their depth times their length.
			if t.names += int64(len(p)); t.names > t.lim.MaxNameBytes {
				return t.namesError()
			}
			if err := os.Mkdir(filepath.Join(t.dir, filepath.FromSlash(p)), 0o755); err != nil {
				return err
			}
			t.kinds[p] = kindDir
		case kindLink:
			return fmt.Errorf("path goes through the symbolic link %s", quote(p))
		default:
			return fmt.Errorf("path goes through the file %s", quote(p))
		}
	}
	return nil
}

// ceiling is how many directories a link at parts may climb: up to the
// archive root, or in strict mode up to its top-level directory.
func (t *tree) ceiling(parts []string) int {
	depth := len(parts) - 1
	if t.strict && depth > 0 {
		depth--
	}
	return depth
}

// checkSymlink accepts a relative target that climbs with leading ".." no
// higher than the component directory and then only descends. A ".." after
// a name is refused: through another link it would climb from somewhere
// else than it seems.
func (t *tree) checkSymlink(parts []string, target string) error {
	switch {
	case target == "":
		return errors.New("symbolic link with an empty target")
	case strings.ContainsRune(target, 0):
		return errors.New("NUL byte in link target")
	case func() bool { _, ctl := controlChar(target); return ctl }():
		return errors.New("control character in link target")
	case strings.HasPrefix(target, "/"):
		return fmt.Errorf("symbolic link to the absolute path %s leaves the component directory", quote(target))
	}
	up, named := 0, false
	for _, p := range strings.Split(target, "/") {
		switch p {
		case "", ".":
		case "..":
			if named {
				return fmt.Errorf("symbolic link target %s has \"..\" after a name", quote(target))
			}
			up++
		default:
			named = true
		}
	}
	if up > t.ceiling(parts) {
		return fmt.Errorf("symbolic link to %s leaves the component directory", quote(target))
	}
	return nil
}

// checkHardLink accepts a link to a regular file written earlier in the
// same component directory and returns the target's path.
func (t *tree) checkHardLink(parts []string, target string) (string, error) {
	tparts, err := splitName(target)
	if err != nil {
		return "", fmt.Errorf("hard link target %s: %w", quote(target), err)
	}
	if len(tparts) == 0 {
		return "", errors.New("hard link with an empty target")
	}
	if t.strict && len(parts) > 1 && (len(tparts) == 1 || tparts[0] != parts[0]) {
		return "", fmt.Errorf("hard link to %s leaves the component directory", quote(target))
	}
	rel := strings.Join(tparts, "/")
	if t.kinds[rel] != kindFile {
		return "", fmt.Errorf("hard link to %s, which is not a regular file extracted before it", quote(target))
	}
	return rel, nil
}

// openNoFollow makes creating a file fail rather than follow a link.
const openNoFollow = syscall.O_NOFOLLOW

// writeOnly hides os.File's ReadFrom so that io.CopyBuffer uses our buffer.
type writeOnly struct{ io.Writer }

func (t *tree) writeFile(full string, e archiveEntry, body io.Reader) error {
	if e.size < 0 {
		return fmt.Errorf("negative size %d", e.size)
	}
	if e.size > t.cap-t.bytes {
		return t.lim.capError(-1, t.compressed)
	}
	if ok, free := t.room.take(e.size); !ok {
		return &SpaceError{Dir: t.dir, What: fmt.Sprintf("after %s written, the next file needs", humansize.Bytes(t.bytes)), Need: e.size, Free: free}
	}
	// Perm drops setuid, setgid and sticky; the owner may always read and
	// write what cudadeps installed.
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL|openNoFollow, e.perm|0o600)
	if err != nil {
		return err
	}
	if t.buf == nil {
		t.buf = make([]byte, 256<<10)
	}
	n, err := io.CopyBuffer(writeOnly{f}, io.LimitReader(body, e.size), t.buf)
	if err == nil && n < e.size {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		// The entry must end where its header said; reading to the end also
		// makes archive/zip check the CRC.
		var one [1]byte
		if m, rerr := body.Read(one[:]); m > 0 {
			err = fmt.Errorf("more data than the declared %d bytes", e.size)
		} else if rerr != nil && rerr != io.EOF {
			err = rerr
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if isNoSpace(err) {
		free, _ := freeSpace(t.dir)
		return &SpaceError{Dir: t.dir, What: fmt.Sprintf("after %s written, the next file needs", humansize.Bytes(t.bytes)), Need: e.size, Free: free}
	}
	if err != nil {
		return err
	}
	t.bytes += e.size
	return nil
}

func (t *tree) result() extracted {
	res := extracted{layout: LayoutWheel, files: t.files}
	if t.strict {
		res.layout = LayoutTree
		if !t.mixed && t.top != "" {
			res.root = t.top
			res.layout = LayoutRedist
			prefix := t.top + "/"
			for i, f := range res.files {
				res.files[i] = strings.TrimPrefix(f, prefix)
			}
		}
	}
	slices.Sort(res.files)
	return res
}
