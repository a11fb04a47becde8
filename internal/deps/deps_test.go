package deps

// Test-only dependencies pinned until their first real importer lands.
import (
	_ "go.uber.org/goleak"
	_ "go.uber.org/mock/gomock"
)
