package doctor

import (
	"context"
	"errors"
)

// fakeGPUs is a GPUSource with fixed answers.
type fakeGPUs struct {
	facts GPUFacts
	err   error
}

func (f fakeGPUs) GPUs(context.Context) (GPUFacts, error) { return f.facts, f.err }

// fakeFitter fits a model of fixed size: weights need weightBytes, and
// every bytesPerToken beyond them is a token of context, up to maxContext.
type fakeFitter struct {
	weightBytes, bytesPerToken uint64
	maxContext                 int
	err                        error
}

func (f fakeFitter) Fit(g GPUMemory, available uint64) (Fit, error) {
	if f.err != nil {
		return Fit{}, f.err
	}
	ctx := func(bytes uint64) int {
		if bytes <= f.weightBytes {
			return 0
		}
		return min(int((bytes-f.weightBytes)/f.bytesPerToken), f.maxContext)
	}
	fit := Fit{Model: "Test-14B", Context: ctx(available), IdleContext: ctx(g.MemoryTotal), ModelContext: f.maxContext}
	fit.Fits = fit.Context >= 4096
	if !fit.Fits {
		fit.Reason = "Test-14B needs 16 GB for weights and a 4,096-token context"
	}
	return fit, nil
}

// fakeDocker is a DockerSource with fixed answers that records what it ran.
type fakeDocker struct {
	info    DockerInfo
	infoErr error
	images  map[string]bool
	runOut  string
	runErr  error
	ran     []string // images of the containers run
}

func (f *fakeDocker) Info(context.Context) (DockerInfo, error) { return f.info, f.infoErr }

func (f *fakeDocker) ImagePresent(_ context.Context, image string) (bool, error) {
	return f.images[image], nil
}

func (f *fakeDocker) RunGPU(_ context.Context, image string, _ []string) (string, error) {
	f.ran = append(f.ran, image)
	return f.runOut, f.runErr
}

// fakeSystem is a System with fixed answers.
type fakeSystem struct {
	diskFree   map[string]uint64
	diskErr    error
	memAvail   uint64
	memErr     error
	listenErr  error
	mcast      []string
	mcastErr   error
	writeErr   error
	listenedOn []string
}

func (f *fakeSystem) DiskFree(path string) (uint64, error) {
	if f.diskErr != nil {
		return 0, f.diskErr
	}
	free, ok := f.diskFree[path]
	if !ok {
		return 0, errors.New("no such disk")
	}
	return free, nil
}
func (f *fakeSystem) MemAvailable() (uint64, error) { return f.memAvail, f.memErr }
func (f *fakeSystem) Listen(addr string) error {
	f.listenedOn = append(f.listenedOn, addr)
	return f.listenErr
}
func (f *fakeSystem) MulticastInterfaces() ([]string, error) { return f.mcast, f.mcastErr }
func (f *fakeSystem) ProbeWrite(string) error                { return f.writeErr }
