package dashboard

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH                            = 960, 260
	padLeft, padRight, padTop, padBottom      = 56, 12, 10, 28
	sparkW, sparkH                            = 120, 26
	plotW                                     = chartW - padLeft - padRight
	plotH                                     = chartH - padTop - padBottom
	xTicks                                    = 6
	yTicks                                    = 4
	coordFmt                             byte = 'f'
)

// stackedChart draws failures as a stacked step area: one <path> per error
// code (class "series", data-code, data-total), a y axis with round ticks
// and a time axis. Colors come from the stylesheet (class code-<code>). At
// most MaxBuckets buckets reach it, so it stays light.
func stackedChart(f Failures) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="Failures over time, stacked by error code" xmlns="http://www.w3.org/2000/svg">`, chartW, chartH)
	n := max(f.Buckets, 1)
	stackTop := make([]uint64, n)
	for _, s := range f.Series {
		for i, v := range s.Counts {
			stackTop[i] += v
		}
	}
	var peak uint64
	for _, v := range stackTop {
		peak = max(peak, v)
	}
	top, step := niceScale(peak, yTicks)
	y := func(v uint64) string { return num(padTop + plotH - float64(v)/float64(top)*plotH) }
	x := func(i int) string { return num(padLeft + float64(i)/float64(n)*plotW) }

	// Grid and y labels.
	for v := uint64(0); v <= top; v += step {
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%s" y2="%s"/>`, padLeft, chartW-padRight, y(v), y(v))
		fmt.Fprintf(&b, `<text class="ylabel" x="%d" y="%s">%d</text>`, padLeft-6, y(v), v)
	}
	// Series, bottom up.
	base := make([]uint64, n)
	for _, s := range f.Series {
		if s.Total == 0 {
			continue
		}
		var d strings.Builder
		for i := 0; i < n; i++ {
			up := base[i] + s.Counts[i]
			if i == 0 {
				fmt.Fprintf(&d, "M%s %s", x(0), y(up))
			} else {
				fmt.Fprintf(&d, "L%s %s", x(i), y(up))
			}
			fmt.Fprintf(&d, "L%s %s", x(i+1), y(up))
		}
		for i := n - 1; i >= 0; i-- {
			fmt.Fprintf(&d, "L%s %sL%s %s", x(i+1), y(base[i]), x(i), y(base[i]))
		}
		d.WriteString("Z")
		fmt.Fprintf(&b, `<path class="series code-%s" data-code="%s" data-total="%d" d="%s"><title>%s: %d failures</title></path>`,
			cssName(s.Code), html.EscapeString(s.Code), s.Total, d.String(), html.EscapeString(s.Code), s.Total)
		for i := range base {
			base[i] += s.Counts[i]
		}
	}
	// Time axis.
	fmt.Fprintf(&b, `<line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/>`, padLeft, chartW-padRight, padTop+plotH, padTop+plotH)
	w := time.Duration(f.BucketSeconds) * time.Second
	layout := "15:04"
	if time.Duration(n)*w > 36*time.Hour {
		layout = "01-02 15:04"
	}
	if w >= 24*time.Hour {
		layout = "2006-01-02"
	}
	every := max(1, n/xTicks)
	for i := 0; i < n; i += every {
		t := f.Start.Add(time.Duration(i) * w)
		fmt.Fprintf(&b, `<line class="tick" x1="%s" x2="%s" y1="%d" y2="%d"/><text class="xlabel" x="%s" y="%d">%s</text>`,
			x(i), x(i), padTop+plotH, padTop+plotH+4, x(i), chartH-8, t.Format(layout))
	}
	if len(f.Series) == 0 {
		fmt.Fprintf(&b, `<text class="empty" x="%d" y="%d">No failures in this range</text>`, chartW/2, chartH/2)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// sparkline draws calls (and failures beneath them) per bucket as two
// polylines scaled to the busiest bucket.
func sparkline(calls, fails []uint64) template.HTML {
	var peak uint64 = 1
	for _, v := range calls {
		peak = max(peak, v)
	}
	n := max(len(calls), 1)
	pts := func(vs []uint64) string {
		var b strings.Builder
		for i, v := range vs {
			if i > 0 {
				b.WriteByte(' ')
			}
			xx := float64(i) / float64(max(n-1, 1)) * (sparkW - 2)
			yy := sparkH - 1 - float64(v)/float64(peak)*(sparkH-2)
			b.WriteString(num(xx+1) + "," + num(yy))
		}
		return b.String()
	}
	return template.HTML(fmt.Sprintf(`<svg class="spark" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="calls and failures over time" xmlns="http://www.w3.org/2000/svg"><polyline class="spark-calls" points="%s"/><polyline class="spark-failures" points="%s"/></svg>`,
		sparkW, sparkH, sparkW, sparkH, pts(calls), pts(fails)))
}

// niceScale returns an axis top at or above peak and a round tick step.
func niceScale(peak uint64, ticks int) (top, step uint64) {
	if peak == 0 {
		return uint64(ticks), 1
	}
	raw := float64(peak) / float64(ticks)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	var s float64
	switch r := raw / mag; {
	case r <= 1:
		s = 1
	case r <= 2:
		s = 2
	case r <= 5:
		s = 5
	default:
		s = 10
	}
	step = max(uint64(s*mag), 1)
	top = (peak + step - 1) / step * step
	return top, step
}

func num(v float64) string { return strconv.FormatFloat(v, coordFmt, 1, 64) }

// cssName maps a code to a class-name-safe word.
func cssName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
