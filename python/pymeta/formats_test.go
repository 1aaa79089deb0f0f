package pymeta

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestParseMetadata(t *testing.T) {
	text := "Metadata-Version: 2.1\nName: Demo_Pkg\nVersion: 1.0\nSummary: a long\n  folded summary\n" +
		"Requires-Dist: a[x]>=1; extra == 'Extra_One'\nRequires-Dist: not a requirement ==\nProvides-Extra: extra-one\n\n" +
		"Requires-Dist: in-the-body\n"
	m, err := ParseMetadata(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "Demo_Pkg" || m.Version != "1.0" || len(m.RequiresDist) != 1 || m.RequiresDist[0].Name != "a" ||
		len(m.Problems) != 1 || len(m.ProvidesExtra) != 1 {
		t.Fatalf("%+v", m)
	}
	for _, bad := range []string{"Version: 1\n", " continuation\n", "no colon here\n"} {
		if _, err := ParseMetadata(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// Header names in any ASCII case, with CRLF line ends; a name that only
	// Unicode folding would match is another header.
	m, err = ParseMetadata(strings.NewReader("NAME: Demo\r\nversion: 2\r\nREQUIRES-DIST: b\r\nRequires-Di\u017ft: c\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "Demo" || m.Version != "2" || len(m.RequiresDist) != 1 || m.RequiresDist[0].Name != "b" {
		t.Errorf("%+v", m)
	}
	huge := "Name: x\nSummary: " + strings.Repeat("y", MaxMetadataSize) + "\n"
	if _, err := ParseMetadata(strings.NewReader(huge)); err == nil {
		t.Error("oversized METADATA accepted")
	}
}

// A License header that carries a whole license as continuation lines
// (numpy's and scipy's run to thousands) is read in memory linear in its
// size: appending each line to the value so far copied it again, 1.6 GB
// over one environment's distributions. A folded Requires-Dist is still
// read whole.
func TestParseMetadataLongFoldedHeader(t *testing.T) {
	var b strings.Builder
	b.WriteString("Name: numpy\nVersion: 2.3.0\nLicense: Copyright (c) 2005-2025, NumPy Developers.\n")
	for range 20000 {
		b.WriteString("        Redistribution and use in source and binary forms, with or without modification.\n")
	}
	b.WriteString("Requires-Dist: cupy-cuda13x>=14;\n extra == 'gpu'\nProvides-Extra: gpu\n\nbody\n")
	text := b.String()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := ParseMetadata(strings.NewReader(text))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "numpy" || len(m.RequiresDist) != 1 || m.RequiresDist[0].Name != "cupy-cuda13x" || m.RequiresDist[0].Marker == nil || len(m.ProvidesExtra) != 1 {
		t.Fatalf("%+v", m)
	}
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(4*len(text)); got > limit {
		t.Errorf("parsing %d bytes of METADATA allocated %d bytes (more than %d)", len(text), got, limit)
	}
}

func TestParseRecord(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	text := fmt.Sprintf("pkg/a.py,sha256=%s,1\n\"pkg/with,comma.py\",,\npkg-1.0.dist-info/RECORD,,\n", base64.RawURLEncoding.EncodeToString(sum[:]))
	rec, err := ParseRecord(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 3 || string(rec[0].Hash) != string(sum[:]) || rec[0].Size != 1 || rec[1].Path != "pkg/with,comma.py" || rec[1].Size != -1 {
		t.Fatalf("%+v", rec)
	}
	for _, bad := range []string{"a,sha256,1\n", "a,sha256=!!,1\n", "a,,-3\n", "a,,x\n", "\"a,,\n"} {
		if _, err := ParseRecord(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	huge := strings.Repeat("pkg/some/long/path/name.py,,\n", 1000)
	if _, err := parseRecord(strings.NewReader(huge), 4096); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Errorf("oversized RECORD: %v", err)
	}
}

func meta(t *testing.T, name, version string, reqs ...string) *Metadata {
	t.Helper()
	m := &Metadata{Name: name, Version: version}
	for _, r := range reqs {
		req, err := ParseRequirement(r)
		if err != nil {
			t.Fatal(err)
		}
		m.RequiresDist = append(m.RequiresDist, req)
	}
	return m
}

func TestResolveExtrasAndCycles(t *testing.T) {
	installed := map[string]*Metadata{
		"app":     meta(t, "App", "1.0", "kit[Fast]==2.0; sys_platform == 'linux'", "lib>=2", "missing==1"),
		"kit":     meta(t, "kit", "2.0", "fastlib==3.*; extra == 'fast'", "slowlib; extra == 'slow'", "app"),
		"fastlib": meta(t, "fastlib", "3.1"),
		"lib":     meta(t, "lib", "1.5", "kit[slow]"),
		"slowlib": meta(t, "slowlib", "0.1rc1"),
	}
	env := Environment{"sys_platform": "linux"}
	r, err := Resolve(installed, "app", env)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range r.Dependencies {
		got = append(got, fmt.Sprintf("%s:%v", d.Name, d.Satisfied))
	}
	// lib 1.5 fails >=2; missing is not installed; slowlib comes in
	// through lib's kit[slow], its pre-release accepted as installed.
	if strings.Join(got, " ") != "fastlib:true kit:true lib:false missing:false slowlib:true" {
		t.Fatalf("%v", got)
	}
	fl := r.Find("FastLib")
	if fl.RequiredBy[0].Extra != "fast" || strings.Join(fl.RequiredBy[0].Chain, ">") != "app>kit" {
		t.Fatalf("%+v", fl.RequiredBy[0])
	}
	if _, err := Resolve(installed, "nosuch", env); err == nil {
		t.Fatal("resolved what is not installed")
	}
	// Without sys_platform the marker is unknown and taken to hold.
	r, _ = Resolve(installed, "app", Environment{})
	if k := r.Find("kit"); k == nil || k.RequiredBy[0].MarkerKnown {
		t.Fatalf("%+v", k)
	}
}
