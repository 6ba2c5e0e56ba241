package bench

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// Series is one line of a chart.
type Series struct {
	Name  string
	Color string
	X, Y  []float64
	Dots  bool // draw points instead of a line
}

// Chart is a hand-written SVG line chart.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	LogY                  bool
	// PercentileX plots X (percentiles 0..100) on a log scale of 1/(1-p), labelled
	// 0%, 90%, 99%, 99.9% …, as HdrHistogram's plotter does.
	PercentileX bool
	Width       int
	Height      int
}

const (
	padL, padR, padT, padB = 70, 36, 34, 46
)

// pxX maps a percentile to its log-scale position: log10(1/(1-p/100)).
func pctPos(p float64) float64 {
	if p >= 100 {
		p = 99.9999
	}
	return math.Log10(1 / (1 - p/100))
}

// niceTicks returns about n round tick values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	span := hi - lo
	step := math.Pow(10, math.Floor(math.Log10(span/float64(n))))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= float64(n) {
			step *= m
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, round(v, 9))
	}
	return out
}

// SVG renders the chart as a self-contained <svg> element.
func (c Chart) SVG() string {
	w, h := c.Width, c.Height
	if w == 0 {
		w = 860
	}
	if h == 0 {
		h = 300
	}
	pw, ph := float64(w-padL-padR), float64(h-padT-padB)
	// Data range.
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	// With PercentileX, p = 100 (the maximum) has no finite position: it is drawn at
	// the right edge, which is the next whole decade after the other points.
	pmax := 1.0
	if c.PercentileX {
		for _, s := range c.Series {
			for _, x := range s.X {
				if x < 100 {
					pmax = math.Max(pmax, math.Ceil(pctPos(x)-1e-9))
				}
			}
		}
	}
	tx := func(x float64) float64 {
		if c.PercentileX {
			if x >= 100 {
				return pmax
			}
			return pctPos(x)
		}
		return x
	}
	ty := func(y float64) float64 {
		if c.LogY {
			return math.Log10(math.Max(y, 1e-3))
		}
		return y
	}
	n := 0
	for _, s := range c.Series {
		for i := range s.X {
			if i >= len(s.Y) || math.IsNaN(s.Y[i]) || s.Y[i] < 0 {
				continue
			}
			x, y := tx(s.X[i]), ty(s.Y[i])
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
			n++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`, w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`, w, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(c.Title))
	if n == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#888">no data</text></svg>`, w/2-20, h/2)
		return b.String()
	}
	if c.PercentileX {
		xmin, xmax = 0, math.Max(pmax, 2)
	}
	if !c.LogY {
		ymin = math.Min(ymin, 0)
	} else {
		ymin, ymax = math.Floor(ymin), math.Ceil(ymax)
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	if !c.LogY {
		ymax *= 1.05
	}
	px := func(x float64) float64 { return float64(padL) + (x-xmin)/(xmax-xmin)*pw }
	py := func(y float64) float64 { return float64(padT) + ph - (y-ymin)/(ymax-ymin)*ph }
	// Grid and y ticks.
	var yt []float64
	if c.LogY {
		for e := ymin; e <= ymax+1e-9; e++ {
			yt = append(yt, e)
		}
	} else {
		yt = niceTicks(ymin, ymax, 6)
	}
	for _, v := range yt {
		y := py(v)
		label := v
		if c.LogY {
			label = math.Pow(10, v)
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e4e4e4"/>`, padL, y, w-padR, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-6, y+4, tick(label))
	}
	// X ticks.
	if c.PercentileX {
		for k := 0; float64(k) <= xmax+1e-9; k++ {
			x := px(float64(k))
			label := "0%"
			if k > 0 {
				label = trimZero(fmt.Sprintf("%.*f", max(0, k-2), 100*(1-math.Pow(10, -float64(k))))) + "%"
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e4e4e4"/>`, x, padT, x, h-padB)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, h-padB+15, label)
		}
	} else {
		for _, v := range niceTicks(xmin, xmax, 10) {
			x := px(v)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#f0f0f0"/>`, x, padT, x, h-padB)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, h-padB+15, tick(v))
		}
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`, padL, padT, pw, ph)
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%s</text>`, float64(padL)+pw/2, h-8, template.HTMLEscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(14 %.0f) rotate(-90)" text-anchor="middle">%s</text>`, float64(padT)+ph/2, template.HTMLEscapeString(c.YLabel))
	// Series.
	lx := float64(w - padR - 10)
	for si, s := range c.Series {
		color := s.Color
		if color == "" {
			color = palette[si%len(palette)]
		}
		var pts []string
		for i := range s.X {
			if i >= len(s.Y) || math.IsNaN(s.Y[i]) || s.Y[i] < 0 {
				continue
			}
			x, y := px(tx(s.X[i])), py(ty(s.Y[i]))
			if s.Dots {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="1.8" fill="%s"/>`, x, y, color)
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`, color, strings.Join(pts, " "))
		}
		// Legend, right-aligned in the top margin.
		ly := 22
		label := template.HTMLEscapeString(s.Name)
		lw := float64(7*len(s.Name) + 22)
		lx -= lw
		fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="12" height="3" fill="%s"/><text x="%.0f" y="%d">%s</text>`, lx, ly-4, color, lx+16, ly, label)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

func tick(v float64) string {
	if math.Abs(v) < 1e-9 {
		return "0"
	}
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trimZero(fmt.Sprintf("%.1f", v/1e9)) + "G"
	case a >= 1e6:
		return trimZero(fmt.Sprintf("%.1f", v/1e6)) + "M"
	case a >= 1e4:
		return trimZero(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case a >= 1 || a == 0:
		return trimZero(fmt.Sprintf("%.2f", v))
	}
	return trimZero(fmt.Sprintf("%.3f", v))
}

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// Charts returns the report's charts: latency over time, percentile distribution,
// throughput over time, and where present freshness and the target's memory and
// goroutines.
func Charts(rep *Report) []Chart {
	var t, p50, p99, mx, ok, errs, ev []float64
	for _, p := range rep.Timeline {
		t = append(t, p.T)
		if p.OK+p.Err == 0 { // nothing completed: no latency to draw (the gap shows the stall)
			p50, p99, mx = append(p50, math.NaN()), append(p99, math.NaN()), append(mx, math.NaN())
		} else {
			p50, p99, mx = append(p50, p.P50), append(p99, p.P99), append(mx, p.Max)
		}
		ok, errs, ev = append(ok, float64(p.OK)), append(errs, float64(p.Err)), append(ev, float64(p.Events))
	}
	out := []Chart{
		{Title: "Latency over time (from due time; per second of completion)", XLabel: "seconds since start", YLabel: "ms (log)", LogY: true,
			Series: []Series{{Name: "p50", X: t, Y: p50}, {Name: "p99", X: t, Y: p99}, {Name: "max", X: t, Y: mx}}},
	}
	var dx, dy []float64
	for _, d := range rep.Distribution {
		dx, dy = append(dx, d.Percentile), append(dy, d.Ms)
	}
	dist := []Series{{Name: "latency from due time", X: dx, Y: dy}}
	if rep.Freshness != nil && len(rep.Freshness.Distribution) > 0 {
		var fx, fy []float64
		for _, d := range rep.Freshness.Distribution {
			fx, fy = append(fx, d.Percentile), append(fy, d.Ms)
		}
		dist = append(dist, Series{Name: "freshness", X: fx, Y: fy})
	}
	out = append(out, Chart{Title: "Latency by percentile", XLabel: "percentile", YLabel: "ms (log)", LogY: true, PercentileX: true, Series: dist})
	tp := []Series{{Name: "ok req/s", X: t, Y: ok}, {Name: "error req/s", X: t, Y: errs}}
	out = append(out, Chart{Title: "Throughput over time (requests per second)", XLabel: "seconds since start", YLabel: "requests/s", Series: tp})
	if rep.Events.Sent > 0 {
		out = append(out, Chart{Title: "Accepted events per second", XLabel: "seconds since start", YLabel: "events/s",
			Series: []Series{{Name: "events/s", X: t, Y: ev, Color: "#2ca02c"}}})
	}
	if f := rep.Freshness; f != nil && len(f.Timeline) > 0 {
		var x, y []float64
		for _, p := range f.Timeline {
			if p.Ms >= 0 {
				x, y = append(x, p.T), append(y, p.Ms)
			}
		}
		out = append(out, Chart{Title: "Freshness per probe (202 to visible)", XLabel: "seconds since start", YLabel: "ms",
			Series: []Series{{Name: "probe", X: x, Y: y, Dots: true, Color: "#9467bd"}}})
	}
	if len(rep.Samples) > 1 {
		var x, heap, rss, gor, cpu []float64
		for i, s := range rep.Samples {
			x, heap, rss, gor = append(x, s.T), append(heap, s.HeapInuse/(1<<20)), append(rss, s.RSS/(1<<20)), append(gor, s.Goroutines)
			if i > 0 {
				dt := s.T - rep.Samples[i-1].T
				c := math.NaN()
				if dt > 0 {
					c = (s.CPUSeconds - rep.Samples[i-1].CPUSeconds) / dt
				}
				cpu = append(cpu, c)
			} else {
				cpu = append(cpu, math.NaN())
			}
		}
		out = append(out,
			Chart{Title: "Target memory", XLabel: "seconds since start", YLabel: "MiB",
				Series: []Series{{Name: "heap in use", X: x, Y: heap}, {Name: "RSS", X: x, Y: rss}}},
			Chart{Title: "Target goroutines", XLabel: "seconds since start", YLabel: "goroutines",
				Series: []Series{{Name: "goroutines", X: x, Y: gor, Color: "#8c564b"}}},
			Chart{Title: "Target CPU (cores)", XLabel: "seconds since start", YLabel: "cores",
				Series: []Series{{Name: "svc cores", X: x, Y: cpu, Color: "#ff7f0e"}}})
	}
	return out
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{"ms": ms}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>svc bench: {{.R.Title}}</title>
<style>
body{font-family:sans-serif;margin:24px;max-width:900px;color:#222}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
th{background:#f5f5f5}td.n{text-align:right;font-variant-numeric:tabular-nums}
svg{display:block;margin:12px 0;border:1px solid #eee}.note{color:#555}
</style></head><body>
<h1>svc bench: {{.R.Title}}</h1>
<p class="note">{{.R.Started.Format "2006-01-02 15:04:05 MST"}} · target {{.R.Target}} · machine {{.R.Machine.Host}}, {{.R.Machine.Cores}} cores ({{.R.Machine.CPUModel}}), {{printf "%.0f" .R.Machine.MemoryGiB}} GiB, {{.R.Machine.GoVersion}}{{if .R.Machine.Storage}}, data on {{.R.Machine.Storage}}{{end}}{{if .R.Machine.Probe}}, host probe {{printf "%.1f" .R.Machine.Probe}} ns/op{{end}}{{if .R.Machine.Note}} · {{.R.Machine.Note}}{{end}}</p>
<p class="note"><code>{{.R.Command}}</code></p>
<table>
<tr><th>target rate</th><td class="n">{{printf "%.0f" .R.Rate}} req/s for {{printf "%.0f" .R.Duration}} s</td></tr>
<tr><th>achieved rate</th><td class="n">{{printf "%.1f" .R.AchievedRate}} req/s ({{printf "%.1f" .R.OKRate}} ok/s) over {{printf "%.1f" .R.Elapsed}} s</td></tr>
<tr><th>requests</th><td class="n">{{.R.Requests.Scheduled}} scheduled · {{.R.Requests.OK}} ok · {{.R.Requests.Errors}} errors · {{.R.Requests.Late}} late · {{.R.Requests.Unsent}} unsent</td></tr>
{{if .R.Events.Sent}}<tr><th>events</th><td class="n">{{.R.Events.Sent}} sent · {{.R.Events.Accepted}} accepted · {{.R.Events.Rejected}} rejected</td></tr>
<tr><th>events/s</th><td class="n">{{printf "%.0f" .R.Events.PerSecond}} accepted/s · {{printf "%.0f" .R.Events.PerCore}} per core{{if .R.Events.PerTargetCPU}} · {{printf "%.0f" .R.Events.PerTargetCPU}} per target CPU-second{{end}}</td></tr>{{end}}
{{if .R.CPU}}<tr><th>CPU (cores)</th><td class="n">busy {{printf "%.2f" .R.CPU.Busy}} of {{.R.Machine.Cores}}{{range $k, $v := .R.CPU.Procs}} · {{$k}} {{printf "%.2f" $v}}{{end}}</td></tr>
{{if .R.CPU.PerEvent}}<tr><th>CPU per event (µs)</th><td class="n">{{.R.CPU.PerEventLine}}</td></tr>{{end}}{{end}}
{{with .R.CaughtUp}}{{if .CPU}}<tr><th>CPU per event, caught up (µs)</th><td class="n">{{.CaughtUpLine}}</td></tr>{{end}}{{end}}
{{with .R.Redis}}<tr><th>Redis per request</th><td class="n">{{printf "%.2f" .UsecPerRequest}} µs in {{printf "%.2f" .CallsPerRequest}} commands (INFO commandstats, {{.Requests}} requests){{range .TopCommands}} · {{.}}{{end}}{{with .Held}} · Redis held {{.}} at the start{{end}}{{with .RoundTrips}} · {{.}} (INFO stats){{end}}</td></tr>{{end}}
{{with .R.ClickHouse}}<tr><th>ClickHouse's work</th><td class="n">{{.Line $.R.Events.Accepted}}</td></tr>{{end}}
</table>
<table><tr><th>latency (ms)</th><th>n</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>
<tr><td>from due time</td><td class="n">{{.R.Latency.Count}}</td><td class="n">{{ms .R.Latency.P50}}</td><td class="n">{{ms .R.Latency.P90}}</td><td class="n">{{ms .R.Latency.P99}}</td><td class="n">{{ms .R.Latency.P999}}</td><td class="n">{{ms .R.Latency.Max}}</td></tr>
<tr><td>service time</td><td class="n">{{.R.Service.Count}}</td><td class="n">{{ms .R.Service.P50}}</td><td class="n">{{ms .R.Service.P90}}</td><td class="n">{{ms .R.Service.P99}}</td><td class="n">{{ms .R.Service.P999}}</td><td class="n">{{ms .R.Service.Max}}</td></tr>
{{range $k, $v := .R.Reads}}<tr><td>{{$k}}</td><td class="n">{{$v.Count}}</td><td class="n">{{ms $v.P50}}</td><td class="n">{{ms $v.P90}}</td><td class="n">{{ms $v.P99}}</td><td class="n">{{ms $v.P999}}</td><td class="n">{{ms $v.Max}}</td></tr>{{end}}
{{with .R.Freshness}}<tr><td>freshness (via {{.Via}}; {{.Seen}}/{{.Probes}} seen)</td><td class="n">{{.Latency.Count}}</td><td class="n">{{ms .Latency.P50}}</td><td class="n">{{ms .Latency.P90}}</td><td class="n">{{ms .Latency.P99}}</td><td class="n">{{ms .Latency.P999}}</td><td class="n">{{ms .Latency.Max}}</td></tr>{{end}}
</table>
<table><tr><th>errors by code</th><th>count</th></tr>{{range $k, $v := .R.Errors}}<tr><td>{{$k}}</td><td class="n">{{$v}}</td></tr>{{else}}<tr><td>none</td><td></td></tr>{{end}}</table>
{{with .R.Soak}}<p><b>Soak:</b> {{.Verdict}}</p>{{end}}
{{range .R.Notes}}<p class="note">{{.}}</p>{{end}}
{{range .Charts}}{{.}}{{end}}
<details><summary>parameters</summary><table>{{range $k, $v := .R.Params}}<tr><td>{{$k}}</td><td>{{$v}}</td></tr>{{end}}</table></details>
</body></html>
`))

// RenderHTML writes rep as a self-contained HTML page with inline SVG charts.
func RenderHTML(w io.Writer, rep *Report) error {
	var charts []template.HTML
	for _, c := range Charts(rep) {
		charts = append(charts, template.HTML(c.SVG())) // built from numbers and escaped labels
	}
	return page.Execute(w, struct {
		R      *Report
		Charts []template.HTML
	}{rep, charts})
}
