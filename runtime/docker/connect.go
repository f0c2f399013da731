package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/client"
)

// Connect connects to the local Docker Engine ($DOCKER_HOST or its
// socket) and checks that it answers.
func Connect(ctx context.Context) (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err == nil {
		pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err = cli.Ping(pingCtx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
			cli.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the Docker Engine does not answer (is it installed and running, and may this user use it? `hearth doctor` checks): %w", err)
	}
	return cli, nil
}
