package deploy

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The schema of each manifest is kubeconform's job (make lint-deploy). These tests check
// what a schema cannot: that the objects fit together.

type k8sObject struct {
	File string
	Obj  map[string]any
}

func (o k8sObject) kind() string { return str(o.Obj, "kind") }
func (o k8sObject) name() string { return str(o.Obj, "metadata", "name") }

// get walks maps (string keys) and lists (integer keys) and returns what is there.
func get(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...string) []any {
	l, _ := get(v, path...).([]any)
	return l
}

func loadManifests(t *testing.T) []k8sObject {
	t.Helper()
	files, _ := filepath.Glob("k8s/*.yaml")
	var out []k8sObject
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := YAMLDocuments(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range docs {
			var m map[string]any
			if err := d.Decode(&m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, k8sObject{File: f, Obj: m})
		}
	}
	if len(out) == 0 {
		t.Fatal("no manifests under k8s/")
	}
	return out
}

func byKind(objs []k8sObject, kind string) map[string]k8sObject {
	m := map[string]k8sObject{}
	for _, o := range objs {
		if o.kind() == kind {
			m[o.name()] = o
		}
	}
	return m
}

func TestK8sKustomizationListsEveryFile(t *testing.T) {
	data, err := os.ReadFile("k8s/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Namespace  string   `yaml:"namespace"`
		Resources  []string `yaml:"resources"`
		Images     []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		} `yaml:"images"`
	}
	if err := DecodeYAMLStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, _ := filepath.Glob("k8s/*.yaml")
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			want = append(want, b)
		}
	}
	got := append([]string(nil), k.Resources...)
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kustomization resources %v, files %v", got, want)
	}
}

