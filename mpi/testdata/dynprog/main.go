// Command dynprog is the MPI program of the dynamic-process tests
// (dynamic_test.go): it spawns copies of itself, connects to other jobs
// through ports and the name service, and joins over sockets, checking
// every exchange and printing one line per check it passed.
//
//	dynprog spawn N         every rank of the world spawns N children
//	dynprog selfspawn       rank 0 alone spawns 2 children (on MPI_COMM_SELF)
//	dynprog nested          spawn 1 child, which spawns 1 grandchild
//	dynprog missing         spawn a missing program: per-child errors, the job goes on
//	dynprog childhang       parent and child wait for ever (for mpirun -timeout)
//	dynprog childdie        the children exit with status 3 after meeting the parent
//	dynprog server SERVICE  accept one client, published under SERVICE
//	dynprog client SERVICE  look SERVICE up and connect
//	dynprog reconnect SERVICE K / reclient SERVICE K   connect and disconnect K times
//	dynprog joinserver / joinclient ADDR   CommJoin over a TCP connection
//	dynprog multiple        CommSpawnMultiple of two commands (APPNUM 0 and 1), MPI_UNIVERSE_SIZE
//	dynprog spawntime N R   R rounds: time of spawning N children (until the intercommunicator works)
//	dynprog pubspawn        publish a port in mpirun's name service, spawn a
//	                        child that looks it up and connects
//
// DYNPROG_SPAWN_HOST=H spawns on host H (Info "host"), and each child
// says where it runs; DYNPROG_MISSING=PATH is what "missing" spawns;
// DYNPROG_SPAWN_TIMEOUT=T sets every spawn's Info "timeout".
package main

import (
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: dynprog MODE [ARGS]")
	}
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	if p := mpi.CommGetParent(); p != nil {
		child(p)
		return
	}
	w := mpi.World()
	switch os.Args[1] {
	case "spawn":
		n, _ := strconv.Atoi(os.Args[2])
		parentSide(spawn(w, n, "child"), w)
	case "nested":
		parentSide(spawn(w, 1, "nested-child"), w)
	case "selfspawn":
		// One rank spawns on MPI_COMM_SELF; the others go on alone.
		if w.Rank() == 0 {
			parentSide(spawn(mpi.Self(), 2, "child"), mpi.Self())
		}
	case "missing":
		missing(w)
	case "childhang":
		// Parent and child both wait for a message that never comes:
		// mpirun -timeout must hear where each of them waits.
		inter := spawn(w, 1, "hang")
		buf := make([]int64, 1)
		mpi.Recv(inter, buf, 0, 99)
	case "childdie":
		inter := spawn(w, 2, "die")
		// The children exit before answering: this receive is never
		// matched, and mpirun must stop the job.
		buf := make([]int64, 1)
		_, err := mpi.Recv(inter, buf, 0, 99)
		log.Fatalf("rank %d: receive from a dead child returned %v", w.Rank(), err)
	case "server":
		server(w, os.Args[2], 1)
	case "client":
		client(w, os.Args[2], 1)
	case "reconnect":
		k, _ := strconv.Atoi(os.Args[3])
		server(w, os.Args[2], k)
	case "reclient":
		k, _ := strconv.Atoi(os.Args[3])
		client(w, os.Args[2], k)
	case "pubspawn":
		pubSpawn(w)
	case "multiple":
		multiple(w)
	case "spawntime":
		spawnTime()
	case "joinserver":
		joinServer(w)
	case "joinclient":
		joinClient(w, os.Args[2])
	default:
		log.Fatalf("dynprog: unknown mode %q", os.Args[1])
	}
}

func check(err error, what string) {
	if err != nil {
		log.Fatalf("rank %d: %s: %v", mpi.World().Rank(), what, err)
	}
}

