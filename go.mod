module github.com/adimpi/adimpi

go 1.26.0

require (
	github.com/spf13/pflag v1.1.0
	golang.org/x/sys v0.49.0
)
