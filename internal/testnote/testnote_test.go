package testnote

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// goTest runs "go test" in package-list mode on testdata/skipper, its
// output read through a pipe as in CI, and returns what the user sees.
func goTest(t *testing.T, ci string) (string, error) {
	t.Helper()
	cmd := exec.Command("go", "test", "-count=1", "./testdata/skipper")
	cmd.Env = append(os.Environ(), "CI="+ci)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	r.Close()
	return b.String(), cmd.Wait()
}

// A skip and a note reach the user of "go test ./..." although the package
// passes, and in CI the skip is a failure.
func TestSkipIsVisible(t *testing.T) {
	out, err := goTest(t, "")
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	for _, want := range []string{
		"SKIP TestNeedsSomething: skipper: something is not installed\n",
		"skipper: progress note\n",
		"ok  \tgithub.com/adimpi/adimpi/internal/testnote/testdata/skipper",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("go test output lacks %q:\n%s", want, out)
		}
	}
	out, err = goTest(t, "true")
	if err == nil || !strings.Contains(out, "skipper: something is not installed (CI=true: CI must install what this test needs)") {
		t.Errorf("CI=true: want a failure naming the reason, got %v:\n%s", err, out)
	}
}
