//go:build cgo

package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// cStatus is MPICH's MPI_Status: five ints, the byte count split over the
// first two (bit 0 of the second is the cancelled flag).
type cStatus struct {
	countLo          int32
	countHiCancelled int32
	source           int32
	tag              int32
	err              int32
}

const (
	statusIgnore = 1 // MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE: (MPI_Status *)1
	statusSize   = int(unsafe.Sizeof(cStatus{}))
)

// statusAt is the i-th status of the array at p, nil for the ignore values.
func statusAt(p uintptr, i int) *cStatus {
	if p <= statusIgnore {
		return nil
	}
	return (*cStatus)(addrPointer(p + uintptr(i*statusSize)))
}

// putStatus stores s into the C status at p (unless ignored).
func putStatus(p uintptr, s mpi.Status) {
	if cs := statusAt(p, 0); cs != nil {
		setStatus(cs, s)
	}
}

func setStatus(cs *cStatus, s mpi.Status) {
	n := uint64(s.Bytes())
	cs.countLo = int32(uint32(n))
	cs.countHiCancelled = int32(n>>32) << 1
	if s.Cancelled {
		cs.countHiCancelled |= 1
	}
	cs.source, cs.tag = int32(s.Source), int32(s.Tag)
}

func (cs *cStatus) bytes() int {
	return int(uint64(uint32(cs.countLo)) | uint64(uint32(cs.countHiCancelled)>>1)<<32)
}

func xSend(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm) error {
	b, err := buf("MPI_Send", p, count, t)
	if err != nil {
		return err
	}
	return mpi.SendBuf(c, b, dest, tag)
}

func xSsend(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm) error {
	b, err := buf("MPI_Ssend", p, count, t)
	if err != nil {
		return err
	}
	return mpi.SsendBuf(c, b, dest, tag)
}

func xRsend(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm) error {
	b, err := buf("MPI_Rsend", p, count, t)
	if err != nil {
		return err
	}
	return mpi.RsendBuf(c, b, dest, tag)
}

func xBsend(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm) error {
	b, err := buf("MPI_Bsend", p, count, t)
	if err != nil {
		return err
	}
	return mpi.BsendBuf(c, b, dest, tag)
}

func xRecv(p unsafe.Pointer, count int, t *datatype.Type, src, tag int, c *mpi.Comm, st uintptr) error {
	b, err := buf("MPI_Recv", p, count, t)
	if err != nil {
		return err
	}
	s, err := mpi.RecvBuf(c, b, src, tag)
	putStatus(st, s)
	return err
}

// startReq is the body of every call that returns a new request.
type startFn func(c *mpi.Comm, b mpi.Buffer, peer, tag int) (*mpi.Request, error)

func startReq(fn string, f startFn, persistent bool, p unsafe.Pointer, count int, t *datatype.Type, peer, tag int, c *mpi.Comm, req *C.int) error {
	b, err := buf(fn, p, count, t)
	if err != nil {
		return err
	}
	r, err := f(c, b, peer, tag)
	if err != nil {
		return err
	}
	*req = C.int(requests.add(reqEntry{r: r, persistent: persistent}))
	return nil
}

func xIsend(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm, req *C.int) error {
	return startReq("MPI_Isend", mpi.IsendBuf, false, p, count, t, dest, tag, c, req)
}

func xIssend(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm, req *C.int) error {
	return startReq("MPI_Issend", mpi.IssendBuf, false, p, count, t, dest, tag, c, req)
}

func xIrsend(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm, req *C.int) error {
	return startReq("MPI_Irsend", mpi.IrsendBuf, false, p, count, t, dest, tag, c, req)
}

func xIbsend(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm, req *C.int) error {
	return startReq("MPI_Ibsend", mpi.IbsendBuf, false, p, count, t, dest, tag, c, req)
}

func xIrecv(p unsafe.Pointer, count int, t *datatype.Type, src, tag int, c *mpi.Comm, req *C.int) error {
	return startReq("MPI_Irecv", mpi.IrecvBuf, false, p, count, t, src, tag, c, req)
}

func xSend_init(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm, req *C.int) error {
	return startReq("MPI_Send_init", mpi.SendInitBuf, true, p, count, t, dest, tag, c, req)
}

func xSsend_init(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm, req *C.int) error {
	return startReq("MPI_Ssend_init", mpi.SsendInitBuf, true, p, count, t, dest, tag, c, req)
}

func xRsend_init(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm, req *C.int) error {
	return startReq("MPI_Rsend_init", mpi.RsendInitBuf, true, p, count, t, dest, tag, c, req)
}