func TestK8sWiring(t *testing.T) {
	objs := loadManifests(t)
	for _, o := range objs {
		if o.kind() != "Namespace" && str(o.Obj, "metadata", "namespace") != "svc" {
			t.Errorf("%s %s (%s): namespace is not svc", o.kind(), o.name(), o.File)
		}
	}
	cms, secrets := byKind(objs, "ConfigMap"), byKind(objs, "Secret")
	deploys, pdbs, hpas := byKind(objs, "Deployment"), byKind(objs, "PodDisruptionBudget"), byKind(objs, "HorizontalPodAutoscaler")
	services, jobs := byKind(objs, "Service"), byKind(objs, "Job")

	cfg, ok := cms["svc-config"]
	if !ok {
		t.Fatal("ConfigMap svc-config missing")
	}
	data, _ := get(cfg.Obj, "data").(map[string]any)
	for k := range data {
		if !strings.HasPrefix(k, "SVC_") {
			t.Errorf("svc-config: key %s is not an SVC_ setting", k)
		}
		if strings.Contains(k, "PASSWORD") || strings.Contains(k, "SECRET") {
			t.Errorf("svc-config: %s belongs in the Secret", k)
		}
	}
	for _, k := range []string{"SVC_HTTP_ADDR", "SVC_METRICS_ADDR"} {
		if s, _ := data[k].(string); !strings.HasPrefix(s, "0.0.0.0:") {
			t.Errorf("svc-config: %s=%q: a pod must listen on 0.0.0.0", k, s)
		}
	}
	for _, k := range []string{"SVC_KAFKA_BROKERS", "SVC_REDIS_CLUSTER", "SVC_CLICKHOUSE_ADDR", "SVC_CLICKHOUSE_DB"} {
		if s, _ := data[k].(string); s == "" {
			t.Errorf("svc-config: %s empty", k)
		}
	}
	for _, seed := range strings.Split(str(data, "SVC_REDIS_CLUSTER"), ",") {
		if _, _, err := net.SplitHostPort(seed); err != nil {
			t.Errorf("svc-config: SVC_REDIS_CLUSTER seed %q is not host:port", seed)
		}
	}
	if _, ok := data["SVC_REDIS_URL"]; ok {
		t.Error("svc-config: SVC_REDIS_URL beside SVC_REDIS_CLUSTER: one Redis, the cluster")
	}
	partitions, _ := strconv.Atoi(str(data, "SVC_KAFKA_PARTITIONS"))
	if sec, ok := secrets["svc-credentials"]; !ok {
		t.Error("Secret svc-credentials missing")
	} else if str(sec.Obj, "stringData", "SVC_CLICKHOUSE_PASSWORD") == "" && str(sec.Obj, "data", "SVC_CLICKHOUSE_PASSWORD") == "" {
		t.Error("svc-credentials: no SVC_CLICKHOUSE_PASSWORD")
	}

	checkPod := func(where, role string, pod any) {
		containers := list(pod, "spec", "containers")
		if len(containers) == 0 {
			t.Errorf("%s: no containers", where)
		}
		for _, c := range containers {
			args := list(c, "args")
			if len(args) == 0 || args[0] != role {
				t.Errorf("%s: args %v, want the role %q first", where, args, role)
			}
			for _, r := range []string{"requests", "limits"} {
				for _, res := range []string{"cpu", "memory"} {
					if get(c, "resources", r, res) == nil {
						t.Errorf("%s: resources.%s.%s not set", where, r, res)
					}
				}
			}
			refs := map[string]bool{}
			for _, e := range list(c, "envFrom") {
				if n := str(e, "configMapRef", "name"); n != "" {
					refs["cm/"+n] = true
					if _, ok := cms[n]; !ok {
						t.Errorf("%s: envFrom ConfigMap %s does not exist", where, n)
					}
				}
				if n := str(e, "secretRef", "name"); n != "" {
					refs["secret/"+n] = true
					if _, ok := secrets[n]; !ok {
						t.Errorf("%s: envFrom Secret %s does not exist", where, n)
					}
				}
			}
			if !refs["cm/svc-config"] || !refs["secret/svc-credentials"] {
				t.Errorf("%s: must take svc-config and svc-credentials as environment", where)
			}
			if role == "migrate" {
				continue
			}
			if p := str(c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
				t.Errorf("%s: readinessProbe path %q, want /readyz", where, p)
			}
			if p := str(c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
				t.Errorf("%s: livenessProbe path %q, want /healthz", where, p)
			}
			ports := map[string]bool{}
			for _, p := range list(c, "ports") {
				ports[str(p, "name")] = true
			}
			if !ports["http"] || !ports["metrics"] {
				t.Errorf("%s: container ports http and metrics must be named", where)
			}
		}
	}

	roles := map[string]bool{}
	for name, d := range deploys {
		role := str(d.Obj, "metadata", "labels", "app.kubernetes.io/component")
		roles[role] = true
		sel, _ := get(d.Obj, "spec", "selector", "matchLabels").(map[string]any)
		podLabels, _ := get(d.Obj, "spec", "template", "metadata", "labels").(map[string]any)
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("Deployment %s: selector %s=%v does not match its pods", name, k, v)
			}
		}
		checkPod("Deployment "+name, role, get(d.Obj, "spec", "template"))
		found := false
		for _, p := range pdbs {
			found = found || reflect.DeepEqual(get(p.Obj, "spec", "selector", "matchLabels"), get(d.Obj, "spec", "selector", "matchLabels"))
		}
		if !found {
			t.Errorf("Deployment %s: no PodDisruptionBudget selects its pods", name)
		}
	}
	for _, r := range []string{"ingest", "rollup", "api", "webhooks", "app"} {
		if !roles[r] {
			t.Errorf("no Deployment for role %s", r)
		}
	}
	if len(pdbs) != len(deploys) {
		t.Errorf("%d PodDisruptionBudgets for %d Deployments", len(pdbs), len(deploys))
	}

	scaled := map[string]bool{}
	for name, h := range hpas {
		target := str(h.Obj, "spec", "scaleTargetRef", "name")
		d, ok := deploys[target]
		if !ok || str(h.Obj, "spec", "scaleTargetRef", "kind") != "Deployment" {
			t.Errorf("HPA %s: target %s is not a Deployment here", name, target)
			continue
		}
		role := str(d.Obj, "metadata", "labels", "app.kubernetes.io/component")
		scaled[role] = true
		max, _ := get(h.Obj, "spec", "maxReplicas").(int)
		if role == "rollup" && partitions > 0 && max > partitions {
			t.Errorf("HPA %s: maxReplicas %d > %d partitions: the extra consumers would idle", name, max, partitions)
		}
	}
	for _, r := range []string{"ingest", "rollup"} {
		if !scaled[r] {
			t.Errorf("no HorizontalPodAutoscaler for %s", r)
		}
	}

	for name, s := range services {
		sel, _ := get(s.Obj, "spec", "selector").(map[string]any)
		var match *k8sObject
		for _, d := range deploys {
			labels, _ := get(d.Obj, "spec", "template", "metadata", "labels").(map[string]any)
			ok := len(sel) > 0
			for k, v := range sel {
				ok = ok && labels[k] == v
			}
			if ok {
				d := d
				match = &d
			}
		}
		if match == nil {
			t.Errorf("Service %s: selector %v matches no Deployment", name, sel)
			continue
		}
		ports := map[string]bool{}
		for _, p := range list(match.Obj, "spec", "template", "spec", "containers", "0", "ports") {
			ports[str(p, "name")] = true
		}
		for _, p := range list(s.Obj, "spec", "ports") {
			if tp := str(p, "targetPort"); !ports[tp] {
				t.Errorf("Service %s: targetPort %q is not a named port of %s", name, tp, match.name())
			}
		}
	}

	for _, ing := range byKind(objs, "Ingress") {
		for _, r := range list(ing.Obj, "spec", "rules") {
			for _, p := range list(r, "http", "paths") {
				svcName := str(p, "backend", "service", "name")
				s, ok := services[svcName]
				if !ok {
					t.Errorf("Ingress %s: path %s: Service %s missing", ing.name(), str(p, "path"), svcName)
					continue
				}
				portName := str(p, "backend", "service", "port", "name")
				found := false
				for _, sp := range list(s.Obj, "spec", "ports") {
					found = found || str(sp, "name") == portName
				}
				if !found {
					t.Errorf("Ingress %s: Service %s has no port %q", ing.name(), svcName, portName)
				}
			}
		}
	}

	checkIngressRoutes(t, byKind(objs, "Ingress"), services, deploys)
	checkSharedSettings(t, data, deploys)

	m, ok := jobs["svc-migrate"]
	if !ok {
		t.Fatal("Job svc-migrate missing")
	}
	checkPod("Job svc-migrate", "migrate", get(m.Obj, "spec", "template"))
	args := ""
	for _, a := range list(m.Obj, "spec", "template", "spec", "containers", "0", "args") {
		args += a.(string) + " "
	}
	if !strings.Contains(args, "--clustered") {
		t.Errorf("Job svc-migrate: args %q do not apply the clustered schema", args)
	}
}

