package wire

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// The handshake that opens every connection, before any frame:
//
//	dialer → acceptor  hello:     helloMagic, job, dialer's rank, acceptor's rank, nonce D
//	acceptor → dialer  challenge: nonce A, MAC(secret, "acceptor", D, A, ranks, job)
//	dialer → acceptor  proof:     MAC(secret, "dialer", D, A, ranks, job)
//
// The dialer believes the acceptor after checking the challenge's MAC; the
// acceptor believes the dialer after checking the proof. Fresh nonces on
// both sides make a recorded handshake useless on another connection. The
// dialer may send frames right after its proof; the acceptor reads none of
// them before the proof checks.
const (
	helloMagic = 0xad1a_7e01
	nonceLen   = 16
	macLen     = sha256.Size
	helloLen   = 4 + 8 + 4 + 4 + nonceLen
	challLen   = nonceLen + macLen
	proofLen   = macLen
)

// hello is the dialer's first message.
type hello struct {
	job      uint64
	from, to int
	nonce    [nonceLen]byte
}

func (h *hello) encode(b []byte) {
	binary.LittleEndian.PutUint32(b[0:4], helloMagic)
	binary.LittleEndian.PutUint64(b[4:12], h.job)
	binary.LittleEndian.PutUint32(b[12:16], uint32(h.from))
	binary.LittleEndian.PutUint32(b[16:20], uint32(h.to))
	copy(b[20:20+nonceLen], h.nonce[:])
}

func decodeHello(b []byte) (hello, error) {
	var h hello
	if m := binary.LittleEndian.Uint32(b[0:4]); m != helloMagic {
		return h, fmt.Errorf("not an adimpi wire hello (magic %#x)", m)
	}
	h.job = binary.LittleEndian.Uint64(b[4:12])
	h.from = int(int32(binary.LittleEndian.Uint32(b[12:16])))
	h.to = int(int32(binary.LittleEndian.Uint32(b[16:20])))
	copy(h.nonce[:], b[20:20+nonceLen])
	return h, nil
}

// mac computes the handshake MAC of one side ("dialer" or "acceptor").
func mac(secret []byte, side string, h *hello, acceptorNonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	var b [helloLen]byte
	h.encode(b[:])
	m.Write([]byte(side))
	m.Write(b[:])
	m.Write(acceptorNonce)
	return m.Sum(nil)
}

func newNonce() (n [nonceLen]byte) {
	if _, err := rand.Read(n[:]); err != nil {
		panic("wire: no randomness for a nonce: " + err.Error())
	}
	return n
}