func xBsend_init(p unsafe.Pointer, count int, t *datatype.Type, dest, tag int, c *mpi.Comm, req *C.int) error {
	return startReq("MPI_Bsend_init", mpi.BsendInitBuf, true, p, count, t, dest, tag, c, req)
}

func xRecv_init(p unsafe.Pointer, count int, t *datatype.Type, src, tag int, c *mpi.Comm, req *C.int) error {
	return startReq("MPI_Recv_init", mpi.RecvInitBuf, true, p, count, t, src, tag, c, req)
}

func xSendrecv(sp unsafe.Pointer, scount int, st *datatype.Type, dest, stag int, rp unsafe.Pointer, rcount int, rt *datatype.Type, src, rtag int, c *mpi.Comm, status uintptr) error {
	sb, err := buf("MPI_Sendrecv", sp, scount, st)
	if err != nil {
		return err
	}
	rb, err := buf("MPI_Sendrecv", rp, rcount, rt)
	if err != nil {
		return err
	}
	s, err := mpi.SendrecvBuf(c, sb, dest, stag, rb, src, rtag)
	putStatus(status, s)
	return err
}

func xSendrecv_replace(p unsafe.Pointer, count int, t *datatype.Type, dest, stag, src, rtag int, c *mpi.Comm, status uintptr) error {
	b, err := buf("MPI_Sendrecv_replace", p, count, t)
	if err != nil {
		return err
	}
	s, err := mpi.SendrecvReplaceBuf(c, b, dest, stag, src, rtag)
	putStatus(status, s)
	return err
}

func xProbe(src, tag int, c *mpi.Comm, st uintptr) error {
	s, err := mpi.Probe(c, src, tag)
	putStatus(st, s)
	return err
}

