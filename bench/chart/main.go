// Command chart draws the MCP round-trip latency against the number of
// members, from the output of the BenchmarkMCP benchmarks of mcpadapter,
// as an SVG file:
//
//	go test -run '^$' -bench MCP -count 3 ./mcpadapter | go run ./bench/chart -o docs/roundtrip.svg
//
// It reads benchmark lines on standard input (or the files named as
// arguments), takes the median of each metric over repeated runs, and
// plots the median (p50) and 99th percentile (p99) latency of a
// fleet_send round trip and of a no-op tool call, both axes logarithmic.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	out := flag.String("o", "docs/roundtrip.svg", "the SVG file to write")
	title := flag.String("title", "fleetstate over MCP streamable HTTP: latency against members", "the chart's title")
	flag.Parse()
	var in []io.Reader
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		in = append(in, f)
	}
	if len(in) == 0 {
		in = append(in, os.Stdin)
	}
	series, err := parse(io.MultiReader(in...))
	if err != nil {
		fail(err)
	}
	if len(series) == 0 {
		fail(fmt.Errorf("no BenchmarkMCP lines with noop-p50-ns, rt-p50-ns, … in the input"))
	}
	svg := draw(*title, series)
	if err := os.WriteFile(*out, []byte(svg), 0o644); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "chart: wrote %s\n", *out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "chart:", err)
	os.Exit(1)
}

// point is one x (members) with the median of its samples of a metric.
type point struct {
	x int
	y float64 // milliseconds
}

// line is one curve of the chart.
type line struct {
	name   string
	color  string
	dashed bool
	points []point
}

// benchLine matches "BenchmarkMCP/members=100-2   N   ns/op ... 12 noop-p50-ns ... 34 rt-p99-ns ...".
var benchLine = regexp.MustCompile(`^BenchmarkMCP/members=(\d+)(?:-\d+)?\s+\d+\s+(.*)$`)

// metrics are the units of benchLine that are charted, as keys of parse's
// samples.
var metrics = map[string]string{
	"noop-p50-ns": "noop p50",
	"noop-p99-ns": "noop p99",
	"rt-p50-ns":   "roundtrip p50",
	"rt-p99-ns":   "roundtrip p99",
}

func parse(r io.Reader) ([]line, error) {
	samples := map[string]map[int][]float64{} // "roundtrip p50" -> members -> ms
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		fields := strings.Fields(m[2])
		for i := 0; i+1 < len(fields); i += 2 {
			key, ok := metrics[fields[i+1]]
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", sc.Text(), err)
			}
			if samples[key] == nil {
				samples[key] = map[int][]float64{}
			}
			samples[key][n] = append(samples[key][n], v/1e6)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	styles := []struct {
		key, name, color string
		dashed           bool
	}{
		{"roundtrip p50", "fleet_send round trip, median", "#1f77b4", false},
		{"roundtrip p99", "fleet_send round trip, p99", "#1f77b4", true},
		{"noop p50", "no-op tool call, median", "#7f7f7f", false},
		{"noop p99", "no-op tool call, p99", "#7f7f7f", true},
	}
	var out []line
	for _, s := range styles {
		byX := samples[s.key]
		if len(byX) == 0 {
			continue
		}
		l := line{name: s.name, color: s.color, dashed: s.dashed}
		for x, ys := range byX {
			slices.Sort(ys)
			l.points = append(l.points, point{x: x, y: ys[len(ys)/2]})
		}
		slices.SortFunc(l.points, func(a, b point) int { return a.x - b.x })
		out = append(out, l)
	}
	return out, nil
}

// draw renders the lines on log-log axes.
func draw(title string, lines []line) string {
	const (
		width, height          = 760, 460
		left, right, top, foot = 80, 250, 50, 60
	)
	minX, maxX := math.Inf(1), math.Inf(-1)
	minY, maxY := math.Inf(1), math.Inf(-1)
	for _, l := range lines {
		for _, p := range l.points {
			minX, maxX = math.Min(minX, float64(p.x)), math.Max(maxX, float64(p.x))
			minY, maxY = math.Min(minY, p.y), math.Max(maxY, p.y)
		}
	}
	// Decades that enclose the data.
	x0, x1 := math.Floor(math.Log10(minX)), math.Ceil(math.Log10(maxX))
	y0, y1 := math.Floor(math.Log10(minY)), math.Ceil(math.Log10(maxY))
	if x1 == x0 {
		x1++
	}
	if y1 == y0 {
		y1++
	}
	pw, ph := float64(width-left-right), float64(height-top-foot)
	px := func(x float64) float64 { return float64(left) + (math.Log10(x)-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return float64(top) + (1-(math.Log10(y)-y0)/(y1-y0))*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="15" font-weight="bold">%s</text>`+"\n", left, escape(title))
	// Grid and ticks.
	for e := x0; e <= x1; e++ {
		x := px(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, top, x, height-foot)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, height-foot+18, strconv.FormatFloat(math.Pow(10, e), 'f', -1, 64))
	}
	for e := y0; e < y1; e++ {
		for _, m := range []float64{2, 5} {
			y := py(m * math.Pow(10, e))
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#f0f0f0"/>`+"\n", left, y, width-right, y)
		}
	}
	for e := y0; e <= y1; e++ {
		y := py(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, width-right, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s ms</text>`+"\n", left-6, y+4, strconv.FormatFloat(math.Pow(10, e), 'f', -1, 64))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">members, each with one round trip in flight (clients, for the no-op call)</text>`+"\n", float64(left)+pw/2, height-18)
	fmt.Fprintf(&b, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">latency per call</text>`+"\n", float64(top)+ph/2, float64(top)+ph/2)
	// Curves and legend.
	for i, l := range lines {
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		for _, p := range l.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(float64(p.x)), py(p.y)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), l.color, dash)
		for _, p := range l.points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %d: %.3g ms</title></circle>`+"\n",
				px(float64(p.x)), py(p.y), l.color, escape(l.name), p.x, p.y)
		}
		ly := top + 10 + 22*i
		lx := width - right + 16
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+28, ly, l.color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+34, ly+4, escape(l.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
