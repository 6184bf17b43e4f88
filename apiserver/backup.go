package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/kapi-dev/kapi/meta"
	"github.com/kapi-dev/kapi/storage"
)

// backupWriteStall is how long a backup download may make no progress
// before it is cut off.
const backupWriteStall = time.Minute

// BackupHandler serves online backups of b. Mount it with
// Config.NonResourceHandlers (as "/backup"): kapi then authenticates the
// request, applies flow control and authorizes it as verb get on that path,
// so only users an RBAC rule {nonResourceURLs: ["/backup"], verbs: ["get"]}
// grants can take one. A backup holds every object, Secrets included: grant
// it to the operators who may read everything.
//
// GET streams a full backup; GET ?since=REV an incremental one, the
// changes after REV (an earlier backup's revision). The body is the
// backend's backup stream (application/octet-stream); its revision is in
// the stream's header (badger.VerifyBackup reads it). A backup is not bound
// by the request timeout, only by a client that stops reading for a minute.
// Errors found before the stream starts are Status responses: 410 when REV
// is no longer in the retained history (take a full backup), 400 for a bad
// REV, 503 while the store closes or cannot serve it for now
// (storage.ErrUnavailable: a Badger store recovering from a failed
// write). A failure once the stream has started
// aborts the connection, and the partial backup fails its checksum on
// restore. logger receives those failures (nil: discard).
func BackupHandler(b storage.Backuper, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			writeStatus(w, meta.NewMethodNotAllowed(r.Method, "a backup"))
			return
		}
		var opts storage.BackupOptions
		if v := r.URL.Query().Get("since"); v != "" {
			since, err := strconv.ParseInt(v, 10, 64)
			if err != nil || since < 0 {
				writeStatus(w, meta.NewBadRequest(fmt.Sprintf("invalid since revision %q", v)))
				return
			}
			opts.Since = since
		}
		bw := &backupResponse{w: w, rc: http.NewResponseController(w)}
		// The request timeout is for API calls; a backup takes as long as
		// the store is large, and ends when its client stops reading.
		_, err := b.Backup(context.WithoutCancel(r.Context()), bw, opts)
		switch {
		case err == nil:
		case !bw.started:
			se := backupStatus(err)
			if se.Code() == http.StatusInternalServerError {
				logger.Error("backup failed", "err", err)
			}
			writeStatus(w, se)
		default:
			logger.Warn("backup failed after it started; aborting the response", "err", err)
			panic(http.ErrAbortHandler)
		}
	})
}

// backupResponse writes the headers at the first write, and gives each
// write backupWriteStall to complete.
type backupResponse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (b *backupResponse) Write(p []byte) (int, error) {
	if !b.started {
		b.started = true
		h := b.w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", `attachment; filename="kapi.backup"`)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		b.w.WriteHeader(http.StatusOK)
	}
	_ = b.rc.SetWriteDeadline(time.Now().Add(backupWriteStall)) // ErrNotSupported: no deadline to move
	return b.w.Write(p)
}

// backupStatus is the Status answering a backup that failed before it
// started.
func backupStatus(err error) *meta.StatusError {
	var compacted *storage.CompactedError
	var future *storage.FutureRevisionError
	switch {
	case errors.As(err, &compacted):
		return meta.NewGone(fmt.Sprintf("revision %d is older than the retained history (oldest %d): take a full backup", compacted.Requested, compacted.Oldest))
	case errors.As(err, &future):
		return meta.NewBadRequest(fmt.Sprintf("revision %d is newer than the store's current revision %d", future.Requested, future.Current))
	case errors.Is(err, storage.ErrInvalid):
		return meta.NewBadRequest(err.Error())
	case errors.Is(err, storage.ErrClosed):
		return meta.NewServiceUnavailable("the storage is shutting down")
	case errors.Is(err, storage.ErrUnavailable):
		// A store recovering from a disk fault: retry later.
		return meta.NewServiceUnavailable(err.Error())
	}
	return meta.NewInternalError(err)
}

// writeStatus writes se as JSON.
func writeStatus(w http.ResponseWriter, se *meta.StatusError) {
	body, _ := json.Marshal(se.Status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(se.Code())
	_, _ = w.Write(body)
}