func xIprobe(src, tag int, c *mpi.Comm, flag *C.int, st uintptr) error {
	s, ok, err := mpi.Iprobe(c, src, tag)
	*flag = cbool(ok)
	if ok {
		putStatus(st, s)
	}
	return err
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// emptyStatus is what completing MPI_REQUEST_NULL gives.
var emptyStatus = mpi.Status{Source: mpi.AnySource, Tag: mpi.AnyTag}

// reqOf decodes a request handle; MPI_REQUEST_NULL is a nil request.
func reqOf(fn string, h C.int) (reqEntry, error) {
	if int32(h) == hRequestNull {
		return reqEntry{}, nil
	}
	e, ok := requests.get(int32(h))
	if !ok {
		return e, newErr(mpi.ErrRequest, fn, "invalid request handle %#x", uint32(h))
	}
	return e, nil
}

// retire frees a completed non-persistent request's handle.
func retire(e reqEntry, req *C.int) {
	if !e.persistent {
		requests.del(int32(*req))
		*req = C.int(hRequestNull)
	}
}

func xWait(req *C.int, st uintptr) error {
	e, err := reqOf("MPI_Wait", *req)
	if err != nil || e.r == nil {
		putStatus(st, emptyStatus)
		return err
	}
	s, err := e.r.Wait()
	retire(e, req)
	putStatus(st, s)
	return err
}

func xTest(req *C.int, flag *C.int, st uintptr) error {
	e, err := reqOf("MPI_Test", *req)
	if err != nil || e.r == nil {
		*flag = 1
		putStatus(st, emptyStatus)
		return err
	}
	s, ok, err := e.r.Test()
	*flag = cbool(ok)
	if ok {
		retire(e, req)
		putStatus(st, s)
	}
	return err
}

func xRequest_get_status(req int32, flag *C.int, st uintptr) error {
	e, err := reqOf("MPI_Request_get_status", C.int(req))
	if err != nil || e.r == nil {
		*flag = 1
		putStatus(st, emptyStatus)
		return err
	}
	s, ok, err := e.r.GetStatus()
	*flag = cbool(ok)
	if ok {
		putStatus(st, s)
	}
	return err
}

// reqArray is the C array of n request handles at p.
func reqArray(p *C.int, n int) []C.int {
	if n <= 0 {
		return nil
	}
	return unsafe.Slice(p, n)
}

// waitall completes every request in order: waiting for each in turn
// completes them all, and costs no allocation. An error goes into that
// request's status and makes the call return MPI_ERR_IN_STATUS.
func xWaitall(n int, reqs *C.int, sts uintptr) error {
	var first error
	for i, h := range reqArray(reqs, n) {
		e, err := reqOf("MPI_Waitall", h)
		s := emptyStatus
		if err == nil && e.r != nil {
			s, err = e.r.Wait()
			retire(e, &reqArray(reqs, n)[i])
		}
		if cs := statusAt(sts, i); cs != nil {
			setStatus(cs, s)
			cs.err = 0
			if err != nil {
				cs.err = codeOf(err)
			}
		}
		if err != nil && first == nil {
			first = err
		}
	}
	if first != nil && n > 1 {
		// The request's error has run its communicator's handler already.
		return &classErr{17, "MPI_Waitall: MPI_ERR_IN_STATUS: a request failed (see its status): " + first.Error()}
	}
	return first
}

// goReqs turns a C request array into mpi requests (nil for
// MPI_REQUEST_NULL) and their entries.
func goReqs(fn string, reqs []C.int) ([]*mpi.Request, []reqEntry, error) {
	rs := make([]*mpi.Request, len(reqs))
	es := make([]reqEntry, len(reqs))
	for i, h := range reqs {
		e, err := reqOf(fn, h)
		if err != nil {
			return nil, nil, err
		}
		rs[i], es[i] = e.r, e
	}
	return rs, es, nil
}

func xTestall(n int, reqs *C.int, flag *C.int, sts uintptr) error {
	hs := reqArray(reqs, n)
	rs, es, err := goReqs("MPI_Testall", hs)
	if err != nil {
		return err
	}
	ss, ok, err := mpi.Testall(rs)
	*flag = cbool(ok)
	if ok {
		for i := range hs {
			if rs[i] != nil {
				retire(es[i], &hs[i])
			}
			if cs := statusAt(sts, i); cs != nil && i < len(ss) {
				setStatus(cs, ss[i])
			}
		}
	}
	return err
}

func xWaitany(n int, reqs *C.int, idx *C.int, st uintptr) error {
	hs := reqArray(reqs, n)
	rs, es, err := goReqs("MPI_Waitany", hs)
	if err != nil {
		return err
	}
	i, s, err := mpi.Waitany(rs)
	*idx = C.int(i)
	if i >= 0 {
		retire(es[i], &hs[i])
		putStatus(st, s)
	} else {
		putStatus(st, emptyStatus)
	}
	return err
}

func xTestany(n int, reqs *C.int, idx *C.int, flag *C.int, st uintptr) error {
	hs := reqArray(reqs, n)
	rs, es, err := goReqs("MPI_Testany", hs)
	if err != nil {
		return err
	}
	i, s, ok, err := mpi.Testany(rs)
	*idx, *flag = C.int(i), cbool(ok)
	if ok && i >= 0 {
		retire(es[i], &hs[i])
		putStatus(st, s)
	} else if ok {
		putStatus(st, emptyStatus)
	}
	return err
}

func some(fn string, wait bool, n int, reqs *C.int, outcount *C.int, idxs *C.int, sts uintptr) error {
	hs := reqArray(reqs, n)
	rs, es, err := goReqs(fn, hs)
	if err != nil {
		return err
	}
	var is []int
	var ss []mpi.Status
	if wait {
		is, ss, err = mpi.Waitsome(rs)
	} else {
		is, ss, err = mpi.Testsome(rs)
	}
	active := false
	for _, r := range rs {
		active = active || r.Active()
	}
	if is == nil && wait && !active {
		*outcount = C.int(mpi.Undefined)
		return err
	}
	*outcount = C.int(len(is))
	out := reqArray(idxs, len(is))
	for k, i := range is {
		out[k] = C.int(i)
		retire(es[i], &hs[i])
		if cs := statusAt(sts, k); cs != nil {
			setStatus(cs, ss[k])
		}
	}
	return err
}

func xWaitsome(n int, reqs *C.int, outcount *C.int, idxs *C.int, sts uintptr) error {
	return some("MPI_Waitsome", true, n, reqs, outcount, idxs, sts)
}

func xTestsome(n int, reqs *C.int, outcount *C.int, idxs *C.int, sts uintptr) error {
	return some("MPI_Testsome", false, n, reqs, outcount, idxs, sts)
}

func xStart(req *C.int) error {
	e, err := reqOf("MPI_Start", *req)
	if err != nil {
		return err
	}
	if e.r == nil {
		return newErr(mpi.ErrRequest, "MPI_Start", "request is MPI_REQUEST_NULL")
	}
	return e.r.Start()
}

func xStartall(n int, reqs *C.int) error {
	for i := range reqArray(reqs, n) {
		if err := xStart(&reqArray(reqs, n)[i]); err != nil {
			return err
		}
	}
	return nil
}

func xRequest_free(req *C.int) error {
	e, err := reqOf("MPI_Request_free", *req)
	if err != nil {
		return err
	}
	if e.r == nil {
		return newErr(mpi.ErrRequest, "MPI_Request_free", "request is MPI_REQUEST_NULL")
	}
	// The freed operation may still run, in the device or in a goroutine
	// (a non-blocking collective), where the C fast path cannot see it.
	fast.spoiled = true
	err = e.r.Free()
	requests.del(int32(*req))
	*req = C.int(hRequestNull)
	return err
}

func xCancel(req *C.int) error {
	e, err := reqOf("MPI_Cancel", *req)
	if err != nil || e.r == nil {
		return err
	}
	return e.r.Cancel()
}

func xTest_cancelled(st uintptr, flag *C.int) error {
	cs := statusAt(st, 0)
	if cs == nil {
		return newErr(mpi.ErrArg, "MPI_Test_cancelled", "status is MPI_STATUS_IGNORE")
	}
	*flag = C.int(cs.countHiCancelled & 1)
	return nil
}

func xGet_count(st uintptr, t *datatype.Type, count *C.int) error {
	cs := statusAt(st, 0)
	if cs == nil {
		return newErr(mpi.ErrArg, "MPI_Get_count", "status is MPI_STATUS_IGNORE")
	}
	n, size := cs.bytes(), t.Size()
	switch {
	case size == 0 && n == 0:
		*count = 0
	case size == 0 || n%size != 0:
		*count = C.int(mpi.Undefined)
	default:
		*count = C.int(n / size)
	}
	return nil
}

func xGet_elements(st uintptr, t *datatype.Type, count *C.int) error {
	cs := statusAt(st, 0)
	if cs == nil {
		return newErr(mpi.ErrArg, "MPI_Get_elements", "status is MPI_STATUS_IGNORE")
	}
	*count = C.int(t.Elements(cs.bytes()))
	return nil
}

func xBuffer_attach(p unsafe.Pointer, size int) error {
	if size < 0 {
		return newErr(mpi.ErrArg, "MPI_Buffer_attach", "size %d is negative", size)
	}
	return mpi.BufferAttach(unsafe.Slice((*byte)(p), size))
}

func xBuffer_detach(addr *uintptr, size *C.int) error {
	b, err := mpi.BufferDetach()
	if err != nil {
		return err
	}
	*addr, *size = 0, C.int(len(b))
	if len(b) > 0 {
		*addr = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	}
	return nil
}

// messages: MPI_Mprobe's handles.
func putMessage(m *mpi.Message, msg *C.int) {
	switch {
	case m == nil:
		*msg = C.int(hMessageNull)
	case m == mpi.MessageNoProc:
		*msg = C.int(hMessageNoProc)
	default:
		*msg = C.int(messages.add(m))
	}
}

func takeMessage(fn string, msg *C.int) (*mpi.Message, error) {
	switch int32(*msg) {
	case hMessageNoProc:
		*msg = C.int(hMessageNull)
		return mpi.MessageNoProc, nil
	case hMessageNull:
		return nil, newErr(mpi.ErrRequest, fn, "message is MPI_MESSAGE_NULL")
	}
	m, ok := messages.get(int32(*msg))
	if !ok {
		return nil, newErr(mpi.ErrRequest, fn, "invalid message handle %#x", uint32(*msg))
	}
	messages.del(int32(*msg))
	*msg = C.int(hMessageNull)
	return m, nil
}

func xMprobe(src, tag int, c *mpi.Comm, msg *C.int, st uintptr) error {
	m, s, err := mpi.Mprobe(c, src, tag)
	if err != nil {
		return err
	}
	putMessage(m, msg)
	putStatus(st, s)
	return nil
}

func xImprobe(src, tag int, c *mpi.Comm, flag *C.int, msg *C.int, st uintptr) error {
	m, s, ok, err := mpi.Improbe(c, src, tag)
	if err != nil {
		return err
	}
	*flag = cbool(ok)
	if ok {
		putMessage(m, msg)
		putStatus(st, s)
	}
	return nil
}

func xMrecv(p unsafe.Pointer, count int, t *datatype.Type, msg *C.int, st uintptr) error {
	m, err := takeMessage("MPI_Mrecv", msg)
	if err != nil {
		return err
	}
	b, err := buf("MPI_Mrecv", p, count, t)
	if err != nil {
		return err
	}
	s, err := mpi.MrecvBuf(m, b)
	putStatus(st, s)
	return err
}

func xImrecv(p unsafe.Pointer, count int, t *datatype.Type, msg *C.int, req *C.int) error {
	m, err := takeMessage("MPI_Imrecv", msg)
	if err != nil {
		return err
	}
	b, err := buf("MPI_Imrecv", p, count, t)
	if err != nil {
		return err
	}
	r, err := mpi.ImrecvBuf(m, b)
	if err != nil {
		return err
	}
	*req = C.int(requests.add(reqEntry{r: r}))
	return nil
}
