// Command gen writes libmpich's cgo export file from its spec table: run by
// "go generate ./cmd/libmpich" in that directory.
//
// It reads spec.txt (the implemented functions, one a line: the C name and
// its parameters as name:kind) and abi_names.txt (every function of
// MPICH's ABI with its C return type), and writes
//
//   - zexport.go: for each implemented function a Go body that decodes its
//     handles (an invalid one fails the call with the right class) and
//     calls the hand-written x<Name> translation, and the two cgo exports
//     MPI_<Name> and PMPI_<Name> that call that body;
//   - zstubs.c: for every other ABI function a C stub (and its PMPI_ alias)
//     returning MPI_ERR_UNSUPPORTED_OPERATION through adimpi_unsupported;
//   - FUNCTIONS.md: the lists of both, for the documentation.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// kind says how one C parameter crosses: its Go type in the export, and how
// the body turns it into the argument of the translation function.
type kind struct {
	goType string // the parameter's type in the exported Go function
	conv   string // the argument expression (%s: the parameter) when no lookup is needed
	lookup string // a decoding function (op, handle) (T, error), or ""
}

var kinds = map[string]kind{
	"int":   {goType: "C.int", conv: "int(%s)"},
	"ptr":   {goType: "unsafe.Pointer", conv: "%s"},
	"intp":  {goType: "*C.int", conv: "%s"},
	"aint":  {goType: "C.long", conv: "int(%s)"},
	"aintp": {goType: "*C.long", conv: "%s"},
	"uptr":  {goType: "uintptr", conv: "%s"},
	"uptrp": {goType: "*uintptr", conv: "%s"},
	"str":   {goType: "*C.char", conv: "%s"},
	"h":     {goType: "C.int", conv: "int32(%s)"},
	"hp":    {goType: "*C.int", conv: "%s"},
	// countp: an array of MPI_Count counts or MPI_Aint displacements of a
	// large-count collective, one per rank of the call's communicator,
	// narrowed to the ints of the int form's translation.
	"countp": {goType: "*C.long", conv: "narrow(fn, %s, comm_)"},
	"dt":     {goType: "C.int", lookup: "typeOf"},
	"comm":   {goType: "C.int", lookup: "commOf"},
	"group":  {goType: "C.int", lookup: "groupOf"},
	"op":     {goType: "C.int", lookup: "opOf"},
	"win":    {goType: "C.int", lookup: "winOf"},
}

type param struct{ name, kind string }

type fn struct {
	name   string // MPI_Send
	params []param
	manual bool // exported by hand (a non-int return, or C-only)
	// cfront: the MPI_ and PMPI_ names are C functions (fastpath.c) that
	// try a fast path first; Go exports the call as adimpi_slow_<Name>.
	cfront bool
	// impl and mode, from a "=impl:mode" token, make one translation
	// function serve a call's blocking, non-blocking and persistent forms:
	// it is called as impl(mode, request, the other parameters), with nil
	// for a blocking form's request and any "info" parameter left out. A
	// token "=impl" without a mode calls impl with the parameters as they
	// are: a call that is another under a different C signature (MPI_Send_c
	// is xSend with an MPI_Count count).
	impl, mode string
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("gen: ")
	in := flag.String("in", ".", "directory of spec.txt and abi_names.txt")
	out := flag.String("out", ".", "directory to write the generated files to")
	flag.Parse()
	files, err := generate(*in)
	if err != nil {
		log.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(*out, name), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// generate reads the tables in dir and returns the generated files by name.
func generate(dir string) (map[string][]byte, error) {
	specs, err := readSpec(filepath.Join(dir, "spec.txt"))
	if err != nil {
		return nil, err
	}
	abi, err := readNames(filepath.Join(dir, "abi_names.txt"))
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, f := range specs {
		if _, ok := abi[f.name]; !ok && !f.manual {
			return nil, fmt.Errorf("spec.txt: %s is not in abi_names.txt", f.name)
		}
		if have[f.name] {
			return nil, fmt.Errorf("spec.txt: %s twice", f.name)
		}
		have[f.name] = true
	}
	var stubs []string
	for name := range abi {
		if !have[name] {
			stubs = append(stubs, name)
		}
	}
	sort.Strings(stubs)
	goSrc, err := format.Source(goFile(specs, stubs))
	if err != nil {
		return nil, fmt.Errorf("zexport.go: %v", err)
	}
	c, err := cFile(stubs, abi)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"zexport.go": goSrc, "zstubs.c": c, "FUNCTIONS.md": mdFile(specs, stubs)}, nil
}

func lines(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, strings.Fields(l))
	}
	return out, sc.Err()
}

