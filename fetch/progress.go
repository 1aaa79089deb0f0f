package fetch

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/cudadeps/cudadeps/internal/humansize"
	"github.com/cudadeps/cudadeps/internal/tty"
)

// progress reports on a set of archives: one aggregate bytes bar on a
// terminal, otherwise plain lines at each archive's start and end and about
// every 10 % (CI logs stay short and readable). A nil *progress is quiet.
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	bar    *progressbar.ProgressBar // nil: plain lines
	failed []string                 // archives that failed under the bar
}

func (c *Client) newProgress(reqs []Request) *progress {
	if c.progress == nil || len(reqs) == 0 {
		return nil
	}
	p := &progress{w: c.progress}
	if tty.Is(c.progress) {
		var total int64
		for _, r := range reqs {
			total += r.Size
		}
		desc := "fetching " + reqs[0].label()
		if len(reqs) > 1 {
			desc = fmt.Sprintf("fetching %d archives", len(reqs))
		}
		w := c.progress
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowBytes(true),
			progressbar.OptionUseIECUnits(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionSetWidth(20),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowCount(),
			progressbar.OptionFullWidth(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
	}
	return p
}

// track starts reporting on one archive.
func (p *progress) track(req Request) *tracker {
	if p == nil {
		return nil
	}
	return &tracker{p: p, name: req.label(), size: req.Size}
}

// finish ends the bar (plain lines need no ending). After an error the
// bar stays where the bytes stopped and the archives that failed are named:
// filling it would claim a download that did not happen.
func (p *progress) finish(err error) {
	if p == nil || p.bar == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar.IsFinished() {
		return
	}
	if err == nil && len(p.failed) == 0 {
		_ = p.bar.Finish()
		return
	}
	_ = p.bar.Exit()
	for _, name := range p.failed {
		fmt.Fprintf(p.w, "%s: failed\n", name)
	}
}

func (p *progress) printf(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, a...)
}

// tracker reports on one archive; its bytes are those read so far (from the
// network, the cache or a file:// mirror) in the current attempt.
type tracker struct {
	p       *progress
	name    string
	size    int64
	started bool
	began   time.Time
	n       int64 // bytes reported
	tenth   int64 // last 10 % step printed
	kept    int64 // bytes a partial download already held: not fetched now
}

// resume says that the download starts from a partial file of kept bytes.
func (t *tracker) resume(kept int64) {
	if t != nil {
		t.kept = kept
	}
}

// start is called when bytes begin to flow; network tells a download from a
// local read. Only the first call prints.
func (t *tracker) start(network bool) {
	if t == nil || t.started {
		return
	}
	t.started, t.began = true, time.Now()
	if t.p.bar != nil {
		return
	}
	switch {
	case !network:
		t.p.printf("%s: reading %s\n", t.name, humansize.Bytes(t.size))
	case t.kept >= t.size:
		t.p.printf("%s: checking a complete partial download of %s\n", t.name, humansize.Bytes(t.size))
	case t.kept > 0:
		t.p.printf("%s: downloading %s, resumed at %s\n", t.name, humansize.Bytes(t.size), humansize.Bytes(t.kept))
	default:
		t.p.printf("%s: downloading %s\n", t.name, humansize.Bytes(t.size))
	}
}

// set reports that n bytes of the current attempt are through (an attempt
// that starts over goes back to 0).
func (t *tracker) set(n int64) {
	if t == nil {
		return
	}
	d := n - t.n
	t.n = n
	if t.p.bar != nil {
		t.p.mu.Lock()
		_ = t.p.bar.Add64(d)
		t.p.mu.Unlock()
		return
	}
	if tenth := n * 10 / t.size; tenth > t.tenth && n < t.size {
		t.tenth = tenth
		t.p.printf("%s: %d%% (%s of %s)\n", t.name, tenth*10, humansize.Bytes(n), humansize.Bytes(t.size))
	} else if tenth < t.tenth {
		t.tenth = tenth
	}
}

// done reports the outcome.
func (t *tracker) done(err error) {
	if t == nil {
		return
	}
	if t.p.bar != nil {
		if err != nil {
			t.p.mu.Lock()
			t.p.failed = append(t.p.failed, t.name)
			t.p.mu.Unlock()
		}
		return
	}
	if err != nil {
		t.p.printf("%s: failed\n", t.name)
		return
	}
	if !t.started {
		return
	}
	fetched := t.size - t.kept
	if fetched <= 0 {
		t.p.printf("%s: done, %s from a complete partial download\n", t.name, humansize.Bytes(t.size))
		return
	}
	// The speed is that of the bytes this run fetched.
	el := time.Since(t.began)
	rate := float64(fetched) / max(el.Seconds(), 1e-3)
	t.p.printf("%s: done, %s in %s (%s/s)\n", t.name, humansize.Bytes(fetched), el.Round(10*time.Millisecond), humansize.Bytes(int64(rate)))
}
