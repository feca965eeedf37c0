// The dashboard's history (SPEC §16), appended to src/dashboard.html by src/http/dashboard.rs:
// per machine a 30-day strip coloured by time open (numbers on hover and on tap), flakiest
// first; today's timeline of open and half-open intervals (from /status/events); requests
// and fallbacks over the last 24 h (from /status/hourly). Each part has its own refresh
// loop: when one endpoint fails, its part says so and the rest of the page goes on.
"use strict";
// SVG's namespace, as the HTML parser gave it to the page's own <svg id="svgns"> (the page
// names no URL, so nothing can ever be fetched from one).
const SVGNS = $("svgns").namespaceURI;
const DAY_S = 86400;

function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}
function dur(s) {
  s = Math.round(Number(s) || 0);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60 ? (s % 60) + " s" : "");
  return Math.floor(s / 3600) + " h " + Math.round(s % 3600 / 60) + " min";
}
// The colour step of a day by its time open: 0 none, then up to a minute, ten minutes,
// an hour, six hours, more.
function openStep(s) {
  s = Number(s) || 0;
  return s <= 0 ? 0 : s < 60 ? 1 : s < 600 ? 2 : s < 3600 ? 3 : s < 6 * 3600 ? 4 : 5;
}
function dayText(name, d) {
  return name + " · " + d.day + ": " + d.trips + " trip" + (d.trips === 1 ? "" : "s") +
    ", open " + dur(d.open_s) + ", " + d.served + " served, " + d.rerouted + " rerouted, " +
    d.rejected + " rejected, tasks " + d.tasks_finished + " finished / " + d.tasks_failed + " failed";
}
// As History::flakiest_first: most time open, then most trips, then by name.
function flakiestFirst(machines) {
  const sum = (days, k) => days.reduce((a, d) => a + (Number(d[k]) || 0), 0);
  return Object.keys(machines).map((n) => [n, sum(machines[n], "open_s"), sum(machines[n], "trips")])
    .sort((a, b) => b[1] - a[1] || b[2] - a[2] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map((x) => x[0]);
}

function renderStrip(name, days) {
  const row = el("div", "hrow"), strip = el("div", "strip");
  const open = days.reduce((a, d) => a + (Number(d.open_s) || 0), 0);
  const trips = days.reduce((a, d) => a + (Number(d.trips) || 0), 0);
  row.dataset.machine = name; row.dataset.trips = trips;
  const label = el("div", "hname");
  label.append(el("strong", "", name), el("small", "muted", trips + (trips === 1 ? " trip" : " trips") + " · open " + dur(open)));
  const note = el("p", "daynote muted", "tap a day for its numbers");
  strip.setAttribute("role", "group");
  strip.setAttribute("aria-label", name + ": the last " + days.length + " days");
  for (const d of days) {
    const c = el("button", "cell o" + openStep(d.open_s));
    c.type = "button";
    c.dataset.day = d.day; c.dataset.trips = d.trips; c.dataset.openS = d.open_s;
    c.title = dayText(name, d);
    c.setAttribute("aria-label", c.title);
    c.addEventListener("click", () => { setText(note, c.title); note.classList.remove("muted"); });
    strip.append(c);
  }
  row.append(label, strip, note);
  return row;
}

async function refreshHistory() {
  const box = $("history");
  try {
    const h = await api("status/history?days=30");
    const machines = h.machines || {};
    const order = flakiestFirst(machines);
    const rows = order.map((n) => renderStrip(n, machines[n]));
    const head = el("p", "muted");
    const worst = order.find((n) => machines[n].some((d) => d.trips > 0 || d.open_s > 0));
    head.append(worst ? "Flakiest this month: " : "No trips in 30 days.");
    if (worst) head.append(el("strong", "flakiest", worst));
    head.append(" · days in " + h.timezone + ", " + (h.days || []).slice(-1)[0] + " last");
    box.dataset.history = "ok";
    box.replaceChildren(head, ...rows);
  } catch (e) {
    if (e.message === "API key needed") return;
    box.dataset.history = "failed";
    const p = box.querySelector(".hfail") || el("p", "hfail");
    setText(p, "History unavailable (" + (e.status ? "HTTP " + e.status : e.message) + "); retrying.");
    if (!box.querySelector(".hrow")) box.replaceChildren(p); else if (!p.isConnected) box.prepend(p);
  }
}

// Today (from local midnight to now): each machine's down intervals from the ledger rows.
function intervals(rows, stateNow, start, now) {
  const by = {};
  for (const r of rows) (by[r.machine] = by[r.machine] || []).push(r);
  const out = {};
  for (const name of new Set(Object.keys(by).concat(Object.keys(stateNow)))) {
    const list = (by[name] || []).sort((a, b) => a.seq - b.seq), spans = [];
    let state = list.length ? list[0].from : stateNow[name] || "closed", since = start;
    for (const r of list) {
      if (state !== "closed") spans.push([since, r.at_ms, state]);
      state = r.to; since = r.at_ms;
    }
    if (state !== "closed") spans.push([since, now, state]);
    out[name] = spans;
  }
  return out;
}

function renderTimeline(spans, start, now) {
  // A narrow screen gets a narrower drawing, so its names and hours stay legible.
  const narrow = window.innerWidth < 600, W = narrow ? 420 : 1000, G = narrow ? 84 : 130;
  const box = $("timeline"), H = 14, names = Object.keys(spans).sort();
  const xOf = (t) => G + (W - G) * (t - start) / (DAY_S * 1000);
  const chart = svg("svg", { viewBox: "0 0 " + W + " " + (names.length * (H + 8) + 16), class: "tl", role: "img" });
  chart.setAttribute("aria-label", "today's open and half-open intervals per machine");
  names.forEach((name, i) => {
    const y = i * (H + 8) + 2;
    chart.append(svg("rect", { x: G, y, width: W - G, height: H, class: "tl-bg" }));
    for (const [a, b, st] of spans[name]) {
      const r = svg("rect", { x: xOf(a), y, width: Math.max(2, xOf(b) - xOf(a)), height: H,
        class: "tl-" + (st === "half_open" ? "half" : "open") });
      r.dataset.machine = name;
      r.append(svg("title", {}));
      r.firstChild.textContent = name + " " + st + " " + new Date(a).toLocaleTimeString() + "–" + new Date(b).toLocaleTimeString();
      chart.append(r);
    }
    const t = svg("text", { x: 4, y: y + H - 3, class: "tl-name" });
    const max = narrow ? 12 : 18;
    t.textContent = name.length > max ? name.slice(0, max - 1) + "…" : name;
    chart.append(t);
  });
  const y2 = names.length * (H + 8) + 2;
  chart.append(svg("line", { x1: xOf(now), x2: xOf(now), y1: 0, y2, class: "tl-now" }));
  for (const h of [0, 6, 12, 18, 24]) {
    const t = svg("text", { x: Math.min(W - 40, xOf(start + h * 3600000)), y: y2 + 12, class: "tl-axis" });
    t.textContent = String(h).padStart(2, "0") + ":00";
    chart.append(t);
  }
  box.replaceChildren(chart);
}

async function refreshTimeline() {
  const midnight = new Date(); midnight.setHours(0, 0, 0, 0);
  try {
    const [ev, st] = await Promise.all([api("status/events?limit=1000&since=" + midnight.getTime()), api("status")]);
    const now = Date.now(), stateNow = {};
    for (const n in st.machines || {}) stateNow[n] = st.machines[n].state;
    const rows = (ev.events || []).filter((r) => r.machine && r.machine[0] !== "(");
    renderTimeline(intervals(rows, stateNow, midnight.getTime(), now), midnight.getTime(), now);
  } catch (e) {
    if (e.message !== "API key needed") setText($("timeline"), "Today's timeline unavailable (" + (e.status ? "HTTP " + e.status : e.message) + ").");
  }
}

// The last 24 h by the hour: requests served (all machines) and fallbacks (rerouted).
async function refreshHourly() {
  const box = $("hourly");
  try {
    const h = await api("status/hourly");
    const hours = h.hours || [], served = hours.map(() => 0), rer = hours.map(() => 0);
    for (const n in h.machines || {}) h.machines[n].forEach((x, i) => { served[i] += x.served; rer[i] += x.rerouted; });
    const max = Math.max(1, ...served, ...rer), W = 24 * 40, H = 90;
    const chart = svg("svg", { viewBox: "0 0 " + W + " " + (H + 16), class: "hr", role: "img" });
    chart.setAttribute("aria-label", "requests served and fallbacks per hour, last 24 h");
    hours.forEach((at, i) => {
      const label = new Date(at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
      for (const [v, cls, dx] of [[served[i], "hr-served", 4], [rer[i], "hr-rer", 20]]) {
        const hh = v > 0 ? Math.max(2, H * v / max) : 0, r = svg("rect", { x: i * 40 + dx, y: H - hh, width: 15, height: hh, class: cls });
        r.append(svg("title", {}));
        r.firstChild.textContent = label + ": " + served[i] + " served, " + rer[i] + " rerouted";
        chart.append(r);
      }
      if (i % 6 === 0) { const t = svg("text", { x: i * 40 + 2, y: H + 13, class: "tl-axis" }); t.textContent = label; chart.append(t); }
    });
    const sum = (a) => a.reduce((x, y) => x + y, 0);
    const p = el("p", "muted", sum(served) + " requests served, " + sum(rer) + " fallbacks in 24 h (");
    p.append(el("span", "key hr-served-k", "served"), " ", el("span", "key hr-rer-k", "rerouted"), ")");
    box.replaceChildren(p, chart);
  } catch (e) {
    if (e.message !== "API key needed") setText(box, "Hourly counts unavailable (" + (e.status ? "HTTP " + e.status : e.message) + ").");
  }
}

loop(refreshHistory, 30000);
loop(refreshTimeline, 10000);
loop(refreshHourly, 30000);
