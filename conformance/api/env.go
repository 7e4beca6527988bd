package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/adimpi/adimpi/mpi"
)

// checkEnv: the thread level is MPI_THREAD_MULTIPLE, the goroutine that
// called Init (the check's) is the main one and no other is, the
// predefined attributes hold the job's values on every rank, and InfoEnv
// names the job's size.
func checkEnv(w *mpi.Comm) error {
	np := w.Size()
	if l, err := mpi.QueryThread(); err != nil || l != mpi.ThreadMultiple {
		return fmt.Errorf("QueryThread = %v, %v; want MPI_THREAD_MULTIPLE", l, err)
	}
	if main, err := mpi.IsThreadMain(); err != nil || !main {
		return fmt.Errorf("IsThreadMain in the goroutine that called Init = %v, %v", main, err)
	}
	other := make(chan bool)
	go func() {
		m, _ := mpi.IsThreadMain()
		other <- m
	}()
	if <-other {
		return fmt.Errorf("IsThreadMain in another goroutine = true")
	}
	if v, ok := w.Attr(mpi.KeyUniverseSize); !ok || v != np {
		return fmt.Errorf("UNIVERSE_SIZE = %v, %v; want %d", v, ok, np)
	}
	if v, ok := w.Attr(mpi.KeyTagUB); !ok || v != mpi.TagUB {
		return fmt.Errorf("TAG_UB = %v, %v; want %d", v, ok, mpi.TagUB)
	}
	if v, ok := w.Attr(mpi.KeyWtimeIsGlobal); !ok || v != false {
		return fmt.Errorf("WTIME_IS_GLOBAL = %v, %v; want false", v, ok)
	}
	v, ok := w.Attr(mpi.KeyAppNum)
	if s, set := os.LookupEnv("ADIMPI_APPNUM"); set {
		if n, _ := strconv.Atoi(s); !ok || v != n {
			return fmt.Errorf("APPNUM = %v, %v; want %s (ADIMPI_APPNUM)", v, ok, s)
		}
	} else if ok {
		return fmt.Errorf("APPNUM = %v without ADIMPI_APPNUM; want absent", v)
	}
	if m, ok, err := mpi.InfoEnv().Get("maxprocs"); err != nil || !ok || m != strconv.Itoa(np) {
		return fmt.Errorf("InfoEnv maxprocs = %q, %v, %v; want %d", m, ok, err, np)
	}
	if h, _, _ := mpi.InfoEnv().Get("host"); h != mpi.ProcessorName() {
		return fmt.Errorf("InfoEnv host = %q, want ProcessorName %q", h, mpi.ProcessorName())
	}
	return nil
}

// checkTypedStructs moves padded Go structs through point-to-point calls
// and collectives with TypedSlice alone.
func checkTypedStructs(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	t, err := recType()
	if err != nil {
		return err
	}
	right, left := (me+1)%np, (me+np-1)%np
	send, recv := inputs(me, 0, 50), poisoned(50)
	if _, err := mpi.SendrecvBuf(w, recBuf(send, t), right, 1, recBuf(recv, t), left, 1); err != nil {
		return err
	}
	if err := checkRecs("Sendrecv", recv, 0, func(i int) rec { return input(left, i) }); err != nil {
		return err
	}
	buf := poisoned(30)
	if me == 1%np {
		copy(buf, inputs(me, 0, 30))
	}
	if err := mpi.BcastBuf(w, recBuf(buf, t), 1%np); err != nil {
		return err
	}
	if err := checkRecs("Bcast", unpoisonedData(buf), 0, func(i int) rec { return input(1%np, i) }); err != nil {
		return err
	}
	all := poisoned(4 * np)
	if err := mpi.AllgatherBuf(w, recBuf(inputs(me, 0, 4), t), recBuf(all, t)); err != nil {
		return err
	}
	for r := range np {
		if err := checkRecs(fmt.Sprintf("Allgather block %d", r), all[4*r:4*r+4], 0, func(i int) rec { return input(r, i) }); err != nil {
			return err
		}
	}
	return nil
}
