package browser

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestExecPath(t *testing.T) {
	t.Run("CHROMIUM names a missing file", func(t *testing.T) {
		t.Setenv("CHROMIUM", filepath.Join(t.TempDir(), "no-such-browser"))
		if _, err := ExecPath(); !errors.Is(err, ErrNotInstalled) {
			t.Errorf("err = %v, want ErrNotInstalled", err)
		}
	})
	t.Run("nothing on PATH", func(t *testing.T) {
		t.Setenv("CHROMIUM", "")
		t.Setenv("PATH", t.TempDir())
		if _, err := ExecPath(); !errors.Is(err, ErrNotInstalled) {
			t.Errorf("err = %v, want ErrNotInstalled", err)
		}
	})
}
