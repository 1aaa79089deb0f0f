package fetch

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func zstdBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// liar206 answers a Range request with the right status and Content-Range
// and the wrong bytes. With hold, it sends the rest only once the client
// gave up (or after 10 s), so that an extractor that checks as it decodes
// (xz, zstd) meets them before the download can end and be verified; gzip
// checks at its end, and there verification comes first.
func liar206(hold bool) func(w http.ResponseWriter, r *http.Request, data []byte) {
	return func(w http.ResponseWriter, r *http.Request, data []byte) { lie206(w, r, data, hold) }
}

func lie206(w http.ResponseWriter, r *http.Request, data []byte, hold bool) {
	var start int
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &start); err != nil {
		http.Error(w, "want a range", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
	w.Header().Set("Content-Length", strconv.Itoa(len(data)-start))
	w.WriteHeader(http.StatusPartialContent)
	junk := bytes.Repeat([]byte{0x5a}, len(data)-start)
	w.Write(junk[:64<<10])
	w.(http.Flusher).Flush()
	if !hold {
		w.Write(junk[64<<10:])
		return
	}
	select {
	case <-r.Context().Done():
		return
	case <-time.After(10 * time.Second):
	}
	w.Write(junk[64<<10:])
}

// A download that breaks and resumes with a 206 of the right range and the
// wrong bytes, while the archive is extracted as it streams: the extractor
// refuses the bytes before they can be verified, and the install starts over
// from byte 0 once instead of failing on a corrupt stream.
func TestInstallLying206StartsOver(t *testing.T) {
	tarball := tarBytes(t, redistMembers(400_000))
	cases := map[string][]byte{"a.tar.gz": gzBytes(t, tarball), "a.tar.zst": zstdBytes(t, tarball)}
	if d := decoders(t)["system"]; d.xz != "" {
		cases["a.tar.xz"] = xzBytes(t, tarball)
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, data, dropAfter(len(data)/3), liar206(name != "a.tar.gz"))
			s := openStore(t, t.TempDir())
			c := testClient(t, nil)
			es, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request(srv.url(name), data)}})
			if err != nil {
				t.Fatalf("install: %v", err)
			}
			checkRedist(t, es[0].Dir, 400_000)
			reqs := srv.requests()
			if len(reqs) != 3 || reqs[1].Get("Range") == "" || reqs[2].Get("Range") != "" {
				t.Fatalf("requests %v; want the first, a resume, then one from the start", reqs)
			}
			checkNoLeftovers(t, s, c)
		})
	}
}

// The same lie twice is an error, not a loop: one clean restart only.
func TestInstallLying206Twice(t *testing.T) {
	data := zstdBytes(t, tarBytes(t, redistMembers(400_000)))
	srv := newServer(t, data, dropAfter(len(data)/3), liar206(true), dropAfter(len(data)/3), liar206(true))
	s := openStore(t, t.TempDir())
	c := testClient(t, nil)
	_, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request(srv.url("a.tar.zst"), data)}})
	if err == nil {
		t.Fatal("installed from lying answers")
	}
	t.Log(err)
	if n := len(srv.requests()); n != 4 {
		t.Errorf("%d requests; want 4", n)
	}
	mustNotExist(t, s.entryDir(testKey()))
	checkNoLeftovers(t, s, c)
}
