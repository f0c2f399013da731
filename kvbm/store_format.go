package kvbm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/zeebo/xxh3"
)

// The on-disk form of one block: a fixed header, then the payload.
//
//	offset size field
//	0      4    magic "HKVB"
//	4      2    format version (little endian), 1
//	6      2    flags, 0 (reserved: a reader rejects any other value)
//	8      8    block hash
//	16     8    payload length in bytes
//	24     8    xxh3-64 of the payload
//	32     8    xxh3-64 of bytes 0..31
//
// The header checksum lets a reader tell a damaged header from a damaged
// payload, and the length lets it tell a truncated file by its size alone.
const (
	// HeaderSize is the size of a block file's header; a block file is
	// HeaderSize plus its payload length bytes long.
	HeaderSize = 40
	// FormatVersion is the version of the block file format this package
	// writes and reads.
	FormatVersion = 1
	// MaxBlockBytes bounds one block's payload, so that a header cannot ask
	// a reader for an absurd allocation.
	MaxBlockBytes = 1 << 30
)

var blockMagic = [4]byte{'H', 'K', 'V', 'B'}

// blockHeader is the parsed header of a block file.
type blockHeader struct {
	hash       uint64
	length     int64
	payloadSum uint64
}

var errBadHeader = errors.New("bad block header")

// encode writes h into b, which must hold HeaderSize bytes.
func (h blockHeader) encode(b []byte) {
	_ = b[HeaderSize-1]
	copy(b[0:4], blockMagic[:])
	binary.LittleEndian.PutUint16(b[4:6], FormatVersion)
	binary.LittleEndian.PutUint16(b[6:8], 0)
	binary.LittleEndian.PutUint64(b[8:16], h.hash)
	binary.LittleEndian.PutUint64(b[16:24], uint64(h.length))
	binary.LittleEndian.PutUint64(b[24:32], h.payloadSum)
	binary.LittleEndian.PutUint64(b[32:40], xxh3.Hash(b[0:32]))
}

// parseHeader reads the header at the start of b. It accepts exactly the
// bytes encode writes: any header it returns re-encodes to b[:HeaderSize].
func parseHeader(b []byte) (blockHeader, error) {
	if len(b) < HeaderSize {
		return blockHeader{}, fmt.Errorf("%w: %d bytes, want %d", errBadHeader, len(b), HeaderSize)
	}
	if [4]byte(b[0:4]) != blockMagic {
		return blockHeader{}, fmt.Errorf("%w: magic %q", errBadHeader, b[0:4])
	}
	if v := binary.LittleEndian.Uint16(b[4:6]); v != FormatVersion {
		return blockHeader{}, fmt.Errorf("%w: format version %d, want %d", errBadHeader, v, FormatVersion)
	}
	if f := binary.LittleEndian.Uint16(b[6:8]); f != 0 {
		return blockHeader{}, fmt.Errorf("%w: flags %#x", errBadHeader, f)
	}
	if got, want := binary.LittleEndian.Uint64(b[32:40]), xxh3.Hash(b[0:32]); got != want {
		return blockHeader{}, fmt.Errorf("%w: header checksum %016x, want %016x", errBadHeader, got, want)
	}
	length := binary.LittleEndian.Uint64(b[16:24])
	if length > MaxBlockBytes {
		return blockHeader{}, fmt.Errorf("%w: payload length %d over %d", errBadHeader, length, MaxBlockBytes)
	}
	return blockHeader{
		hash:       binary.LittleEndian.Uint64(b[8:16]),
		length:     int64(length),
		payloadSum: binary.LittleEndian.Uint64(b[24:32]),
	}, nil
}

// zeroSums caches the checksum of n zero bytes per n: a sparse block's
// payload reads back as zeros, and every block of one space has the same
// size, so one entry per space is the usual content.
var zeroSums sync.Map // int64 -> uint64

var zeroChunk [64 << 10]byte

func zeroSum(n int64) uint64 {
	if v, ok := zeroSums.Load(n); ok {
		return v.(uint64)
	}
	h := xxh3.New()
	for left := n; left > 0; {
		k := min(left, int64(len(zeroChunk)))
		_, _ = h.Write(zeroChunk[:k])
		left -= k
	}
	sum := h.Sum64()
	zeroSums.Store(n, sum)
	return sum
}
