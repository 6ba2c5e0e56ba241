package deploy

import (
	"encoding/xml"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// composeFile covers the fields deploy/compose/compose.yaml uses. Decoding is strict: a
// misspelt or misplaced key fails the test. Top-level x-* keys are YAML anchors' homes.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]*struct {
		Driver string `yaml:"driver"`
	} `yaml:"volumes"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet string `yaml:"subnet"`
			} `yaml:"config"`
		} `yaml:"ipam"`
	} `yaml:"networks"`
	Extensions map[string]any `yaml:",inline"`
}

type composeService struct {
	Image           string                                `yaml:"image"`
	Build           *struct{ Context, Dockerfile string } `yaml:"build"`
	Hostname        string                                `yaml:"hostname"`
	User            string                                `yaml:"user"`
	Restart         string                                `yaml:"restart"`
	Entrypoint      []string                              `yaml:"entrypoint"`
	Command         []string                              `yaml:"command"`
	Environment     map[string]string                     `yaml:"environment"`
	Volumes         []string                              `yaml:"volumes"`
	Ports           []string                              `yaml:"ports"`
	DependsOn       map[string]composeDependsOn           `yaml:"depends_on"`
	Healthcheck     *composeHealthcheck                   `yaml:"healthcheck"`
	StopGracePeriod string                                `yaml:"stop_grace_period"`
	CPUShares       int                                   `yaml:"cpu_shares"`
	Ulimits         map[string]struct {
		Soft int `yaml:"soft"`
		Hard int `yaml:"hard"`
	} `yaml:"ulimits"`
}

type composeDependsOn struct {
	Condition string `yaml:"condition"`
}

type composeHealthcheck struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	Retries     int      `yaml:"retries"`
	StartPeriod string   `yaml:"start_period"`
}

const composeDir = "compose"

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(composeDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := DecodeYAMLStrict(data, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if len(c.Services) == 0 {
		t.Fatal("compose.yaml: no services")
	}
	return c
}

// svcRole returns the svc role a service runs ("" when the service is not an svc image).
func svcRole(s composeService) string {
	if s.Image != "svc:local" || len(s.Command) == 0 {
		return ""
	}
	return s.Command[0]
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestComposeStructure: references inside compose.yaml resolve: files, build contexts,
// named volumes, depends_on targets and conditions; host ports do not clash.
func TestComposeStructure(t *testing.T) {
	c := loadCompose(t)
	for k := range c.Extensions {
		if !strings.HasPrefix(k, "x-") {
			t.Errorf("compose.yaml: unknown top-level key %q", k)
		}
	}
	hostPorts := map[string]string{}
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		if s.Image == "" && s.Build == nil {
			t.Errorf("%s: neither image nor build", name)
		}
		if s.Build != nil {
			ctx := filepath.Join(composeDir, s.Build.Context)
			if fi, err := os.Stat(ctx); err != nil || !fi.IsDir() {
				t.Errorf("%s: build context %s is not a directory", name, ctx)
			}
			if _, err := os.Stat(filepath.Join(ctx, s.Build.Dockerfile)); err != nil {
				t.Errorf("%s: dockerfile: %v", name, err)
			}
		}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || len(parts) > 3 {
				t.Errorf("%s: volume %q: want SOURCE:TARGET[:MODE]", name, v)
				continue
			}
			src, target := parts[0], parts[1]
			if !strings.HasPrefix(target, "/") {
				t.Errorf("%s: volume %q: target is not absolute", name, v)
			}
			if len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw" {
				t.Errorf("%s: volume %q: mode %q", name, v, parts[2])
			}
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				if _, err := os.Stat(filepath.Join(composeDir, src)); err != nil {
					t.Errorf("%s: bind mount source: %v", name, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("%s: named volume %q not declared under volumes:", name, src)
			}
		}
		for dep, d := range s.DependsOn {
			target, ok := c.Services[dep]
			if !ok {
				t.Errorf("%s: depends_on %q: no such service", name, dep)
				continue
			}
			switch d.Condition {
			case "service_started":
			case "service_healthy":
				if target.Healthcheck == nil {
					t.Errorf("%s: depends_on %s healthy, but %s has no healthcheck", name, dep, dep)
				}
			case "service_completed_successfully":
				if target.Restart != "no" {
					t.Errorf("%s: waits for %s to complete, but %s restarts (%q)", name, dep, dep, target.Restart)
				}
			default:
				t.Errorf("%s: depends_on %s: condition %q", name, dep, d.Condition)
			}
		}
		for _, p := range s.Ports {
			// [IP:]HOST:CONTAINER
			parts := strings.Split(p, ":")
			if len(parts) < 2 {
				t.Errorf("%s: port %q publishes no fixed host port", name, p)
				continue
			}
			host := strings.Join(parts[:len(parts)-1], ":")
			hostPort := parts[len(parts)-2]
			if other, ok := hostPorts[hostPort]; ok {
				t.Errorf("%s: host port %s (%s) already published by %s", name, hostPort, host, other)
			}
			hostPorts[hostPort] = name
		}
		if h := s.Healthcheck; h != nil && (len(h.Test) < 2 || (h.Test[0] != "CMD" && h.Test[0] != "CMD-SHELL")) {
			t.Errorf("%s: healthcheck test %q: want [CMD, ...] or [CMD-SHELL, ...]", name, h.Test)
		}
	}
	if _, err := os.Stat(filepath.Join(composeDir, "../observability/prometheus.yml")); err != nil {
		t.Error(err)
	}
}

// TestComposeTopology: the stack is the one issue 8 describes, and the svc roles are
// wired to services that exist.
func TestComposeTopology(t *testing.T) {
	c := loadCompose(t)
	subnets := map[string]bool{}
	for _, n := range c.Networks {
		for _, cfg := range n.IPAM.Config {
			subnets[cfg.Subnet] = true
		}
	}
	roles := map[string][]string{}
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		role := svcRole(s)
		if role == "" {
			continue
		}
		roles[role] = append(roles[role], name)
		env := s.Environment
		for _, k := range []string{"SVC_KAFKA_BROKERS", "SVC_REDIS_CLUSTER", "SVC_CLICKHOUSE_ADDR", "SVC_CLICKHOUSE_DB", "SVC_CLICKHOUSE_USER", "SVC_CLICKHOUSE_PASSWORD"} {
			if env[k] == "" {
				t.Errorf("%s: %s not set", name, k)
			}
		}
		for _, k := range []string{"SVC_HTTP_ADDR", "SVC_METRICS_ADDR"} {
			if !strings.HasPrefix(env[k], "0.0.0.0:") {
				t.Errorf("%s: %s=%q: in a container it must listen on 0.0.0.0", name, k, env[k])
			}
		}
		for _, k := range []string{"SVC_KAFKA_BROKERS", "SVC_REDIS_CLUSTER", "SVC_CLICKHOUSE_ADDR"} {
			for _, b := range strings.Split(env[k], ",") {
				checkHostPort(t, c, name, k, b)
			}
		}
		if u := env["SVC_REDIS_URL"]; u != "" {
			t.Errorf("%s: SVC_REDIS_URL %q beside SVC_REDIS_CLUSTER: one Redis, the cluster", name, u)
		}
		for _, p := range strings.Split(env["SVC_TRUSTED_PROXIES"], ",") {
			if p == "" {
				continue
			}
			if _, err := netip.ParsePrefix(p); err != nil {
				t.Errorf("%s: SVC_TRUSTED_PROXIES: %v", name, err)
			} else if !subnets[p] {
				t.Errorf("%s: SVC_TRUSTED_PROXIES %s is not the stack's network", name, p)
			}
		}
		if role != "migrate" && (s.Healthcheck == nil || !strings.Contains(strings.Join(s.Healthcheck.Test, " "), "/readyz")) {
			t.Errorf("%s: healthcheck should probe /readyz", name)
		}
	}
	for role, min := range map[string]int{"ingest": 2, "rollup": 2, "api": 2, "webhooks": 1, "app": 2, "migrate": 1} {
		if len(roles[role]) < min {
			t.Errorf("want at least %d svc %s containers, have %v", min, role, roles[role])
		}
	}
	if m := roles["migrate"]; len(m) == 1 {
		cmd := strings.Join(c.Services[m[0]].Command, " ")
		if !strings.Contains(cmd, "--clustered") || !strings.Contains(cmd, "--cluster svc_cluster") {
			t.Errorf("migrate: command %q does not apply the clustered schema to svc_cluster", cmd)
		}
	}

	checkAppSettings(t, c, roles)

	// Kafka: three KRaft brokers with one quorum.
	var kafka []string
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		if strings.HasPrefix(s.Image, "apache/kafka") && s.Environment["KAFKA_NODE_ID"] != "" {
			kafka = append(kafka, name)
			if !strings.Contains(s.Environment["KAFKA_PROCESS_ROLES"], "controller") {
				t.Errorf("%s: not a KRaft controller", name)
			}
			for _, v := range strings.Split(s.Environment["KAFKA_CONTROLLER_QUORUM_VOTERS"], ",") {
				_, hp, _ := strings.Cut(v, "@")
				checkHostPort(t, c, name, "KAFKA_CONTROLLER_QUORUM_VOTERS", hp)
			}
		}
	}
	if len(kafka) != 3 {
		t.Errorf("want 3 Kafka brokers, have %v", kafka)
	}
	checkRedisCluster(t, c)
	for _, s := range []string{"lb", "prometheus", "grafana"} {
		if _, ok := c.Services[s]; !ok {
			t.Errorf("service %s missing", s)
		}
	}
}

// appSharedSettings are the settings an application container must hold as the
// containers of another role do: the webhooks role's Redis prefix and egress policy (its
// Webhooks screens read and change that state under that policy), and the API's base
// URL (cookies Secure behind https, sign-in links) and trusted proxies (its sign-in
// throttle and audit log see the client address the API's key allow-lists see).
var appSharedSettings = map[string][]string{
	"webhooks": {"SVC_WEBHOOKS_REDIS_PREFIX", "SVC_WEBHOOKS_ALLOW_NETS"},
	"api":      {"SVC_PUBLIC_URL", "SVC_TRUSTED_PROXIES"},
}

// checkAppSettings: every svc app container agrees with every container of the roles
// in appSharedSettings on those settings, which must be set (a prefix left to its
// default on one side only would drift silently), and does not wait for Kafka, which
// it does not use.
func checkAppSettings(t *testing.T, c composeFile, roles map[string][]string) {
	t.Helper()
	for _, app := range roles["app"] {
		env := c.Services[app].Environment
		for _, role := range sortedKeys(appSharedSettings) {
			for _, k := range appSharedSettings[role] {
				want, ok := env[k]
				if !ok {
					t.Errorf("%s: %s not set", app, k)
					continue
				}
				for _, other := range roles[role] {
					if got, ok := c.Services[other].Environment[k]; !ok || got != want {
						t.Errorf("%s: %s=%q, but %s (svc %s) has %q", app, k, want, other, role, got)
					}
				}
			}
		}
		if _, ok := c.Services[app].DependsOn["kafka-init"]; ok {
			t.Errorf("%s: waits for kafka-init, but svc app does not use Kafka", app)
		}
	}
}

// checkRedisCluster: six Redis nodes in cluster mode with AOF, joined by a one-shot
// redis-cli --cluster create with a replica per master, which every svc role waits for.
func checkRedisCluster(t *testing.T, c composeFile) {
	t.Helper()
	nodes := 0
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		cmd := strings.Join(append(append([]string{}, s.Entrypoint...), s.Command...), " ")
		if !strings.HasPrefix(s.Image, "redis:") || !strings.Contains(cmd, "redis-server") {
			continue
		}
		nodes++
		for _, want := range []string{"--cluster-enabled yes", "--appendonly yes", "--cluster-announce-hostname"} {
			if !strings.Contains(cmd, want) {
				t.Errorf("%s: redis-server without %s", name, want)
			}
		}
	}
	if nodes != 6 {
		t.Errorf("want 6 Redis Cluster nodes (3 masters, 3 replicas), have %d", nodes)
	}
	init, ok := c.Services["redis-init"]
	if cmd := strings.Join(init.Command, " "); !ok || !strings.Contains(cmd, "--cluster create") || !strings.Contains(cmd, "--cluster-replicas 1") {
		t.Errorf("redis-init: want redis-cli --cluster create ... --cluster-replicas 1, have %q", cmd)
	}
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		if r := svcRole(s); r != "" && r != "migrate" && s.DependsOn["redis-init"].Condition != "service_completed_successfully" {
			t.Errorf("%s: does not wait for redis-init to complete", name)
		}
	}
}

func checkHostPort(t *testing.T, c composeFile, service, what, hp string) {
	t.Helper()
	host, port, err := net.SplitHostPort(strings.TrimSpace(hp))
	if err != nil || port == "" {
		t.Errorf("%s: %s: %q is not host:port", service, what, hp)
		return
	}
	if _, ok := c.Services[host]; !ok {
		t.Errorf("%s: %s names %q, which is not a service", service, what, host)
	}
}

// TestComposePrometheusTargets: prometheus.yml scrapes every svc role container on its
// metrics port, and names only services of the stack.
func TestComposePrometheusTargets(t *testing.T) {
	c := loadCompose(t)
	data, err := os.ReadFile("observability/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Global        map[string]any `yaml:"global"`
		RuleFiles     []string       `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string          `yaml:"targets"`
				Labels  map[string]string `yaml:"labels"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := DecodeYAMLStrict(data, &p); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	scraped := map[string]bool{}
	for _, sc := range p.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				host, port, err := net.SplitHostPort(tg)
				if err != nil {
					t.Errorf("job %s: target %q", sc.JobName, tg)
					continue
				}
				if host == "localhost" {
					continue
				}
				s, ok := c.Services[host]
				if !ok {
					t.Errorf("job %s: target %s is not a compose service", sc.JobName, tg)
					continue
				}
				if role := svcRole(s); role != "" {
					if sc.JobName != "svc-"+role {
						t.Errorf("target %s (role %s) is in job %s, want svc-%s", tg, role, sc.JobName, role)
					}
					if !strings.HasSuffix(s.Environment["SVC_METRICS_ADDR"], ":"+port) {
						t.Errorf("target %s: %s serves metrics on %s", tg, host, s.Environment["SVC_METRICS_ADDR"])
					}
				}
				scraped[host] = true
			}
		}
	}
	for _, name := range sortedKeys(c.Services) {
		if role := svcRole(c.Services[name]); role != "" && role != "migrate" && !scraped[name] {
			t.Errorf("%s (svc %s) is not scraped by prometheus.yml", name, role)
		}
	}
}

var haproxyServer = regexp.MustCompile(`(?m)^\s*server\s+(\S+)\s+([^\s:]+):(\d+)`)
var haproxyBackend = regexp.MustCompile(`(?m)^backend\s+(\S+)`)

// TestComposeLoadBalancer: the HAProxy backends hold exactly the compose containers of
// their role, on the HTTP port those containers listen on, and the routing rules send
// POST /events and /v1/events to ingest, /webhooks/ to webhooks and /app, /app/ to app;
// every backend checks /readyz; the edge passes on
// only the X-Forwarded-For line it writes itself.
func TestComposeLoadBalancer(t *testing.T) {
	c := loadCompose(t)
	data, err := os.ReadFile(filepath.Join(composeDir, "haproxy/haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(data)
	// Split into sections by backend.
	got := map[string][]string{}
	locs := haproxyBackend.FindAllStringSubmatchIndex(cfg, -1)
	for i, l := range locs {
		end := len(cfg)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if next := strings.Index(cfg[l[1]:end], "\nfrontend "); next >= 0 {
			end = l[1] + next
		}
		backend, section := cfg[l[2]:l[3]], cfg[l[0]:end]
		if !strings.Contains(section, "option httpchk GET /readyz") || !strings.Contains(section, "default-server check") {
			t.Errorf("backend %s: its servers are not health-checked on /readyz", backend)
		}
		for _, m := range haproxyServer.FindAllStringSubmatch(section, -1) {
			host, port := m[2], m[3]
			s, ok := c.Services[host]
			if !ok {
				t.Errorf("backend %s: server %s is not a compose service", backend, host)
				continue
			}
			if svcRole(s) != backend {
				t.Errorf("backend %s: server %s runs role %q", backend, host, svcRole(s))
			}
			if !strings.HasSuffix(s.Environment["SVC_HTTP_ADDR"], ":"+port) {
				t.Errorf("backend %s: %s listens on %s, not port %s", backend, host, s.Environment["SVC_HTTP_ADDR"], port)
			}
			got[backend] = append(got[backend], host)
		}
	}
	for _, name := range sortedKeys(c.Services) {
		role := svcRole(c.Services[name])
		if role == "ingest" || role == "api" || role == "webhooks" || role == "app" {
			found := false
			for _, h := range got[role] {
				found = found || h == name
			}
			if !found {
				t.Errorf("%s (svc %s) is not in HAProxy backend %s", name, role, role)
			}
		}
	}
	for _, want := range []string{
		"acl events_path path /events /v1/events",
		"acl is_post method POST",
		"use_backend ingest if events_path is_post",
		"use_backend webhooks if webhooks_path",
		"acl app_path path /app\n",    // the first screen
		"acl app_path path_beg /app/", // every other one, not /apple
		"use_backend app if app_path",
		"default_backend api",
		"option forwardfor",
		"http-request del-header X-Forwarded-For", // the edge: a client's own lines are not passed on
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("haproxy.cfg: missing %q", want)
		}
	}
	for _, dep := range sortedKeys(c.Services["lb"].DependsOn) {
		if _, ok := got[svcRole(c.Services[dep])]; !ok {
			t.Errorf("lb depends on %s, which no backend routes to", dep)
		}
	}
}

// xmlHosts collects the text of every element named one of names in an XML document.
func xmlHosts(t *testing.T, path string, names ...string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var out []string
	var stack []string
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("%s: not well-formed XML: %v", path, err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			stack = append(stack, v.Name.Local)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				for _, n := range names {
					if stack[len(stack)-1] == n && strings.TrimSpace(string(v)) != "" {
						out = append(out, strings.TrimSpace(string(v)))
					}
				}
			}
		}
	}
}

// TestComposeClickHouse: the ClickHouse configuration is well-formed XML, its cluster
// is two shards of two replicas whose hosts are the compose services, and its Keeper
// nodes are the compose Keeper services.
func TestComposeClickHouse(t *testing.T) {
	c := loadCompose(t)
	files, _ := filepath.Glob(filepath.Join(composeDir, "clickhouse/*/*.xml"))
	if len(files) < 3 {
		t.Fatalf("ClickHouse configuration files: %v", files)
	}
	for _, f := range files {
		xmlHosts(t, f) // well-formedness
	}
	cluster := filepath.Join(composeDir, "clickhouse/config.d/cluster.xml")
	hosts := xmlHosts(t, cluster, "host")
	if len(hosts) != 4+3 {
		t.Errorf("cluster.xml: want 4 replicas and 3 keeper nodes, have hosts %v", hosts)
	}
	for _, h := range hosts {
		if _, ok := c.Services[h]; !ok {
			t.Errorf("cluster.xml: host %s is not a compose service", h)
		}
	}
	data, _ := os.ReadFile(cluster)
	var rs struct {
		RemoteServers struct {
			Cluster struct {
				Shards []struct {
					Replicas []struct {
						Host string `xml:"host"`
					} `xml:"replica"`
					InternalReplication bool `xml:"internal_replication"`
				} `xml:"shard"`
			} `xml:"svc_cluster"`
		} `xml:"remote_servers"`
	}
	if err := xml.Unmarshal(data, &rs); err != nil {
		t.Fatal(err)
	}
	if sh := rs.RemoteServers.Cluster.Shards; len(sh) != 2 || len(sh[0].Replicas) != 2 || len(sh[1].Replicas) != 2 {
		t.Errorf("svc_cluster: want 2 shards x 2 replicas, have %+v", sh)
	}
	for _, sh := range rs.RemoteServers.Cluster.Shards {
		if !sh.InternalReplication {
			t.Errorf("svc_cluster: internal_replication must be true with ReplicatedMergeTree")
		}
	}
	// Every ClickHouse service mounts the cluster file and sets its macros.
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		if !strings.HasPrefix(s.Image, "clickhouse/clickhouse-server") {
			continue
		}
		if s.Environment["CH_SHARD"] == "" || s.Environment["CH_REPLICA"] != name {
			t.Errorf("%s: CH_SHARD/CH_REPLICA macros not set (CH_REPLICA must be the hostname)", name)
		}
		if s.CPUShares == 0 || s.CPUShares >= 1024 {
			t.Errorf("%s: cpu_shares %d, want below the default 1024 (ClickHouse yields the cores to the edge on a shared host)", name, s.CPUShares)
		}
		mounted := strings.Join(s.Volumes, " ")
		if !strings.Contains(mounted, "cluster.xml") || !strings.Contains(mounted, "users.d/svc.xml") {
			t.Errorf("%s: does not mount cluster.xml and users.d/svc.xml", name)
		}
	}
	raft := xmlHosts(t, filepath.Join(composeDir, "clickhouse/keeper/keeper.xml"), "hostname")
	if len(raft) != 3 {
		t.Errorf("keeper.xml: want 3 raft servers, have %v", raft)
	}
	for _, h := range raft {
		if _, ok := c.Services[h]; !ok {
			t.Errorf("keeper.xml: %s is not a compose service", h)
		}
	}
}

// TestComposeGrafanaProvisioning: the provisioning files parse and point where the
// compose file mounts the dashboards.
func TestComposeGrafanaProvisioning(t *testing.T) {
	c := loadCompose(t)
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
			IsDefault                    bool `yaml:"isDefault"`
			Editable                     bool `yaml:"editable"`
		} `yaml:"datasources"`
	}
	data, err := os.ReadFile(filepath.Join(composeDir, "grafana/provisioning/datasources/prometheus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := DecodeYAMLStrict(data, &ds); err != nil {
		t.Fatalf("datasource: %v", err)
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" {
		t.Fatalf("datasource: %+v", ds)
	}
	u, err := url.Parse(ds.Datasources[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	checkHostPort(t, c, "grafana datasource", "url", u.Host)

	var dp struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name                  string `yaml:"name"`
			Folder                string `yaml:"folder"`
			Type                  string `yaml:"type"`
			DisableDeletion       bool   `yaml:"disableDeletion"`
			UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
			AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
			Options               struct {
				Path                      string `yaml:"path"`
				FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	data, err = os.ReadFile(filepath.Join(composeDir, "grafana/provisioning/dashboards/svc.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := DecodeYAMLStrict(data, &dp); err != nil {
		t.Fatalf("dashboard provider: %v", err)
	}
	if len(dp.Providers) != 1 {
		t.Fatalf("dashboard providers: %+v", dp)
	}
	want := fmt.Sprintf("../observability/grafana:%s:ro", dp.Providers[0].Options.Path)
	found := false
	for _, v := range c.Services["grafana"].Volumes {
		found = found || v == want
	}
	if !found {
		t.Errorf("grafana: no volume %q for the provisioned dashboards", want)
	}
}