func readSpec(path string) ([]fn, error) {
	ls, err := lines(path)
	if err != nil {
		return nil, err
	}
	var fs []fn
	for _, l := range ls {
		f := fn{name: l[0]}
		for _, p := range l[1:] {
			if p == "manual" {
				f.manual = true
				continue
			}
			if p == "cfront" {
				f.cfront = true
				continue
			}
			if strings.HasPrefix(p, "=") {
				f.impl, f.mode, _ = strings.Cut(p[1:], ":")
				continue
			}
			n, k, ok := strings.Cut(p, ":")
			if !ok {
				return nil, fmt.Errorf("%s: %s: parameter %q is not name:kind", path, f.name, p)
			}
			if _, ok := kinds[k]; !ok {
				return nil, fmt.Errorf("%s: %s: unknown kind %q", path, f.name, k)
			}
			f.params = append(f.params, param{n, k})
		}
		fs = append(fs, f)
	}
	return fs, nil
}

func readNames(path string) (map[string]string, error) {
	ls, err := lines(path)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range ls {
		if len(l) < 2 {
			return nil, fmt.Errorf("%s: %q: want name and return type", path, l)
		}
		m[l[0]] = strings.Join(l[1:], " ")
	}
	return m, nil
}

func goFile(specs []fn, stubs []string) []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated by gen from spec.txt and abi_names.txt; DO NOT EDIT.\n\n//go:build cgo\n\npackage main\n\n")
	b.WriteString("/*\n#include <stdint.h>\n*/\nimport \"C\"\n\nimport \"unsafe\"\n\nvar _ unsafe.Pointer\n\n")
	for _, f := range specs {
		if f.manual {
			continue
		}
		short := strings.TrimPrefix(f.name, "MPI_")
		var sig, call []string
		for _, p := range f.params {
			sig = append(sig, p.name+" "+kinds[p.kind].goType)
			call = append(call, p.name)
		}
		fmt.Fprintf(&b, "// c%s decodes %s's handles and runs its translation.\nfunc c%s(%s) (rc C.int) {\n\tdefer guard(&rc, %q)\n", short, f.name, short, strings.Join(sig, ", "), f.name)
		var args []string
		var decode []param // the handles to look up, communicators first
		target := "x" + short
		rewrite := f.impl != "" && f.mode != ""
		if f.impl != "" {
			target = f.impl
		}
		if rewrite {
			args = append(args, f.mode, "nil")
		}
		for _, p := range f.params {
			k := kinds[p.kind]
			switch {
			case rewrite && p.name == "info":
			case rewrite && p.name == "request":
				args[1] = p.name
			case k.lookup == "":
				args = append(args, fmt.Sprintf(k.conv, p.name))
			default:
				decode = append(decode, p)
				args = append(args, p.name+"_")
			}
		}
		sort.SliceStable(decode, func(i, j int) bool { return decode[i].kind == "comm" && decode[j].kind != "comm" })
		// An invalid handle runs the error handler of the call's first
		// communicator once that is decoded (MPI_COMM_WORLD's before).
		commVar := "nil"
		if len(decode) > 0 {
			fmt.Fprintf(&b, "\tconst fn = %q\n", f.name)
		}
		for _, p := range decode {
			fmt.Fprintf(&b, "\t%s_, err := %s(fn, int32(%s))\n\tif err != nil {\n\t\treturn fail(%s, err)\n\t}\n", p.name, kinds[p.kind].lookup, p.name, commVar)
			if p.kind == "comm" && commVar == "nil" {
				commVar = p.name + "_"
			}
		}
		// A window call's errors follow the window's handler (winDone).
		ret := "done(" + commVar + ", "
		for _, p := range decode {
			if p.kind == "win" {
				ret = "winDone(" + p.name + "_, "
			}
		}
		fmt.Fprintf(&b, "\treturn %s%s(%s))\n}\n\n", ret, target, strings.Join(args, ", "))
		if f.cfront {
			fmt.Fprintf(&b, "// adimpi_slow_%s is %s's Go side, which the C functions %s and\n// P%s (fastpath.c) call when their fast path does not apply.\n//\n//export adimpi_slow_%s\nfunc adimpi_slow_%s(%s) C.int {\n\treturn c%s(%s)\n}\n\n", short, f.name, f.name, f.name, short, short, strings.Join(sig, ", "), short, strings.Join(call, ", "))
			continue
		}
		for _, pre := range []string{"MPI_", "PMPI_"} {
			fmt.Fprintf(&b, "// %s%s is %s for C programs, with MPICH's signature.\n//\n//export %s%s\nfunc %s%s(%s) C.int {\n\treturn c%s(%s)\n}\n\n", pre, short, f.name, pre, short, pre, short, strings.Join(sig, ", "), short, strings.Join(call, ", "))
		}
	}
	b.WriteString("// unsupportedNames are the ABI functions zstubs.c answers with\n// MPI_ERR_UNSUPPORTED_OPERATION, by the index the stub passes.\nvar unsupportedNames = [...]string{\n")
	for _, s := range stubs {
		fmt.Fprintf(&b, "\t%q,\n", s)
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func cFile(stubs []string, abi map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by gen from spec.txt and abi_names.txt; DO NOT EDIT.\n\n")
	b.WriteString("// The MPI functions of MPICH's ABI that adimpi does not implement. Each\n// takes whatever arguments its caller passes (the stub reads none) and\n// fails with MPI_ERR_UNSUPPORTED_OPERATION, naming itself.\n\n")
	b.WriteString("extern int adimpi_unsupported(int);\n\n")
	for i, s := range stubs {
		switch abi[s] {
		case "int":
			fmt.Fprintf(&b, "int %s() { return adimpi_unsupported(%d); }\n", s, i)
			fmt.Fprintf(&b, "int P%s() __attribute__((alias(%q)));\n", s, s)
		default:
			return nil, fmt.Errorf("%s returns %s: implement it (spec.txt, manual) instead of stubbing it", s, abi[s])
		}
	}
	return b.Bytes(), nil
}

func mdFile(specs []fn, stubs []string) []byte {
	var b bytes.Buffer
	b.WriteString("<!-- Code generated by gen from spec.txt and abi_names.txt; DO NOT EDIT. -->\n\n")
	b.WriteString("# libmpich: the MPI functions adimpi's C library implements\n\n")
	fmt.Fprintf(&b, "Implemented (%d, each also under its `PMPI_` name):\n\n", len(specs))
	var names []string
	for _, f := range specs {
		names = append(names, "`"+f.name+"`")
	}
	sort.Strings(names)
	b.WriteString(strings.Join(names, ", ") + "\n\n")
	fmt.Fprintf(&b, "Not implemented (%d): each returns `MPI_ERR_UNSUPPORTED_OPERATION` through the error handler of `MPI_COMM_WORLD`, with a message naming the function:\n\n", len(stubs))
	groups := map[string][]string{}
	var order []string
	for _, s := range stubs {
		g := strings.SplitN(strings.TrimPrefix(s, "MPI_"), "_", 2)[0]
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], "`"+s+"`")
	}
	for _, g := range order {
		fmt.Fprintf(&b, "- %s\n", strings.Join(groups[g], ", "))
	}
	return b.Bytes()
}
