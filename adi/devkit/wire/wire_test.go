package wire

import (
	"encoding/binary"
	"testing"
)

// The fields are the machine's byte order; the devices' headers assume a
// little-endian machine (amd64, arm64), where they are laid out as
// encoding/binary's LittleEndian writes them.
func TestFieldsLayout(t *testing.T) {
	b := make([]byte, 24)
	U16(2).Set(b, 0x0102)
	U32(4).Store(b, 0x03040506)
	I32(8).Set(b, -2)
	U64(16).Set(b, 0x0708090a0b0c0d0e)
	if binary.LittleEndian.Uint16(b[2:]) != 0x0102 || binary.LittleEndian.Uint32(b[4:]) != 0x03040506 ||
		int32(binary.LittleEndian.Uint32(b[8:])) != -2 || binary.LittleEndian.Uint64(b[16:]) != 0x0708090a0b0c0d0e {
		t.Fatalf("layout % x", b)
	}
	if U16(2).Get(b) != 0x0102 || U32(4).Load(b) != 0x03040506 || I32(8).Get(b) != -2 || U64(16).Load(b) != 0x0708090a0b0c0d0e {
		t.Fatal("Get does not read what Set wrote")
	}
	defer func() {
		if recover() == nil {
			t.Error("a field past the end of the slice was not caught")
		}
	}()
	U64(20).Get(b)
}
