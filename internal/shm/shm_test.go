package shm

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// When the test binary is started with SHM_CHILD=pid:fd:key it plays the
// importing peer: it maps the parent's segment, checks the parent's pattern,
// writes its own, and wakes the parent's futex.
func TestMain(m *testing.M) {
	if spec := os.Getenv("SHM_CHILD"); spec != "" {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
}

func child(spec string) int {
	var pid, fd int
	var key uint64
	if _, err := fmt.Sscanf(spec, "%d:%d:%x", &pid, &fd, &key); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := Import(pid, fd, key^1); err == nil {
		fmt.Fprintln(os.Stderr, "import with a wrong key succeeded")
		return 3
	}
	s, err := Import(pid, fd, key)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	for i := 0; i < 4096; i++ {
		if s.Mem[HeaderSize+i] != byte(i) {
			fmt.Fprintf(os.Stderr, "byte %d = %d\n", i, s.Mem[HeaderSize+i])
			return 5
		}
		s.Mem[HeaderSize+4096+i] = byte(i * 3)
	}
	w := s.Uint32(HeaderSize + 8192)
	atomic.StoreUint32(w, 1)
	if err := FutexWake(w, 1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 6
	}
	return 0
}

func shmEntries(t *testing.T) int {
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	return len(ents)
}

func TestExportImportAcrossProcesses(t *testing.T) {
	before := shmEntries(t)
	s, err := Export("adimpi-test", 3*4096)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 4096; i++ {
		s.Mem[HeaderSize+i] = byte(i)
	}
	if n := shmEntries(t); n != before {
		t.Fatalf("/dev/shm went from %d to %d entries: segments must not be files there", before, n)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SHM_CHILD="+strconv.Itoa(os.Getpid())+":"+strconv.Itoa(s.FD)+":"+strconv.FormatUint(s.Key, 16))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := s.Uint32(HeaderSize + 8192)
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		exited <- err
		atomic.CompareAndSwapUint32(w, 0, 2) // a child that died without waking us
		FutexWake(w, 1)
	}()
	for atomic.LoadUint32(w) == 0 {
		if err := FutexWait(w, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-exited; err != nil || atomic.LoadUint32(w) != 1 {
		t.Fatalf("child: %v (flag %d)", err, atomic.LoadUint32(w))
	}
	for i := 0; i < 4096; i++ {
		if s.Mem[HeaderSize+4096+i] != byte(i*3) {
			t.Fatalf("child's write at %d not visible", i)
		}
	}
}

func TestRemoteWriteReadOwnProcess(t *testing.T) {
	dst := make([]byte, 10000)
	a, b := []byte("hello, "), make([]byte, 9000)
	for i := range b {
		b[i] = byte(i)
	}
	if err := RemoteWrite(os.Getpid(), uintptr(unsafe.Pointer(&dst[5])), [][]byte{a, nil, b}); err != nil {
		t.Skipf("process_vm_writev not permitted here: %v", err)
	}
	if string(dst[5:12]) != "hello, " || dst[12+8999] != byte(8999%256) || dst[4] != 0 {
		t.Fatal("remote write landed wrong")
	}
	got := make([]byte, 7)
	if err := RemoteRead(os.Getpid(), uintptr(unsafe.Pointer(&dst[5])), [][]byte{got}); err != nil || string(got) != "hello, " {
		t.Fatalf("remote read: %q %v", got, err)
	}
	if !Alive(os.Getpid()) {
		t.Fatal("own process reported dead")
	}
}

func TestFutexTimeout(t *testing.T) {
	s, err := Export("adimpi-futex", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := s.Uint32(HeaderSize)
	start := time.Now()
	if err := FutexWait(w, 0, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 10*time.Millisecond {
		t.Fatal("futex wait returned before its timeout with nothing to wake it")
	}
	if err := FutexWait(w, 7, time.Hour); err != nil { // value differs: returns at once
		t.Fatal(err)
	}
}

func TestRemoteScatterUnevenPieces(t *testing.T) {
	src := make([]byte, 5000)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, 20000)
	// local: 3 uneven pieces; remote: 4 of every 16 bytes of dst, 1250
	// pieces (more than one call's IOV_MAX)
	local := [][]byte{src[:1], src[1:3333], src[3333:]}
	var remote []RemoteSeg
	for i := 0; i < 1250; i++ {
		remote = append(remote, RemoteSeg{Addr: uint64(uintptr(unsafe.Pointer(&dst[i*16]))), Len: 4})
	}
	remote = append(remote, RemoteSeg{Addr: uint64(uintptr(unsafe.Pointer(&dst[0]))), Len: 0})
	if err := RemoteScatter(os.Getpid(), local, remote); err != nil {
		t.Skipf("process_vm_writev not permitted here: %v", err)
	}
	for i := 0; i < 1250; i++ {
		for j := 0; j < 16; j++ {
			got, want := dst[i*16+j], byte(0)
			if j < 4 {
				want = src[i*4+j]
			}
			if got != want {
				t.Fatalf("dst[%d] = %d, want %d", i*16+j, got, want)
			}
		}
	}
	if err := RemoteScatter(os.Getpid(), local, remote[:3]); err == nil {
		t.Fatal("mismatched byte counts accepted")
	}
}

// A process may import a segment it exported (several ranks of a job in one
// test process do): the import is a second mapping of the same memory.
func TestImportOwnSegment(t *testing.T) {
	s, err := Export("own", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := Import(os.Getpid(), s.FD, s.Key)
	if err != nil {
		t.Fatalf("Import of an own segment: %v", err)
	}
	defer v.Close()
	s.Mem[HeaderSize] = 42
	if v.Mem[HeaderSize] != 42 || &v.Mem[0] == &s.Mem[0] {
		t.Fatal("the import is not a second mapping of the exported memory")
	}
}
