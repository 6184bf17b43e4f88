package apiserver

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/kapi-dev/kapi/watch"
)

// chunkHeaderRoom is the room kept before a batch of frames for its chunk
// size line (16 hex digits and CRLF at most).
const chunkHeaderRoom = 18

// writeWatchConn streams the watch over conn, an HTTP/1.1 connection taken
// over after the response header (chunked, Connection: close) was sent: each
// batch of frames is one chunk written with one call, straight into the TLS
// connection, instead of passing through the response's buffer, its chunk
// writer and the connection's buffer. Most watch events are a single frame
// going to hundreds of watchers; that path is a good part of each one's
// cost. The stream ends as net/http would end it (the last chunk), then the
// connection closes.
//
// The server no longer reads the connection, so a goroutine does: it ends
// the watch when the client goes (and when the connection closes).
func (s *Server) writeWatchConn(r *http.Request, conn net.Conn, cancel context.CancelFunc, wt *watch.Watcher, dl writeDeadliner) {
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Time{}) // the server's request read deadline, if any
	go func() {
		var b [64]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				cancel()
				return
			}
		}
	}()
	err := s.streamWatch(r, wt, chunkHeaderRoom, func(b []byte, shared []watch.SharedFrame) error {
		n := len(b) - chunkHeaderRoom
		for _, f := range shared {
			n += len(f.Frame)
		}
		start := putChunkHeader(b[:chunkHeaderRoom], n)
		return writePieces(append(b, "\r\n"...), start, shared, func(p []byte) error {
			dl.bound(conn.SetWriteDeadline)
			_, err := conn.Write(p)
			return err
		})
	})
	if err == nil { // the watch ended: the last chunk
		dl.bound(conn.SetWriteDeadline)
		_, _ = conn.Write([]byte("0\r\n\r\n"))
	}
}

// putChunkHeader writes the chunk size line of an n-byte chunk at the end
// of room and returns where it starts.
func putChunkHeader(room []byte, n int) int {
	i := len(room) - 2
	room[i], room[i+1] = '\r', '\n'
	const hex = "0123456789abcdef"
	for {
		i--
		room[i] = hex[n&0xf]
		n >>= 4
		if n == 0 {
			return i
		}
	}
}
