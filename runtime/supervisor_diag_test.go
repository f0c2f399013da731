package runtime

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// oomTraceback is what vLLM prints when the weights do not fit.
var oomTraceback = []string{
	"(EngineCore_DP0 pid=164) INFO 01-23 15:48:47 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-32B...",
	"Loading safetensors checkpoint shards:  50% Completed | 4/8 [00:06<00:06,  1.50s/it]",
	"(EngineCore_DP0 pid=164) ERROR 01-23 15:49:07 [core.py:708] EngineCore failed to start.",
	"(EngineCore_DP0 pid=164) ERROR 01-23 15:49:07 [core.py:708] Traceback (most recent call last):",
	"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 has a total capacity of 23.55 GiB of which 0.41 GiB is free.",
	"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
}

func writeLines(t *testing.T, w io.Writer, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSupervisorDiagnosesAFailedStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{launched: make(chan *fakeHandle)}
		s := newTestSupervisor(t, l, &fakeAttacher{}, healthyEngine{})
		go s.Run(t.Context())

		h := <-l.launched
		h.logs = oomTraceback
		h.die(errors.New("exit status 1"))
		synctest.Wait()
		st := status(t, s)
		if st.State != StateRestarting || st.Diagnosis.Cause != CauseOutOfMemory {
			t.Fatalf("engine %+v: want restarting, diagnosed out of memory", st)
		}
		for _, want := range []string{"exited: exit status 1: ", "CUDA ran out of memory while loading weights", "0.41 GiB of 23.55 GiB was free", "lower --max-model-len or use a smaller model"} {
			if !strings.Contains(st.LastError, want) {
				t.Errorf("last error %q lacks %q", st.LastError, want)
			}
		}
		if !strings.HasSuffix(st.LastError, st.Diagnosis.Message) {
			t.Errorf("last error %q does not end with the diagnosis %q", st.LastError, st.Diagnosis.Message)
		}
		if !strings.Contains(s.Summary("m"), "lower --max-model-len") {
			t.Errorf("summary %q lacks the fix", s.Summary("m"))
		}

		// The next start serves: the diagnosis goes.
		h2 := <-l.launched
		h2.becomeReady()
		synctest.Wait()
		if st := status(t, s); st.State != StateReady || st.LastError != "" || st.Diagnosis != (Diagnosis{}) {
			t.Fatalf("served engine: %+v, want no error or diagnosis left", st)
		}
	})
}

func TestSupervisorDiagnosesWhatItDoesNotKnowAsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{launched: make(chan *fakeHandle)}
		s := newTestSupervisor(t, l, &fakeAttacher{}, healthyEngine{})
		go s.Run(t.Context())
		h := <-l.launched
		h.logs = []string{"Segmentation fault (core dumped)"}
		h.die(errors.New("exit status 139"))
		synctest.Wait()
		if st := status(t, s); st.LastError != "exited: exit status 139" || st.Diagnosis.Cause != "" {
			t.Fatalf("engine %+v: want the bare exit error and no cause", st)
		}
	})
}

// TestSupervisorDiagnosesALaunchErrorWithoutTheLastRunsLog: a launch that
// fails has no log; the previous run's OOM must not be blamed.
func TestSupervisorDiagnosesALaunchErrorWithoutTheLastRunsLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{launched: make(chan *fakeHandle), fail: func(n int) error {
			if n == 2 {
				return errors.New(`create container: Error response from daemon: could not select device driver "nvidia" with capabilities: [[gpu]]`)
			}
			return nil
		}}
		s := newTestSupervisor(t, l, &fakeAttacher{}, healthyEngine{})
		go s.Run(t.Context())
		h := <-l.launched
		h.logs = oomTraceback
		h.die(errors.New("exit status 1"))
		synctest.Wait()
		time.Sleep(time.Second) // the backoff; launch 2 fails at once
		synctest.Wait()
		st := status(t, s)
		if st.Diagnosis.Cause != CauseNoNVIDIARuntime || !strings.HasPrefix(st.LastError, "launch: create container") {
			t.Fatalf("engine %+v: want the launch error diagnosed as no NVIDIA runtime", st)
		}
	})
}

func TestSupervisorShowsALoadingEnginesPhase(t *testing.T) {
	for _, follow := range []bool{true, false} {
		t.Run(map[bool]string{true: "followed log", false: "log read whole"}[follow], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &fakeLauncher{launched: make(chan *fakeHandle), rings: follow}
				s := newTestSupervisor(t, l, &fakeAttacher{}, healthyEngine{})
				go s.Run(t.Context())
				h := <-l.launched
				synctest.Wait()
				write := func(lines ...string) {
					if follow {
						writeLines(t, h.ring, lines...)
					} else {
						h.logs = append(h.logs, lines...)
					}
				}
				steps := []struct {
					line string
					want LoadState
				}{
					{"(EngineCore_DP0 pid=164) INFO 01-23 15:48:47 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-14B-FP8...", LoadState{Phase: PhaseLoading, Progress: -1}},
					{"Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:03<00:03,  1.52s/it]", LoadState{Phase: PhaseLoading, Progress: 50}},
					{"(EngineCore_DP0 pid=164) INFO 01-23 15:51:33 [kv_cache_utils.py:1087] GPU KV cache size: 31,648 tokens", LoadState{Phase: PhaseProfiling, Progress: -1}},
					{"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  40%|████      | 27/67 [00:05<00:07,  5.43it/s]", LoadState{Phase: PhaseCapturing, Progress: 40}},
				}
				for _, step := range steps {
					write(step.line)
					if st := status(t, s); st.State != StateLoading || st.Load != step.want {
						t.Fatalf("after %q: %s %+v, want loading %+v", step.line, st.State, st.Load, step.want)
					}
				}
				h.becomeReady()
				synctest.Wait()
				if st := status(t, s); st.State != StateReady || st.Load.Phase != "" || st.Load.Progress != -1 {
					t.Fatalf("ready engine: %s %+v, want no load phase", st.State, st.Load)
				}
			})
		})
	}
}

