package adminapi

import (
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/pprof"
)

// ProfilePrefix is where MountProfiler serves Go's runtime profiles.
const ProfilePrefix = "/debug/pprof"

// MountProfiler serves Go's runtime profiles (net/http/pprof's: heap,
// goroutine, allocs, profile, trace, …) under ProfilePrefix, for a daemon
// started with --pprof. A profile shows the daemon's memory, so it is
// never open to a bare loopback request as /api/v1's reads are: guard
// must pass only a request with a real admin credential, an admin API key
// or the local token, checked (the console's RequireAdminCredential), not
// merely present.
func MountProfiler(r fiber.Router, guard fiber.Handler) {
	r.Use(ProfilePrefix, guard, pprof.New())
}
