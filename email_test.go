package herald_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhooks/herald"
)

func TestValidateEmail(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"ops@example.com", "a.b+hooks@mail.example.co.uk", "x_1@EXAMPLE.com", "o'brien@example.com",
		strings.Repeat("a", 64) + "@example.com",
	} {
		require.NoError(t, herald.ValidateEmail(ok), ok)
	}
	for _, bad := range []string{
		"", "ops", "@example.com", "ops@", "ops@localhost", "ops@example..com", "ops@-example.com",
		"Ops <ops@example.com>", "<ops@example.com>", "ops@example.com (ops)", `"o p"@example.com`,
		"a@example.com, b@example.com", "a@example.com,b@example.com", "ops@example.com\r\nBcc: x@example.com",
		" ops@example.com", "ops@example.com ", "ops@[127.0.0.1]", "öps@example.com", "ops@exämple.com",
		strings.Repeat("a", 65) + "@example.com", "a@" + strings.Repeat("b", 250) + ".com",
	} {
		require.Error(t, herald.ValidateEmail(bad), "%q", bad)
	}
}
