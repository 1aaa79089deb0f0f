package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/platform"
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
	renderResolve(&b, o, func(args ...string) string { return "cudadeps " + strings.Join(args, " ") }, nil)
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

// TestRenderStillShadowedSharedAdvice: wrong copies with the same remedy
// (a cuDNN's sub-libraries on LD_LIBRARY_PATH) are listed together, the
// remedy once after them; another remedy keeps its own line.
func TestRenderStillShadowedSharedAdvice(t *testing.T) {
	llp := "remove /usr/lib/x86_64-linux-gnu from LD_LIBRARY_PATH; in this shell: unset LD_LIBRARY_PATH"
	var list []resolver.Unresolved
	for _, n := range []string{"libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9"} {
		list = append(list, resolver.Unresolved{Soname: n, Kind: resolver.UnresolvedShadowed, Reason: n + ": the loader takes /usr/lib/x86_64-linux-gnu/" + n + " (9.14.0) via ld_library_path", Advice: llp})
	}
	list = append(list, resolver.Unresolved{Soname: "libcusparse.so.12", Kind: resolver.UnresolvedShadowed, Reason: "libcusparse.so.12: the loader takes /opt/cuda/lib/libcusparse.so.12 (12.5.0) via rpath", Advice: "remove or rename it"})
	var b bytes.Buffer
	renderStillShadowed(&b, list)
	out := b.String()
	if n := strings.Count(out, llp); n != 1 {
		t.Errorf("the shared remedy is given %d times:\n%s", n, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 || !strings.Contains(lines[3], "libcudnn_cnn.so.9") || !strings.Contains(lines[4], llp) || !strings.Contains(lines[6], "remove or rename it") {
		t.Errorf("grouped wrongly:\n%s", out)
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
	renderResolve(&b, o, func(args ...string) string { return "cudadeps " + strings.Join(args, " ") }, nil)
	if want := "Not done (still missing libraries after 2 rounds)."; !strings.Contains(b.String(), want) {
		t.Errorf("the report lacks %q:\n%s", want, b.String())
	}
}

// TestRenderHostAndJetPack: the report names the host with its evidence,
// what --platform overrode, and the libraries taken from JetPack with
// their paths; the confirmation's plan header names the host too.
func TestRenderHostAndJetPack(t *testing.T) {
	h := &platform.Host{Kind: platform.KindJetsonOrin, Name: "Jetson Orin (Tegra234)", L4T: "R36.4.7",
		Evidence: []platform.Evidence{{Source: platform.TegraReleaseFile, Says: "R36 (release), REVISION: 4.7", Found: true}, {Source: platform.CompatibleFile, Says: "nvidia,p3767-0005 nvidia,tegra234", Found: true}}}
	plan := &resolver.Plan{Host: h.Brief(), Platform: platform.LinuxAarch64, CUDAMajor: 12,
		JetPack: []resolver.JetPackLib{{Soname: "libcublas.so.12", Path: "/usr/local/cuda/lib64/libcublas.so.12", Dir: "/usr/local/cuda/lib64", JetPack: "JetPack 6 (L4T R36.4.7)"}}}
	o := &resolver.Outcome{
		Target: &resolver.Target{Kind: resolver.KindDir, Name: "app", Path: "/srv/app"}, Host: h, Platform: platform.LinuxAarch64, CUDAMajor: 12,
		PlatformOverride: "--platform linux-aarch64 instead of linux-sbsa (Jetson Thor)",
		Rounds:           []*resolver.Round{{N: 1, Missing: []*resolver.Need{{Soname: "libcublas.so.12"}}, Plan: plan}},
		Stopped:          "dry run", DryRun: true,
	}
	var b bytes.Buffer
	renderResolve(&b, o, func(args ...string) string { return "cudadeps " + strings.Join(args, " ") }, nil)
	for _, want := range []string{
		"host: Jetson Orin (Tegra234): /etc/nv_tegra_release L4T R36.4.7; /proc/device-tree/compatible nvidia,tegra234\n",
		"platform: --platform linux-aarch64 instead of linux-sbsa (Jetson Thor)\n",
		"  libcublas.so.12: taken from JetPack 6 (L4T R36.4.7), /usr/local/cuda/lib64/libcublas.so.12\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
	prefix, err := activation.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	renderPlan(&b, o.Rounds[0], prefix)
	if want := "Plan (linux-aarch64, CUDA 12) for Jetson Orin (Tegra234): /etc/nv_tegra_release L4T R36.4.7;"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("plan header:\n%s\nwant it to start with %q", b.String(), want)
	}
}

// TestRenderLeftToPip: a distribution at another version that no plan
// named is listed with its requirement and the pip command, and a dry run
// that plans nothing does not invite the user to apply a plan.
func TestRenderLeftToPip(t *testing.T) {
	reason := "9.14.0 is installed; torch 2.11.0 requires nvidia-cudnn-cu13==9.19.0.56"
	advice := "install the required version: pip install 'nvidia-cudnn-cu13==9.19.0.56'"
	o := &resolver.Outcome{
		Target:     &resolver.Target{Kind: resolver.KindDir, Name: "torch", Path: "/venv/site-packages/torch"},
		Rounds:     []*resolver.Round{{N: 1}},
		DryRun:     true,
		Stopped:    resolver.StopDryRun,
		Unresolved: []resolver.Unresolved{{Soname: "nvidia-cudnn-cu13", Kind: resolver.UnresolvedDistribution, Reason: reason, Advice: advice}},
	}
	var b bytes.Buffer
	renderResolve(&b, o, func(args ...string) string { return "cudadeps " + strings.Join(args, " ") }, nil)
	out := b.String()
	for _, want := range []string{"Not made whole by cudadeps", "nvidia-cudnn-cu13: " + reason, advice, "there is nothing cudadeps would change"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "apply the plan") {
		t.Errorf("a dry run that plans nothing invites applying a plan:\n%s", out)
	}
}

// TestRenderDistributionsLeft: a real resolve after which everything loads
// but a declared distribution is left damaged ends "Not done", saying why.
func TestRenderDistributionsLeft(t *testing.T) {
	o := &resolver.Outcome{
		Target:  &resolver.Target{Kind: resolver.KindDir, Name: "torch", Path: "/venv/site-packages/torch"},
		Rounds:  []*resolver.Round{{N: 1}, {N: 2}},
		Stopped: resolver.StopNothingMissing,
		Unresolved: []resolver.Unresolved{{Soname: "nvidia-cuda-runtime", Kind: resolver.UnresolvedDistribution,
			Reason: "nvidia-cuda-runtime 13.0.96 is damaged: 1 of its files missing or changed that cudadeps does not bring back (cuda_fp16.h)",
			Advice: "reinstall it: pip install --force-reinstall --no-deps 'nvidia-cuda-runtime==13.0.96'"}},
	}
	var b bytes.Buffer
	renderResolve(&b, o, func(args ...string) string { return "cudadeps " + strings.Join(args, " ") }, nil)
	if want := "Not done: the loader finds everything, but the declared distributions listed above are not as the package requires."; !strings.Contains(b.String(), want) {
		t.Errorf("the report lacks %q:\n%s", want, b.String())
	}
}
