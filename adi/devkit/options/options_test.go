package options

import (
	"strings"
	"testing"
)

var table = Table{Device: "netvm", Options: []Option{
	{Key: "ring", Default: "262144", Min: 4096, Max: 1 << 30, Unit: "bytes", Help: "control ring size"},
	{Key: "bulk", Default: "64", Min: 0, Multiple: 64, Unit: "bytes", Help: "chunk"},
	{Key: "cma", Default: "auto", Choices: []string{"auto", "off"}, Help: "remote copies"},
}}

func TestParseErrorsNameTheValueTyped(t *testing.T) {
	for _, c := range []struct {
		opts map[string]string
		want string
	}{
		{map[string]string{"ring": "1"}, "netvm: option ring=1: must be at least 4096 bytes"},
		{map[string]string{"ring": "2000000000"}, "netvm: option ring=2000000000: must be at most 1073741824 bytes"},
		{map[string]string{"ring": "64k"}, "netvm: option ring=64k: must be an integer number of bytes"},
		{map[string]string{"bulk": "100"}, "netvm: option bulk=100: must be a multiple of 64 bytes"},
		{map[string]string{"cma": "maybe"}, "netvm: option cma=maybe: must be auto or off"},
		{map[string]string{"rnig": "5"}, "netvm: unknown option rnig=5 (known options: ring, bulk, cma)"},
	} {
		_, err := table.Parse(c.opts)
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%v) = %v, want %q", c.opts, err, c.want)
		}
	}
}

func TestParseValues(t *testing.T) {
	v, err := table.Parse(map[string]string{"ring": " 8192 ", "cma": "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Int("ring") != 8192 || v.Int("bulk") != 64 || v.String("cma") != "off" {
		t.Errorf("ring=%d bulk=%d cma=%q", v.Int("ring"), v.Int("bulk"), v.String("cma"))
	}
	if s, ok := v.Given("ring"); !ok || s != "8192" {
		t.Errorf("Given(ring) = %q, %v", s, ok)
	}
	if _, ok := v.Given("bulk"); ok {
		t.Error("Given(bulk) reports a default as given")
	}
	if got := table.Errorf("ring", v.Raw("ring"), "must be at least 4 times eager=%d", 4096).Error(); got != "netvm: option ring=8192: must be at least 4 times eager=4096" {
		t.Errorf("Errorf: %q", got)
	}
}

func TestHelpListsEveryOption(t *testing.T) {
	h := table.Help()
	for _, want := range []string{"ring=262144", "4096..1073741824 bytes", "cma=auto", "auto|off", "a multiple of 64"} {
		if !strings.Contains(h, want) {
			t.Errorf("Help lacks %q:\n%s", want, h)
		}
	}
}
