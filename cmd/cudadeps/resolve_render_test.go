package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/resolver"
)

// TestRenderStillShadowed: a wrong copy that placement could not beat ends
// the loop with OK false; the text report names it and its remedy, so that
// "Not done" never stands without a reason.
func TestRenderStillShadowed(t *testing.T) {
	o := &resolver.Outcome{
		Target:  &resolver.Target{Kind: resolver.KindDir, Name: "app", Path: "/srv/app"},
		Rounds:  []*resolver.Round{{N: 1}},
		Stopped: resolver.StopNothingMissing,
		Unresolved: []resolver.Unresolved{
			{Soname: "libcusparse.so.12", Kind: resolver.UnresolvedShadowed, Reason: "libcusparse.so.12: the loader takes /opt/cuda/lib/libcusparse.so.12 (12.5.0) via ld_library_path",
				Advice: "put the owned copy's directory first on LD_LIBRARY_PATH"},
			{Soname: "libfoo.so.1", Kind: resolver.UnresolvedMissing, Reason: "no archive provides it"},
		},
	}
	var b bytes.Buffer
	renderResolve(&b, o, func(args ...string) string { return "cudadeps " + strings.Join(args, " ") })
	out := b.String()
	for _, want := range []string{"Still found first", "libcusparse.so.12: the loader takes /opt/cuda/lib/libcusparse.so.12 (12.5.0)", "put the owned copy's directory first", "Not done (nothing missing)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "libcusparse.so.12: libcusparse.so.12") {
		t.Errorf("the soname is named twice:\n%s", out)
	}
	if strings.Contains(out, "libfoo.so.1: no archive") {
		t.Errorf("a plain unresolved library is listed among the wrong copies:\n%s", out)
	}
}

// TestRenderRoundLimit: the loop stops at the round past the limit; the
// report counts the rounds that acted, from the typed reason.
func TestRenderRoundLimit(t *testing.T) {
	o := &resolver.Outcome{
		Target:  &resolver.Target{Kind: resolver.KindDir, Name: "app", Path: "/srv/app"},
		Rounds:  []*resolver.Round{{N: 1}, {N: 2}, {N: 3}},
		Stopped: resolver.StopRoundLimit,
	}
	var b bytes.Buffer
	renderResolve(&b, o, func(args ...string) string { return "cudadeps " + strings.Join(args, " ") })
	if want := "Not done (still missing libraries after 2 rounds)."; !strings.Contains(b.String(), want) {
		t.Errorf("the report lacks %q:\n%s", want, b.String())
	}
}
