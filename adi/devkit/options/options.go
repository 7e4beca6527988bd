// Package options is a device's table of -device-opt keys: each key's
// default, its allowed range or choices and a line of help, declared once,
// parsed with one error format that names the value the user typed
// ("netvm: option ring=1: must be at least 4096 bytes") and printed as help.
package options

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Option declares one key. An option is either an integer (Choices nil:
// Min, Max, Multiple and Unit apply) or one of Choices.
type Option struct {
	Key     string
	Default string   // the value used when the key is absent, as a user would type it
	Help    string   // what the option does, in a sentence
	Choices []string // the accepted words, for a choice option
	Unit    string   // the unit of an integer, plural ("bytes", "microseconds"), or ""
	Min     int64    // least integer accepted
	Max     int64    // greatest integer accepted; 0: no bound
	// Multiple: an integer must be a multiple of it (0 is always accepted);
	// 0 or 1: any integer.
	Multiple int64
}

// Table is a device's options.
type Table struct {
	Device  string // the device's name, the prefix of every error
	Options []Option
}

// Values are the parsed options of one Init: the value of every key of the
// table, given or default, and the text the user typed for the given ones.
type Values struct {
	t    *Table
	ints map[string]int64
	strs map[string]string
	raw  map[string]string
}

// Parse checks opts against the table: an unknown key is an error listing
// the known keys, a bad value an error naming the key and the value given.
// Values of choice options are compared without case or surrounding space.
func (t *Table) Parse(opts map[string]string) (*Values, error) {
	for _, k := range sortedKeys(opts) {
		if t.find(k) == nil {
			return nil, fmt.Errorf("%s: unknown option %s=%s (known options: %s)", t.Device, k, opts[k], strings.Join(t.Keys(), ", "))
		}
	}
	v := &Values{t: t, ints: map[string]int64{}, strs: map[string]string{}, raw: map[string]string{}}
	for i := range t.Options {
		o := &t.Options[i]
		s, given := opts[o.Key]
		if given {
			s = strings.TrimSpace(s)
			v.raw[o.Key] = s
		} else {
			s = o.Default
		}
		if err := v.set(o, s); err != nil {
			if !given {
				panic(fmt.Sprintf("%s: the default of option %s: %v", t.Device, o.Key, err))
			}
			return nil, t.Errorf(o.Key, s, "%v", err)
		}
	}
	return v, nil
}

func (v *Values) set(o *Option, s string) error {
	s = strings.TrimSpace(s)
	if o.Choices != nil {
		for _, c := range o.Choices {
			if strings.EqualFold(s, c) {
				v.strs[o.Key] = c
				return nil
			}
		}
		return fmt.Errorf("must be %s", oneOf(o.Choices))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return fmt.Errorf("must be an integer%s", unit(" number of ", o.Unit))
	case n < o.Min:
		return fmt.Errorf("must be at least %d%s", o.Min, unit(" ", o.Unit))
	case o.Max != 0 && n > o.Max:
		return fmt.Errorf("must be at most %d%s", o.Max, unit(" ", o.Unit))
	case o.Multiple > 1 && n%o.Multiple != 0:
		return fmt.Errorf("must be a multiple of %d%s", o.Multiple, unit(" ", o.Unit))
	}
	v.ints[o.Key] = n
	return nil
}

// Errorf is an error about option key whose value was val, in the table's
// format: "fm: option bulk=100: must be a multiple of 64 bytes". Devices use
// it for the checks that involve several options.
func (t *Table) Errorf(key, val, format string, args ...any) error {
	return fmt.Errorf("%s: option %s=%s: %s", t.Device, key, val, fmt.Sprintf(format, args...))
}

// Keys lists the table's keys in table order.
func (t *Table) Keys() []string {
	keys := make([]string, len(t.Options))
	for i, o := range t.Options {
		keys[i] = o.Key
	}
	return keys
}

// Help describes every option, one line each: key=default, the range or
// choices, and the help sentence.
func (t *Table) Help() string {
	var b strings.Builder
	for _, o := range t.Options {
		var rng string
		switch {
		case o.Choices != nil:
			rng = strings.Join(o.Choices, "|")
		case o.Max != 0:
			rng = fmt.Sprintf("%d..%d%s", o.Min, o.Max, unit(" ", o.Unit))
		default:
			rng = fmt.Sprintf("≥ %d%s", o.Min, unit(" ", o.Unit))
		}
		if o.Multiple > 1 {
			rng += fmt.Sprintf(", a multiple of %d", o.Multiple)
		}
		fmt.Fprintf(&b, "  %s=%s\t(%s) %s\n", o.Key, o.Default, rng, o.Help)
	}
	return b.String()
}

func (t *Table) find(key string) *Option {
	for i := range t.Options {
		if t.Options[i].Key == key {
			return &t.Options[i]
		}
	}
	return nil
}

func (v *Values) option(key string) *Option {
	o := v.t.find(key)
	if o == nil {
		panic(v.t.Device + ": no option " + key + " in the table")
	}
	return o
}

// Int is the value of integer option key.
func (v *Values) Int(key string) int {
	if v.option(key).Choices != nil {
		panic(v.t.Device + ": option " + key + " is not an integer")
	}
	return int(v.ints[key])
}

// String is the value of choice option key, spelled as in Choices.
func (v *Values) String(key string) string {
	if v.option(key).Choices == nil {
		panic(v.t.Device + ": option " + key + " is not a choice")
	}
	return v.strs[key]
}

// Given reports whether the user gave key, and the text given.
func (v *Values) Given(key string) (string, bool) {
	v.option(key)
	s, ok := v.raw[key]
	return s, ok
}

// Raw is the text the user gave for key, or the key's value when it was not
// given: what an error about key must quote.
func (v *Values) Raw(key string) string {
	o := v.option(key)
	if s, ok := v.raw[key]; ok {
		return s
	}
	if o.Choices != nil {
		return v.strs[key]
	}
	return strconv.FormatInt(v.ints[key], 10)
}

func unit(sep, u string) string {
	if u == "" {
		return ""
	}
	return sep + u
}

func oneOf(c []string) string {
	if len(c) == 1 {
		return c[0]
	}
	return strings.Join(c[:len(c)-1], ", ") + " or " + c[len(c)-1]
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
