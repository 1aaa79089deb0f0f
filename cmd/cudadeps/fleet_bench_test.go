package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/registrytest"
)

// BenchmarkFleetPullApply measures apply oci://... on N nodes at once
// (separate prefixes, stores and caches, each its own cudadeps process)
// against docker-registry with TLS and a login on 127.0.0.1: the plan's
// blobs pulled, verified, extracted into the store and placed. It reports
// the throughput of one node (the plan's bytes over the mean time a node
// took) and of the fleet (every node's bytes over the wall time).
// CUDADEPS_BENCH_FLEET_MIB sets the payload of the plan's larger archive
// (default 8; building it, xz-compressed in Go, takes a while). Run with
// -benchtime=1x: each round starts fresh nodes.
//
//	go test ./cmd/cudadeps -run '^$' -bench FleetPullApply -benchtime=1x
func BenchmarkFleetPullApply(b *testing.B) {
	mib := 8
	if v, err := strconv.Atoi(os.Getenv("CUDADEPS_BENCH_FLEET_MIB")); err == nil && v > 0 {
		mib = v
	}
	reg := registrytest.Start(b, registrytest.Options{})
	nv := fleetStandIn(b, mib<<20)
	admin := newFleetNode(b, reg, appTree(b))
	env := append(admin.env, "CUDADEPS_CATALOG="+nv.Catalog)
	r := runBinary(b, env, "", "resolve", admin.tree, "--dry-run", "--json", "--mirror", nv.URL, "--ld-library-path", "")
	if r.code != exitMissing {
		b.Fatalf("dry run: exit %d\n%s", r.code, r.stderr)
	}
	var ps planSteps
	if err := jsonUnmarshal(r.stdout, &ps); err != nil || len(ps.Rounds) == 0 {
		b.Fatalf("plan: %v", err)
	}
	var bytes int64
	for _, s := range ps.Rounds[0].Plan.Steps {
		bytes += s.Size
	}
	planFile := filepath.Join(b.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(r.stdout), 0o644); err != nil {
		b.Fatal(err)
	}
	ref := "oci://" + reg.Host + "/fleet/bench:v1"
	if r := runBinary(b, env, "", "mirror", "--plan", planFile, "--to", admin.ref("/fleet/bench:v1"), "--quiet", "--mirror", nv.URL); r.code != exitOK {
		b.Fatalf("push: exit %d\n%s", r.code, r.stderr)
	}
	login := reg.DockerConfig(b)
	for _, nodes := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			var perNode, wall time.Duration
			for range b.N {
				b.StopTimer()
				type node struct {
					tree, prefix string
					env          []string
				}
				fleet := make([]node, nodes)
				for i := range fleet {
					fleet[i] = node{tree: appTree(b), prefix: filepath.Join(b.TempDir(), "prefix"),
						env: nodeEnv(b, "SSL_CERT_FILE="+reg.CA.File, "DOCKER_CONFIG="+login)}
				}
				took := make([]time.Duration, nodes)
				var wg sync.WaitGroup
				b.StartTimer()
				start := time.Now()
				for i, n := range fleet {
					wg.Add(1)
					go func() {
						defer wg.Done()
						t0 := time.Now()
						r := runBinary(b, n.env, "", "apply", ref, n.tree, "--prefix", n.prefix, "--ld-library-path", "", "--quiet")
						took[i] = time.Since(t0)
						if r.code != exitOK {
							b.Errorf("node %d: exit %d\n%s", i, r.code, r.stderr)
						}
					}()
				}
				wg.Wait()
				wall += time.Since(start)
				for _, d := range took {
					perNode += d
				}
			}
			mean := perNode / time.Duration(b.N*nodes)
			b.ReportMetric(float64(bytes)/(1<<20)/mean.Seconds(), "MiB/s/node")
			b.ReportMetric(float64(bytes*int64(nodes))/(1<<20)/(wall.Seconds()/float64(b.N)), "MiB/s-fleet")
			b.ReportMetric(mean.Seconds(), "s/node")
		})
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
