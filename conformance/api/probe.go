package main

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"

	"github.com/adimpi/adimpi/mpi"
)

// probeMsgs is how many messages each rank sends rank 0 in the matched
// probe checks; every fourth is large (rendezvous on every device).
const probeMsgs = 24

// probeLen is the length in int32 of message k: small ones vary, large
// ones are 40 KiB and more.
func probeLen(k int) int {
	if k%4 == 3 {
		return 10000 + k
	}
	return 1 + k%7
}

// probePayload is message k from rank r: every element names r and k.
func probePayload(r, k int) []int32 {
	s := make([]int32, probeLen(k))
	for i := range s {
		s[i] = int32(r*100000 + k*100 + i%100)
	}
	return s
}

// sendProbeMsgs starts every rank's messages to rank 0 (rank 0's own too),
// tag k%5 (so tags repeat, and a source's messages with one tag must come
// in order).
func sendProbeMsgs(w *mpi.Comm) ([]*mpi.Request, error) {
	var reqs []*mpi.Request
	for k := range probeMsgs {
		q, err := mpi.Isend(w, probePayload(w.Rank(), k), 0, k%5)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, q)
	}
	return reqs, nil
}

// checkMsg checks that a received message is the one the status names:
// its payload names the status's source, and its length and tag fit the
// message number found in it; it returns that number.
func checkMsg(what string, st mpi.Status, got []int32) (int, error) {
	if len(got) == 0 {
		return 0, fmt.Errorf("%s: empty message", what)
	}
	r, k := int(got[0])/100000, int(got[0])%100000/100
	if r != st.Source || k%5 != st.Tag || len(got) != probeLen(k) || st.Bytes() != 4*len(got) {
		return 0, fmt.Errorf("%s: status says source %d, tag %d, %d bytes, but message %d of rank %d (tag %d, %d int32) arrived",
			what, st.Source, st.Tag, st.Bytes(), k, r, k%5, probeLen(k))
	}
	want := probePayload(r, k)
	for i := range got {
		if got[i] != want[i] {
			return 0, fmt.Errorf("%s: message %d of rank %d: int32 %d is %d, want %d", what, k, r, i, got[i], want[i])
		}
	}
	return k, nil
}

// probeThreads is how many goroutines drain rank 0's messages at once.
const probeThreads = 4

// checkMprobeThreads: rank 0 drains every rank's messages with
// probeThreads goroutines, each running Mprobe(AnySource, AnyTag) and then
// Mrecv into a buffer of the probed size. With a plain Probe and Recv one
// goroutine's Recv takes the message another probed (this check then fails
// with ErrTruncate or a wrong message); the matched probe must give each
// goroutine exactly the message it probed, each message once.
func checkMprobeThreads(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	reqs, err := sendProbeMsgs(w)
	if err != nil {
		return err
	}
	if me == 0 {
		var mu sync.Mutex
		seen := map[[2]int]bool{}
		total := np * probeMsgs
		errs := make(chan error, probeThreads)
		var next int // messages claimed so far, under mu
		for range probeThreads {
			go func() {
				for {
					mu.Lock()
					if next == total {
						mu.Unlock()
						errs <- nil
						return
					}
					next++
					mu.Unlock()
					m, st, err := mpi.Mprobe(w, mpi.AnySource, mpi.AnyTag)
					if err != nil {
						errs <- err
						return
					}
					// Whatever the goroutine does between the probe and
					// the receive, the message stays its own: yield to
					// the others here to give them every chance to take it.
					goruntime.Gosched()
					buf := make([]int32, st.Bytes()/4)
					rst, err := mpi.Mrecv(m, buf)
					if err != nil {
						errs <- err
						return
					}
					if rst.Source != st.Source || rst.Tag != st.Tag || rst.Bytes() != st.Bytes() {
						errs <- fmt.Errorf("Mrecv status (source %d, tag %d, %d bytes) differs from Mprobe's (%d, %d, %d)",
							rst.Source, rst.Tag, rst.Bytes(), st.Source, st.Tag, st.Bytes())
						return
					}
					k, err := checkMsg("Mprobe/Mrecv", st, buf)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					dup := seen[[2]int{st.Source, k}]
					seen[[2]int{st.Source, k}] = true
					mu.Unlock()
					if dup {
						errs <- fmt.Errorf("message %d of rank %d received twice", k, st.Source)
						return
					}
				}
			}()
		}
		for range probeThreads {
			if err := <-errs; err != nil {
				return err
			}
		}
		if len(seen) != total {
			return fmt.Errorf("received %d distinct messages, want %d", len(seen), total)
		}
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return err
	}
	return mpi.Barrier(w)
}

