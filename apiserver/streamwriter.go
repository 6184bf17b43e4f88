package apiserver

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/klauspost/compress/gzip"

	"github.com/kapi-dev/kapi/internal/bufpool"
)

// A streamed response holds its first gzipThreshold bytes back: a list that
// ends before is written with a Content-Length and never compressed, exactly
// as the buffered path writes it, and an error found meanwhile is still a
// plain Status. A longer list commits the status line then: gzip-compressed
// (level 1, through a pooled writer) when the client accepts gzip, chunked
// otherwise. An error after that aborts the connection, so that the client
// sees a broken response, never a complete-looking partial list.

// streamWriter writes a response body of unknown length: it holds the first
// gzipThreshold bytes back, then commits the status line and writes through
// a pooled gzip or bufio writer (see the comment at the top of this file).
type streamWriter struct {
	w         http.ResponseWriter
	mediaType string
	gzip      bool // the client accepts gzip

	head    *[]byte // the body until the response starts
	length  int     // the body's length when known before its first byte, else -1
	started bool
	out     io.Writer
	bw      *bufio.Writer
	zw      *gzip.Writer
	err     error // the first write error: the client is gone
}

var (
	headBufs  = bufpool.New(16 << 10) // grows to below gzipThreshold
	bufioPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}
	gzipPool  = sync.Pool{New: func() any {
		zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		return zw
	}}
)

func newStreamWriter(w http.ResponseWriter, mediaType string, gzipOK bool) *streamWriter {
	return &streamWriter{w: w, mediaType: mediaType, gzip: gzipOK, head: headBufs.Get(), length: -1}
}

// announce tells the writer the body's length before its first byte (a
// protobuf list knows it). An uncompressed body then goes out with a
// Content-Length instead of chunked: no chunk framing, and 32 KiB writes
// that become two full TLS records each instead of three (the framing
// split them in net/http's 4 KiB buffer).
func (sw *streamWriter) announce(n int) { sw.length = n }

func (sw *streamWriter) Write(p []byte) (int, error) {
	if sw.err != nil {
		return 0, sw.err
	}
	if !sw.started {
		if len(*sw.head)+len(p) < gzipThreshold {
			*sw.head = append(*sw.head, p...)
			return len(p), nil
		}
		sw.start()
		if _, err := sw.out.Write(*sw.head); err != nil {
			sw.err = err
			return 0, err
		}
		sw.releaseHead()
	}
	if _, err := sw.out.Write(p); err != nil {
		sw.err = err
		return 0, err
	}
	return len(p), nil
}

// start commits the status line of a body of gzipThreshold bytes or more.
func (sw *streamWriter) start() {
	sw.started = true
	h := sw.w.Header()
	h.Set("Content-Type", sw.mediaType)
	h.Set("X-Content-Type-Options", "nosniff")
	if sw.gzip {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		h.Del("Content-Length")
		sw.w.WriteHeader(http.StatusOK)
		sw.zw = gzipPool.Get().(*gzip.Writer)
		sw.zw.Reset(sw.w)
		sw.out = sw.zw
		return
	}
	if sw.length >= 0 {
		h.Set("Content-Length", strconv.Itoa(sw.length))
	}
	sw.w.WriteHeader(http.StatusOK)
	sw.bw = bufioPool.Get().(*bufio.Writer)
	sw.bw.Reset(sw.w)
	sw.out = sw.bw
}

// finish completes the body: a short one is written whole with its
// Content-Length, a long one is flushed.
func (sw *streamWriter) finish() error {
	if !sw.started {
		sw.started = true
		h := sw.w.Header()
		h.Set("Content-Type", sw.mediaType)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Length", strconv.Itoa(len(*sw.head)))
		sw.w.WriteHeader(http.StatusOK)
		_, sw.err = sw.w.Write(*sw.head)
		sw.release()
		return sw.err
	}
	if sw.zw != nil {
		sw.err = sw.zw.Close()
	} else {
		sw.err = sw.bw.Flush()
	}
	if sw.err == nil {
		sw.release()
	}
	return sw.err
}

func (sw *streamWriter) releaseHead() {
	if sw.head != nil {
		headBufs.Put(sw.head, 2*gzipThreshold) // always kept: it stays below gzipThreshold
		sw.head = nil
	}
}

// release returns the pooled buffers (not after a failed write: a writer in
// an unknown state is dropped).
func (sw *streamWriter) release() {
	sw.releaseHead()
	if sw.zw != nil {
		sw.zw.Reset(io.Discard)
		gzipPool.Put(sw.zw)
		sw.zw = nil
	}
	if sw.bw != nil {
		sw.bw.Reset(nil)
		bufioPool.Put(sw.bw)
		sw.bw = nil
	}
}
