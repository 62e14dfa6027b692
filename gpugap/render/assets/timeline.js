/* gpugap timeline: a canvas renderer for the JSON embedded in this page. No libraries,
 * no network. Events narrower than a pixel at the current zoom are merged into
 * per-pixel spans (the status line says how many). Test hook: window.__gpugap. */
(function () {
  "use strict";
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });

  var DATA = JSON.parse(document.getElementById("gpugap-data").textContent);
  var GUTTER = 200, AXIS_H = 22, TRACK_ROW = 14, GROUP_H = 17, PAD = 3, PHASE_H = 14;
  var FOLD_W = 112;
  var TRACK_ROWS_OUTSIDE = 2;   // findings track rows for findings outside the initial view    // px: the column standing for the time folded before the view
  var FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
  var X0 = GUTTER;    // where the plot starts: after the gutter, and the fold when shown
  var ROW_H = { gpu: 18, api: 14, nvtx: 15 };
  var MIN_SPAN = 50;  // ns: the deepest zoom
  var dpr = window.devicePixelRatio || 1;
  var CATS = DATA.categories, PALETTE = DATA.kernel_palette;
  var KERNEL = 0, PAGEABLE = {};
  CATS.forEach(function (c, i) { if (c.id.indexOf("pageable") >= 0) { PAGEABLE[i] = 1; } });

  // ---------------------------------------------------------------- data
  function decodePanel(d, index) {
    var n = d.dur.length, S = new Float64Array(n), D = new Float64Array(n);
    var corr = new Float64Array(n), bytes = new Float64Array(n), acc = 0, c = 0, i;
    for (i = 0; i < n; i++) {
      acc += d.start[i]; S[i] = acc; D[i] = d.dur[i];
      c += d.corr[i]; corr[i] = c;
    }
    for (i = 0; i + 1 < d.bytes.length; i += 2) { bytes[d.bytes[i]] = d.bytes[i + 1]; }
    // A report larger than the page holds: events merged into spans when it was written
    // (sparse: event index, events it stands for, ...).
    var merged = {};
    for (i = 0; d.merged && i + 1 < d.merged.length; i += 2) { merged[d.merged[i]] = d.merged[i + 1]; }
    var lanes = d.lanes.map(function (l) {
      var rows = []; for (var r = 0; r < l.rows; r++) { rows.push(null); }
      return { kind: l.kind, group: l.group, label: l.label, nrows: l.rows, rows: rows };
    });
    var evLane = new Int32Array(n), evRow = new Int16Array(n), at = 0;
    d.groups.forEach(function (g) {
      var lane = g[0], row = g[1], count = g[2], endMax = new Float64Array(count), m = -Infinity;
      for (var k = 0; k < count; k++) {
        var e = S[at + k] + D[at + k]; if (e > m) { m = e; } endMax[k] = m;
        evLane[at + k] = lane; evRow[at + k] = row;
      }
      lanes[lane].rows[row] = { i0: at, i1: at + count, endMax: endMax };
      at += count;
    });
    var colors = new Array(n);
    for (i = 0; i < n; i++) {
      colors[i] = d.cat[i] === KERNEL ? PALETTE[d.name[i] % PALETTE.length] : CATS[d.cat[i]].color;
    }
    var P = { d: d, index: index, n: n, S: S, D: D, corr: corr, bytes: bytes, merged: merged,
      colors: colors, lanes: lanes,
      evLane: evLane, evRow: evRow, findings: d.findings, markers: d.markers,
      trackRows: 0, byFinding: [], drawn: [], marked: [] };
    d.findings.forEach(function () { P.byFinding.push([]); });
    d.markers.forEach(function (m) { P.byFinding[m.f].push(m); });
    return P;
  }

  function layout(P) {
    P.phaseH = (P.d.phases || []).length ? PHASE_H : 0;
    var top = AXIS_H + P.phaseH;
    var y = top + (P.trackRows ? P.trackRows * TRACK_ROW + 2 * PAD + 2 : 0), prev = null;
    P.trackY = top + PAD;
    P.laneY = []; P.laneH = []; P.groupY = [];
    P.lanes.forEach(function (l, i) {
      if (l.group !== prev) { P.groupY.push([y, l.group]); y += GROUP_H; prev = l.group; }
      var h = Math.max(1, l.nrows) * ROW_H[l.kind] + 2 * PAD;
      P.laneY.push(y); P.laneH.push(h); y += h;
      l.index = i;
    });
    P.height = y + 4;
  }

  function rowY(P, lane, row) { return P.laneY[lane] + PAD + row * ROW_H[P.lanes[lane].kind]; }

  function lowerBound(arr, i0, t) {  // arr: endMax of a row; first k with arr[k] >= t
    var lo = 0, hi = arr.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid] < t) { lo = mid + 1; } else { hi = mid; } }
    return i0 + lo;
  }

  // ---------------------------------------------------------------- formatting
  function fmtNs(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) { return (ns / 1e9).toPrecision(4) + " s"; }
    if (a >= 1e6) { return (ns / 1e6).toPrecision(4) + " ms"; }
    if (a >= 1e3) { return (ns / 1e3).toPrecision(4) + " µs"; }
    return Math.round(ns) + " ns";
  }
  function fmtBytes(b) {
    var u = [["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024]];
    for (var i = 0; i < u.length; i++) { if (b >= u[i][1]) { return (b / u[i][1]).toPrecision(3) + " " + u[i][0]; } }
    return b + " B";
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; });
  }
  // About 125 px a tick: room for a time on the report's clock ("18.435 s").
  function tickStep(span, px) {
    var raw = span / Math.max(1, px / 125), p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p; return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }
  // Ticks on the report's clock (nsys's, as every view gives times), not the panel's
  // origin: seconds with as many digits as the step needs.
  function tickLabel(t, step) {
    var digits = Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / 1e9) - 1e-9)));
    return (t / 1e9).toFixed(digits) + " s";
  }
  function at(ns) { return "t=" + (ns / 1e9).toFixed(6) + "s"; }
  var lum = {};
  function textColor(bg) {
    if (!(bg in lum)) {
      var r = parseInt(bg.substr(1, 2), 16), g = parseInt(bg.substr(3, 2), 16), b = parseInt(bg.substr(5, 2), 16);
      lum[bg] = (0.299 * r + 0.587 * g + 0.114 * b) > 150 ? "#1d2330" : "#ffffff";
    }
    return lum[bg];
  }
  function alpha(hex, a) {
    var r = parseInt(hex.substr(1, 2), 16), g = parseInt(hex.substr(3, 2), 16), b = parseInt(hex.substr(5, 2), 16);
    return "rgba(" + r + "," + g + "," + b + "," + a + ")";
  }

  // ---------------------------------------------------------------- state
  var panels = DATA.panels.map(decodePanel);
  var extent = [Infinity, -Infinity];
  panels.forEach(function (P) {
    extent[0] = Math.min(extent[0], P.d.extent[0]); extent[1] = Math.max(extent[1], P.d.extent[1]);
  });
  if (!isFinite(extent[0])) { extent = [0, 1]; }
  if (extent[1] - extent[0] < MIN_SPAN) { extent[1] = extent[0] + MIN_SPAN; }
  var foldAt = null;   // the end of the time folded before the initial view (relative ns)
  panels.forEach(function (P) {
    if (P.d.fold) { foldAt = foldAt === null ? P.d.fold.e : Math.max(foldAt, P.d.fold.e); }
  });
  var initial = [Infinity, -Infinity];
  panels.forEach(function (P) {
    initial[0] = Math.min(initial[0], P.d.view[0]); initial[1] = Math.max(initial[1], P.d.view[1]);
  });
  if (!isFinite(initial[0])) { initial = extent.slice(); }
  initial = padded(initial[0], initial[1]);
  var view = { t0: initial[0], t1: initial[1] };
  var selected = null;  // {p, f}
  var stats = {};
  var hatch = null;

  function padded(s, e) {
    var pad = Math.max((e - s) * 0.02, 200);
    return [s - pad, e + pad];
  }

  function setView(t0, t1) {
    var span = Math.max(MIN_SPAN, t1 - t0), full = (extent[1] - extent[0]) * 1.5;
    if (span > full) { var mid = (t0 + t1) / 2; t0 = mid - full / 2; t1 = mid + full / 2; span = full; }
    else { t1 = t0 + span; }
    view.t0 = t0; view.t1 = t1;
    redraw();
  }
  function zoomAt(factor, t) {
    if (t === undefined) { t = (view.t0 + view.t1) / 2; }
    setView(t - (t - view.t0) * factor, t + (view.t1 - t) * factor);
  }
  function pan(dt) { setView(view.t0 + dt, view.t1 + dt); }

  // ---------------------------------------------------------------- canvases
  var canvases = Array.prototype.slice.call(document.querySelectorAll("canvas.lanes"));
  panels.forEach(function (P, i) {
    P.canvas = canvases[i]; P.ctx = P.canvas.getContext("2d");
  });
  var overview = document.getElementById("overview"), octx = overview.getContext("2d");
  var statusEl = document.getElementById("status"), tip = document.getElementById("tooltip");

  function sizeCanvas(c, cssH) {
    var w = Math.max(300, c.parentNode.clientWidth || 900);
    c.style.height = cssH + "px";
    c.width = Math.round(w * dpr); c.height = Math.round(cssH * dpr);
    c.cssW = w; c.cssH = cssH;
  }
  function resize() {
    // The gutter as wide as its widest lane label (within bounds): the plot gets the rest.
    var widest = 0;
    panels.forEach(function (P) {
      P.ctx.font = FONT;
      P.lanes.forEach(function (l) { widest = Math.max(widest, P.ctx.measureText(l.label).width); });
    });
    GUTTER = Math.round(Math.min(240, Math.max(150, widest + 24)));
    panels.forEach(function (P) {
      packTrack(P, Math.max(300, P.canvas.parentNode.clientWidth || 900));
      layout(P);
      sizeCanvas(P.canvas, P.height);
    });
    sizeCanvas(overview, 36);
    computeDensity();
    drawAll();
  }

  var hatchGrey = null;
  // Rows of the findings track, packed for the initial view: a finding in it gets room
  // for its label (inside its bar, or after it), so that labels there need not be
  // dropped; the rest only their bars.
  function packTrack(P, W) {
    var x0 = foldAt !== null ? GUTTER + FOLD_W : GUTTER, scale = (W - x0) / (initial[1] - initial[0]);
    var ctx = P.ctx, ends = [], inView = [], outside = [];
    ctx.font = FONT;
    P.findings.forEach(function (f, i) {
      var a = (f.s - initial[0]) * scale, b = (f.e - initial[0]) * scale;
      if (b - a < 4) { var c = (a + b) / 2; a = c - 2; b = c + 2; }
      var item = { f: f, a: a, b: b, end: b + 4, i: i };
      if (b >= 0 && a <= W - x0) {
        var w = ctx.measureText(trackTexts(f)[0]).width + 10;
        item.end = b - Math.max(a, 0) >= w ? b + 4 : b + w;
        inView.push(item);
      } else { outside.push(item); }
    });
    function byStart(p, q) { return p.a - q.a || p.i - q.i; }
    // Those in view first, each row as they need; then the rest, in a free row where
    // there is one, else in new rows up to TRACK_ROWS_OUTSIDE, else where one frees first.
    inView.sort(byStart).concat(outside.sort(byStart)).forEach(function (it) {
      var cap = inView.indexOf(it) >= 0 ? Infinity : Math.max(ends.length, TRACK_ROWS_OUTSIDE);
      for (var r = 0; r < ends.length; r++) {
        if (ends[r] <= it.a) { ends[r] = it.end; it.f.row = r; return; }
      }
      if (ends.length < cap || !ends.length) { ends.push(it.end); it.f.row = ends.length - 1; return; }
      var first = 0;
      ends.forEach(function (e, r) { if (e < ends[first]) { first = r; } });
      ends[first] = Math.max(ends[first], it.end); it.f.row = first;
    });
    P.trackRows = ends.length;
  }

  function makeHatch(ctx, color) {
    var c = document.createElement("canvas"); c.width = 6; c.height = 6;
    var g = c.getContext("2d");
    g.strokeStyle = color || "rgba(255,255,255,0.6)"; g.lineWidth = 1.5;
    g.beginPath(); g.moveTo(0, 6); g.lineTo(6, 0); g.moveTo(-1, 1); g.lineTo(1, -1);
    g.moveTo(5, 7); g.lineTo(7, 5); g.stroke();
    return ctx.createPattern(c, "repeat");
  }

  // ---------------------------------------------------------------- drawing
  var frame = 0;
  function redraw() {
    if (frame) { return; }
    frame = window.requestAnimationFrame(function () { frame = 0; drawAll(); });
  }

  function drawAll() {
    var t = performance.now();
    stats = { visible: 0, merged: 0, spans: 0, drawn: 0, marked: 0 };
    X0 = folded() ? GUTTER + FOLD_W : GUTTER;
    panels.forEach(drawPanel);
    drawOverview();
    stats.frame_ms = performance.now() - t;
    updateStatus();
  }

  function xOf(P, t) { return X0 + (t - view.t0) * P.scale; }

  function drawPanel(P) {
    var ctx = P.ctx, W = P.canvas.cssW, H = P.height;
    if (!hatch) { hatch = makeHatch(ctx); }
    P.scale = (W - X0) / (view.t1 - view.t0);
    P.drawn = []; P.marked = []; P.cands = []; P.labels = []; P.obstacles = [];
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    // lane backgrounds
    P.lanes.forEach(function (l, i) {
      ctx.fillStyle = i % 2 ? "#f7f8fa" : "#ffffff";
      ctx.fillRect(0, P.laneY[i], W, P.laneH[i]);
    });
    P.groupY.forEach(function (g) { ctx.fillStyle = "#eef1f6"; ctx.fillRect(0, g[0], W, GROUP_H); });
    ctx.save();
    ctx.beginPath(); ctx.rect(X0, 0, W - X0, H); ctx.clip();
    drawPhases(P, H);
    drawGrid(P, W, H);
    drawMarkers(P, "band");
    for (var li = 0; li < P.lanes.length; li++) { drawLane(P, li, W); }
    drawMarkers(P, "span");
    drawMarkers(P, "ev");
    drawMarkers(P, "link");
    drawTrack(P, W);
    placeLabels(P, W);
    ctx.restore();
    drawFold(P, W, H);
    drawGutter(P, W);
    stats.drawn += P.drawn.filter(Boolean).length;
    stats.marked += P.marked.filter(Boolean).length;
  }

  // The program's phases: start-up and warm-up tinted, each phase named at its start.
  var PHASE_TINT = { "start-up": "rgba(247,144,9,0.10)", "warm-up": "rgba(247,184,9,0.10)",
                     "tail": "rgba(152,162,179,0.10)" };
  function drawPhases(P, H) {
    var ctx = P.ctx, seen = {};
    (P.d.phases || []).forEach(function (ph) {
      var x0 = xOf(P, ph.s), x1 = xOf(P, ph.e);
      if (x1 < X0 || x0 > P.canvas.cssW) { return; }
      if (PHASE_TINT[ph.name]) {
        ctx.fillStyle = PHASE_TINT[ph.name];
        ctx.fillRect(x0, AXIS_H, Math.max(1, x1 - x0), H - AXIS_H);
      }
      var key = ph.name + "@" + ph.s;
      if (seen[key]) { return; }
      seen[key] = true;
      ctx.strokeStyle = "rgba(181,71,8,0.55)"; ctx.lineWidth = 1;
      ctx.beginPath(); ctx.moveTo(Math.round(x0) + 0.5, AXIS_H); ctx.lineTo(Math.round(x0) + 0.5, H); ctx.stroke();
      label(P, 0.5, [ph.name], Math.max(x0, X0) + 3, AXIS_H + P.phaseH / 2, Math.max(x0, X0),
            Math.min(x1, P.canvas.cssW), "#b54708", "");
    });
  }

  function drawGrid(P, W, H) {
    var ctx = P.ctx, step = tickStep(view.t1 - view.t0, W - X0);
    // Round times on the report's clock (the origin is the panel's, any nanosecond).
    var o = P.d.origin_ns, first = Math.ceil((o + view.t0) / step) * step - o;
    ctx.strokeStyle = "#e9ecf2"; ctx.lineWidth = 1; P.tickTotal = 0;
    for (var t = first; t <= view.t1; t += step) {
      var x = Math.round(xOf(P, t)) + 0.5, text = tickLabel(o + t, step);
      ctx.beginPath(); ctx.moveTo(x, AXIS_H - 5); ctx.lineTo(x, H); ctx.stroke();
      // Right of its line, or left of it where the plot ends: never cut at the edge.
      var tx = x + 3 + ctx.measureText(text).width > W - 2 ? x - 3 - ctx.measureText(text).width : x + 3;
      label(P, 0, [text], tx, 10, X0, W, "#475467", "");
      P.tickTotal += 1;
    }
    ctx.strokeStyle = "#c0c6d2";
    ctx.beginPath(); ctx.moveTo(X0, AXIS_H - 0.5); ctx.lineTo(W, AXIS_H - 0.5); ctx.stroke();
  }

  function drawLane(P, li, W) {
    var lane = P.lanes[li], ctx = P.ctx, h = ROW_H[lane.kind] - 2, d = P.d;
    var S = P.S, D = P.D, colors = P.colors, scale = P.scale, t0 = view.t0, t1 = view.t1;
    var xmax = W + 2;
    for (var r = 0; r < lane.rows.length; r++) {
      var row = lane.rows[r]; if (!row) { continue; }
      var y = rowY(P, li, r), i = lowerBound(row.endMax, row.i0, t0);
      var runX0 = 0, runX1 = -1e9, runN = 0, runColor = "";
      var flush = function () {
        if (!runN) { return; }
        ctx.fillStyle = runColor;
        ctx.fillRect(Math.floor(runX0), y, Math.max(1, Math.ceil(runX1) - Math.floor(runX0)), h);
        if (runN > 1) { stats.merged += runN; stats.spans += 1; }
        runN = 0;
      };
      for (; i < row.i1; i++) {
        var s = S[i]; if (s > t1) { break; }
        var x0 = X0 + (s - t0) * scale, x1 = x0 + D[i] * scale;
        stats.visible++;
        if (x1 - x0 < 1) {
          if (runN && x0 <= runX1 + 1) { if (x1 > runX1) { runX1 = x1; } runN++; }
          else { flush(); runX0 = x0; runX1 = x1; runN = 1; runColor = colors[i]; }
          continue;
        }
        flush();
        if (x0 < X0 - 2) { x0 = X0 - 2; }
        if (x1 > xmax) { x1 = xmax; }
        var w = x1 - x0;
        ctx.fillStyle = colors[i];
        ctx.fillRect(x0, y, w > 3 ? w - 0.5 : w, h);
        if (PAGEABLE[d.cat[i]]) { ctx.fillStyle = hatch; ctx.fillRect(x0, y, w, h); }
        if (w > 30) {
          var lx = Math.max(x0, X0);
          label(P, 4, shortened(d.strings[d.name[i]]), lx + 3, y + h / 2 + 0.5, lx,
                Math.min(x1, W), textColor(colors[i]), "");
        }
      }
      flush();
    }
  }

  function evBox(P, i) {
    var x0 = xOf(P, P.S[i]), x1 = x0 + P.D[i] * P.scale;
    var lane = P.evLane[i], y = rowY(P, lane, P.evRow[i]), h = ROW_H[P.lanes[lane].kind] - 2;
    if (x1 - x0 < 4) { var c = (x0 + x1) / 2; x0 = c - 2; x1 = c + 2; }
    return { x0: x0, x1: x1, y: y, h: h };
  }
  function visibleX(P, x0, x1) { return x1 >= X0 && x0 <= P.canvas.cssW; }
  function isSel(P, f) { return selected && selected.p === P.index && selected.f === f; }

  function drawMarkers(P, kind) {
    var ctx = P.ctx;
    P.markers.forEach(function (m) {
      if (m.t !== kind) { return; }
      var sel = isSel(P, m.f), dim = selected && !sel, color = m.color || P.findings[m.f].color;
      ctx.globalAlpha = dim ? 0.3 : 1;
      if (kind === "band" || kind === "span") {
        var x0 = xOf(P, m.s), x1 = xOf(P, m.e);
        if (x1 - x0 < 2) { x1 = x0 + 2; }
        if (!visibleX(P, x0, x1)) { ctx.globalAlpha = 1; return; }
        var y0 = P.laneY[m.l0], y1 = P.laneY[m.l1] + P.laneH[m.l1];
        if (kind === "span") { y0 += 1; y1 -= 1; }
        ctx.fillStyle = alpha(color, kind === "band" ? (sel ? 0.3 : 0.17) : (sel ? 0.35 : 0.22));
        ctx.fillRect(x0, y0, x1 - x0, y1 - y0);
        ctx.fillStyle = color;
        ctx.fillRect(x0, y0, x1 - x0, kind === "band" ? 3 : 2);
        if (kind === "span") { ctx.strokeStyle = color; ctx.lineWidth = sel ? 2.5 : 1.5; ctx.strokeRect(x0, y0, x1 - x0, y1 - y0); }
        if (m.label) {
          var lx0 = Math.max(x0, X0);
          label(P, kind === "band" ? 2 : 3, [m.label, m.label.split(" ")[0]], lx0 + 4,
                y0 + (kind === "band" ? 10 : (y1 - y0) / 2), lx0, Math.min(x1, P.canvas.cssW),
                color, "#ffffff");
        }
      } else if (kind === "ev") {
        var b = evBox(P, m.i);
        if (!visibleX(P, b.x0, b.x1)) { ctx.globalAlpha = 1; return; }
        ctx.strokeStyle = color; ctx.lineWidth = sel ? 3 : 2;
        ctx.strokeRect(b.x0 - 1.5, b.y - 1.5, b.x1 - b.x0 + 3, b.h + 3);
      } else if (kind === "link") {
        var a = evBox(P, m.a), z = evBox(P, m.b);
        var ax = m.ends[0] === "e" ? a.x1 : a.x0, zx = m.ends[1] === "e" ? z.x1 : z.x0;
        var ay = a.y + a.h / 2, zy = z.y + z.h / 2;
        // Both ends in view (or nearly): an arrow from off the plot across it says nothing.
        if (Math.min(ax, zx) < X0 - 40 || Math.max(ax, zx) > P.canvas.cssW + 40) { ctx.globalAlpha = 1; return; }
        ctx.strokeStyle = color; ctx.lineWidth = sel ? 2.5 : 1.5;
        var bend = Math.min(60, Math.abs(zy - ay) / 2 + 10);
        ctx.beginPath(); ctx.moveTo(ax, ay);
        ctx.bezierCurveTo(ax + (zy === ay ? 0 : 0), ay + (zy > ay ? bend : zy < ay ? -bend : -12),
          zx, zy + (zy > ay ? -bend : zy < ay ? bend : -12), zx, zy);
        ctx.stroke();
        arrowHead(ctx, zx, zy, zy > ay ? 1 : zy < ay ? -1 : 1, color);
      }
      ctx.globalAlpha = 1;
      P.marked[m.f] = true;
    });
  }

  function arrowHead(ctx, x, y, dir, color) {
    ctx.fillStyle = color;
    ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x - 4, y - 7 * dir); ctx.lineTo(x + 4, y - 7 * dir);
    ctx.closePath(); ctx.fill();
  }

  function trackBox(P, f) {
    var x0 = xOf(P, f.s), x1 = xOf(P, f.e);
    if (x1 - x0 < 4) { var c = (x0 + x1) / 2; x0 = c - 2; x1 = c + 2; }
    return { x0: x0, x1: x1, y: P.trackY + f.row * TRACK_ROW, h: TRACK_ROW - 3 };
  }

  function drawTrack(P, W) {
    var ctx = P.ctx;
    P.findings.forEach(function (f, i) {
      var b = trackBox(P, f);
      if (b.x1 < X0 || b.x0 > W) { return; }
      var sel = isSel(P, i);
      ctx.globalAlpha = selected && !sel ? 0.35 : 1;
      ctx.fillStyle = f.color; ctx.fillRect(b.x0, b.y, b.x1 - b.x0, b.h);
      if (sel) { ctx.strokeStyle = "#111"; ctx.lineWidth = 2; ctx.strokeRect(b.x0, b.y, b.x1 - b.x0, b.h); }
      ctx.globalAlpha = 1;
      P.obstacles.push([b.x0, b.y, b.x1, b.y + b.h]);
      // Inside the bar where it fits, else just after it (its packing left room there).
      var texts = trackTexts(f), x = Math.max(b.x0, X0);
      label(P, 1, texts, x + 3, b.y + b.h / 2 + 0.5, x, Math.min(b.x1, W), "#ffffff", "", i);
      label(P, 1.5, texts, Math.min(b.x1, W) + 3, b.y + b.h / 2 + 0.5, Math.min(b.x1, W),
            W, f.color, "#ffffff", i);
      P.drawn[i] = true;
    });
  }

  function trackTexts(f) {
    return ["#" + f.num + " " + f.rule + " [" + f.cause + "]", "#" + f.num + " " + f.rule, "#" + f.num];
  }
  // Event names, longest first: the whole name, then without its template arguments
  // and argument list ("void foo<...>(...)" -> "foo"), each cut to whole words only.
  var shortCache = {};
  function shortened(name) {
    if (shortCache[name]) { return shortCache[name]; }
    var out = [name], bare = name.replace(/\(.*$/, "").replace(/<.*$/, "").replace(/^void /, "");
    bare = bare.split("::").pop();
    if (bare && bare !== name) { out.push(bare); }
    shortCache[name] = out;
    return out;
  }

  // ---------------------------------------------------------------- labels
  // Every text on the plot is a candidate: texts (longest first), where it starts (x, y
  // middle), the box it must stay in (x0..x1), its colour, a halo colour ("" none), a
  // priority (0 first) and, for track labels, the finding (one label each). After the
  // frame is drawn, candidates are placed in priority order; one that fits its box in
  // none of its texts, or would overlap a label already placed, is not drawn (its
  // event or finding still shows it on hover). P.labels keeps what was drawn.
  function label(P, prio, texts, x, y, x0, x1, color, halo, finding) {
    if (x1 - x0 < 8) { return; }
    P.cands.push({ prio: prio, texts: texts, x: x, y: y, x0: x0, x1: x1, color: color,
                   halo: halo, f: finding, n: P.cands.length });
  }
  var LABEL_KINDS = { 0: "tick", 0.5: "phase", 1: "finding", 1.5: "finding", 2: "band", 3: "span", 4: "event" };
  function overlaps(a, b) { return a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]; }
  function placeLabels(P, W) {
    var ctx = P.ctx, placed = [], done = {};
    ctx.font = FONT; ctx.textAlign = "left"; ctx.textBaseline = "middle";
    P.cands.sort(function (a, b) { return a.prio - b.prio || a.n - b.n; });
    P.cands.forEach(function (c) {
      if (c.f !== undefined && done[c.f]) { return; }
      for (var k = 0; k < c.texts.length; k++) {
        var text = c.texts[k], w = ctx.measureText(text).width;
        if (c.x < c.x0 || c.x + w > Math.min(c.x1, W) - 2 || c.x < X0) { continue; }
        var box = [c.x - 1, c.y - 7, c.x + w + 1, c.y + 7];
        var hitsLabel = placed.some(function (b) { return overlaps(b, box); });
        var hitsBar = c.halo && P.obstacles.some(function (b) { return overlaps(b, box); });
        if (hitsLabel || hitsBar) { continue; }
        placed.push(box);
        if (c.halo) {
          ctx.lineWidth = 3; ctx.strokeStyle = c.halo; ctx.lineJoin = "round";
          ctx.strokeText(text, c.x, c.y);
        }
        ctx.fillStyle = c.color; ctx.fillText(text, c.x, c.y);
        P.labels.push({ text: text, x0: box[0] + 1, y0: box[1], x1: box[2] - 1, y1: box[3],
                        bx0: c.x0, bx1: Math.min(c.x1, W), kind: LABEL_KINDS[c.prio] });
        if (c.f !== undefined) { done[c.f] = true; }
        return;
      }
    });
  }

  // ---------------------------------------------------------------- the fold
  // A whole report opens on a few steady iterations; what came before (start-up...) is
  // folded into a column at the left of the plot, named there; a click opens it.
  function folded() { return foldAt !== null && view.t0 >= foldAt - 0.05 * (view.t1 - view.t0); }
  function drawFold(P, W, H) {
    if (X0 === GUTTER) { return; }
    var ctx = P.ctx, fold = P.d.fold, top = AXIS_H;
    ctx.fillStyle = "#f2f4f7"; ctx.fillRect(GUTTER, 0, FOLD_W, H);
    ctx.fillStyle = hatchGrey || (hatchGrey = makeHatch(ctx, "rgba(152,162,179,0.35)"));
    ctx.fillRect(GUTTER, top, FOLD_W, H - top);
    ctx.strokeStyle = "#98a2b3"; ctx.setLineDash([3, 3]);
    ctx.beginPath(); ctx.moveTo(X0 - 0.5, 0); ctx.lineTo(X0 - 0.5, H); ctx.stroke();
    ctx.setLineDash([]);
    if (!fold) { return; }
    ctx.font = FONT; ctx.textAlign = "left"; ctx.fillStyle = "#344054";
    var y = top + 12;
    P.foldLines = fold.lines.filter(function (line) {
      return ctx.measureText(line).width <= FOLD_W - 8;
    });
    P.foldLines.forEach(function (line, k) {
      ctx.fillText(line, GUTTER + 4, y + k * 13);
      P.labels.push({ text: line, x0: GUTTER + 4, y0: y + k * 13 - 6,
                      x1: GUTTER + 4 + ctx.measureText(line).width, y1: y + k * 13 + 6,
                      bx0: GUTTER, bx1: X0, kind: "fold" });
    });
  }

  // Gutter text cut to its room (the whole of it shows on hover).
  function fit(ctx, text, room) {
    if (ctx.measureText(text).width <= room) { return text; }
    var n = text.length;
    while (n > 1 && ctx.measureText(text.slice(0, n) + "…").width > room) { n--; }
    return text.slice(0, n) + "…";
  }

  function drawGutter(P, W) {
    var ctx = P.ctx;
    ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, GUTTER, AXIS_H);
    ctx.fillStyle = "#475467"; ctx.textAlign = "left";
    ctx.fillText(fit(ctx, P.d.label, GUTTER - 10), 6, 9);
    if (P.trackRows) {
      ctx.fillStyle = "#fff7ed"; ctx.fillRect(0, AXIS_H, GUTTER, P.trackRows * TRACK_ROW + 2 * PAD);
      ctx.fillStyle = "#9a3412"; ctx.fillText("findings (" + P.findings.length + ")", 8, AXIS_H + 9);
    }
    P.groupY.forEach(function (g) {
      ctx.fillStyle = "#344054";
      ctx.font = "600 11px system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
      ctx.fillText(g[1], 6, g[0] + GROUP_H / 2 + 0.5);
    });
    ctx.font = "11px system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
    P.lanes.forEach(function (l, i) {
      ctx.fillStyle = i % 2 ? "#f7f8fa" : "#ffffff"; ctx.fillRect(0, P.laneY[i], GUTTER, P.laneH[i]);
      ctx.fillStyle = "#1d2330";
      ctx.fillText(fit(ctx, l.label, GUTTER - 18), 14, P.laneY[i] + Math.min(P.laneH[i], ROW_H[l.kind] + 2 * PAD) / 2);
    });
    ctx.strokeStyle = "#d0d5dd"; ctx.beginPath(); ctx.moveTo(GUTTER - 0.5, 0); ctx.lineTo(GUTTER - 0.5, P.height); ctx.stroke();
  }

  // ---------------------------------------------------------------- overview (range slider)
  var density = [];
  function computeDensity() {
    var bins = Math.max(50, Math.floor(overview.cssW || 600)), span = extent[1] - extent[0];
    density = panels.map(function (P) {
      var busy = new Float64Array(bins);
      for (var li = 0; li < P.lanes.length; li++) {
        var lane = P.lanes[li]; if (lane.kind !== "gpu") { continue; }
        lane.rows.forEach(function (row) {
          if (!row) { return; }
          for (var i = row.i0; i < row.i1; i++) {
            var a = (P.S[i] - extent[0]) / span * bins, b = (P.S[i] + P.D[i] - extent[0]) / span * bins;
            var k0 = Math.max(0, Math.floor(a)), k1 = Math.min(bins - 1, Math.floor(b));
            for (var k = k0; k <= k1; k++) { busy[k] += Math.min(b, k + 1) - Math.max(a, k); }
          }
        });
      }
      return busy;
    });
  }
  function ovX(t) { return (t - extent[0]) / (extent[1] - extent[0]) * overview.cssW; }
  function ovT(x) { return extent[0] + x / overview.cssW * (extent[1] - extent[0]); }
  function drawOverview() {
    var W = overview.cssW, H = overview.cssH, n = panels.length, h = (H - 4) / Math.max(1, n);
    octx.setTransform(dpr, 0, 0, dpr, 0, 0);
    octx.clearRect(0, 0, W, H);
    density.forEach(function (busy, p) {
      var y0 = 2 + p * h, bins = busy.length, bw = W / bins;
      octx.fillStyle = "#4c78a8";
      for (var k = 0; k < bins; k++) {
        var v = Math.min(1, busy[k]); if (v <= 0) { continue; }
        var bh = Math.max(1, v * (h - 2));
        octx.fillRect(k * bw, y0 + h - 1 - bh, Math.max(1, bw), bh);
      }
      (panels[p].d.phases || []).forEach(function (ph) {
        if (!PHASE_TINT[ph.name]) { return; }
        octx.fillStyle = PHASE_TINT[ph.name].replace("0.10", "0.25");
        octx.fillRect(ovX(ph.s), y0, Math.max(1, ovX(ph.e) - ovX(ph.s)), h);
      });
      panels[p].findings.forEach(function (f) {
        octx.fillStyle = f.color; var x = ovX(f.s);
        octx.fillRect(x, y0, Math.max(2, ovX(f.e) - x), 3);
      });
    });
    var x0 = ovX(view.t0), x1 = ovX(view.t1);
    octx.fillStyle = "rgba(16,24,40,0.18)";
    octx.fillRect(0, 0, Math.max(0, x0), H); octx.fillRect(x1, 0, Math.max(0, W - x1), H);
    octx.strokeStyle = "#175cd3"; octx.lineWidth = 2;
    octx.strokeRect(Math.max(1, x0), 1, Math.max(2, Math.min(W - 1, x1) - Math.max(1, x0)), H - 2);
  }

  // ---------------------------------------------------------------- status, test hook
  function updateStatus() {
    var span = view.t1 - view.t0;
    var o = panels.length ? panels[0].d.origin_ns : 0;
    var text = "view " + at(o + view.t0) + " … " + at(o + view.t1) + " (" + fmtNs(span) + ") · " +
      stats.visible.toLocaleString() + " events in view";
    text += stats.merged ? " · " + stats.merged.toLocaleString() + " events merged into " +
      stats.spans.toLocaleString() + " spans at this zoom (zoom in to separate them)"
      : " · every event drawn on its own";
    var cut = panels.filter(function (P) { return P.d.decimation; });
    if (cut.length) {
      var dec = cut[0].d.decimation;
      text += " · the page holds " + dec.drawn.toLocaleString() + " of " + dec.events.toLocaleString() +
        " events: short ones merged into " + dec.spans.toLocaleString() + " spans when written";
    }
    statusEl.textContent = text;
    var kinds = { gpu: 0, api: 0, nvtx: 0 }, lanes = 0, findings = 0, events = 0;
    panels.forEach(function (P) {
      P.lanes.forEach(function (l) { kinds[l.kind] += 1; lanes += 1; });
      findings += P.findings.length; events += P.n;
    });
    var state = { ready: true, panels: panels.length, lanes: lanes, lane_kinds: kinds,
      findings: findings, drawn: stats.drawn, marked: stats.marked, events: events,
      visible: stats.visible, merged: stats.merged, spans: stats.spans,
      view: [view.t0, view.t1], frame_ms: Math.round(stats.frame_ms * 100) / 100,
      selected: selected, errors: errors.slice(), folded: X0 !== GUTTER,
      decimation: panels.map(function (P) { return P.d.decimation || null; }),
      labels: labelsInClient(),
      ticks: panels.map(function (P) { return P.tickTotal; }) };
    window.__gpugap = state;
    document.documentElement.setAttribute("data-gpugap", JSON.stringify(state));
  }

  function labelsInClient() {
    var out = [];
    panels.forEach(function (P, p) {
      var r = P.canvas.getBoundingClientRect();
      (P.labels || []).forEach(function (l) {
        out.push({ p: p, kind: l.kind, text: l.text, x0: r.left + l.x0, x1: r.left + l.x1, y0: r.top + l.y0,
                   y1: r.top + l.y1, bx0: r.left + l.bx0, bx1: r.left + l.bx1,
                   canvas: [r.left, r.top, r.right, r.bottom] });
      });
    });
    return out;
  }

  // ---------------------------------------------------------------- selection
  function select(p, f, zoom) {
    selected = f === null || f === undefined ? null : { p: p, f: f };
    document.querySelectorAll("li.finding.selected").forEach(function (li) { li.classList.remove("selected"); });
    if (selected) {
      var li = document.querySelector('li.finding[data-panel="' + p + '"][data-finding="' + f + '"]');
      if (li) { li.classList.add("selected"); if (!zoom) { li.scrollIntoView({ block: "nearest" }); } }
      if (zoom) {
        var F = panels[p].findings[f], w = padded(F.s, F.e), extra = (w[1] - w[0]) * 0.08;
        setView(w[0] - extra, w[1] + extra);
        var r = panels[p].canvas.getBoundingClientRect();
        if (r.top < 0 || r.top > window.innerHeight - 80) { panels[p].canvas.scrollIntoView({ block: "start" }); }
      }
    }
    redraw();
  }
  document.querySelectorAll("li.finding .finding-head").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var li = btn.parentNode;
      select(+li.getAttribute("data-panel"), +li.getAttribute("data-finding"), true);
    });
  });

  // ranges: the select box and the links in the tables
  var rangeSel = document.getElementById("range-select");   // absent without ranges
  function zoomRange(p, i) { var r = panels[p].d.ranges[i], w = padded(r.s, r.e); setView(w[0], w[1]); }
  if (rangeSel) {
    rangeSel.addEventListener("change", function () {
      if (!rangeSel.value) { return; }
      var parts = rangeSel.value.split(":"); zoomRange(+parts[0], +parts[1]);
    });
  }
  document.querySelectorAll(".range-link").forEach(function (b) {
    b.addEventListener("click", function () {
      zoomRange(+b.getAttribute("data-panel"), +b.getAttribute("data-range"));
      window.scrollTo({ top: 0 });
    });
  });
  document.getElementById("zoom-in").addEventListener("click", function () { zoomAt(0.5); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoomAt(2); });
  document.getElementById("zoom-reset").addEventListener("click", function () { var w = padded(extent[0], extent[1]); setView(w[0], w[1]); });
  document.getElementById("zoom-initial").addEventListener("click", function () { setView(initial[0], initial[1]); });

  // ---------------------------------------------------------------- hover & hit tests
  function hit(P, x, y) {
    var t = view.t0 + (x - X0) / P.scale, tol = 3 / P.scale, out = { t: t };
    if (x < GUTTER) {
      P.lanes.forEach(function (l, li) {
        if (y >= P.laneY[li] && y < P.laneY[li] + P.laneH[li]) { out.gutter = l.group + " · " + l.label; }
      });
      return out;
    }
    if (x < X0) { out.fold = true; return out; }
    if (P.trackRows && y >= P.trackY && y < P.trackY + P.trackRows * TRACK_ROW) {
      P.findings.forEach(function (f, i) {
        var b = trackBox(P, f);
        if (y >= b.y && y <= b.y + b.h && x >= b.x0 - 2 && x <= b.x1 + 2 && out.finding === undefined) { out.finding = i; }
      });
      return out;
    }
    for (var li = 0; li < P.lanes.length; li++) {
      if (y < P.laneY[li] || y >= P.laneY[li] + P.laneH[li]) { continue; }
      var lane = P.lanes[li], r = Math.floor((y - P.laneY[li] - PAD) / ROW_H[lane.kind]);
      out.lane = li;
      var row = lane.rows[Math.max(0, Math.min(lane.rows.length - 1, r))];
      if (row) {
        var found = [], i = lowerBound(row.endMax, row.i0, t - tol);
        for (; i < row.i1 && P.S[i] <= t + tol; i++) {
          if (P.S[i] + P.D[i] >= t - tol) { found.push(i); }
        }
        out.events = found;
      }
      P.markers.forEach(function (m) {
        if (out.finding !== undefined) { return; }
        if ((m.t === "band" || m.t === "span") && li >= m.l0 && li <= m.l1 && t >= m.s - tol && t <= m.e + tol) { out.finding = m.f; }
        if (m.t === "ev" && found && found.indexOf(m.i) >= 0) { out.finding = m.f; }
      });
    }
    return out;
  }

  function eventHtml(P, i) {
    var d = P.d, cat = CATS[d.cat[i]], lane = P.lanes[P.evLane[i]];
    var html = "";
    if (P.merged[i]) {
      var q = d.decimation.quantum_ns;
      html += '<div class="t">' + P.merged[i].toLocaleString() + " events merged into one span</div>" +
        '<div class="d">' + (q ? "events shorter than " + fmtNs(q) + " and less than that apart merge " : "") +
        "(this page draws at most " + d.decimation.max_events.toLocaleString() +
        " events per timeline; those of the initial view, e.g. --range's, kept as they are where they fit) · the first:</div>";
    }
    html += '<div class="t">' + esc(d.strings[d.name[i]]) + "</div>";
    html += '<div class="d">' + esc(cat.label) + " · " + esc(lane.group) + " · " + esc(lane.label) + "</div>";
    html += "<div>start " + at(d.origin_ns + P.S[i]) + " · duration " + fmtNs(P.D[i]) + "</div>";
    if (d.strings[d.info[i]]) { html += "<div>" + esc(d.strings[d.info[i]]) + "</div>"; }
    var extra = [];
    if (P.corr[i] >= 0) { extra.push("correlation id " + P.corr[i]); }
    if (P.bytes[i] > 0 && P.D[i] > 0 && cat.id !== "memset") {
      extra.push(fmtBytes(P.bytes[i]) + " at " + (P.bytes[i] / P.D[i]).toFixed(2) + " GB/s");
    }
    if (extra.length) { html += '<div class="d">' + esc(extra.join(" · ")) + "</div>"; }
    return html;
  }
  function findingHtml(P, f) {
    var F = P.findings[f];
    return '<div class="f"><b>#' + esc(F.num) + " " + esc(F.rule) + "</b> [" + esc(F.cause) + "] " +
      esc(F.severity) + " · cost " + fmtNs(F.cost) + (F.count > 1 ? " ×" + F.count : "") +
      '<div class="d">' + esc(F.message) + "</div></div>";
  }

  function showTip(ev, html) {
    if (!html) { tip.hidden = true; return; }
    tip.innerHTML = html; tip.hidden = false;
    var w = tip.offsetWidth, h = tip.offsetHeight, x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + w > window.innerWidth - 4) { x = ev.clientX - w - 14; }
    if (y + h > window.innerHeight - 4) { y = ev.clientY - h - 14; }
    tip.style.left = Math.max(4, x) + "px"; tip.style.top = Math.max(4, y) + "px";
  }

  function hoverHtml(P, h) {
    var html = "";
    if (h.gutter) { return '<div class="t">' + esc(h.gutter) + "</div>"; }
    if (h.fold) {
      var fold = P.d.fold || panels.filter(function (Q) { return Q.d.fold; })[0].d.fold;
      return '<div class="t">' + esc(fold.label) + ' before this view</div><div class="d">click: show the whole report</div>';
    }
    if (h.events && h.events.length) {
      if (h.events.length === 1) { html += eventHtml(P, h.events[0]); }
      else {
        var longest = h.events[0];
        h.events.forEach(function (i) { if (P.D[i] > P.D[longest]) { longest = i; } });
        html += '<div class="t">' + h.events.length + " events under the cursor (zoom in to separate)</div>" +
          '<div class="d">the longest:</div>' + eventHtml(P, longest);
      }
    }
    if (h.finding !== undefined) { html += findingHtml(P, h.finding); }
    return html;
  }

  // ---------------------------------------------------------------- mouse, wheel, keys
  var drag = null, mouse = null;
  panels.forEach(function (P) {
    var c = P.canvas;
    c.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var rect = c.getBoundingClientRect(), x = ev.clientX - rect.left;
      var t = view.t0 + (Math.max(X0, x) - X0) / P.scale;
      var dx = ev.deltaX || (ev.shiftKey ? ev.deltaY : 0);
      if (dx && Math.abs(dx) > Math.abs(ev.shiftKey ? 0 : ev.deltaY)) { pan(dx / P.scale); return; }
      var unit = ev.deltaMode === 1 ? 30 : ev.deltaMode === 2 ? 300 : 1;
      zoomAt(Math.exp(Math.max(-2, Math.min(2, ev.deltaY * unit * 0.002))), t);
    }, { passive: false });
    c.addEventListener("pointerdown", function (ev) {
      if (ev.button !== 0) { return; }
      c.setPointerCapture(ev.pointerId);
      drag = { P: P, x: ev.clientX, t0: view.t0, t1: view.t1, moved: false };
      c.classList.add("dragging");
    });
    c.addEventListener("pointermove", function (ev) {
      var rect = c.getBoundingClientRect(), x = ev.clientX - rect.left, y = ev.clientY - rect.top;
      mouse = { P: P, x: x };
      if (drag && drag.P === P) {
        var dx = ev.clientX - drag.x;
        if (Math.abs(dx) > 2) { drag.moved = true; }
        if (drag.moved) {
          var dt = -dx / P.scale; view.t0 = drag.t0 + dt; view.t1 = drag.t1 + dt; redraw();
          tip.hidden = true; return;
        }
      }
      showTip(ev, hoverHtml(P, hit(P, x, y)));
    });
    c.addEventListener("pointerup", function (ev) {
      c.classList.remove("dragging");
      var was = drag; drag = null;
      if (was && !was.moved) {
        var rect = c.getBoundingClientRect(), h = hit(P, ev.clientX - rect.left, ev.clientY - rect.top);
        if (h.fold) { var w = padded(extent[0], extent[1]); setView(w[0], w[1]); }
        else if (h.finding !== undefined) { select(P.index, h.finding, false); }
        else if (selected) { select(null, null, false); }
      }
    });
    c.addEventListener("pointerleave", function () { tip.hidden = true; mouse = null; });
    c.addEventListener("dblclick", function () { var w = padded(extent[0], extent[1]); setView(w[0], w[1]); });
  });

  var odrag = null;
  overview.addEventListener("pointerdown", function (ev) {
    var rect = overview.getBoundingClientRect(), x = ev.clientX - rect.left;
    var x0 = ovX(view.t0), x1 = ovX(view.t1);
    overview.setPointerCapture(ev.pointerId);
    if (Math.abs(x - x0) < 6) { odrag = { mode: "left" }; }
    else if (Math.abs(x - x1) < 6) { odrag = { mode: "right" }; }
    else if (x > x0 && x < x1) { odrag = { mode: "move", x: x, t0: view.t0, t1: view.t1 }; }
    else { odrag = { mode: "new", anchor: ovT(x) }; }
  });
  overview.addEventListener("pointermove", function (ev) {
    if (!odrag) { return; }
    var rect = overview.getBoundingClientRect(), x = ev.clientX - rect.left, t = ovT(x);
    if (odrag.mode === "left") { setView(Math.min(t, view.t1 - MIN_SPAN), view.t1); }
    else if (odrag.mode === "right") { setView(view.t0, Math.max(t, view.t0 + MIN_SPAN)); }
    else if (odrag.mode === "move") { var dt = ovT(x) - ovT(odrag.x); setView(odrag.t0 + dt, odrag.t1 + dt); }
    else { setView(Math.min(odrag.anchor, t), Math.max(odrag.anchor, t) + 1); }
  });
  overview.addEventListener("pointerup", function () { odrag = null; });

  document.addEventListener("keydown", function (ev) {
    if (ev.target && /INPUT|SELECT|TEXTAREA/.test(ev.target.tagName)) { return; }
    var t = mouse ? view.t0 + (mouse.x - X0) / mouse.P.scale : undefined;
    var k = ev.key.toLowerCase(), span = view.t1 - view.t0;
    if (k === "w") { zoomAt(0.7, t); } else if (k === "s") { zoomAt(1 / 0.7, t); }
    else if (k === "a") { pan(-span * 0.15); } else if (k === "d") { pan(span * 0.15); }
    else if (k === "0") { var w = padded(extent[0], extent[1]); setView(w[0], w[1]); }
    else if (k === "escape") { select(null, null, false); }
    else { return; }
    ev.preventDefault();
  });

  window.addEventListener("resize", function () { resize(); });
  resize();
  // For tests and scripting: select/zoom from the outside.
  window.gpugapTimeline = {
    select: select, setView: setView, zoomAt: zoomAt,
    whole: function () { var w = padded(extent[0], extent[1]); setView(w[0], w[1]); drawAll(); return window.__gpugap; },
    redrawNow: function () { drawAll(); return window.__gpugap; },
    // Client coordinates of time t (relative ns) in the middle of a lane's first row.
    where: function (p, lane, t) {
      var P = panels[p], r = P.canvas.getBoundingClientRect();
      return { x: r.left + xOf(P, t), y: r.top + rowY(P, lane, 0) + ROW_H[P.lanes[lane].kind] / 2 };
    }
  };
})();
