package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// IsTerminal reports whether f is a character device (a terminal, as far
// as a progress line cares), without a dependency on x/term.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Progress writes a live, self-overwriting status line. It stays silent for
// the first ProgressAfter of a run and then prints at most twice a second,
// so short runs leave no trace. It is safe for concurrent use.
type Progress struct {
	mu      sync.Mutex
	w       io.Writer
	label   string
	start   time.Time
	last    time.Time
	printed bool
}

// ProgressAfter is how long a run goes before its progress line appears.
const ProgressAfter = 2 * time.Second

// NewProgress returns a Progress writing to w, each line prefixed by label.
func NewProgress(w io.Writer, label string) *Progress {
	return &Progress{w: w, label: label, start: time.Now()}
}

// Update replaces the line, if it is time to.
func (p *Progress) Update(format string, args ...any) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.start) < ProgressAfter || now.Sub(p.last) < 500*time.Millisecond {
		return
	}
	p.last = now
	p.printed = true
	fmt.Fprintf(p.w, "\r\033[K[%s] %s", p.label, fmt.Sprintf(format, args...))
}

// Done erases the line, if one was printed.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.printed {
		fmt.Fprint(p.w, "\r\033[K")
		p.printed = false
	}
}
