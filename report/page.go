package report

import "html/template"

// page is the report's one HTML file. Its colours are the console's theme
// palette (theme.go, light); every mark also carries its class letter.
var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
:root { --base:#1F2328; --subtle:#6E7781; --accent:#0969DA; --ok:#1A7F37; --warn:#9A6700; --error:#CF222E; --wait:#8250DF; --bg:#FFFFFF; --panel:#F6F8FA; --line:#D0D7DE; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--base); background: var(--bg); margin: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.sub { color: var(--subtle); }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 90px; }
.card b { display: block; font-size: 20px; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 10px; text-align: left; vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
svg { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; display: block; max-width: 100%; height: auto; }
svg text { font: 12px system-ui, sans-serif; fill: var(--base); }
svg .lane { fill: none; stroke: var(--line); }
svg .tick { stroke: var(--line); stroke-dasharray: 2 3; }
svg .ticklabel { fill: var(--subtle); font-size: 11px; }
svg .mark text { font-weight: 700; fill: #FFFFFF; text-anchor: middle; }
svg .wait { stroke: var(--wait); stroke-width: 3; stroke-dasharray: 6 3; }
svg .pacing { stroke: var(--accent); stroke-width: 2; stroke-dasharray: 2 2; }
svg .arrow { stroke: var(--error); stroke-width: 2; fill: none; }
svg .req { stroke: var(--accent); stroke-width: 2; fill: none; }
svg .tok { stroke: var(--ok); stroke-width: 2; fill: none; stroke-dasharray: 5 2; }
.c-ok { fill: var(--ok); background: var(--ok); } .c-rate-limit { fill: var(--warn); background: var(--warn); }
.c-overload { fill: #BC4C00; background: #BC4C00; } .c-flex-capacity { fill: var(--warn); background: var(--warn); } .c-quota { fill: var(--error); background: var(--error); }
.c-broken { fill: #A40E26; background: #A40E26; } .c-server { fill: #953800; background: #953800; }
.c-connection, .c-timeout { fill: var(--wait); background: var(--wait); } .c-caller { fill: var(--subtle); background: var(--subtle); }
.c-cancelled { fill: #57606A; background: #57606A; }
.badge { display: inline-block; min-width: 16px; padding: 0 4px; border-radius: 3px; color: #FFFFFF; font-weight: 700; text-align: center; }
.legend span { margin-right: 14px; white-space: nowrap; }
details { border-bottom: 1px solid var(--line); } details[open] { background: var(--panel); }
summary { cursor: pointer; padding: 4px 2px; font-variant-numeric: tabular-nums; }
summary span { display: inline-block; margin-right: 14px; }
.o-ok { color: var(--ok); font-weight: 600; } .o-stopped, .o-failed, .o-gave-up, .o-interrupted { color: var(--error); font-weight: 600; }
.o-deferred, .o-cancelled { color: var(--warn); font-weight: 600; }
.err { color: var(--error); }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<div class="sub">{{if .Scope}}{{.Scope}} · {{end}}{{if .From}}{{.From}} → {{.To}} · {{end}}generated {{.Generated}}{{if .Version}} by limitscope {{.Version}}{{end}}</div>
<div class="cards" id="totals">
<div class="card"><b>{{.Totals.Calls}}</b>calls</div>
<div class="card"><b>{{.Totals.OK}}</b>answered</div>
<div class="card"><b>{{.Totals.Attempts}}</b>requests</div>
<div class="card"><b>{{.Totals.Retries}}</b>retries</div>
<div class="card"><b>{{.Totals.Wasted}}</b>wasted requests</div>
<div class="card"><b>{{.Totals.Waits}}</b>waits ({{.Totals.Waited}})</div>
<div class="card"><b>{{.Totals.Failovers}}</b>failovers</div>
<div class="card"><b>{{.Totals.Quota}}</b>quota stops</div>
<div class="card"><b>{{.Totals.Broken}}</b>broken streams</div>
</div>
{{if .Sessions}}<table id="sessions"><tr><th>session</th><th>started</th><th>ended</th><th>command</th><th>mode</th><th>version</th></tr>
{{range .Sessions}}<tr><td>{{.ID}}</td><td>{{.Started}}</td><td>{{.Ended}}</td><td>{{.Command}}</td><td>{{.Mode}}</td><td>{{.Version}}</td></tr>
{{end}}</table>{{end}}

<h2 id="timeline">Timeline</h2>
<div class="legend">{{range .Legend}}<span><span class="badge {{.Class}}">{{.Letter}}</span> {{.Name}}</span>{{end}}
<span><svg width="30" height="10" style="display:inline;border:0;background:none"><line x1="0" y1="5" x2="30" y2="5" class="wait"/></svg> wait</span>
<span><svg width="30" height="10" style="display:inline;border:0;background:none"><line x1="0" y1="5" x2="30" y2="5" class="pacing"/></svg> pacing</span>
<span><svg width="30" height="10" style="display:inline;border:0;background:none"><line x1="0" y1="5" x2="30" y2="5" class="arrow"/></svg> failover</span></div>
{{with .Timeline}}<svg id="timeline-svg" viewBox="0 0 {{.W}} {{.H}}" width="{{.W}}" height="{{.H}}" role="img" aria-label="attempts per target over time">
<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#CF222E"/></marker></defs>
{{range .Ticks}}<line class="tick" x1="{{.X}}" y1="20" x2="{{.X}}" y2="{{$.Timeline.AxisY}}"/><text class="ticklabel" x="{{.X}}" y="14" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Lanes}}<rect class="lane" x="4" y="{{.Y}}" width="{{$.Timeline.PlotRight}}" height="30"/><text x="10" y="{{.TextY}}">{{.Name}}</text>
{{end}}{{range .Waits}}<line class="{{if .Pacing}}pacing{{else}}wait{{end}}" x1="{{.X1}}" y1="{{.Y}}" x2="{{.X2}}" y2="{{.Y}}"><title>{{.Title}}</title></line>
{{end}}{{range .Marks}}<g class="mark"><rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" rx="3"/><text x="{{.TextX}}" y="{{.TextY}}">{{.Letter}}</text><title>{{.Title}}</title></g>
{{end}}{{range .Arrows}}<path class="arrow" d="M {{.X1}} {{.Y1}} L {{.X2}} {{.Y2}}" marker-end="url(#head)"><title>{{.Title}}</title></path>
{{end}}</svg>{{end}}

<h2 id="limits">Limits over time</h2>
<div class="legend"><span><svg width="30" height="10" style="display:inline;border:0;background:none"><line x1="0" y1="5" x2="30" y2="5" class="req"/></svg> requests left</span>
<span><svg width="30" height="10" style="display:inline;border:0;background:none"><line x1="0" y1="5" x2="30" y2="5" class="tok"/></svg> tokens left</span> (share of the window's limit, from each response's headers; marks: errors)</div>
{{range .Limits}}<h3>{{.Target}} <span class="sub">{{.Last}}</span></h3>
{{if .Note}}<p class="sub">{{.Note}}</p>{{end}}
<svg class="limits" viewBox="0 0 {{.W}} {{.H}}" width="{{.W}}" height="{{.H}}" role="img" aria-label="limits left over time">
{{range .Ticks}}<line class="tick" x1="{{.X}}" y1="4" x2="{{.X}}" y2="86"/><text class="ticklabel" x="{{.X}}" y="104" text-anchor="middle">{{.Label}}</text>
{{end}}<text class="ticklabel" x="10" y="16">100%</text><text class="ticklabel" x="10" y="84">0%</text>
{{range .Marks}}<g class="mark"><rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"/><text x="{{.TextX}}" y="{{.TextY}}" style="fill:#CF222E">{{.Letter}}</text><title>{{.Title}}</title></g>
{{end}}{{if .Requests}}<polyline class="req" points="{{.Requests}}"/>{{end}}{{if .Tokens}}<polyline class="tok" points="{{.Tokens}}"/>{{end}}
</svg>
{{end}}

<h2 id="waits">Waits</h2>
{{if .Waits}}<table><tr><th>at</th><th>call</th><th>target</th><th>source</th><th class="n">planned</th><th class="n">waited</th><th>why</th></tr>
{{range .Waits}}<tr><td>{{.At}}</td><td>{{.Call}}</td><td>{{.Target}}</td><td>{{.Source}}</td><td class="n">{{.Planned}}</td><td class="n">{{.Waited}}</td><td>{{.Why}}</td></tr>
{{end}}</table>{{else}}<p class="sub">no waits</p>{{end}}

<h2 id="failovers">Failovers</h2>
{{if .Failovers}}<table><tr><th>at</th><th>call</th><th>from</th><th>to</th><th>reason</th></tr>
{{range .Failovers}}<tr><td>{{.At}}</td><td>{{.Call}}</td><td>{{.From}}</td><td>{{.To}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>{{else}}<p class="sub">no failovers</p>{{end}}

<h2 id="providers">Per provider</h2>
<table><tr><th>provider</th><th class="n">requests</th><th class="n">ok</th><th class="n">rate limit</th><th class="n">overload</th><th class="n">quota</th><th class="n">server</th><th class="n">broken</th><th class="n">other</th><th class="n">wasted</th><th class="n">p50</th><th class="n">p95</th><th class="n">ttft p50</th><th class="n">waited</th></tr>
{{range .Providers}}<tr><td>{{.Provider}}</td><td class="n">{{.Requests}}</td><td class="n">{{.OK}}</td><td class="n">{{.RateLimit}}</td><td class="n">{{.Overload}}</td><td class="n">{{.Quota}}</td><td class="n">{{.Server}}</td><td class="n">{{.Broken}}</td><td class="n">{{.Other}}</td><td class="n">{{.Wasted}}</td><td class="n">{{.P50}}</td><td class="n">{{.P95}}</td><td class="n">{{.TTFT}}</td><td class="n">{{.Waited}}</td></tr>
{{end}}</table>

<h2 id="calls">Calls</h2>
<p class="sub">Click a call for its attempts.</p>
{{range .Calls}}<details class="call" id="call-{{.ID}}"><summary><span>#{{.ID}}</span><span>{{.Started}}</span><span class="{{.OutcomeClass}}">{{.Outcome}}</span><span>{{.Chain}}</span><span>served by {{or .ServedBy "–"}}</span><span>{{.Tries}} tries</span><span>waited {{.Waited}}</span><span>{{.Latency}}</span>{{if .Route}}<span>route {{.Route}}</span>{{end}}</summary>
{{if .Err}}<p class="err">{{.Err}}</p>{{end}}
<table class="attempts"><tr><th>#</th><th>target</th><th>started</th><th></th><th>class</th><th class="n">status</th><th>code</th><th>decision</th><th class="n">retry-after</th><th>source</th><th class="n">waited</th><th class="n">paced</th><th class="n">ttft</th><th class="n">duration</th><th>limits</th><th>request id</th><th>message</th></tr>
{{range .Attempts}}<tr><td>{{.N}}</td><td>{{.Target}}</td><td>{{.Started}}</td><td><span class="badge {{.CSS}}">{{.Letter}}</span></td><td>{{.Class}}</td><td class="n">{{.Status}}</td><td>{{.Code}}</td><td>{{.Decision}}</td><td class="n">{{.RetryAfter}}</td><td>{{.Source}}</td><td class="n">{{.Waited}}</td><td class="n">{{.Paced}}</td><td class="n">{{.TTFT}}</td><td class="n">{{.Duration}}</td><td>{{.Limits}}</td><td>{{.RequestID}}</td><td>{{.Message}}</td></tr>
{{end}}</table></details>
{{end}}
</body>
</html>
`))