// spawn starts n copies of this program in the given child mode from
// every rank of w (root 0).
func spawn(w *mpi.Comm, n int, mode string) *mpi.Comm {
	self, err := os.Executable()
	check(err, "os.Executable")
	info := spawnInfo()
	wd, _ := os.Getwd()
	check(info.Set("wdir", wd), "info")
	inter, errs, err := mpi.CommSpawn(self, []string{mode}, n, info, 0, w)
	check(err, "CommSpawn")
	if len(errs) != n {
		log.Fatalf("CommSpawn: %d error codes for %d children", len(errs), n)
	}
	for i, e := range errs {
		check(e, fmt.Sprintf("child %d", i))
	}
	if !inter.IsInter() || inter.RemoteSize() != n || inter.Size() != w.Size() {
		log.Fatalf("spawn intercommunicator: inter %v, remote %d, local %d", inter.IsInter(), inter.RemoteSize(), inter.Size())
	}
	return inter
}

// spawnInfo is the Info of every spawn: the host DYNPROG_SPAWN_HOST
// names, if set.
func spawnInfo() *mpi.Info {
	info := mpi.NewInfo()
	if h := os.Getenv("DYNPROG_SPAWN_HOST"); h != "" {
		check(info.Set("host", h), "info")
	}
	if d := os.Getenv("DYNPROG_SPAWN_TIMEOUT"); d != "" {
		check(info.Set("timeout", d), "info")
	}
	return info
}

// parentSide exchanges with the children of a spawn over inter: p2p both
// ways, the intercommunicator collectives, a merged intracommunicator,
// then disconnects.
func parentSide(inter, w *mpi.Comm) {
	me, n := w.Rank(), inter.RemoteSize()
	for c := 0; c < n; c++ {
		check(mpi.Send(inter, []int64{int64(100*me + c)}, c, 1), "Send to child")
	}
	for c := 0; c < n; c++ {
		buf := make([]int64, 1)
		st, err := mpi.Recv(inter, buf, mpi.AnySource, 2)
		check(err, "Recv from child")
		if want := int64(100*me+st.Source) + 1000; buf[0] != want {
			log.Fatalf("parent %d: child %d answered %d, want %d", me, st.Source, buf[0], want)
		}
	}
	// Bcast from the parents' rank 0 to the children.
	root := mpi.ProcNull
	if me == 0 {
		root = mpi.Root
	}
	check(mpi.Bcast(inter, []float64{3.5, 7}, root), "Bcast to children")
	// Allreduce across the groups: each side gets the other's sum.
	got := make([]int64, 1)
	check(mpi.Allreduce(inter, []int64{1}, got, mpi.Sum), "Allreduce")
	if got[0] != int64(n) {
		log.Fatalf("parent %d: intercomm Allreduce gave %d, want %d (children)", me, got[0], n)
	}
	merged, err := inter.IntercommMerge(false)
	check(err, "IntercommMerge")
	sum := make([]int64, 1)
	check(mpi.Allreduce(merged, []int64{int64(merged.Rank())}, sum, mpi.Sum), "Allreduce on merged")
	t := int64(merged.Size())
	if sum[0] != t*(t-1)/2 {
		log.Fatalf("parent %d: merged Allreduce %d, want %d", me, sum[0], t*(t-1)/2)
	}
	check(merged.Free(), "Free merged")
	check(mpi.CommDisconnect(inter), "CommDisconnect")
	fmt.Printf("parent %d: %d children ok\n", me, n)
}

