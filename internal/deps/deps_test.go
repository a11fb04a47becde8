package deps

import (
	"testing"

	_ "go.uber.org/goleak"
	_ "go.uber.org/mock/gomock"
)

func TestNothing(t *testing.T) {}
