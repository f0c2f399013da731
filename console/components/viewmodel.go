package components

// Layout is what every page shares.
type Layout struct {
	Title    string
	Active   string // nav entry to highlight: "overview", "sessions", ...
	Base     string // console path prefix, "/console"
	Static   string // static files prefix, "/console/static"
	LiveURL  string // SSE stream of this page, "" for pages that do not update
	LoggedIn bool   // a cookie session exists (shows "log out")
}

// Href joins the console base with a page path.
func (l Layout) Href(p string) string { return l.Base + p }

// OverviewVM is the overview page.
type OverviewVM struct {
	Totals Totals
	GPUs   []GPUCard
	Err    string // the engine source failed
	// Stores are the nodes' SSD KV stores, one panel each; none when the
	// daemon has no store source. StoresErr says the source failed.
	Stores    []StoreCard
	StoresErr string
	// Layout is the engines' layout and LayoutReason why it runs; empty
	// when not known.
	Layout       string
	LayoutReason string
	// Models are the models served on demand; not shown when there are
	// none.
	Models ModelsPanel
}

// ModelsPanel is the models served on demand: each GPU's models, the
// resident ones first, and a timeline of their engines' latest loads,
// wakes, sleeps and stops, newest first.
type ModelsPanel struct {
	Shown    bool
	Err      string // the model source failed
	GPUs     []ModelGPU
	Timeline []TimelineRow
}

// ModelGPU is one GPU's models served on demand.
type ModelGPU struct {
	GPU   string
	DOMID string
	// Resident are the models resident or loading on it; Away the others
	// (sleeping, on disk, being put away).
	Resident, Away []ModelChip
}

// ModelChip is one model and its state.
type ModelChip struct {
	Name  string
	State string
	Class string // the badge's class for the state: good, warn or none
	// Note is what else there is to say: "2 in flight", "pinned", "29% of
	// the GPU"; "" for nothing.
	Note string
}

// TimelineRow is one transition of a model's engine.
type TimelineRow struct {
	At, GPU, Model string
	Kind           string // load, wake, sleep, stop
	Took           string // "1.2 s"
	// BarW is the width of its duration bar in a 100-wide box: its time
	// against the longest one shown.
	BarW string
	Err  string // why it failed; "" when it did not
}

// Totals are the cluster figures above the GPU cards.
type Totals struct {
	Window         string // "5 min"
	RequestsPerSec string
	TTFTP50        string
	TTFTP90        string
	PrefillSaved   string // prefill seconds saved by cache hits in Window
	HitRate        string // measured, all engines, in Window
	Running        int
	Waiting        int
	Queued         int
	Err            string // traffic or router source failed
}

// GPUCard is one GPU and its engine.
type GPUCard struct {
	DOMID      string
	Worker     string
	Image      string   // the container image the engine runs; "" outside containers
	State      string   // the engine's life stage; "" when unknown
	StateClass string   // "good" when it serves, "bad" when it is down
	LogTail    []string // the engine's last log lines, shown while it is down
	LoadPhase  string   // where a loading engine's start is; "" when not loading
	LoadText   string   // the phase and its figure: "capturing CUDA graphs 40%"
	LoadPct    string   // "40%", "" when the phase gives no figure
	LoadValue  string   // the percentage as a number, for <progress>
	Diagnosis  string   // why the engine failed, with the fix
	Node       string
	GPU        string
	Model      string
	Memory     string // "18.4 / 24.0 GiB", "" when unknown; "reserved by the engine: 21.6 of 24.0 GiB" when no reading
	// MemoryInUse is what of a reservation holds data, "14.2 GiB: weights
	// and KV in use"; "" for a reading or when unknown.
	MemoryInUse string
	MemoryPct   float64
	MemoryBar   MemoryBar
	// Sparks are utilisation, temperature, power and memory over the last
	// SparkWindow, each with its latest reading ("87%", "64 °C",
	// "312 / 450 W", "18.4 GiB"); TelemetryKnown is false when none of
	// them has a reading (a simulated GPU), and the card then shows none.
	Sparks         []Sparkline
	SparkWindow    string // "2 min"
	TelemetryKnown bool
	PlanNote       string // why the engine got a smaller plan; "" when it did not
	TokenizerNote  string // the engine tokenizes differently from Hearth, or was not checked; "" when it agrees
	KVEventsNote   string // the engine's KV events do not name the probe's blocks as Hearth predicts, or were not checked; "" when they match
	Lost           bool   // the driver lost the GPU
	LostText       string // "GPU lost: <driver error>"
	KV             KVBar
	Tiers          Tiers
	Chart          HitChart
	Running        int
	Waiting        int
	TokensPerSec   string
	Err            string
}

