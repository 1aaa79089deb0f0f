package catalog

import (
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/platform"
)

func TestChoose(t *testing.T) {
	c := loadDefault(t, LoadOptions{})
	comp, ok := c.Component("libcudss")
	if !ok {
		// Not an oracle: the test is about the built-in catalog's own data.
		t.Skip("the built-in catalog has no libcudss")
	}
	newest := comp.Releases[0]

	ch, err := c.Choose("libcudss", "", platform.LinuxX86_64, 13)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Release != newest || ch.Archive.Platform != platform.LinuxX86_64 || ch.Archive.CUDAMajor(ch.Release) != 13 {
		t.Errorf("Choose(libcudss, x86_64, 13) = %s %s %s", ch.Release.Version, ch.Archive.Platform, ch.Archive.CUDAVariant)
	}
	if !strings.HasSuffix(ch.URL, ch.Archive.RelativePath) {
		t.Errorf("URL %s does not end in %s", ch.URL, ch.Archive.RelativePath)
	}

	var majors []int
	for _, a := range newest.Archives {
		if a.Platform == platform.LinuxX86_64 && !slices.Contains(majors, a.CUDAMajor(newest)) {
			majors = append(majors, a.CUDAMajor(newest))
		}
	}
	slices.Sort(majors)
	_, err = c.Choose("libcudss", "", platform.LinuxX86_64, 0)
	nf := asNotFound(t, err)
	if len(majors) > 1 && !slices.Equal(nf.CUDAMajors, majors) {
		t.Errorf("ambiguous majors = %v, want %v (%s)", nf.CUDAMajors, majors, nf.Reason)
	}
	wantContains(t, nf.Reason, "ambiguous")

	nf = asNotFound(t, ignoreChoice(c.Choose("libcudss", "9.9", platform.LinuxX86_64, 13)))
	wantContains(t, nf.Reason, "has no release 9.9")
	wantContains(t, nf.Reason, newest.Version)

	nf = asNotFound(t, ignoreChoice(c.Choose("libcudss", "", platform.LinuxX86_64, 11)))
	wantContains(t, nf.Reason, "no archive for linux-x86_64 and CUDA 11")

	nf = asNotFound(t, ignoreChoice(c.Choose("no-such-thing", "", platform.LinuxX86_64, 0)))
	wantContains(t, nf.Reason, "no such component")
}

func ignoreChoice(_ Choice, err error) error { return err }

func TestArchiveFits(t *testing.T) {
	r := &Release{CUDA: 12}
	a := &Archive{Platform: platform.LinuxSBSA}
	for _, tc := range []struct {
		platform string
		cuda     int
		want     bool
	}{
		{"", 0, true}, {platform.LinuxSBSA, 12, true}, {platform.LinuxSBSA, 13, false}, {platform.LinuxX86_64, 0, false},
	} {
		if got := a.Fits(r, tc.platform, tc.cuda); got != tc.want {
			t.Errorf("Fits(%q, %d) = %v, want %v", tc.platform, tc.cuda, got, tc.want)
		}
	}
}
