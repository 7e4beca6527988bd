package reliable

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
)

// EtherType is the EtherType of the job's frames (IEEE 802 local
// experimental); the XDP program steers frames by it and by the job id.
const EtherType = 0x88B5

// A frame, byte offsets from the start of the Ethernet header. Multi-byte
// fields after the EtherType are little-endian. The job id comes first so
// that the XDP program finds it at a fixed place. The header tag covers
// the bytes from offSrc to offSack, and the selective acknowledgement
// after them when flagSack says there is one (see authenticator): the
// first 24 of them are the same in every frame from one rank to another
// (offSrc to offKind), the rest change.
const (
	offDst    = 0  // destination MAC
	offSrc    = 6  // source MAC
	offType   = 12 // EtherType, big-endian
	offJob    = 14 // u64 job id
	offTo     = 22 // u32 destination rank
	offFrom   = 26 // u32 source rank
	offKind   = 30 // u8 kindData, kindAck, kindBye
	offFlags  = 31 // u8 flagFirst, flagLast, flagProbe, flagSack
	offSeq    = 32 // u32 sequence number of a data frame
	offAck    = 36 // u32 the next sequence number the sender expects from the receiver
	offWindow = 40 // u16 credits: frames the sender accepts beyond ack
	offLen    = 42 // u16 payload bytes
	offHead   = 44 // u16 first fragment: the message's head length (2 bytes of padding follow)
	offTotal  = 48 // u32 first fragment: head + body length of the message
	offSack   = 52 // with flagSack: Window bits, bit i: the sender holds sequence number ack+1+i
	offNonce  = 84 // u64 with a tag over the whole frame: the sender's count of tagged frames (the nonce)
	hdrLen    = offNonce + 8
	sackLen   = Window / 8
	tagLen    = 16 // tag after the payload (see authenticator)
)

// Frame kinds and flags.
const (
	kindData = 1
	kindAck  = 2
	kindBye  = 3

	flagFirst = 1
	flagLast  = 2
	flagProbe = 4 // on an acknowledgement: a keepalive probe, answer at once
	flagSack  = 8 // the selective acknowledgement is not empty: read (and tag) it
)

// authenticator tags frames under keys derived from the job's secret. The
// tag covers the header from the source MAC on — the job, both ranks, the
// sequence numbers, the acknowledgements — so that no frame from elsewhere
// is believed, and, when whole is set, the payload too.
//
// A tag over the header only is SipHash-2-4's 128-bit output: a keyed
// function made for short inputs, which costs about half of a GMAC tag on
// a frame header (one AES block for the nonce plus the GHASH, each through
// the FIPS module's checks). It covers what the receiver reads and no
// more: the 32 bytes of the selective acknowledgement only when flagSack
// (which it covers) says there is one — most frames have none — and not
// the count, which SipHash does not need. The hash's state after the
// first 24 covered bytes, the same in every frame between two ranks in
// one direction, is kept per peer (sipPrefix): a frame header then costs
// three compressions of a word and the finalization, where the whole
// header cost eleven. A tag over the whole frame is GMAC (AES-256-GCM
// with the frame as additional data and nothing to encrypt), which is
// faster than SipHash on a long payload. GCM needs a nonce never used
// twice under one key: it is the sending rank (every rank of the job
// shares the key) and the rank's own count of tagged frames, which the
// frame carries; the count starts at a random point, so that another
// transport of the same rank under the same secret (a spawned job's) does
// not repeat it.
type authenticator struct {
	gcm    cipher.AEAD
	k0, k1 uint64 // the SipHash key
	whole  bool
	count  uint64
	nonce  [12]byte
	tag    []byte
}

// sipPrefix is SipHash's state after the first 24 covered bytes of a
// frame (source MAC, EtherType, job, both ranks), with those bytes: a
// frame that starts with them resumes from the state. The state is a
// function of the bytes and the key alone, so a frame that starts
// otherwise (a stranger's, another peer's) is hashed from the start and
// its state kept instead; which peer's prefix a frame uses is a matter of
// speed, never of what the tag means.
type sipPrefix struct {
	w  [3]uint64
	s  sipState
	ok bool
}

func newAuthenticator(secret []byte, whole bool) *authenticator {
	a := &authenticator{whole: whole, tag: make([]byte, 0, tagLen)}
	var start [8]byte
	_, _ = rand.Read(start[:])
	a.count = binary.LittleEndian.Uint64(start[:]) >> 1
	if !whole {
		key := sha256.Sum256(append([]byte("adimpi xdp wire siphash "), secret...))
		a.k0, a.k1 = binary.LittleEndian.Uint64(key[:8]), binary.LittleEndian.Uint64(key[8:16])
		return a
	}
	key := sha256.Sum256(append([]byte("adimpi xdp wire "), secret...))
	blk, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	if a.gcm, err = cipher.NewGCM(blk); err != nil {
		panic(err)
	}
	return a
}

// nonceOf is the GCM nonce of frame f: its source rank and its count.
func (a *authenticator) nonceOf(f []byte) []byte {
	copy(a.nonce[:4], f[offFrom:offFrom+4])
	copy(a.nonce[4:], f[offNonce:offNonce+8])
	return a.nonce[:]
}

// headerEnd is where the header tag's cover of hdr ends: before the
// selective acknowledgement, or after it when the frame has one.
func headerEnd(hdr []byte) int {
	if hdr[offFlags]&flagSack != 0 {
		return offSack + sackLen
	}
	return offSack
}

