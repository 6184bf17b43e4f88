package apiserver

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/kapi-dev/kapi/apiserver/registry"
	"github.com/kapi-dev/kapi/codec"
	"github.com/kapi-dev/kapi/meta"
)

// spoolSink passes a deletecollection's deleted objects to a protobuf list
// sink. Past the sink's buffer the sink only measures items and reads them
// again in a second pass (listprotobuf.go); deleted objects cannot be listed
// again, so spoolSink keeps those items in a temporary file (in os.TempDir,
// unlinked at once) and replays them from it. Where no temporary file
// can be made it keeps them in memory, as a buffered answer would.
type spoolSink struct {
	ps  *protobufListSink
	log *slog.Logger

	f      *os.File
	inDir  bool // the file still has its name (unlinking an open file failed)
	w      *bufio.Writer
	held   [][]byte // the spooled items, when no file could be made
	first  int      // index of the first spooled item
	n      int      // items seen
	varint [binary.MaxVarintLen64]byte
}

// deletedProtobufListSink returns the protobuf list sink of a
// deletecollection's answer in c: it transcodes every item, since deleted
// objects have no shared encodings.
func (s *Server) deletedProtobufListSink(sw *streamWriter, res *registry.Resource, c codec.Choice) (*protobufListSink, error) {
	switch c.As {
	case "":
		ps := newProtobufListSink(sw, s.protobufListBuffer, res.APIVersion(), res.ListKind, 1, 2)
		ps.items = protobufItemEncoding{msg: res.Protobuf, kind: res.ListKind}
		ps.appendItem = ps.items.transcode
		return ps, nil
	case codec.AsPartialObjectMetadataList:
		return s.metadataProtobufListSink(sw, c.Version), nil
	}
	return nil, metadataOfList(res) // a Table is never protobuf: PartialObjectMetadata
}

var errSpoolReplay = errors.New("deletecollection: the second pass does not start where the spool does")

func (s *spoolSink) Begin(h registry.ListHead) error {
	h.ItemsSize = -1 // the listed objects' size: the deleted ones differ
	return s.ps.Begin(h)
}

func (s *spoolSink) Item(item []byte) error {
	before := s.ps.buffered
	if err := s.ps.Item(item); err != nil {
		return err
	}
	s.n++
	if s.ps.buffered > before {
		return nil // in the sink's buffer
	}
	if s.f == nil && s.held == nil {
		s.first = s.n - 1
		f, err := os.CreateTemp("", "kapi-deletecollection-*")
		if err != nil {
			s.log.Warn("deletecollection: no temporary file for the protobuf answer, holding it in memory", "err", err)
			s.held = make([][]byte, 0, 64)
		} else {
			// Unlinked at once where the system allows it: nothing is
			// left behind if the process dies.
			s.f, s.inDir, s.w = f, os.Remove(f.Name()) != nil, bufio.NewWriterSize(f, 64<<10)
		}
	}
	if s.held != nil {
		s.held = append(s.held, append([]byte(nil), item...))
		return nil
	}
	if _, err := s.w.Write(binary.AppendUvarint(s.varint[:0], uint64(len(item)))); err != nil {
		return meta.NewInternalError(fmt.Errorf("deletecollection: spool: %w", err))
	}
	if _, err := s.w.Write(item); err != nil {
		return meta.NewInternalError(fmt.Errorf("deletecollection: spool: %w", err))
	}
	return nil
}

func (s *spoolSink) End(e registry.ListEnd) error {
	e.Replay = s.replay
	return s.ps.End(e)
}

// replay hands the spooled items to fn, in order; skip is the number of
// items before them.
func (s *spoolSink) replay(skip int, fn func(item []byte) error) error {
	if skip != s.first {
		return meta.NewInternalError(errSpoolReplay)
	}
	if s.held != nil {
		for _, item := range s.held {
			if err := fn(item); err != nil {
				return err
			}
		}
		return nil
	}
	if s.f == nil {
		return nil
	}
	spoolErr := func(err error) error {
		return meta.NewInternalError(fmt.Errorf("deletecollection: read the spool back: %w", err))
	}
	if err := s.w.Flush(); err != nil {
		return spoolErr(err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return spoolErr(err)
	}
	r := bufio.NewReaderSize(s.f, 64<<10)
	var item []byte
	for i := s.first; i < s.n; i++ {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return spoolErr(err)
		}
		if uint64(cap(item)) < n {
			item = make([]byte, n)
		}
		item = item[:n]
		if _, err := io.ReadFull(r, item); err != nil {
			return spoolErr(err)
		}
		if err := fn(item); err != nil {
			return err
		}
	}
	return nil
}

// close closes and removes the temporary file, if one was made.
func (s *spoolSink) close() {
	if s.f != nil {
		s.f.Close()
		if s.inDir {
			os.Remove(s.f.Name())
		}
		s.f = nil
	}
	s.held = nil
}