// checkMprobeHeld: rank 0 claims every message with Improbe (wildcard
// source, then each tag in turn) before receiving any, and receives them in
// reverse order, half with Imrecv: a claimed message stays out of matching
// (a Recv of anything finds nothing) and keeps its data until received.
// Then the error cases: a message received twice, a short buffer
// (ErrTruncate with the buffer filled), MessageNoProc.
func checkMprobeHeld(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	reqs, err := sendProbeMsgs(w)
	if err != nil {
		return err
	}
	if me == 0 {
		type claimed struct {
			m  *mpi.Message
			st mpi.Status
		}
		var held []claimed
		last := map[[2]int]int{} // (source, tag) -> message number last claimed
		for tag := 0; len(held) < np*probeMsgs; tag = (tag + 1) % 5 {
			m, st, ok, err := mpi.Improbe(w, mpi.AnySource, tag)
			if err != nil {
				return err
			}
			if ok {
				held = append(held, claimed{m, st})
			}
		}
		for tag := range 5 { // a neighbour may already send mprobeTruncate's message
			if _, ok, err := mpi.Iprobe(w, mpi.AnySource, tag); err != nil || ok {
				return fmt.Errorf("Iprobe of tag %d after every message was claimed: found %v, error %v; want nothing", tag, ok, err)
			}
		}
		var pending []*mpi.Request
		bufs := make([][]int32, len(held))
		for i := len(held) - 1; i >= 0; i-- {
			h := held[i]
			bufs[i] = make([]int32, h.st.Bytes()/4)
			if i%2 == 0 {
				q, err := mpi.Imrecv(h.m, bufs[i])
				if err != nil {
					return err
				}
				pending = append(pending, q)
				continue
			}
			if _, err := mpi.Mrecv(h.m, bufs[i]); err != nil {
				return err
			}
		}
		if _, err := mpi.Waitall(pending); err != nil {
			return err
		}
		for i, h := range held {
			k, err := checkMsg("Improbe/Mrecv", h.st, bufs[i])
			if err != nil {
				return err
			}
			key := [2]int{h.st.Source, h.st.Tag}
			if prev, ok := last[key]; ok && prev > k {
				return fmt.Errorf("messages from rank %d with tag %d were claimed out of order: %d after %d", h.st.Source, h.st.Tag, k, prev)
			}
			last[key] = k
		}
		if _, err := mpi.Mrecv(held[0].m, bufs[0]); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("Mrecv of a message already received: error %v, want ErrRequest", err)
		}
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return err
	}
	if err := mprobeTruncate(w); err != nil {
		return err
	}
	m, st, err := mpi.Mprobe(w, mpi.ProcNull, 3)
	if err != nil || m != mpi.MessageNoProc || st.Source != mpi.ProcNull {
		return fmt.Errorf("Mprobe(ProcNull): message %p, status %+v, error %v; want MessageNoProc", m, st, err)
	}
	st, err = mpi.Mrecv(m, []int32{})
	if err != nil || st.Source != mpi.ProcNull || st.Tag != mpi.AnyTag || st.Bytes() != 0 {
		return fmt.Errorf("Mrecv(MessageNoProc): status %+v, error %v; want source ProcNull, tag AnyTag, no data", st, err)
	}
	return mpi.Barrier(w)
}

// mprobeTruncate: each rank sends its right neighbour 5 int32, which
// Mrecv receives into 3: ErrTruncate, and the 3 filled.
func mprobeTruncate(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	q, err := mpi.Isend(w, []int32{1, 2, 3, 4, 5}, (me+1)%np, 77)
	if err != nil {
		return err
	}
	m, st, err := mpi.Mprobe(w, (me+np-1)%np, 77)
	if err != nil {
		return err
	}
	if st.Bytes() != 20 {
		return fmt.Errorf("Mprobe of 5 int32: %d bytes", st.Bytes())
	}
	short := make([]int32, 3)
	_, err = mpi.Mrecv(m, short)
	if !errors.Is(err, mpi.ErrTruncate) || short[0] != 1 || short[2] != 3 {
		return fmt.Errorf("Mrecv of 5 int32 into 3: error %v, data %v; want ErrTruncate and [1 2 3]", err, short)
	}
	_, err = q.Wait()
	return err
}

