package doctor

import (
	"strings"
	"testing"
	"time"

	checkpkg "github.com/cudadeps/cudadeps/check"
	"github.com/cudadeps/cudadeps/resolver"
)

// TestCheckImportVerdicts: the import line for each outcome check gives,
// a passing import from cache naming when it really ran.
func TestCheckImportVerdicts(t *testing.T) {
	at := time.Date(2026, 11, 25, 17, 0, 0, 0, time.UTC)
	imp := func(i checkpkg.Import, cached bool) *checkpkg.Result {
		i.Command, i.At = "python -c import torch", at
		return &checkpkg.Result{OK: true, Import: &i, Cached: cached}
	}
	for _, tc := range []struct {
		r      *checkpkg.Result
		status Status
		want   string
	}{
		{imp(checkpkg.Import{OK: true}, false), OK, "python -c import torch succeeds"},
		{imp(checkpkg.Import{OK: true}, true), OK, "succeeded at 2026-11-25T17:00:00Z, and nothing it reads has changed since"},
		{imp(checkpkg.Import{TimedOut: true}, false), Fail, "did not finish in 2m0s"},
		{imp(checkpkg.Import{LastLine: "ImportError: libcudnn.so.9: cannot open shared object file"}, false), Fail, "fails: ImportError: libcudnn.so.9"},
	} {
		c := checkImport(tc.r)
		if c == nil || c.Status != tc.status || !strings.Contains(c.Evidence, tc.want) {
			t.Errorf("%+v: got %+v, want %s with %q", tc.r.Import, c, tc.status, tc.want)
		}
	}
	if c := checkImport(&checkpkg.Result{OK: true}); c != nil {
		t.Errorf("no import asked: %+v", c)
	}
}

// A target that does not load whole is answered with the commands that
// restore and list it, naming it as doctor was told to: under --root and
// with --python, the suggested commands carry them.
func TestCheckAnalysisAdviceNamesTheSameTarget(t *testing.T) {
	r := &checkpkg.Result{Target: "torch 2.11.0 (/srv/rootfs/usr/lib/python3/dist-packages)", Problems: []resolver.Problem{{}}}
	for flags, want := range map[string]string{
		"": "run 'cudadeps resolve torch' to restore what it declares (--dry-run to see the plan first); 'cudadeps check torch' lists every problem",
		"--root '/srv/my rootfs' --python /srv/py": "run 'cudadeps resolve torch --root '/srv/my rootfs' --python /srv/py' to restore what it declares (--dry-run to see the plan first); " +
			"'cudadeps check torch --root '/srv/my rootfs' --python /srv/py' lists every problem",
	} {
		c := checkAnalysis(r, nil, flags)
		if c == nil || c.Status != Fail || c.Advice != want {
			t.Errorf("flags %q: got %+v, want advice %q", flags, c, want)
		}
	}
}

// When every problem carries its own advice (what resolve will not do),
// doctor gives that advice instead of suggesting resolve; one problem
// without advice brings resolve back.
func TestCheckAnalysisOwnAdvice(t *testing.T) {
	pip := "install the required version: pip install 'nvidia-cudnn-cu13==9.19.0.56'"
	r := &checkpkg.Result{Target: "torch 2.11.0 (/venv/site-packages)", Problems: []resolver.Problem{
		{Kind: resolver.ProblemDist, Subject: "nvidia-cudnn-cu13", Detail: "other-version", Advice: pip},
	}}
	if c := checkAnalysis(r, nil, ""); c == nil || c.Status != Fail || c.Advice != pip {
		t.Errorf("own advice: %+v", c)
	}
	r.Problems = append(r.Problems, resolver.Problem{Kind: resolver.ProblemMissing, Subject: "libcufft.so.12", Detail: "needed by ..."})
	if c := checkAnalysis(r, nil, ""); c == nil || !strings.HasPrefix(c.Advice, "run 'cudadeps resolve torch'") {
		t.Errorf("mixed: %+v", c)
	}
}

// A target that loads whole with a library taken from elsewhere at exactly
// the required release passes, and the line names that copy rather than
// saying every library is found where the package expects it.
func TestCheckAnalysisNotes(t *testing.T) {
	note := "libnvJitLink.so.13: the loader takes /usr/local/cuda/lib64/libnvJitLink.so.13 (13.0.88) via ld_library_path; ...: the same release, no wrong copy"
	r := &checkpkg.Result{Target: "torch 2.11.0 (/venv/site-packages)", OK: true, Notes: []string{note}}
	c := checkAnalysis(r, nil, "")
	if c == nil || c.Status != OK || !strings.Contains(c.Evidence, note) || strings.Contains(c.Evidence, "where the package expects it") {
		t.Errorf("with a note: %+v", c)
	}
	r.Notes = nil
	if c := checkAnalysis(r, nil, ""); c == nil || c.Status != OK || !strings.Contains(c.Evidence, "where the package expects it") {
		t.Errorf("without: %+v", c)
	}
}
