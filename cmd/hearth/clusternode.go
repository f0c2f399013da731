package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/daemon"
)

// runCluster is hearth cluster token|status|revoke|leave.
func runCluster(ctx context.Context, env *environment, args []string) error {
	usage := "cluster token [--rotate] [--data-dir DIR] [--node NAME] [--advertise HOST:PORT,…] [--addr URL] | status [--addr URL] | revoke NODE_ID [--addr URL] | leave [--addr URL] | requests [--addr URL] | accept ID [--addr URL] | reject ID [--addr URL]"
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, "Usage: hearth "+usage)
		return fmt.Errorf("%w: cluster: no subcommand", errUsage)
	}
	sub, rest := args[0], args[1:]
	var target string // revoke's node id or accept's and reject's request id, before the flags
	if (sub == "revoke" || sub == "accept" || sub == "reject") && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		target, rest = rest[0], rest[1:]
	}
	fs := newFlagSet(env, "cluster "+sub, usage)
	dataDir := fs.String("data-dir", string(daemon.DefaultDataDir(env.getenv)), "where Hearth keeps its state")
	node := fs.String("node", "", "this node's name (default: the host name)")
	advertise := fs.String("advertise", "", "addresses (host:port of the cluster port, comma-separated) to put in the token (default: every LAN address, port "+strconv.Itoa(daemon.DefaultClusterPort)+")")
	iface := fs.String("advertise-iface", "", "take the token's addresses from this interface only")
	addr := fs.String("addr", "http://127.0.0.1:8000", "the daemon's address")
	key := fs.String("api-key", "", "API key, when the daemon needs one (also $HEARTH_API_KEY)")
	asJSON := fs.Bool("json", false, "print the daemon's JSON as it is")
	rotate := fs.Bool("rotate", false, "token: replace the join secret first, so that every token printed before is refused (revoking a node does this too)")
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	running := daemonFlags{addr: addr, key: key, dataDir: dataDir}
	switch sub {
	case "token":
		id, created, err := daemon.DataDir(*dataDir).ClusterIdentity(*node)
		switch {
		case err != nil:
			return err
		case created:
			fmt.Fprintf(env.stderr, "created cluster %s in %s\n", id.ClusterID(), daemon.DataDir(*dataDir).Cluster())
		case *rotate:
			if err := id.RotateSecret(); err != nil {
				return err
			}
			fmt.Fprintln(env.stderr, "join secret replaced: tokens printed before are refused")
		}
		var named []string
		if *advertise != "" {
			named = strings.Split(*advertise, ",")
		}
		addrs := daemon.TokenAddrs(named, *iface, daemon.DefaultClusterPort)
		tok, err := id.Token(addrs)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "Run on another machine: hearth up --join TOKEN (cluster %s; addresses %s)\n", id.ClusterID(), strings.Join(addrs, ", "))
		fmt.Fprintln(env.stdout, tok.String())
		noteDaemonOutside(ctx, env, running, id.ClusterID())
		return nil
	case "status":
		list, err := askDaemon(ctx, env, running, (*adminapi.Client).Nodes)
		if *asJSON && list.Raw != nil {
			return printAsItCame(env.stdout, list.Raw)
		}
		if err != nil {
			return err
		}
		if list.Cluster == "" {
			fmt.Fprintln(env.stdout, "this node belongs to no cluster")
			return nil
		}
		fmt.Fprintf(env.stdout, "cluster %s\n", list.Cluster)
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tADDRESS\tSTATE\tGPUS\tENGINES\tLAST SEEN")
		for _, n := range list.Nodes {
			seen := "-"
			if n.LastSeen != nil {
				seen = time.Since(*n.LastSeen).Round(100*time.Millisecond).String() + " ago"
			}
			names := make([]string, len(n.Engines))
			for i, e := range n.Engines {
				names[i] = e.Name
			}
			id := n.ID
			if n.Self {
				id += " (this)"
			}
			state := n.State
			if n.Drained != "" {
				state += ", " + n.Drained
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", id, n.Name, n.Address, state, len(n.GPUs), strings.Join(names, ","), seen)
		}
		return tw.Flush()
	case "revoke":
		if target == "" {
			return fmt.Errorf("%w: hearth cluster revoke NODE_ID [--addr URL]", errUsage)
		}
		o, err := askDaemon(ctx, env, running, func(c *adminapi.Client, ctx context.Context) (adminapi.Outcome, error) {
			return c.Revoke(ctx, target)
		})
		if err == nil {
			fmt.Fprintln(env.stderr, "the node holding the cluster's CA key replaces the join secret: tokens printed before are refused (hearth cluster token prints the new one there)")
		}
		return printOutcome(env.stdout, o, err)
	case "leave":
		o, err := askDaemon(ctx, env, running, (*adminapi.Client).Leave)
		return printOutcome(env.stdout, o, err)
	case "requests":
		list, err := askDaemon(ctx, env, running, (*adminapi.Client).JoinRequests)
		if *asJSON && list.Raw != nil {
			return printAsItCame(env.stdout, list.Raw)
		}
		if err != nil {
			return err
		}
		switch {
		case list.Cluster == "":
			fmt.Fprintln(env.stdout, "this node belongs to no cluster")
			return nil
		case !list.CanInvite:
			fmt.Fprintf(env.stdout, "this node does not hold the CA key of cluster %s: join requests go to the node that created it\n", list.Cluster)
			return nil
		case len(list.Requests) == 0:
			fmt.Fprintln(env.stdout, "no join request is waiting")
			return nil
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tADDRESS\tCODE\tRECEIVED")
		for _, q := range list.Requests {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\n", q.ID, q.Name, q.Address, q.Code, time.Since(q.Received).Round(time.Second))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(env.stdout, "Accept only a request whose code the joining machine prints too: hearth cluster accept ID")
		return nil
	case "accept", "reject":
		if target == "" {
			return fmt.Errorf("%w: hearth cluster %s ID [--addr URL] (the ids: hearth cluster requests)", errUsage, sub)
		}
		decide := (*adminapi.Client).Accept
		if sub == "reject" {
			decide = (*adminapi.Client).Reject
		}
		o, err := askDaemon(ctx, env, running, func(c *adminapi.Client, ctx context.Context) (adminapi.Outcome, error) {
			return decide(c, ctx, target)
		})
		return printOutcome(env.stdout, o, err)
	}
	return fmt.Errorf("%w: cluster: unknown subcommand %q", errUsage, sub)
}

// noteDaemonOutside tells, on stderr, that the hearth up serving at --addr
// is not in cluster clusterID: a daemon reads the cluster at start, so one
// started before the cluster was made stays out of it until restarted.
// When no daemon answers there is nothing to tell.
func noteDaemonOutside(ctx context.Context, env *environment, running daemonFlags, clusterID string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	list, err := askDaemon(ctx, env, running, (*adminapi.Client).Nodes)
	var answer *adminapi.Error
	switch {
	case errors.As(err, &answer) && (answer.StatusCode == http.StatusUnauthorized || answer.StatusCode == http.StatusForbidden):
		fmt.Fprintf(env.stderr, "hearth up at %s did not say its cluster (%v): if it was started before this cluster was made, restart it to join\n", *running.addr, err)
	case err != nil:
		// No daemon there (or none of Hearth's): nothing to restart.
	case list.Cluster == "":
		fmt.Fprintf(env.stderr, "hearth up at %s serves in no cluster: restart it to have it in cluster %s\n", *running.addr, clusterID)
	case list.Cluster != clusterID:
		fmt.Fprintf(env.stderr, "hearth up at %s serves in cluster %s, not %s: restart it with --data-dir %s to serve in this one\n", *running.addr, list.Cluster, clusterID, *running.dataDir)
	}
}
