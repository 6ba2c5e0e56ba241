package deploy

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// procSh runs deploy/local/proc.sh's function fn on pid and returns its exit status.
func procSh(t *testing.T, fn string, pid int) int {
	t.Helper()
	cmd := exec.Command("bash", "-c", `log() { :; }; . local/proc.sh; "$1" "$2"`, "bash", fn, strconv.Itoa(pid))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatalf("%s: %v: %s", fn, err, out)
	return -1
}

// idleGroup is the path of the svc-idle CPU cgroup pid is in, or "".
func idleGroup(t *testing.T, pid int) string {
	t.Helper()
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
		parts := strings.SplitN(line, ":", 3) // id:controllers:path
		if len(parts) == 3 && strings.HasSuffix(parts[2], "/svc-idle") &&
			(parts[1] == "" || strings.Contains(","+parts[1]+",", ",cpu,")) {
			return parts[2]
		}
	}
	return ""
}

// TestCPUIdleMovesAProcess: cpu_idle puts every thread of a process into the svc-idle
// cgroup with cpu.idle = 1 where the machine lets it, and says so by its status;
// cpu_normal takes it out again.
func TestCPUIdleMovesAProcess(t *testing.T) {
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	if st := procSh(t, "cpu_idle", sleep.Process.Pid); st != 0 {
		t.Skipf("cpu_idle returned %d: no writable CPU cgroup on this machine (the script falls back to nice)", st)
	}
	dir := idleGroup(t, sleep.Process.Pid)
	if dir == "" {
		t.Fatalf("cpu_idle returned 0 but the process is not in svc-idle's CPU group")
	}
	for _, top := range []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup"} {
		if b, err := os.ReadFile(top + dir + "/cpu.idle"); err == nil {
			if strings.TrimSpace(string(b)) != "1" {
				t.Fatalf("%s%s/cpu.idle = %q, want 1", top, dir, b)
			}
			procSh(t, "cpu_normal", sleep.Process.Pid)
			if g := idleGroup(t, sleep.Process.Pid); g != "" {
				t.Fatalf("after cpu_normal the process is still in %s", g)
			}
			return
		}
	}
	t.Fatalf("no cpu.idle file for cgroup %s", dir)
}

// TestCPUIdleRefusesAMissingProcess: a pid that is not there changes nothing and
// returns 1, so clickhouse_start falls back to its nice value alone.
func TestCPUIdleRefusesAMissingProcess(t *testing.T) {
	if st := procSh(t, "cpu_idle", 1<<22+12345); st != 1 {
		t.Fatalf("cpu_idle on a missing pid returned %d, want 1", st)
	}
}