// sipTag writes the SipHash tag of hdr's covered bytes into tag, resuming
// from pre when hdr starts with its prefix and keeping hdr's in it
// otherwise; pre may be nil.
func (a *authenticator) sipTag(tag, hdr []byte, pre *sipPrefix) {
	le := binary.LittleEndian
	w := [3]uint64{le.Uint64(hdr[offSrc:]), le.Uint64(hdr[offSrc+8:]), le.Uint64(hdr[offSrc+16:])}
	var s sipState
	if pre != nil && pre.ok && pre.w == w {
		s = pre.s
	} else {
		s = sipStart(a.k0, a.k1, true)
		s.word(w[0])
		s.word(w[1])
		s.word(w[2])
		if pre != nil {
			*pre = sipPrefix{w: w, s: s, ok: true}
		}
	}
	end := headerEnd(hdr)
	lo, hi := s.finish(hdr[offSrc+24:end], end-offSrc, true)
	le.PutUint64(tag, lo)
	le.PutUint64(tag[8:], hi)
}

// sign writes the tag of frame f (hdrLen + payload bytes, with tagLen
// bytes of room after them) after the payload; pre is the prefix state of
// the frame's peer (see sipPrefix). The tag over the whole frame stamps a
// fresh count first.
func (a *authenticator) sign(f []byte, n int, pre *sipPrefix) {
	if !a.whole {
		a.sipTag(f[n:n+tagLen], f, pre)
		return
	}
	a.count++
	binary.LittleEndian.PutUint64(f[offNonce:], a.count)
	a.tag = a.gcm.Seal(a.tag[:0], a.nonceOf(f), nil, f[offSrc:n])
	copy(f[n:n+tagLen], a.tag)
}

// verify reports whether the last tagLen bytes of f are its tag.
func (a *authenticator) verify(f []byte, pre *sipPrefix) bool {
	n := len(f) - tagLen
	if !a.whole {
		return a.verifyHeader(f, f[n:], pre)
	}
	_, err := a.gcm.Open(a.tag[:0], a.nonceOf(f), f[n:], f[offSrc:n])
	return err == nil
}

// verifyHeader reports whether tag is the tag of a frame whose header is
// hdr, for a tag that covers the header only.
func (a *authenticator) verifyHeader(hdr, tag []byte, pre *sipPrefix) bool {
	var want [tagLen]byte
	a.sipTag(want[:], hdr, pre)
	return subtle.ConstantTimeCompare(want[:], tag) == 1
}

// header is a decoded frame header.
type header struct {
	job        uint64
	to, from   int
	kind       byte
	flags      byte
	seq, ack   uint32
	sack       sackMap
	window     int
	plen, head int
	total      int
}

// parse decodes the header of frame f; the selective acknowledgement is
// empty unless flagSack says otherwise.
func parse(f []byte) header {
	le := binary.LittleEndian
	h := header{
		job: le.Uint64(f[offJob:]), to: int(le.Uint32(f[offTo:])), from: int(le.Uint32(f[offFrom:])),
		kind: f[offKind], flags: f[offFlags], seq: le.Uint32(f[offSeq:]), ack: le.Uint32(f[offAck:]),
		window: int(le.Uint16(f[offWindow:])), plen: int(le.Uint16(f[offLen:])),
		head: int(le.Uint16(f[offHead:])), total: int(le.Uint32(f[offTotal:])),
	}
	if h.flags&flagSack != 0 {
		h.sack = getSack(f)
	}
	return h
}

// putHeader writes a frame's header into f: start, the first offKind
// bytes, which are the same in every frame to a peer (see frameStart),
// and the fields of this frame; the acknowledgements, the credits and the
// flagSack bit the frame gets at each emission (restamp).
func putHeader(f []byte, start *[offKind]byte, kind, flags byte, seq uint32, plen, head, total int) {
	le := binary.LittleEndian
	copy(f[:offKind], start[:])
	f[offKind], f[offFlags] = kind, flags
	le.PutUint32(f[offSeq:], seq)
	le.PutUint16(f[offLen:], uint16(plen))
	le.PutUint16(f[offHead:], uint16(head))
	le.PutUint16(f[offHead+2:], 0)
	le.PutUint32(f[offTotal:], uint32(total))
}

// frameStart is the start of every frame from rank from of job to rank
// to at MAC address dst: the Ethernet header, the job and both ranks.
func frameStart(dst, src []byte, job uint64, to, from int) (b [offKind]byte) {
	le := binary.LittleEndian
	copy(b[offDst:], dst)
	copy(b[offSrc:], src)
	binary.BigEndian.PutUint16(b[offType:], EtherType)
	le.PutUint64(b[offJob:], job)
	le.PutUint32(b[offTo:], uint32(to))
	le.PutUint32(b[offFrom:], uint32(from))
	return b
}

// sackMap is a selective acknowledgement: bit i says that the frame
// ack+1+i is held. It covers the whole window, so that every hole among
// the frames in flight is known at every acknowledgement.
type sackMap [Window / 64]uint64

func (m *sackMap) set(i int)      { m[i/64] |= 1 << (i % 64) }
func (m *sackMap) has(i int) bool { return m[i/64]&(1<<(i%64)) != 0 }
func (m *sackMap) zero() bool     { return *m == sackMap{} }

func (m *sackMap) put(f []byte) {
	for w, v := range m {
		binary.LittleEndian.PutUint64(f[offSack+8*w:], v)
	}
}

func getSack(f []byte) sackMap {
	var m sackMap
	for w := range m {
		m[w] = binary.LittleEndian.Uint64(f[offSack+8*w:])
	}
	return m
}

// before reports whether sequence number a comes before b, modulo 2^32.
func before(a, b uint32) bool { return int32(a-b) < 0 }
