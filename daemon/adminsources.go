package daemon

import (
	"errors"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/api"
	"github.com/hearth-llm/hearth/cluster"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// The daemon as the admin API reads it: adapters from the supervisor, the
// gateway's traffic and the cluster node to adminapi's interfaces and
// shapes.

// AdminSources builds the API's sources; node nil: no cluster, else its
// identity is kept in clusterDir (DataDir.Cluster).
func AdminSources(engines func() []hruntime.Status, sup *hruntime.Supervisor, traffic *api.Traffic, decode func([]uint32) string,
	node *cluster.Node, clusterDir string) adminapi.Sources {
	src := adminapi.Sources{
		Engines:  engineAdmin{statuses: engines, logs: sup},
		Sessions: sessionAdmin{traffic: traffic, decode: decode},
	}
	if node != nil { // a nil *cluster.Node in the interface would not read as nil
		src.Cluster = clusterAdmin{node: node, dir: clusterDir}
	}
	return src
}

// engineLogs is the supervisor's side of the engines' logs.
type engineLogs interface {
	Logs(name string) ([]string, bool)
	LogsAfter(name string, c hruntime.LogCursor) (hruntime.LogPage, bool)
}

type engineAdmin struct {
	statuses func() []hruntime.Status
	logs     engineLogs
}

var _ adminapi.Engines = engineAdmin{}

func (a engineAdmin) Engines() []adminapi.Engine {
	statuses := a.statuses()
	out := make([]adminapi.Engine, len(statuses))
	for i, st := range statuses {
		out[i] = adminEngineOf(st)
	}
	return out
}

func (a engineAdmin) Logs(name string) ([]string, bool) { return a.logs.Logs(name) }

func (a engineAdmin) FollowLogs(name string) (adminapi.LogPage, bool) {
	return a.pageAfter(name, hruntime.LogCursor{})
}

func (a engineAdmin) pageAfter(name string, c hruntime.LogCursor) (adminapi.LogPage, bool) {
	p, ok := a.logs.LogsAfter(name, c)
	return adminapi.LogPage{
		Lines: p.Lines, NewRun: p.NewRun, More: p.More, Relaunched: p.Relaunched,
		Next: func() adminapi.LogPage {
			next, _ := a.pageAfter(name, p.Next)
			return next
		},
	}, ok
}

func adminEngineOf(st hruntime.Status) adminapi.Engine {
	e := adminapi.Engine{
		Name: st.Name, Runtime: st.Runtime, Kind: kindJSON(st), Model: st.Model,
		GPU: st.GPU.Index, GPUName: st.GPU.Name, State: string(st.State),
		PID: st.PID, Container: st.Container, Image: st.Image, BaseURL: st.BaseURL, Restarts: st.Restarts,
		Phase: string(st.Load.Phase), LastError: st.LastError, Cause: string(st.Diagnosis.Cause),
		Since: st.Since.UTC(), KVBlocks: st.Profile.GPUBlocks,
	}
	e.Tokenizer = adminTokenizerOf(st.Tokenizer)
	e.KVEvents = adminKVEventsOf(st.KVEvents)
	if len(st.TensorParallel) > 0 { // one engine over several GPUs
		e.GPUs = []int{st.GPU.Index}
		for _, g := range st.TensorParallel {
			e.GPUs = append(e.GPUs, g.Index)
		}
	}
	if st.Load.Phase != "" && st.Load.Progress >= 0 {
		p := st.Load.Progress
		e.Progress = &p
	}
	return e
}

// sessionAdmin reads the gateway's record of sessions; decode turns token
// ids into text.
type sessionAdmin struct {
	traffic *api.Traffic
	decode  func([]uint32) string
}

var _ adminapi.Sessions = sessionAdmin{}

func (a sessionAdmin) Sessions() []adminapi.Session {
	ss := a.traffic.Sessions()
	out := make([]adminapi.Session, len(ss))
	for i, s := range ss {
		js := adminapi.Session{ID: s.ID, Client: s.Client, Worker: s.Worker, LastActive: s.LastActive.UTC(), Turns: make([]adminapi.Turn, len(s.Turns))}
		for j, t := range s.Turns {
			tj := adminapi.Turn{
				N: j + 1, Kind: string(t.Kind), At: t.At.UTC(), Worker: t.Worker,
				PromptTokens: t.PromptTokens, CachedTokens: t.CachedTokens, OutputTokens: t.OutputTokens,
				SharedBlocks: t.SharedBlocks,
			}
			if t.Diverged {
				block, cause := t.DivergedBlock, t.Cause
				tj.DivergedAtBlock, tj.Cause = &block, &cause
			}
			if t.ChangedFrom != nil || t.ChangedTo != nil {
				tj.Changed = &adminapi.Change{Was: a.decode(t.ChangedFrom), Now: a.decode(t.ChangedTo)}
			}
			if t.Kind == api.KindTurn {
				js.ContextTokens = t.PromptTokens
			}
			js.Turns[j] = tj
		}
		out[i] = js
	}
	return out
}

// clusterAdmin is the cluster node; dir is where it keeps its identity.
type clusterAdmin struct {
	node *cluster.Node
	dir  string
}

var _ adminapi.Cluster = clusterAdmin{}

func (a clusterAdmin) Nodes() adminapi.NodeList {
	self := a.node.Identity().NodeID()
	list := adminapi.NodeList{Cluster: a.node.Identity().ClusterID(), NodeID: self}
	for _, m := range a.node.Members() {
		n := adminapi.Node{ID: m.NodeID, Name: m.Name, Address: m.Proxy, State: string(m.State), Self: m.NodeID == self,
			GPUs: make([]adminapi.NodeGPU, len(m.GPUs)), Engines: make([]adminapi.NodeEngine, len(m.Engines)), Drained: DrainText(m.Drained)}
		for i, g := range m.GPUs {
			n.GPUs[i] = nodeGPUOf(g)
		}
		for i, e := range m.Engines {
			n.Engines[i] = nodeEngineOf(e)
		}
		if !m.LastSeen.IsZero() {
			t := m.LastSeen.UTC()
			n.LastSeen = &t
		}
		list.Nodes = append(list.Nodes, n)
	}
	return list
}

func nodeGPUOf(g cluster.GPUInfo) adminapi.NodeGPU {
	return adminapi.NodeGPU{Index: g.Index, Name: g.Name, MemoryMiB: g.MemoryMiB}
}

func nodeEngineOf(e cluster.EngineInfo) adminapi.NodeEngine {
	return adminapi.NodeEngine{
		Name: e.Name, Model: e.Model, Incarnation: e.Incarnation, URL: e.URL,
		CapacityBlocks: e.CapacityBlocks, RAMCapacityBlocks: e.RAMCapacityBlocks, BlockBytes: e.BlockBytes,
		PrefillTokensPerSec: e.PrefillTokensPerSec, LoadBytesPerSec: e.LoadBytesPerSec, Approximate: e.Approximate,
		Running: e.Running, State: e.State,
	}
}

func (a clusterAdmin) Revoke(nodeID string) error { return a.node.Revoke(nodeID) }

func (a clusterAdmin) JoinRequests() adminapi.JoinRequestList {
	id := a.node.Identity()
	list := adminapi.JoinRequestList{Cluster: id.ClusterID(), CanInvite: id.CanInvite()}
	for _, q := range a.node.JoinRequests() {
		list.Requests = append(list.Requests, adminapi.JoinRequest{ID: q.ID, Name: q.Name, Address: q.Address, Code: q.Code, Received: q.Received.UTC()})
	}
	return list
}

func (a clusterAdmin) AcceptJoin(id string) error { return joinDecisionError(a.node.AcceptJoin(id)) }
func (a clusterAdmin) RejectJoin(id string) error { return joinDecisionError(a.node.RejectJoin(id)) }

func joinDecisionError(err error) error {
	switch {
	case errors.Is(err, cluster.ErrNotInviter):
		return adminapi.Conflict(err)
	case errors.Is(err, cluster.ErrNoJoinRequest):
		return adminapi.NotFound(err)
	}
	return err
}

// Leave tells the cluster, stops the node and forgets its identity.
func (a clusterAdmin) Leave() (nodeID string, warning, err error) {
	warning = a.node.Leave()
	a.node.Close()
	if err := cluster.Forget(a.dir); err != nil {
		return "", nil, err
	}
	return a.node.Identity().NodeID(), warning, nil
}

// kindJSON is the engine's kind as the API has always named it: "sim" for
// an engine the simulator plays from its spec, which is vLLM.
func kindJSON(st hruntime.Status) string {
	if st.Simulated {
		return "sim"
	}
	return string(st.Engine)
}

// adminKVEventsOf is the KV-event self-check as the API shows it; nil
// when none ran.
func adminKVEventsOf(c hruntime.KVEventsCheck) *adminapi.KVEventsCheck {
	if c.State == hruntime.KVEventsNotChecked {
		return nil
	}
	out := &adminapi.KVEventsCheck{State: string(c.State), Matched: c.Matched, Blocks: c.Blocks, Cause: c.Cause, Detail: c.Detail, Summary: c.String()}
	if c.State == hruntime.KVEventsDiffer {
		at := c.FirstDifference
		out.FirstDifference = &at
	}
	return out
}

// adminTokenizerOf is the self-check as the API shows it; nil when none
// ran.
func adminTokenizerOf(c hruntime.TokenizerCheck) *adminapi.TokenizerCheck {
	if c.State == hruntime.TokenizerNotChecked {
		return nil
	}
	out := &adminapi.TokenizerCheck{State: string(c.State), Detail: c.Detail, Summary: c.String()}
	if c.State == hruntime.TokenizerDiffers {
		pos, ours, theirs := c.Position, c.HearthID, c.EngineID
		out.Sample, out.Position, out.HearthID, out.EngineID, out.Near = c.Sample, &pos, &ours, &theirs, c.Near
	}
	return out
}
