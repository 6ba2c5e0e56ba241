package svctest

import (
	"bytes"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	json "github.com/goccy/go-json"
)

// Proc is an svc process a test started (Start): its stdout and stderr are kept.
type Proc struct {
	Name string // for messages: the command line
	Addr string // its SVC_HTTP_ADDR, when the test set one (WaitReady)
	Cmd  *exec.Cmd
	log  SyncBuffer
}

// SyncBuffer is a bytes.Buffer that concurrent writers (a process's output copiers, a
// server's goroutines) and a test reading it may use at the same time.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start starts the built svc (Binary) with args in environment env (the whole of it:
// start from os.Environ()), serving HTTP on addr when addr is set (SVC_HTTP_ADDR is
// then appended to env). The test's cleanup kills it if it still runs.
func Start(t testing.TB, env []string, addr string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: "svc " + strings.Join(args, " "), Addr: addr, Cmd: exec.Command(Binary(t), args...)}
	p.Cmd.Env = env
	if addr != "" {
		p.Cmd.Env = append(append([]string{}, env...), "SVC_HTTP_ADDR="+addr)
	}
	p.Cmd.Stdout, p.Cmd.Stderr = &p.log, &p.log
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.Cmd.ProcessState == nil {
			p.Kill()
		}
	})
	return p
}

// Output is everything the process wrote so far.
func (p *Proc) Output() string { return p.log.String() }

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	p.Cmd.Process.Kill()
	p.Cmd.Wait()
}

// Stop sends SIGTERM and waits up to d for the exit, returning its error; past d it
// kills the process and fails the test.
func (p *Proc) Stop(t testing.TB, d time.Duration) error {
	t.Helper()
	p.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.Cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		p.Cmd.Process.Kill()
		<-done
		t.Errorf("%s did not stop within %s:\n%s", p.Name, d, p.Output())
		return nil
	}
}

// WaitReady waits up to d until GET /readyz on Addr answers 200.
func (p *Proc) WaitReady(t testing.TB, d time.Duration) {
	t.Helper()
	ok := func() bool {
		resp, err := http.Get("http://" + p.Addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	if !poll(d, ok) {
		t.Fatalf("%s not ready:\n%s", p.Name, p.Output())
	}
}

// WaitLog waits up to d until the process's output contains every one of subs.
func (p *Proc) WaitLog(t testing.TB, d time.Duration, subs ...string) {
	t.Helper()
	missing := ""
	ok := func() bool {
		out := p.Output()
		for _, s := range subs {
			if !strings.Contains(out, s) {
				missing = s
				return false
			}
		}
		return true
	}
	if !poll(d, ok) {
		t.Fatalf("%s never logged %q:\n%s", p.Name, missing, p.Output())
	}
}

// WaitFor polls ok every 100 ms for up to d, failing the test with what if it never
// holds.
func WaitFor(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	if !poll(d, ok) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func poll(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// Run runs svc with args in environment env to its end and returns what it printed on
// stdout; a non-zero exit fails the test with its stderr.
func Run(t testing.TB, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("svc %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// RunJSON is Run for a command that prints one JSON object (svc admin …).
func RunJSON(t testing.TB, env []string, args ...string) map[string]any {
	t.Helper()
	out := Run(t, env, args...)
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("svc %s printed %q", strings.Join(args, " "), out)
	}
	return m
}