// checkIsendrecv exchanges around a ring with Isendrecv and
// IsendrecvReplace (small and large), and with ProcNull partners.
func checkIsendrecv(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	right, left := (me+1)%np, (me+np-1)%np
	for _, n := range []int{3, 20000} {
		send, recv := make([]float64, n), make([]float64, n)
		for i := range send {
			send[i] = float64(me*n + i)
		}
		q, err := mpi.Isendrecv(w, send, right, 5, recv, left, 5)
		if err != nil {
			return err
		}
		st, err := q.Wait()
		if err != nil {
			return err
		}
		if st.Source != left || st.Tag != 5 || st.Bytes() != 8*n {
			return fmt.Errorf("Isendrecv of %d float64: status source %d, tag %d, %d bytes; want %d, 5, %d", n, st.Source, st.Tag, st.Bytes(), left, 8*n)
		}
		for i, v := range recv {
			if v != float64(left*n+i) {
				return fmt.Errorf("Isendrecv of %d float64: element %d is %v, want %v", n, i, v, float64(left*n+i))
			}
		}
		q, err = mpi.IsendrecvReplace(w, send, right, 6, left, 6)
		if err != nil {
			return err
		}
		if _, err := q.Wait(); err != nil {
			return err
		}
		if err := checkFloats("IsendrecvReplace", send, recv); err != nil {
			return err
		}
	}
	buf := []int32{9}
	q, err := mpi.Isendrecv(w, buf, mpi.ProcNull, 1, buf, mpi.ProcNull, 1)
	if err != nil {
		return err
	}
	st, err := q.Wait()
	if err != nil || st.Source != mpi.ProcNull || buf[0] != 9 {
		return fmt.Errorf("Isendrecv with ProcNull: status %+v, error %v, buffer %v", st, err, buf)
	}
	return nil
}

func checkFloats(what string, got, want []float64) error {
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}

// checkRequestHandles: GetStatus reports an Irecv incomplete until its
// sender has been told to send, then its status, and leaves it for Wait;
// Free of an Isend in flight still delivers it; Free of an inactive
// persistent request ends it (Start fails); Free twice fails.
func checkRequestHandles(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	right, left := (me+1)%np, (me+np-1)%np
	got := make([]int64, 2)
	rq, err := mpi.Irecv(w, got, left, 40)
	if err != nil {
		return err
	}
	if _, done, err := rq.GetStatus(); err != nil || done {
		return fmt.Errorf("GetStatus before the sender was told to send: done %v, error %v; want false", done, err)
	}
	// Tell the left neighbour, who sends to this rank, to send; send once
	// the right neighbour says so.
	if _, err := mpi.Sendrecv(w, []int32{1}, left, 41, make([]int32, 1), right, 41); err != nil {
		return err
	}
	sq, err := mpi.Isend(w, []int64{int64(me), 7}, right, 40)
	if err != nil {
		return err
	}
	if err := sq.Free(); err != nil {
		return err
	}
	if st, err := sq.Wait(); err != nil || st.Source != mpi.AnySource {
		return fmt.Errorf("Wait on a freed request: status %+v, error %v; want an empty status at once", st, err)
	}
	var st mpi.Status
	for done := false; !done; {
		if st, done, err = rq.GetStatus(); err != nil {
			return err
		}
	}
	if st.Source != left || st.Tag != 40 || st.Bytes() != 16 {
		return fmt.Errorf("GetStatus: source %d, tag %d, %d bytes; want %d, 40, 16", st.Source, st.Tag, st.Bytes(), left)
	}
	if !rq.Active() {
		return fmt.Errorf("GetStatus made the request inactive")
	}
	st2, err := rq.Wait()
	if err != nil || st2.Source != left || st2.Tag != 40 || got[0] != int64(left) || got[1] != 7 {
		return fmt.Errorf("Wait after GetStatus: status %+v, error %v, data %v", st2, err, got)
	}
	pq, err := mpi.SendInit(w, []int32{1}, right, 42)
	if err != nil {
		return err
	}
	if err := pq.Free(); err != nil {
		return err
	}
	if err := pq.Start(); !errors.Is(err, mpi.ErrRequest) {
		return fmt.Errorf("Start of a freed persistent request: error %v, want ErrRequest", err)
	}
	if err := pq.Free(); !errors.Is(err, mpi.ErrRequest) {
		return fmt.Errorf("Free twice: error %v, want ErrRequest", err)
	}
	return mpi.Barrier(w)
}
