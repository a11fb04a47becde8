package deps

import (
	"testing"

	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
	_ "go.uber.org/mock/gomock"
)

func TestNothing(t *testing.T) {}
