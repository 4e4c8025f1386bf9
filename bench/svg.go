package main

// SVG charts, written by hand: horizontal bars, one group per
// concurrency, one bar per server. No script, no external font or style.

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// A bar is one server's figure in a group.
type bar struct {
	label string
	value float64 // 0 with failed set: no bar
	low   float64 // latency charts: the p50 drawn inside the p99 bar
	text  string  // the figure printed after the bar
	m0    bool    // m0's own rows stand out
	fail  string
}

type group struct {
	title string
	bars  []bar
}

const (
	chartWidth  = 820
	labelWidth  = 250
	valueWidth  = 150
	barHeight   = 16
	barGap      = 4
	groupGap    = 14
	groupTitleH = 18
	m0Color     = "#d9480f"
	peerColor   = "#5c7cfa"
	lowColor    = "#1c2a6b"
	m0LowColor  = "#7a2100"
)

// barChart draws groups of bars. With perGroup the bars of each group are
// scaled to that group's longest (a group's figures are compared with
// each other, not across groups); logScale draws latencies on a log axis
// from 0.01 ms.
func barChart(title, subtitle string, groups []group, perGroup, logScale bool) string {
	height := 52
	for _, g := range groups {
		height += groupTitleH + len(g.bars)*(barHeight+barGap) + groupGap
	}
	if logScale {
		height += 20
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="10" y="38" fill="#555555">%s</text>`+"\n", html.EscapeString(subtitle))
	plotX, plotW := float64(labelWidth), float64(chartWidth-labelWidth-valueWidth)
	globalMax := 0.0
	for _, g := range groups {
		for _, br := range g.bars {
			globalMax = math.Max(globalMax, br.value)
		}
	}
	lo, hi := 0.01, 10000.0
	if logScale {
		for hi/10 > globalMax && hi > 1 {
			hi /= 10
		}
	}
	scale := func(v, top float64) float64 {
		if logScale {
			if v <= lo {
				return 0
			}
			return plotW * math.Log10(v/lo) / math.Log10(hi/lo)
		}
		if top <= 0 {
			return 0
		}
		return plotW * v / top
	}
	if logScale {
		bottom := height - 24
		for v := lo; v <= hi*1.0001; v *= 10 {
			x := plotX + scale(v, 0)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="52" x2="%.1f" y2="%d" stroke="#dddddd"/>`+"\n", x, x, bottom)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555555">%s ms</text>`+"\n", x, bottom+14, trimFloat(v))
		}
	}
	y := 52
	for _, g := range groups {
		top := globalMax
		if perGroup {
			top = 0
			for _, br := range g.bars {
				top = math.Max(top, br.value)
			}
		}
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y+13, html.EscapeString(g.title))
		y += groupTitleH
		for _, br := range g.bars {
			weight := ""
			if br.m0 {
				weight = ` font-weight="bold"`
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end"%s>%s</text>`+"\n", labelWidth-8, y+12, weight, html.EscapeString(br.label))
			if br.fail != "" {
				fmt.Fprintf(&b, `<text x="%.0f" y="%d" fill="#c92a2a">%s</text>`+"\n", plotX+4, y+12, html.EscapeString(br.fail))
				y += barHeight + barGap
				continue
			}
			color, low := peerColor, lowColor
			if br.m0 {
				color, low = m0Color, m0LowColor
			}
			w := math.Max(scale(br.value, top), 1)
			fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", plotX, y, w, barHeight, color)
			if br.low > 0 {
				fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", plotX, y, math.Max(scale(br.low, top), 1), barHeight, low)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", plotX+w+5, y+12, html.EscapeString(br.text))
			y += barHeight + barGap
		}
		y += groupGap
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
