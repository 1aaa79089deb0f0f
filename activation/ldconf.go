package activation

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/internal/atomicfile"
	"github.com/cudadeps/cudadeps/internal/regfile"
	"github.com/cudadeps/cudadeps/internal/rootfs"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/platform"
)

// For a target under a root (--root), library directories the objects
// search no entry of are activated the way that system's own packages
// activate theirs: an entry in its /etc/ld.so.conf.d lists them, as the
// system sees them, and its own ldconfig (run here, under qemu-user for
// another machine) writes them into its /etc/ld.so.cache. Every program of
// the system, and every container built from the tree, then finds them with
// no environment. ldconfig runs with -X: it rebuilds the cache and changes
// no link in the tree. Undo removes the entry and rebuilds the cache again.
//
// Running a root's ldconfig needs the privilege to chroot (ldconfig -r);
// without it, or without an ldconfig of the root that runs here, the
// directories go to the activation script instead, named as the system
// sees them, and the resolve says why.

// confName is the entry's file name in the root's /etc/ld.so.conf.d.
const confName = "cudadeps.conf"

// maxConf bounds what is read of an ld.so.conf or of the entry.
const maxConf = 1 << 20

// ldconfigTimeout bounds one run of a root's ldconfig: a tree of
// thousands of libraries takes seconds under qemu.
const ldconfigTimeout = 5 * time.Minute

// confFile is the entry of the root, as a path of this machine.
func confFile(root string) string {
	return filepath.Join(root, "etc", "ld.so.conf.d", confName)
}

// confProbe is what was found about activating through a root's
// ld.so.conf.d.
type confProbe struct {
	refused string // why it cannot be used; "" when it can
}

// probeConf finds out whether the system under root can activate
// directories through its ld.so.conf.d: its /etc/ld.so.conf includes the
// entry, the prefix lies in the root, the entry is not another's, and its
// ldconfig runs here with the privilege to chroot into it.
func probeConf(ctx context.Context, p *Prefix, root string) *confProbe {
	refuse := func(format string, a ...any) *confProbe {
		return &confProbe{refused: fmt.Sprintf(format, a...)}
	}
	if why := p.Unseen(); why != "" && p.root == root {
		return refuse("%s", why)
	}
	if !inside(p.dir, root) {
		return refuse("the prefix %s lies outside the root %s", p.dir, root)
	}
	if st, err := os.Stat(filepath.Dir(confFile(root))); err != nil || !st.IsDir() {
		return refuse("%s is no directory", filepath.Dir(confFile(root)))
	}
	if ok, err := includesConf(root); err != nil || !ok {
		if err != nil {
			return refuse("%v", err)
		}
		return refuse("%s does not include /etc/ld.so.conf.d/*.conf", filepath.Join(root, "etc", "ld.so.conf"))
	}
	if cur, err := regfile.Read(confFile(root), maxConf); err == nil && !p.ownsConf(cur, root) {
		return refuse("%s was not written for the prefix %s", confFile(root), p.dir)
	}
	lc, err := findLdconfig(root)
	if err != nil {
		return refuse("%v", err)
	}
	// -N -X: chroot and read the configuration, change nothing.
	if err := lc.run(ctx, "-N", "-X"); err != nil {
		return refuse("%v", err)
	}
	return &confProbe{}
}

// includesConf reports whether the root's /etc/ld.so.conf includes the
// entry (an include line whose pattern matches it).
func includesConf(root string) (bool, error) {
	data, err := rootfs.ReadFile(root, "/etc/ld.so.conf", maxConf)
	if regfile.Absent(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	want := "/etc/ld.so.conf.d/" + confName
	for _, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "include" {
			continue
		}
		for _, pat := range f[1:] {
			if !path.IsAbs(pat) {
				pat = path.Join("/etc", pat)
			}
			if ok, _ := path.Match(pat, want); ok {
				return true, nil
			}
		}
	}
	return false, nil
}

// confHeader starts the entry: who wrote it, for which prefix.
func (p *Prefix) confHeader(root string, names []string) string {
	return "# Written by cudadeps resolve for: " + strings.Join(names, ", ") + "; `cudadeps undo` removes it.\n" +
		"# prefix: " + seenAs(root, p.dir) + "\n"
}

// ownsConf reports whether an entry was written for this prefix.
func (p *Prefix) ownsConf(data []byte, root string) bool {
	return bytes.Contains(data, []byte("\n# prefix: "+seenAs(root, p.dir)+"\n"))
}

// pendingFile marks a rebuild of root's cache that has not finished: it
// is written before the entry changes and removed once ldconfig has run,
// so that a run killed in between is finished by the next one.
func (p *Prefix) pendingFile(root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(p.recordsDir(), "ld.so.cache-"+hex.EncodeToString(sum[:8])+".pending")
}

