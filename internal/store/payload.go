package store

import (
	"bytes"
	"fmt"
	"runtime"

	"github.com/klauspost/compress/zstd"
)

// Payloads may be kept compressed (OpenOptions.CompressPayloads): a
// payload is written as a zstd frame when that saves at least an eighth of
// it, and read back byte for byte. A payload is JSON in UTF-8, which never
// begins as a zstd frame does (the byte '(' and then 0xB5), so a stored
// payload says itself whether it is compressed: payloads written before,
// or by nodes that do not compress, are read as they are.

// compressFrom is the smallest payload worth compressing: under it a
// frame's own bytes eat most of what compression saves.
const compressFrom = 128

// zstdMagic begins every zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// maxPayloadRead bounds what one stored payload may decompress to: ten
// times the largest payload a node accepts (10 MiB), so a damaged row
// cannot take the node's memory.
const maxPayloadRead = 100 << 20

var (
	// payloadEncoder and payloadDecoder are safe for concurrent use
	// through EncodeAll and DecodeAll, and keep their buffers between
	// calls: shared machinery, like a sync.Pool, not state that any
	// caller sees.
	payloadEncoder = mustEncoder()
	payloadDecoder = mustDecoder()
)

// maxCompressions bounds the compressions that run at once in a process:
// four compress a kilobyte of JSON some 600,000 times a second.
const maxCompressions = 4

// compressWindow is how far back a compression looks for repeats: a
// payload of a kilobyte or a hundred packs as well with it, and the
// tables it sizes stay small.
const compressWindow = 256 << 10

// mustEncoder makes the encoder: the default level, whose tables take
// about 1.3 MiB an encoder with the window above and the lower-memory
// setting (the better level's took 4.5 MiB, and 20 MiB at its own window:
// a node's peak RSS rose by 20-37 MiB). It packs JSON as well, since
// repeated keys are what it finds; a block with no repeat at all, such as
// a long run of random hex alone, it leaves whole.
func mustEncoder() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(min(runtime.GOMAXPROCS(0), maxCompressions)),
		zstd.WithEncoderCRC(false), zstd.WithLowerEncoderMem(true),
		zstd.WithWindowSize(compressWindow))
	if err != nil {
		panic("store: zstd encoder: " + err.Error())
	}
	return e
}

func mustDecoder() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(maxPayloadRead))
	if err != nil {
		panic("store: zstd decoder: " + err.Error())
	}
	return d
}

// StoredPayload is what a backend writes for payload p: p compressed, if
// compress is set and that saves at least an eighth of it, or else p
// itself.
func StoredPayload(p []byte, compress bool) []byte {
	if !compress || len(p) < compressFrom {
		return p
	}
	z := payloadEncoder.EncodeAll(p, make([]byte, 0, len(p)*7/8))
	if len(z) > len(p)-len(p)/8 {
		return p
	}
	return z
}

// ReadPayload is the payload a backend stored as b (StoredPayload): b
// decompressed if it is a zstd frame, or else a copy of b. It never
// returns nil.
func ReadPayload(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, zstdMagic) {
		return append([]byte{}, b...), nil
	}
	p, err := payloadDecoder.DecodeAll(b, []byte{})
	if err != nil {
		return nil, fmt.Errorf("decompress payload: %w", err)
	}
	return p, nil
}

// PayloadColumn scans a stored payload into *P, read back by ReadPayload:
// a database/sql Scanner, which pgx takes too.
type PayloadColumn struct{ P *[]byte }

// Scan implements sql.Scanner.
func (c PayloadColumn) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	case nil:
	default:
		return fmt.Errorf("payload: cannot scan %T", src)
	}
	p, err := ReadPayload(b)
	if err != nil {
		return err
	}
	*c.P = p
	return nil
}
