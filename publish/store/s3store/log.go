package s3store

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/smithy-go/logging"
)

// sdkLogger sends the SDK's log lines to slog at debug level: they are details for whoever asks
// for them (pdq --verbose), never lines of their own on the terminal.
type sdkLogger struct{}

// Logf implements logging.Logger.
func (sdkLogger) Logf(class logging.Classification, format string, v ...any) {
	slog.Debug("aws sdk: "+fmt.Sprintf(format, v...), "class", string(class))
}

// LogfWithContext lets the SDK pass its context.
func (sdkLogger) LogfWithContext(ctx context.Context, class logging.Classification, format string, v ...any) {
	slog.DebugContext(ctx, "aws sdk: "+fmt.Sprintf(format, v...), "class", string(class))
}
