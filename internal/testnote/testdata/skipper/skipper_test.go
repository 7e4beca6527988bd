// Package skipper is run by testnote's test: one test that skips through
// testnote.Skip, and a progress note.
package skipper

import (
	"testing"

	"github.com/adimpi/adimpi/internal/testnote"
)

func TestNeedsSomething(t *testing.T) {
	testnote.Printf("skipper: progress note")
	testnote.Skip(t, "skipper: something is not installed")
}