// KVBar is a KV cache drawn as a stacked bar in a 0..BarWidth view box.
type KVBar struct {
	Known      bool // the engine reported its block count
	Total      int
	Used       int
	CachedFree int
	Empty      int
	UsedW      string // widths in view-box units, formatted
	CachedW    string
	CachedX    string
	EmptyW     string
	EmptyX     string
	UsedPct    string
	CachedPct  string
	EmptyPct   string
	Label      string // accessible summary
}

// Tiers are where an engine keeps KV (the GPU, host RAM, its node's SSD
// store) and where its prompt tokens came from. Shown is false for an
// engine with no tier below the GPU; the card then shows none of it.
type Tiers struct {
	Shown  bool
	Bars   []TierBar // GPU, then RAM if the engine has it, then SSD if its node has a store
	Window string    // "5 min": the window of Shares
	Shares TierShares
	Loaded string // bytes per second into the GPU from the tiers below, "1.2 GiB/s"; "–" unknown
	Stored string // out of the GPU into them
}

// TierBar is how full one tier is, drawn in a 0..BarWidth view box.
type TierBar struct {
	Name   string // "GPU", "RAM", "SSD"
	Class  string // CSS class of the filled part: "tier-gpu", ...
	Known  bool   // the size is known; otherwise Text says what is
	UsedW  string // filled width in view-box units, formatted
	Pct    string // "62%"
	Text   string // "1180 / 1900 blocks", "412.0 GiB / 500.0 GiB"
	Shared bool   // the node's engines share this tier
	Label  string // accessible summary
}

// TierShares splits the prompt tokens an engine looked up over the window
// into GPU hits, RAM loads, SSD loads and recomputed tokens, stacked in a
// 0..BarWidth view box.
type TierShares struct {
	Known bool // the engine looked up tokens in the window
	// HasRAM and HasSSD say which tiers the legend names: the engine's RAM
	// tier, its node's store (or SSD loads the engine counted anyway).
	HasRAM, HasSSD            bool
	GPUW                      string
	RAMX, RAMW                string
	SSDX, SSDW                string
	GPU, RAM, SSD, Recomputed string // shares, "62%"
	Label                     string // accessible summary
}

// StoreCard is one node's SSD KV store.
type StoreCard struct {
	DOMID    string
	Node     string
	Dir      string
	Bar      TierBar
	Blocks   string // blocks held
	FreeDisk string // "812.4 GiB"; "–" unknown
	Window   string // "5 min": the window of HitRate, Evicted and Corrupt
	HitRate  string // lookups found, "71%"; "–" without lookups
	Read     string // disk traffic, "240 MiB/s"; "–" unknown
	Write    string
	Evicted  string // blocks evicted in the window
	Corrupt  string // blocks dropped in the window for failing their check
	// CorruptSeen marks Corrupt: the store dropped corrupt blocks in the
	// window.
	CorruptSeen bool
	Err         string
}

// MemoryBar is a GPU's memory by owner, stacked in a 0..BarWidth view box:
// Hearth's engine from the left, then other programs, then what the driver
// keeps that no process accounts for, then free memory.
type MemoryBar struct {
	Known   bool   // the source listed the GPU's processes
	HearthW string // widths and offsets in view-box units, formatted
	OtherX  string
	OtherW  string
	DriverX string
	DriverW string
	Hearth  string // GiB, "16.0"
	Other   string
	Driver  string // "" when too small to mention
	Free    string
	Total   string
	Others  []string // the other programs, "python3 (pid 4242) 6.0 GiB"
	Label   string   // accessible summary
}

// Sparkline is one GPU reading over the card's window, drawn in a
// 0..SparkWidth × 0..SparkHeight view box.
type Sparkline struct {
	Name  string   // "Util", "Temp", "Power", "VRAM"
	Class string   // CSS class of the line: "spark-util", ...
	Now   string   // the latest reading, "87%"; "–" when unknown
	Lines []string // polyline point lists, a gap starting a new one; none when nothing is known
	Label string   // accessible summary
}

// SparkWidth and SparkHeight are the view box of sparklines; SparkPad keeps
// strokes and a lone point's dash inside it.
const (
	SparkWidth  = 120
	SparkHeight = 24
	SparkPad    = 3
)

