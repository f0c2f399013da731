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
// never open to a bare loopback request as /api/v1's reads are: a request
// must carry an admin API key or the local token, which guard (the
// console's Guard) then checks.
func MountProfiler(r fiber.Router, guard fiber.Handler) {
	r.Use(ProfilePrefix, requireCredential, guard, pprof.New())
}

// requireCredential refuses a request that carries neither an API key nor
// the local token; guard checks the one it carries.
func requireCredential(c *fiber.Ctx) error {
	if c.Get("x-api-key") == "" && c.Get(fiber.HeaderAuthorization) == "" && c.Get(LocalTokenHeader) == "" {
		return fiber.NewError(fiber.StatusUnauthorized,
			"the profiles need an admin API key (Authorization: Bearer) or the local token ("+LocalTokenHeader+", from the data directory's "+LocalTokenFile+")")
	}
	return c.Next()
}
