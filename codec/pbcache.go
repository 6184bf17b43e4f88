package codec

import (
	"hash/maphash"
	"sync"
)

// ProtobufCache remembers the protobuf encoding of JSON objects, so that an
// object version read again and again (list after list, an informer's
// relist) is transcoded once. It is keyed by the message and a 128-bit
// keyed hash of the JSON bytes (two independent maphash seeds chosen per
// cache), so it needs no knowledge of keys or revisions and serves lists,
// gets and watch events alike; a false hit would need a 128-bit collision.
// It holds at most about maxBytes of encodings and forgets the oldest
// first. A nil *ProtobufCache transcodes every time. It is safe for
// concurrent use.
type ProtobufCache struct {
	max          int
	seed1, seed2 maphash.Seed

	mu    sync.Mutex
	m     map[pbKey][]byte
	fifo  []pbKey // insertion order; head is the oldest
	head  int
	bytes int
}

type pbKey struct {
	msg    *Message
	h1, h2 uint64
}

// NewProtobufCache returns a cache holding up to maxBytes of encodings
// (nil when maxBytes <= 0: no caching).
func NewProtobufCache(maxBytes int) *ProtobufCache {
	if maxBytes <= 0 {
		return nil
	}
	return &ProtobufCache{max: maxBytes, seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), m: map[pbKey][]byte{}}
}

// AppendProtobuf appends m's protobuf encoding of the JSON object data to
// dst, from the cache when data was encoded before; t does the transcoding
// on a miss.
func (c *ProtobufCache) AppendProtobuf(t *Transcoder, dst []byte, m *Message, data []byte) ([]byte, error) {
	if c == nil {
		return t.AppendProtobuf(dst, m, data)
	}
	enc, err := c.Encoding(t, m, data)
	if err != nil {
		return dst, err
	}
	return append(dst, enc...), nil
}

// Encoding returns m's protobuf encoding of the JSON object data as a slice
// the caller must not modify: the cached one on a hit, otherwise a new one
// (also cached). Holding it keeps it alive even after the cache forgets it.
func (c *ProtobufCache) Encoding(t *Transcoder, m *Message, data []byte) ([]byte, error) {
	if c == nil {
		return t.AppendProtobuf(nil, m, data)
	}
	k := pbKey{msg: m, h1: maphash.Bytes(c.seed1, data), h2: maphash.Bytes(c.seed2, data)}
	c.mu.Lock()
	enc, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return enc, nil
	}
	enc, err := t.AppendProtobuf(nil, m, data)
	if err != nil {
		return nil, err
	}
	if len(enc) <= c.max/16 {
		c.add(k, enc)
	}
	return enc, nil
}

// Max is the cache's bound in bytes (0 for a nil cache).
func (c *ProtobufCache) Max() int {
	if c == nil {
		return 0
	}
	return c.max
}

func (c *ProtobufCache) add(k pbKey, enc []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	c.m[k] = enc
	c.fifo = append(c.fifo, k)
	c.bytes += len(enc)
	for c.bytes > c.max && c.head < len(c.fifo) {
		old := c.fifo[c.head]
		c.fifo[c.head] = pbKey{}
		c.head++
		c.bytes -= len(c.m[old])
		delete(c.m, old)
	}
	// Compact the queue once its consumed head dominates it.
	if c.head > 1024 && c.head*2 > len(c.fifo) {
		c.fifo = append(c.fifo[:0], c.fifo[c.head:]...)
		c.head = 0
	}
}

// Len reports the number of cached encodings and their total size.
func (c *ProtobufCache) Len() (entries, bytes int) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}