// writeLdConfs writes the ld.so.conf.d entry of every root the records
// name, of roots, of the prefix's own root and of any unfinished rebuild,
// from the records' ConfDirs, and rebuilds a root's cache when its entry
// changed: removed once no record names a directory.
func (p *Prefix) writeLdConfs(ctx context.Context, roots ...string) error {
	recs, err := p.Records()
	if err != nil {
		return err
	}
	all := append([]string{p.root}, roots...)
	for _, r := range recs {
		all = append(all, r.Root)
	}
	pending, _ := filepath.Glob(filepath.Join(p.recordsDir(), "ld.so.cache-*.pending"))
	for _, f := range pending {
		if data, err := regfile.Read(f, maxConf); err == nil {
			all = append(all, strings.TrimSpace(string(data)))
		}
	}
	done := map[string]bool{}
	for _, root := range all {
		if root == "" || done[root] {
			continue
		}
		done[root] = true
		var dirs, names []string
		for _, r := range recs {
			if r.Root != root || len(r.ConfDirs) == 0 {
				continue
			}
			names = append(names, r.Name)
			for _, d := range r.ConfDirs {
				dirs = uniq.Append(dirs, seenAs(root, d))
			}
		}
		if err := p.writeLdConf(ctx, root, dirs, names); err != nil {
			return err
		}
	}
	return nil
}

// writeLdConf makes the root's entry list dirs (none: no entry) and
// rebuilds its cache when that changed anything, or when an earlier
// rebuild did not finish.
func (p *Prefix) writeLdConf(ctx context.Context, root string, dirs, names []string) error {
	f := confFile(root)
	cur, err := regfile.Read(f, maxConf)
	exists := err == nil
	if err != nil && !regfile.Absent(err) {
		return fmt.Errorf("read %s: %w", f, err)
	}
	var want []byte
	if len(dirs) > 0 {
		want = []byte(p.confHeader(root, names) + strings.Join(dirs, "\n") + "\n")
	}
	marker := p.pendingFile(root)
	_, merr := os.Stat(marker)
	unfinished := merr == nil
	switch {
	case exists && !p.ownsConf(cur, root):
		if len(dirs) == 0 {
			return nil // another's entry: not ours to remove
		}
		return fmt.Errorf("%s was not written for the prefix %s: not overwritten", f, p.dir)
	case !unfinished && (exists && bytes.Equal(cur, want) || !exists && len(dirs) == 0):
		return nil
	}
	for _, d := range []string{filepath.Dir(marker), filepath.Dir(f)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := atomicfile.WriteFile(marker, []byte(root+"\n"), 0o644); err != nil {
		return err
	}
	if len(dirs) == 0 {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", f, err)
		}
	} else if err := atomicfile.WriteFile(f, want, 0o644); err != nil {
		return err
	}
	lc, err := findLdconfig(root)
	if err != nil {
		return fmt.Errorf("rebuild the ld.so.cache of %s: %w", root, err)
	}
	if err := lc.run(ctx, "-X"); err != nil {
		return fmt.Errorf("rebuild the ld.so.cache of %s: %w", root, err)
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ConfDirs returns, for the system under root, the directories the
// records list in its ld.so.conf.d entry, as that system sees them.
func (p *Prefix) ConfDirs(root string) ([]string, error) {
	recs, err := p.Records()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range recs {
		if r.Root == root {
			for _, d := range r.ConfDirs {
				out = uniq.Append(out, seenAs(root, d))
			}
		}
	}
	return out, nil
}

// ConfFile is the ld.so.conf.d entry activation writes for the system
// under root, as a path of this machine.
func ConfFile(root string) string { return confFile(root) }

// ldconfig is a root's own ldconfig and how this machine runs it.
type ldconfig struct {
	root string
	argv []string // the program, under qemu-user for another machine
}

// findLdconfig finds the root's ldconfig (Ubuntu's real one behind its
// wrapper script first), a static program of the root's machine, and the
// qemu-user emulator that runs it here when that machine is not this one.
func findLdconfig(root string) (*ldconfig, error) {
	r, err := rootfs.Open(root)
	if err != nil {
		return nil, err
	}
	var reasons []string
	for _, guest := range []string{"/sbin/ldconfig.real", "/sbin/ldconfig", "/usr/sbin/ldconfig"} {
		host, err := r.Resolve(guest)
		if err != nil {
			continue
		}
		in, err := elfscan.ReadInfo(host)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", guest, err))
			continue
		}
		if in.Interp != "" {
			reasons = append(reasons, guest+" is not statically linked")
			continue
		}
		if in.Machine == platform.HostMachine() {
			return &ldconfig{root: root, argv: []string{host}}, nil
		}
		name := platform.MachineName(in.Machine)
		for _, q := range []string{"qemu-" + name + "-static", "qemu-" + name} {
			if qp, err := exec.LookPath(q); err == nil {
				return &ldconfig{root: root, argv: []string{qp, host}}, nil
			}
		}
		return nil, fmt.Errorf("%s is a program for %s: running it here needs qemu-%s-static (Debian: qemu-user-static)", guest, in.Machine, cmp.Or(name, in.Machine.String()))
	}
	if len(reasons) > 0 {
		return nil, fmt.Errorf("no ldconfig of %s runs here: %s", root, strings.Join(reasons, "; "))
	}
	return nil, fmt.Errorf("%s has no ldconfig (/sbin/ldconfig, /usr/sbin/ldconfig)", root)
}

// run runs ldconfig on the root with args; -r ROOT makes it chroot there.
func (l *ldconfig) run(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, ldconfigTimeout)
	defer cancel()
	argv := append(append(slices.Clone(l.argv), args...), "-r", l.root)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 500 {
			msg = msg[:500] + "…"
		}
		if strings.Contains(msg, "chroot") {
			msg += " (ldconfig -r needs the privilege to chroot: run as root)"
		}
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, msg)
	}
	return nil
}
