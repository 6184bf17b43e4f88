package badger

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// badgerLogger routes Badger's logger to slog: errors and warnings at their
// level, info at debug level (Badger is chatty at info), debug dropped.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) log(level slog.Level, format string, args ...any) {
	ctx := context.Background()
	if !b.l.Enabled(ctx, level) {
		return
	}
	b.l.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}

func (b badgerLogger) Errorf(format string, args ...any)   { b.log(slog.LevelError, format, args...) }
func (b badgerLogger) Warningf(format string, args ...any) { b.log(slog.LevelWarn, format, args...) }
func (b badgerLogger) Infof(format string, args ...any)    { b.log(slog.LevelDebug, format, args...) }
func (b badgerLogger) Debugf(string, ...any)               {}