func TestSupervisorReadyTimeout(t *testing.T) {
	cases := []struct {
		name     string
		log      []string
		giveUpAt time.Duration
		want     string
	}{
		{"a warm start gets 5 minutes", []string{
			"Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:03<00:09,  3.0s/it]",
		}, 5 * time.Minute, "still not serving 5m0s after launch (loading weights)"},
		{"a download gets 20", []string{
			"(EngineCore_DP0 pid=164) INFO 01-23 15:48:47 [weight_utils.py:392] Using model weights format ['*.safetensors']",
			"model-00001-of-00004.safetensors:  45%|████▌     | 1.80G/4.00G [00:12<00:15, 150MB/s]",
		}, 20 * time.Minute, "still not serving 20m0s after launch (downloading weights)"},
		{"a finished download still counts", []string{
			"INFO 08-06 20:11:33 [weight_utils.py:530] Time spent downloading weights for google/gemma-4-31B-it: 264.51 seconds",
			"Capturing CUDA graphs (decode, FULL):  10%|█         | 4/35 [00:01<00:10,  3.0it/s]",
		}, 20 * time.Minute, "(capturing CUDA graphs)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &fakeLauncher{launched: make(chan *fakeHandle), rings: true}
				s := newTestSupervisor(t, l, &fakeAttacher{}, healthyEngine{})
				go s.Run(t.Context())
				h := <-l.launched
				launched := time.Now()
				writeLines(t, h.ring, tc.log...)
				<-h.exited // stopped once it took too long
				if took := time.Since(launched); took != tc.giveUpAt {
					t.Errorf("gave up after %v, want %v", took, tc.giveUpAt)
				}
				synctest.Wait()
				if st := status(t, s); st.State != StateRestarting || !strings.Contains(st.LastError, tc.want) || h.stops != 1 {
					t.Errorf("engine %+v, stopped %d times: want restarting, stopped once, saying %q", st, h.stops, tc.want)
				}
			})
		})
	}
}

func TestSupervisorLogsAfterFollowsRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{launched: make(chan *fakeHandle), rings: true}
		s := newTestSupervisor(t, l, &fakeAttacher{}, healthyEngine{})
		go s.Run(t.Context())
		if _, ok := s.LogsAfter("nope", LogCursor{}); ok {
			t.Fatal("LogsAfter found an engine that does not exist")
		}
		h := <-l.launched
		synctest.Wait() // the supervisor has taken in the launch it returned
		writeLines(t, h.ring, "one", "two")
		page, ok := s.LogsAfter("gpu0", LogCursor{})
		if !ok || !slices.Equal(page.Lines, []string{"one", "two"}) || page.NewRun {
			t.Fatalf("first page %+v", page)
		}
		select {
		case <-page.More:
			t.Fatal("More closed with nothing new")
		default:
		}
		writeLines(t, h.ring, "three")
		<-page.More
		page, _ = s.LogsAfter("gpu0", page.Next)
		if !slices.Equal(page.Lines, []string{"three"}) {
			t.Fatalf("second page %q, want the new line only", page.Lines)
		}

		// The engine dies and is launched again: the follower hears of it
		// and reads the new run from its start.
		h.die(errors.New("exit status 1"))
		h2 := <-l.launched
		synctest.Wait()
		<-page.Relaunched
		writeLines(t, h2.ring, "again")
		page, _ = s.LogsAfter("gpu0", page.Next)
		if !slices.Equal(page.Lines, []string{"again"}) || !page.NewRun {
			t.Fatalf("page after the relaunch %+v, want the new run's line", page)
		}
	})
}

func TestSupervisorLogsAfterReadsAnUnfollowableLogOncePerRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLauncher{launched: make(chan *fakeHandle), onLaunch: func(h *fakeHandle) { h.logs = []string{"hello"} }}
		s := newTestSupervisor(t, l, &fakeAttacher{}, healthyEngine{})
		go s.Run(t.Context())
		<-l.launched
		synctest.Wait() // the supervisor has taken in the launch it returned
		page, _ := s.LogsAfter("gpu0", LogCursor{})
		if !slices.Equal(page.Lines, []string{"hello"}) || page.More != nil {
			t.Fatalf("first page %+v, want the whole log and no More", page)
		}
		if page, _ = s.LogsAfter("gpu0", page.Next); len(page.Lines) != 0 {
			t.Fatalf("the same run's log came twice: %q", page.Lines)
		}
	})
}
