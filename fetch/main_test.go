package fetch

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
)

// childEnv makes the test binary act as a cudadeps process instead of
// running tests, so that tests can kill it or give it its own environment.
const childEnv = "CUDADEPS_FETCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

// runChild downloads (mode "download") or installs (mode "install") the
// archive described by the CHILD_* variables.
func runChild(mode string) int {
	size, _ := strconv.ParseInt(os.Getenv("CHILD_SIZE"), 10, 64)
	req := Request{Name: "child", URL: os.Getenv("CHILD_URL"), SHA256: os.Getenv("CHILD_SHA256"), Size: size}
	c, err := NewClient(Options{
		CacheDir:  os.Getenv("CHILD_CACHE"),
		AllowHTTP: true,
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	switch mode {
	case "download":
		p, err := c.Download(ctx, req)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(p)
	case "install":
		s, err := OpenStore(os.Getenv("CHILD_STORE"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if _, err := s.Install(ctx, c, []Item{{Key: testKey(), Request: req}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 2
	}
	return 0
}

func testKey() Key {
	return Key{Component: "libcudss", Version: "0.8.0.10", Platform: "linux-sbsa", Variant: "cuda13"}
}