// BarWidth is the view-box width of cache bars.
const BarWidth = 300

// ChartWidth and ChartHeight are the view box of hit-rate charts; the plot
// area leaves room for axis labels.
const (
	ChartWidth  = 300
	ChartHeight = 96
	PlotLeft    = 34
	PlotRight   = 296
	PlotTop     = 6
	PlotBottom  = 78
)

// HitChart is the predicted and measured prefix-cache hit rate over time.
type HitChart struct {
	Predicted    []string // polyline point lists; a gap starts a new one
	Measured     []string
	Since        string // x-axis left label, "−10 min"
	PredictedNow string // latest value, "62%" or "–"
	MeasuredNow  string
	Label        string // accessible summary
	Empty        bool   // no data yet
}

// SessionsVM is the sessions page.
type SessionsVM struct {
	Rows  []SessionRow
	Total int // sessions known; Rows may be fewer
	Err   string
}

// SessionRow is one agent session.
type SessionRow struct {
	DOMID       string
	ID          string
	Client      string
	Turns       int    // turns of the conversation, side requests apart
	Context     string // prompt tokens of the last turn
	LastShare   string // cached share of the last turn's prompt
	LastLow     bool   // the last turn diverged
	Worker      string
	Idle        string
	Busted      int // turns that diverged: lost a cached prefix, or changed the prompt
	TurnRows    []TurnRow
	HiddenTurns int // older turns not shown
	// Sides counts the side requests (titles, topic checks, quota probes),
	// which are listed apart in SideRows and never compared with turns.
	Sides       int
	SideRows    []SideRow
	HiddenSides int
}

// SideRow is one side request of a session.
type SideRow struct {
	At     string
	Prompt string
	Cached string
	Output string
	Worker string
}

// TurnRow is one turn of a session.
type TurnRow struct {
	N        int
	At       string
	Prompt   string
	Cached   string
	New      string
	Share    string
	CachedW  string // width of the cached part in a 0..TurnBarWidth bar
	NewW     string
	NewX     string
	Busted   bool   // the turn diverged
	Diverged string // "diverged at block 12: evicted from the GPU", "" when it did not
	// ChangedFrom and ChangedTo are the prompt's text around a rewritten
	// block, before and now; "" when not known.
	ChangedFrom, ChangedTo string
}

// TurnBarWidth is the view-box width of a turn's cached/new bar.
const TurnBarWidth = 120

// RequestsVM is the routing decisions page.
type RequestsVM struct {
	Rows  []DecisionRow
	Queue int
	Err   string
	// OutputEstimate is the error of the expected output lengths the
	// requests were routed with; "" when none had one.
	OutputEstimate string
}

// DecisionRow is one routing decision.
type DecisionRow struct {
	DOMID     string
	At        string
	RequestID string
	Policy    string
	Winner    string
	Reason    string
	Predicted string // predicted hit rate
	// Client, Session, Model and TTFT come from the request once it has
	// finished; "–" before, or when it is older than the stats window.
	Client      string
	Session     string // the first characters of the session id
	SessionFull string // the whole id, for a tooltip; "" when none
	Model       string // served by the winner
	TTFT        string
	// Hints are the agent hints it was served with and where each came
	// from ("priority=-1(inferred)"), from the request too.
	Hints      string
	Output     string // "170 tokens (expected 183)"
	Blocks     string // "38 / 40 blocks cached"
	Queued     string
	Candidates []CandidateRow
}

// CandidateRow is one worker weighed for a decision.
type CandidateRow struct {
	Worker  string
	Overlap int
	Active  int
	Pending int
	Cost    string
	Winner  bool
}

// ConnectVM is the connect page.
type ConnectVM struct {
	BaseURL string
	Model   string
	KeyNote string // what the API wants as a key; the terminal says the same
	Clients []ClientSnippet
}

// FirstKeyVM asks to confirm the first key, which closes the API.
type FirstKeyVM struct {
	ID     string // the element it replaces: a client's card, or "first-key"
	Base   string // console base, for the form action
	Name   string // of the key
	Client string // the Connect page's client id; "" from the Settings page
	// Clients used the API without a key in the last hour.
	Clients []SeenClient
	Cancel  string // where cancelling goes
	Err     string
}

// SeenClient is a client that used the API without a key.
type SeenClient struct {
	Name string
	Ago  string // when it was last seen: "just now", "3 min ago"
}

