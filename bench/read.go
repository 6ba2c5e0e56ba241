package bench

import (
	"context"
	"errors"
)

func readMain(ctx context.Context, args []string) error {
	return errors.New("read: not yet")
}