// child is the children's side of parentSide (and of the other spawn modes).
func child(p *mpi.Comm) {
	w := mpi.World()
	me := w.Rank()
	mode := os.Args[1]
	if os.Getenv("DYNPROG_SPAWN_HOST") != "" {
		host, _ := os.Hostname()
		fmt.Printf("child %d runs on %s\n", me, host)
	}
	switch mode {
	case "die":
		fmt.Printf("child %d: exiting with status 3\n", me)
		os.Exit(3)
	case "hang":
		buf := make([]int64, 1)
		mpi.Recv(p, buf, 0, 99)
	case "timed":
		check(mpi.CommDisconnect(p), "CommDisconnect")
		return
	case "app0", "app1":
		if v, ok := w.Attr(mpi.KeyAppNum); !ok || fmt.Sprint(v) != mode[3:] {
			log.Fatalf("child %d (%s): MPI_APPNUM = %v", me, mode, v)
		}
	case "lookup":
		// Meet the parents a second time, through mpirun's name service.
		port, err := mpi.LookupName("dynprog-pubspawn", nil)
		check(err, "LookupName in the child")
		inter, err := mpi.CommConnect(port, nil, 0, w)
		check(err, "CommConnect to the parents")
		exchange(inter, w, false)
		check(mpi.CommDisconnect(inter), "CommDisconnect")
	case "nested-child":
		// Spawn a grandchild, then act as a child to the parent.
		g := spawn(w, 1, "child")
		parentSide(g, w)
	}
	nparents := p.RemoteSize()
	for k := 0; k < nparents; k++ {
		buf := make([]int64, 1)
		st, err := mpi.Recv(p, buf, mpi.AnySource, 1)
		check(err, "Recv from parent")
		if buf[0] != int64(100*st.Source+me) {
			log.Fatalf("child %d: parent %d sent %d", me, st.Source, buf[0])
		}
		check(mpi.Send(p, []int64{buf[0] + 1000}, st.Source, 2), "Send to parent")
	}
	buf := make([]float64, 2)
	check(mpi.Bcast(p, buf, 0), "Bcast from parent")
	if buf[0] != 3.5 || buf[1] != 7 {
		log.Fatalf("child %d: Bcast gave %v", me, buf)
	}
	got := make([]int64, 1)
	check(mpi.Allreduce(p, []int64{1}, got, mpi.Sum), "Allreduce")
	if got[0] != int64(nparents) {
		log.Fatalf("child %d: intercomm Allreduce gave %d, want %d", me, got[0], nparents)
	}
	merged, err := p.IntercommMerge(true)
	check(err, "IntercommMerge")
	sum := make([]int64, 1)
	check(mpi.Allreduce(merged, []int64{int64(merged.Rank())}, sum, mpi.Sum), "Allreduce on merged")
	check(merged.Free(), "Free merged")
	check(mpi.CommDisconnect(p), "CommDisconnect")
	if mpi.CommGetParent() != nil {
		log.Fatalf("child %d: CommGetParent after disconnect is not nil", me)
	}
	fmt.Printf("child %d of %d (%s): ok\n", me, w.Size(), mode)
}

// missing spawns a program that does not exist.
func missing(w *mpi.Comm) {
	prog := "/nonexistent/dynprog-missing"
	if p := os.Getenv("DYNPROG_MISSING"); p != "" {
		prog = p
	}
	_, errs, err := mpi.CommSpawn(prog, nil, 3, spawnInfo(), 0, w)
	if !errors.Is(err, mpi.ErrSpawn) {
		log.Fatalf("rank %d: spawning a missing program: err = %v, want MPI_ERR_SPAWN", w.Rank(), err)
	}
	if len(errs) != 3 {
		log.Fatalf("rank %d: %d error codes, want 3", w.Rank(), len(errs))
	}
	for i, e := range errs {
		if !errors.Is(e, mpi.ErrSpawn) {
			log.Fatalf("rank %d: child %d: %v, want MPI_ERR_SPAWN", w.Rank(), i, e)
		}
	}
	// The job is alive: a collective still works.
	got := make([]int64, 1)
	check(mpi.Allreduce(w, []int64{1}, got, mpi.Sum), "Allreduce after the failed spawn")
	if w.Rank() == 0 {
		fmt.Printf("spawn failed as expected: %v\n", errs[0])
	}
}