// ClientSnippet is the settings one client needs.
type ClientSnippet struct {
	ID      string // "claude-code"
	Title   string
	Where   string // where the snippet goes
	Snippet string // the client's configuration
	Env     string // the key as an environment variable, "" when Snippet has it
	KeyName string // name a new key gets
	Secret  string // a key just created, shown once; "" otherwise
	Err     string
	Base    string // console base, for the form action
}

// SettingsVM is the settings page.
type SettingsVM struct {
	Base        string
	Policy      string
	Policies    []string
	Models      []string
	AliasesText string
	Keys        []KeyRow
	NewKey      *NewKeyVM
	Saved       bool
	Err         string // settings could not be read or saved
	KeysErr     string
}

// KeyRow is one API key.
type KeyRow struct {
	ID       string
	Name     string
	Hint     string
	Scope    string
	Created  string
	LastUsed string // "never" when unused
}

// NewKeyVM is a key just created; its secret is shown this once.
type NewKeyVM struct {
	Name   string
	Secret string
}

// LoginVM is the login page.
type LoginVM struct {
	Action   string
	Err      string
	Password bool // the owner's password, not an API key
}

// SetupVM is the first-run page that sets the owner's password.
type SetupVM struct {
	Action    string
	Err       string
	MinLength int
}

// HealthVM is the Health page: the host's checks.
type HealthVM struct {
	Base string
	// Available is false when the daemon has no health source.
	Available              bool
	Err                    string
	Checks                 []HealthRow
	Passed, Warned, Failed int
}

// HealthRow is one check.
type HealthRow struct {
	Name     string
	Status   string // pass, warn or fail
	Evidence string
	Fix      string
}

// Badge is the CSS class of the check's status badge.
func (r HealthRow) Badge() string {
	switch r.Status {
	case "pass":
		return "good"
	case "warn":
		return "warn"
	}
	return "bad"
}

// ClusterPageVM is the Cluster page: its live part and, around it, what
// only the owner's session sees.
type ClusterPageVM struct {
	Base    string
	LiveURL string // the live part's SSE stream; "" without a cluster
	// Owner is set for a session made with the owner's password, which
	// sees the join token and may revoke and accept nodes. OwnerSet says
	// an owner's password exists; OwnerEnabled that one can be set.
	Owner, OwnerSet, OwnerEnabled bool
	// JoinToken is shown to the owner only; CanInvite is false on a node
	// that does not hold the cluster's CA key.
	JoinToken string
	CanInvite bool
	// Notice and Problem answer an action posted without htmx.
	Notice, Problem string
	Body            ClusterVM
}

// ClusterVM is the live part of the Cluster page.
type ClusterVM struct {
	Base      string
	InCluster bool   // false: the page says how to create a cluster
	ID        string // the cluster id
	Err       string // the source failed
	Summary   string // "3 nodes: 2 up, 1 down"
	Map       ClusterMap
	Nodes     []ClusterNodeVM // this node first
	Requests  []JoinRequestVM // oldest first
}

// ClusterNodeVM is one node's card.
type ClusterNodeVM struct {
	DOMID      string
	ID         string
	Name       string
	Address    string
	State      string // up, suspect, down, revoked
	StateClass string // badge colour
	Self       bool
	Seen       string // "last seen 2 s ago"; "" for this node
	GPUs       []string
	Engines    []ClusterEngineVM
	CanRevoke  bool // a peer not revoked yet
	RevokeURL  string
	Drained    string // "drained (manual)"; "" while it takes requests
	Queued     string // "3 requests wait for KV room"; "" when none do
}

// ClusterEngineVM is one engine on a node's card.
type ClusterEngineVM struct {
	Worker  string
	Model   string
	Running int
	Full    bool // its KV cache is full
}

// JoinRequestVM is a node waiting for the owner's answer.
type JoinRequestVM struct {
	DOMID     string
	ID        string
	Name      string
	Address   string
	Code      string
	Received  string // "12 s ago"
	AcceptURL string
	RejectURL string
}

// ClusterMap is the topology drawing: this node linked to each peer, in
// view-box units.
type ClusterMap struct {
	Width, Height int
	Nodes         []MapNode
	Links         []MapLink
}

// MapNode is one node's box on the map.
type MapNode struct {
	X, Y, W, H int
	Label      string
	GPUs       string // "2 GPUs"
	State      string
	Self       bool
	Href       string // its card, "#node-…"
}

// MapLink is the line from this node to a peer, styled by the peer's state.
type MapLink struct {
	X1, Y1, X2, Y2 int
	State          string
	Title          string
}
