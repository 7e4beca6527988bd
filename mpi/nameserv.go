package mpi

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/adimpi/adimpi/internal/pmi"
)

// The name service (MPI_Publish_name, MPI_Lookup_name,
// MPI_Unpublish_name). Two kinds:
//
//   - mpirun's: kept by the launcher for the jobs it runs (a job and the
//     children it spawns), reached over PMI-1 (publish_name, lookup_name,
//     unpublish_name);
//   - a directory, for jobs started separately (by two mpiruns, even on
//     hosts that share the directory): ADIMPI_NAMESERV_DIR names it, or the
//     Info key "adimpi_nameserv_dir" of the call. A published name is a file
//     there holding the port; publishing creates it atomically and fails if
//     it exists.

// EnvNameservDir names the directory of the file-based name service.
const EnvNameservDir = "ADIMPI_NAMESERV_DIR"

// nameDir is the directory of the file-based service for a call, or "".
func nameDir(info *Info) string {
	if info != nil {
		if v, ok, _ := info.Get("adimpi_nameserv_dir"); ok && v != "" {
			return v
		}
	}
	return os.Getenv(EnvNameservDir)
}

func checkService(op, service string) error {
	if service == "" || strings.ContainsAny(service, " \t\n=") {
		return errorf(ErrArg, op, "service name %q: want a non-empty name without spaces or '='", service)
	}
	return nil
}

// PublishName publishes port under service (MPI_Publish_name), for
// LookupName in other jobs. Publishing a name that is published already is
// an ErrService error.
func PublishName(service string, info *Info, port string) error {
	const op = "MPI_Publish_name"
	r, err := current(op)
	if err != nil {
		return err
	}
	if err := checkService(op, service); err != nil {
		return err
	}
	if dir := nameDir(info); dir != "" {
		path := filepath.Join(dir, url.PathEscape(service))
		tmp, err := os.CreateTemp(dir, ".publish-*")
		if err != nil {
			return errorf(ErrService, op, "service %q: %v", service, err)
		}
		_, werr := tmp.WriteString(port)
		tmp.Close()
		defer os.Remove(tmp.Name())
		if werr != nil {
			return errorf(ErrService, op, "service %q: %v", service, werr)
		}
		if err := os.Link(tmp.Name(), path); err != nil {
			if errors.Is(err, os.ErrExist) {
				return errorf(ErrService, op, "service %q is already published (%s exists)", service, path)
			}
			return errorf(ErrService, op, "service %q: %v", service, err)
		}
		return nil
	}
	if err := r.pmi.PublishName(service, port); err != nil {
		return errorf(ErrService, op, "service %q: %v", service, err)
	}
	return nil
}

// UnpublishName withdraws service (MPI_Unpublish_name); a service that is
// not published is an ErrService error.
func UnpublishName(service string, info *Info, port string) error {
	const op = "MPI_Unpublish_name"
	r, err := current(op)
	if err != nil {
		return err
	}
	if err := checkService(op, service); err != nil {
		return err
	}
	if dir := nameDir(info); dir != "" {
		if err := os.Remove(filepath.Join(dir, url.PathEscape(service))); err != nil {
			return errorf(ErrService, op, "service %q is not published in %s", service, dir)
		}
		return nil
	}
	if err := r.pmi.UnpublishName(service); err != nil {
		return errorf(ErrService, op, "service %q: %v", service, err)
	}
	return nil
}

// LookupName returns the port published under service (MPI_Lookup_name);
// a service nobody published is an ErrName error.
func LookupName(service string, info *Info) (string, error) {
	const op = "MPI_Lookup_name"
	r, err := current(op)
	if err != nil {
		return "", err
	}
	if err := checkService(op, service); err != nil {
		return "", err
	}
	if dir := nameDir(info); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, url.PathEscape(service)))
		if err != nil {
			return "", errorf(ErrName, op, "service %q is not published in %s", service, dir)
		}
		return string(b), nil
	}
	port, err := r.pmi.LookupName(service)
	if err != nil {
		if errors.Is(err, pmi.ErrNoName) {
			return "", errorf(ErrName, op, "service %q is not published", service)
		}
		return "", errorf(ErrName, op, "service %q: %v", service, err)
	}
	return port, nil
}
