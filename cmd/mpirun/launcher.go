package main

import (
	"fmt"
	"strings"
)

// hostPlaceholder is replaced, in every word of -launcher-exec, by the name
// of the host a rank runs on.
const hostPlaceholder = "{host}"

// splitCommand splits a command line into words as a POSIX shell would,
// without running one: blanks separate words; single quotes keep
// everything up to the next single quote; double quotes keep everything
// but let a backslash escape ", \, $ and `; a backslash outside quotes
// keeps the next character. Nothing is expanded.
func splitCommand(s string) ([]string, error) {
	var (
		words []string
		w     strings.Builder
		inW   bool // a word has begun (possibly empty, as in '')
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inW {
				words = append(words, w.String())
				w.Reset()
				inW = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inW = true
		case c == '"':
			inW = true
			for i++; ; i++ {
				if i >= len(s) {
					return nil, fmt.Errorf("unterminated double quote")
				}
				if s[i] == '"' {
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
		case c == '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("backslash at the end")
			}
			i++
			w.WriteByte(s[i])
			inW = true
		default:
			w.WriteByte(c)
			inW = true
		}
	}
	if inW {
		words = append(words, w.String())
	}
	return words, nil
}

// launcherArgv is the launcher command for host: words with every
// {host} replaced by the host's name.
func launcherArgv(words []string, host string) []string {
	argv := make([]string, len(words))
	for i, w := range words {
		argv[i] = strings.ReplaceAll(w, hostPlaceholder, host)
	}
	return argv
}