// server accepts k clients in turn on a port published as service.
func server(w *mpi.Comm, service string, k int) {
	port := ""
	if w.Rank() == 0 {
		var err error
		port, err = mpi.OpenPort(nil)
		check(err, "OpenPort")
		check(mpi.PublishName(service, nil, port), "PublishName")
		fmt.Println("published", service)
	}
	var base map[string]int64
	for i := 0; i < k; i++ {
		inter, err := mpi.CommAccept(port, nil, 0, w)
		check(err, "CommAccept")
		exchange(inter, w, true)
		check(mpi.CommDisconnect(inter), "CommDisconnect")
		base = checkLeaks(base, i, k)
	}
	if w.Rank() == 0 {
		check(mpi.UnpublishName(service, nil, port), "UnpublishName")
		check(mpi.ClosePort(port), "ClosePort")
		if _, err := mpi.LookupName(service, nil); !errors.Is(err, mpi.ErrName) {
			log.Fatalf("LookupName after UnpublishName: %v, want MPI_ERR_NAME", err)
		}
	}
	fmt.Printf("server %d: %d connections ok\n", w.Rank(), k)
}

// client connects k times to the port published as service.
func client(w *mpi.Comm, service string, k int) {
	port := ""
	if w.Rank() == 0 {
		var err error
		port, err = mpi.LookupName(service, nil)
		check(err, "LookupName")
	}
	var base map[string]int64
	for i := 0; i < k; i++ {
		inter, err := mpi.CommConnect(port, nil, 0, w)
		check(err, "CommConnect")
		exchange(inter, w, false)
		check(mpi.CommDisconnect(inter), "CommDisconnect")
		base = checkLeaks(base, i, k)
	}
	fmt.Printf("client %d: %d connections ok\n", w.Rank(), k)
}

// checkLeaks compares the inter-job channel's counters after connection
// i of k with those after the first: connections, unexpected messages and
// pending sends must not grow.
func checkLeaks(base map[string]int64, i, k int) map[string]int64 {
	c := mpi.Counters()
	if base == nil {
		return c
	}
	for _, key := range []string{"interjob_conns_out", "interjob_conns_in", "interjob_unexpected", "interjob_posted", "interjob_syncs", "interjob_peers"} {
		if c[key] > base[key] {
			log.Fatalf("rank %d: after %d of %d connections %s = %d, after the first %d", mpi.World().Rank(), i+1, k, key, c[key], base[key])
		}
	}
	return base
}

// exchange checks p2p both ways and a collective across inter.
func exchange(inter, w *mpi.Comm, server bool) {
	me := w.Rank()
	tag := 5
	for r := 0; r < inter.RemoteSize(); r++ {
		check(mpi.Send(inter, []int32{int32(me*10 + r)}, r, tag), "Send across")
	}
	for r := 0; r < inter.RemoteSize(); r++ {
		buf := make([]int32, 1)
		_, err := mpi.Recv(inter, buf, r, tag)
		check(err, "Recv across")
		if buf[0] != int32(r*10+me) {
			log.Fatalf("rank %d: got %d from remote %d", me, buf[0], r)
		}
	}
	got := make([]int64, 1)
	check(mpi.Allreduce(inter, []int64{int64(me + 1)}, got, mpi.Sum), "Allreduce across")
	n := int64(inter.RemoteSize())
	if got[0] != n*(n+1)/2 {
		log.Fatalf("rank %d: Allreduce across gave %d, want %d", me, got[0], n*(n+1)/2)
	}
}

