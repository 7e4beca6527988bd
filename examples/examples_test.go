// Package examples_test runs the example programs through mpirun and checks
// what they print (each example also verifies its own result and exits
// non-zero when it is wrong).
package examples_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/internal/testbuild"
)

func TestExamples(t *testing.T) {
	bins := testbuild.Programs(t, "../cmd/mpirun", "./jacobi", "./masterworker")
	for _, c := range []struct {
		prog string
		args []string
		want string
	}{
		{"jacobi", []string{"-np", "1"}, "on 1x1 ranks, 100 iterations"},
		{"jacobi", []string{"-np", "6"}, "on 3x2 ranks, 100 iterations"},
		{"jacobi", []string{"-np", "4", "-device-opt", "eager=0"}, "on 2x2 ranks"},
		{"masterworker", []string{"-np", "2"}, "2000 items done by 1 workers"},
		{"masterworker", []string{"-np", "8"}, "2000 items done by 7 workers"},
		{"masterworker", []string{"-np", "4", "-device-opt", "eager=0"}, "2000 items done by 3 workers"},
	} {
		args := append(append([]string{}, c.args...), "-timeout", "120s", bins[c.prog])
		out, err := exec.Command(bins["mpirun"], args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("mpirun %v %s: %v, want output containing %q:\n%s", c.args, c.prog, err, c.want, out)
		}
	}
}