// ingressRoutes are the paths the public address routes, as `svc dev` and the compose
// load balancer do, and the role that must answer each.
var ingressRoutes = []struct{ path, pathType, role string }{
	{"/events", "Exact", "ingest"},
	{"/v1/events", "Exact", "ingest"},
	{"/webhooks", "Prefix", "webhooks"},
	{"/v1/webhooks", "Prefix", "webhooks"},
	{"/app", "Prefix", "app"}, // /app and /app/…, not /apple
	{"/", "Prefix", "api"},
}

// checkIngressRoutes: every route of ingressRoutes is a path of an Ingress, of its path
// type, whose Service selects the pods of the Deployment of its role.
func checkIngressRoutes(t *testing.T, ingresses, services, deploys map[string]k8sObject) {
	t.Helper()
	type route struct{ pathType, service string }
	got := map[string]route{}
	for _, ing := range ingresses {
		for _, r := range list(ing.Obj, "spec", "rules") {
			for _, p := range list(r, "http", "paths") {
				got[str(p, "path")] = route{str(p, "pathType"), str(p, "backend", "service", "name")}
			}
		}
	}
	for _, want := range ingressRoutes {
		r, ok := got[want.path]
		if !ok {
			t.Errorf("Ingress: no path %s (to svc %s)", want.path, want.role)
			continue
		}
		if r.pathType != want.pathType {
			t.Errorf("Ingress: path %s is %s, want %s", want.path, r.pathType, want.pathType)
		}
		if role := serviceRole(services[r.service], deploys); role != want.role {
			t.Errorf("Ingress: path %s goes to Service %s, whose pods run %q, want %q", want.path, r.service, role, want.role)
		}
	}
}

// serviceRole is the role (component label) of the Deployment whose pods s selects, ""
// when none.
func serviceRole(s k8sObject, deploys map[string]k8sObject) string {
	sel, _ := get(s.Obj, "spec", "selector").(map[string]any)
	for _, d := range deploys {
		labels, _ := get(d.Obj, "spec", "template", "metadata", "labels").(map[string]any)
		ok := len(sel) > 0
		for k, v := range sel {
			ok = ok && labels[k] == v
		}
		if ok {
			return str(d.Obj, "metadata", "labels", "app.kubernetes.io/component")
		}
	}
	return ""
}

// sharedSettings are what svc app must see as other roles do (compose_test.go,
// appSharedSettings, says why): they are set once, in svc-config, which every pod takes,
// and no Deployment sets them on its own.
var sharedSettings = []string{"SVC_WEBHOOKS_REDIS_PREFIX", "SVC_WEBHOOKS_ALLOW_NETS", "SVC_PUBLIC_URL", "SVC_TRUSTED_PROXIES"}

func checkSharedSettings(t *testing.T, config map[string]any, deploys map[string]k8sObject) {
	t.Helper()
	for _, k := range sharedSettings {
		if _, ok := config[k]; !ok {
			t.Errorf("svc-config: %s not set (svc app and another role must agree on it)", k)
		}
		for name, d := range deploys {
			for _, c := range list(d.Obj, "spec", "template", "spec", "containers") {
				for _, e := range list(c, "env") {
					if str(e, "name") == k {
						t.Errorf("Deployment %s: sets %s itself; it belongs to svc-config only", name, k)
					}
				}
			}
		}
	}
}

// TestYAMLDocuments covers the splitter the manifest tests rely on.
func TestYAMLDocuments(t *testing.T) {
	docs, err := YAMLDocuments([]byte("a: 1\n---\n# only a comment\n---\nb: 2\n"))
	if err != nil || len(docs) != 2 {
		t.Fatalf("got %d docs, %v", len(docs), err)
	}
	var m map[string]int
	if err := docs[1].Decode(&m); err != nil || m["b"] != 2 {
		t.Fatalf("second doc: %v %v", m, err)
	}
	var strict struct{ A int }
	if err := DecodeYAMLStrict([]byte("a: 1\nb: 2\n"), &strict); err == nil {
		t.Error("DecodeYAMLStrict accepted an unknown field")
	}
}