// joinServer listens on loopback, prints the address, accepts one
// connection and joins over it.
func joinServer(w *mpi.Comm) {
	if w.Rank() != 0 {
		return
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	check(err, "listen")
	fmt.Println("listening", ln.Addr())
	c, err := ln.Accept()
	check(err, "accept")
	inter, err := mpi.CommJoin(c)
	check(err, "CommJoin")
	joined(inter, 1)
	c.Close()
}

// joinClient dials the server's address and joins over the connection.
func joinClient(w *mpi.Comm, addr string) {
	if w.Rank() != 0 {
		return
	}
	c, err := net.Dial("tcp4", addr)
	check(err, "dial")
	inter, err := mpi.CommJoin(c)
	check(err, "CommJoin")
	joined(inter, 2)
	c.Close()
}

// joined swaps numbers over a joined intercommunicator both ways.
func joined(inter *mpi.Comm, mine int64) {
	if inter.Size() != 1 || inter.RemoteSize() != 1 {
		log.Fatalf("CommJoin: sizes %d and %d, want 1 and 1", inter.Size(), inter.RemoteSize())
	}
	got := make([]int64, 1)
	_, err := mpi.Sendrecv(inter, []int64{mine}, 0, 3, got, 0, 3)
	check(err, "Sendrecv over the join")
	if got[0] != 3-mine {
		log.Fatalf("CommJoin: got %d, want %d", got[0], 3-mine)
	}
	check(mpi.CommDisconnect(inter), "CommDisconnect")
	fmt.Printf("joined %d ok\n", mine)
}

// pubSpawn publishes a port in mpirun's name service, spawns a child that
// looks it up and connects, and meets it on both intercommunicators.
func pubSpawn(w *mpi.Comm) {
	const service = "dynprog-pubspawn"
	port := ""
	if w.Rank() == 0 {
		var err error
		port, err = mpi.OpenPort(nil)
		check(err, "OpenPort")
		check(mpi.PublishName(service, nil, port), "PublishName")
		if err := mpi.PublishName(service, nil, port); !errors.Is(err, mpi.ErrService) {
			log.Fatalf("publishing %s twice: %v, want MPI_ERR_SERVICE", service, err)
		}
	}
	spawned := spawn(w, 2, "lookup")
	inter, err := mpi.CommAccept(port, nil, 0, w)
	check(err, "CommAccept")
	exchange(inter, w, true)
	check(mpi.CommDisconnect(inter), "CommDisconnect")
	if w.Rank() == 0 {
		check(mpi.UnpublishName(service, nil, port), "UnpublishName")
		check(mpi.ClosePort(port), "ClosePort")
	}
	parentSide(spawned, w)
}

// multiple spawns two commands at once, 1 and 2 processes, and checks the
// universe size mpirun -usize set (the test passes -usize 8).
func multiple(w *mpi.Comm) {
	if v, ok := w.Attr(mpi.KeyUniverseSize); !ok || v != 8 {
		log.Fatalf("MPI_UNIVERSE_SIZE = %v, want 8 (mpirun -usize 8)", v)
	}
	self, err := os.Executable()
	check(err, "os.Executable")
	inter, errs, err := mpi.CommSpawnMultiple([]mpi.SpawnCommand{
		{Command: self, Argv: []string{"app0"}, MaxProcs: 1},
		{Command: self, Argv: []string{"app1"}, MaxProcs: 2},
	}, 0, w)
	check(err, "CommSpawnMultiple")
	if len(errs) != 3 || inter.RemoteSize() != 3 {
		log.Fatalf("CommSpawnMultiple: %d codes, remote size %d", len(errs), inter.RemoteSize())
	}
	parentSide(inter, w)
}

// spawnTime prints how long spawning N children takes, R times: from the
// call until the intercommunicator is there (the children's Init done).
func spawnTime() {
	n, _ := strconv.Atoi(os.Args[2])
	rounds, _ := strconv.Atoi(os.Args[3])
	self, err := os.Executable()
	check(err, "os.Executable")
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		inter, _, err := mpi.CommSpawn(self, []string{"timed"}, n, nil, 0, mpi.Self())
		check(err, "CommSpawn")
		el := time.Since(t0)
		check(mpi.CommDisconnect(inter), "CommDisconnect")
		fmt.Printf("spawn %d children: %.1f ms\n", n, float64(el.Microseconds())/1e3)
	}
}
