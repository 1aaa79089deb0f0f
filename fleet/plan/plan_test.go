package plan

import (
	"strings"
	"testing"
)

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParse(t *testing.T) {
	good := `{"schema":"cudadeps.resolve/v1","target":{"kind":"dir","name":"x","path":"/x"},"platform":"linux-x86_64","cuda_major":13,
"rounds":[{"round":1,"missing":[{"soname":"libcudnn.so.9","owner":{"name":"libcudnn.so.9","distribution":"nvidia-cudnn-cu13","version":"9.19.0.56"}}],
 "plan":{"steps":[{"component":"cudnn","version":"9.19.0.56","platform":"linux-x86_64","cuda_variant":"cuda13","url":"https://x/a.tar.xz","sha256":"` + sha + `","size":10}]}},
 {"round":2,"plan":{"steps":[{"component":"cudnn","version":"9.19.0.56","platform":"linux-x86_64","url":"https://x/a.tar.xz","sha256":"` + sha + `","size":10},
  {"source":"pypi","project":"nvidia-nccl-cu13","filename":"nvidia_nccl_cu13-2.28.3-py3-none-manylinux_2_27_x86_64.whl","version":"2.28.3","url":"https://i/w.whl","sha256":"` + strings.Repeat("1", 64) + `","size":5}]}}],
"host":{"machine":"x86_64","glibc":"2.36"}}`
	p, err := Parse([]byte(good), "plan.json")
	if err != nil {
		t.Fatal(err)
	}
	steps := p.Steps()
	if len(steps) != 2 || steps[0].Wheel() || !steps[1].Wheel() || steps[1].String() != "nvidia-nccl-cu13 2.28.3 (nvidia_nccl_cu13-2.28.3-py3-none-manylinux_2_27_x86_64.whl)" ||
		steps[0].String() != "cudnn 9.19.0.56 (linux-x86_64, cuda13)" {
		t.Fatalf("steps: %+v", steps)
	}
	if o := p.Owners(); len(o) != 1 || o[0].Dist != "nvidia-cudnn-cu13" || o[0].Version != "9.19.0.56" {
		t.Fatalf("owners: %+v", o)
	}
	if p.Host == nil || p.Host.Glibc != "2.36" {
		t.Fatalf("host: %+v", p.Host)
	}
	bad := map[string]string{
		strings.Replace(good, `"schema":"cudadeps.resolve/v1"`, `"schema":"cudadeps.scan/v1"`, 1):     `plan.json: schema "cudadeps.scan/v1" is not a plan's`,
		strings.Replace(good, `"`+sha+`","size":10}]}}`, `"abc","size":10}]}}`, 1):                    `plan.json: round 1, step 1: sha256 "abc"`,
		strings.Replace(good, `"component":"cudnn"`, `"component":"../cudnn"`, 1):                     `component "../cudnn" is not a name`,
		strings.Replace(good, `"source":"pypi"`, `"source":"conda"`, 1):                               `round 2, step 2: source "conda" is neither`,
		strings.Replace(good, `"filename":"nvidia_nccl`, `"filename":"../nvidia_nccl`, 1):             `filename "../nvidia_nccl`,
		strings.Replace(good, `"size":5`, `"size":0`, 1):                                              `size 0`,
		strings.Replace(good, `"component":"cudnn"`, `"component":"`+strings.Repeat("c", 201)+`"`, 1): `is not a name`,
		`[1,2]`: `plan.json: not a plan`,
	}
	for text, want := range bad {
		if _, err := Parse([]byte(text), "plan.json"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}
