// acp-proxy view: the page of a wire trace (docs/trace-format.md).
// Every value from the trace is shown with textContent, never as markup.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  const config = JSON.parse($("trace-config").textContent);
  const DECISIONS = ["forwarded", "rewritten", "held", "released", "refused", "answered", "dropped"];
  const RESUMES = { "session/load": true, "session/resume": true };
  const FIRST_CHUNK = 400;

  const S = {
    header: null,
    items: [],        // every shown record, in trace order: {rec, kind: "msg"|"ev"|"boundary", notes, row}
    msgCount: 0,
    t0: null,
    bySeq: new Map(), // "conn:seq" -> item
    last: new Map(),  // conn -> {item, after: null | "timer" | "closed:PEER"}
    sessions: new Map(),
    decisions: {},
    perSession: new Map(),
    rendered: 0,
    shown: [],        // the items whose rows are not hidden, in order
    filled: new Set(),
    filter: { session: "", decision: "", q: "", set: null },
    offset: config.offset,
    unreadable: config.unreadable || 0,
    selected: null,
  };

  // ------------------------------------------------------------ sessions
  function session(id) {
    let s = S.sessions.get(id);
    if (!s) {
      s = { id: id, parent: null, children: [], title: null, caps: undefined, fresh: true,
            staleAt: null, firstSeq: null, count: 0 };
      S.sessions.set(id, s);
    }
    return s;
  }
  function descendants(id, out) {
    out = out || new Set();
    if (out.has(id)) return out;
    out.add(id);
    const s = S.sessions.get(id);
    if (s) for (const c of s.children) descendants(c, out);
    return out;
  }
  function setParent(child, parent) {
    const c = session(child);
    if (c.parent !== null || child === parent) return;
    c.parent = parent;
    session(parent).children.push(child);
  }
  function readContent(rec) {
    if (typeof rec.content !== "string") return undefined;
    try { return JSON.parse(rec.content); } catch (e) { return undefined; }
  }
  function learnFromContent(rec) {
    if (rec.method !== "session/update" || typeof rec.content !== "string") return;
    if (rec.content.indexOf("subagent_update") < 0) return;
    const body = readContent(rec);
    const up = body && body.params && body.params.update;
    if (!up || up.sessionUpdate !== "subagent_update" || typeof up.sessionId !== "string") return;
    const c = session(up.sessionId);
    if ("capabilities" in up) c.caps = up.capabilities === null ? {} : up.capabilities;
    if ("title" in up) c.title = up.title;
  }

  // ------------------------------------------------------------ formatting
  function secs(d) {
    if (typeof d !== "number") return "";
    return d < 1 ? (d * 1000).toFixed(d < 0.01 ? 2 : 1) + " ms" : d.toFixed(3) + " s";
  }
  function idText(id) { return id === null || id === undefined ? "" : JSON.stringify(id); }
  function eventText(ev) {
    let t = ev.event;
    if (ev.sessionId) t += " " + ev.sessionId;
    if (ev.reason) t += ": " + ev.reason;
    return t;
  }
  function label(rec) {
    if (rec.method) return rec.method;
    if (rec.for_method) return (rec.kind === "error" ? "error for " : "result of ") + rec.for_method;
    return rec.kind || "message";
  }
  function seqOf(item) { return item.rec.seq === null || item.rec.seq === undefined ? null : item.rec.seq; }

  // ------------------------------------------------------------ ingest
  function addNote(item, text) {
    setNotes(item, item.notes.concat([text]));
  }
  function setNotes(item, notes) {
    item.notes = notes;
    if (!item.row) return;
    item.row.classList.remove("l1", "l2", "l3", "l4");
    item.row.classList.add("l" + lines(item));
    if (item.filled) { unfill(item); fill(item); }
  }
  function ingest(rec) {
    if (rec.type === "header") { S.header = rec; return; }
    const conn = rec.conn === undefined ? 1 : rec.conn;
    if (typeof rec.t === "number" && S.t0 === null) S.t0 = rec.t;
    if (rec.type === "message") ingestMessage(rec, conn);
    else ingestOther(rec, conn);
  }
  function ingestOther(rec, conn) {
    let text;
    if (rec.type === "closed") {
      text = "the " + rec.peer + " closed its stream" + (rec.detail ? " (" + rec.detail + ")" : "");
      const l = S.last.get(conn);
      if (l) l.after = "closed:" + rec.peer;
    } else if (rec.type === "timer") {
      text = "hold timer: " + (rec.events || []).map(eventText).join("; ");
      const l = S.last.get(conn);
      if (l) l.after = "timer";
    } else if (rec.type === "proxy") {
      text = "the proxy answered " + (rec.kind || "") + " id " + idText(rec.id) +
        (rec.for_method ? " (" + rec.for_method + ")" : "") + " to the " + rec.to;
    } else {
      text = "record " + rec.type;
    }
    push({ rec: rec, kind: "ev", text: text, notes: [], row: null });
  }
  function ingestMessage(rec, conn) {
    const item = { rec: rec, kind: "msg", notes: [], row: null };
    const events = Array.isArray(rec.events) ? rec.events : [];
    S.msgCount++;
    S.decisions[rec.decision] = (S.decisions[rec.decision] || 0) + 1;
    const sid = typeof rec.session === "string" ? rec.session :
      (typeof rec.for_session === "string" ? rec.for_session : null);
    if (sid !== null) {
      const s = session(sid);
      s.count++;
      if (s.firstSeq === null) s.firstSeq = rec.seq;
      S.perSession.set(sid, (S.perSession.get(sid) || 0) + 1);
    }
    if (typeof rec.created === "string") session(rec.created);
    learnFromContent(rec);
    const resume = rec.dir === "client->agent" && rec.kind === "request" && RESUMES[rec.method] &&
      typeof rec.session === "string" && rec.decision !== "refused" && rec.decision !== "dropped";
    for (const ev of events) {
      if ((ev.event === "child_announced" || ev.event === "child_updated") && ev.sessionId && ev.parentSessionId) {
        setParent(ev.sessionId, ev.parentSessionId);
        if (ev.event === "child_announced") { const c = session(ev.sessionId); c.fresh = true; c.staleAt = null; }
      } else if (ev.event === "grants_revoked" && ev.sessionId) {
        for (const d of descendants(ev.sessionId)) {
          if (d === ev.sessionId) continue;
          const c = session(d); c.fresh = false; c.staleAt = rec.seq;
        }
      } else if (ev.event === "grants_restored" && ev.sessionId) {
        const c = session(ev.sessionId); c.fresh = true; c.staleAt = null;
      }
    }
    const ch = rec.child;  // what the proxy's registry holds after this message
    if (ch && typeof ch.sessionId === "string" && Array.isArray(ch.grants)) {
      const c = session(ch.sessionId);
      c.caps = {};
      for (const k of ch.grants) c.caps[k] = {};
      if (typeof ch.fresh === "boolean") {
        if (ch.fresh) c.staleAt = null;
        else if (c.fresh) c.staleAt = rec.seq;
        c.fresh = ch.fresh;
      }
    }
    if (resume) {
      const revoked = events.some((e) => e.event === "grants_revoked");
      push({ rec: rec, kind: "boundary", session: rec.session, notes: [], row: null,
             text: rec.method + " of " + rec.session + " (#" + rec.seq + "): " +
               (revoked ? "its children's grants are revoked until the agent re-announces them after the answer"
                        : "the session's history is replayed; grants announced before are not fresh") });
    }
    // what the proxy did, with the audit events
    for (const ev of events) if (ev.event !== "held") addNote(item, eventText(ev));
    if (rec.decision === "held") {
      const held = events.find((e) => e.event === "held");
      addNote(item, "held" + (held && held.reason ? ": " + held.reason : "") + "; outcome pending");
    }
    if (rec.decision === "rewritten") addNote(item, cutText(rec, events));
    if (rec.seq !== null && rec.seq !== undefined) {
      S.bySeq.set(conn + ":" + rec.seq, item);
    } else if (rec.of !== undefined && rec.of !== null) {
      joinHeld(item, rec, conn);
    }
    if (rec.for_seq !== undefined && rec.for_seq !== null) {
      const req = S.bySeq.get(conn + ":" + rec.for_seq);
      const dur = secs(rec.duration);
      addNote(item, "answers #" + rec.for_seq + (dur ? " after " + dur : ""));
      if (req) {
        req.responseSeq = rec.seq;
        if (req.row) req.row.dataset.response = rec.seq;
        addNote(req, (rec.kind === "error" ? "error" : "response") + " #" + rec.seq + (dur ? " after " + dur : ""));
      }
      item.request = req;
    }
    if (rec.seq !== null && rec.seq !== undefined) S.last.set(conn, { item: item, after: null });
    push(item);
  }
  function cutText(rec, events) {
    const dup = events.find((e) => e.event === "duplicate_dropped");
    let text = "cut: the state member" + (dup && dup.reason ? " (" + dup.reason + ")" : "");
    const body = readContent(rec);
    const up = body && body.params && body.params.update;
    if (up && "state" in up) text += ": \"state\":" + JSON.stringify(up.state);
    return text;
  }
  function joinHeld(item, rec, conn) {
    const held = S.bySeq.get(conn + ":" + rec.of);
    const l = S.last.get(conn);
    let when;
    if (l && l.after === "timer") when = "on expiry of the hold";
    else if (l && l.after && l.after.indexOf("closed:") === 0) when = "when the " + l.after.slice(7) + " closed";
    else if (l) when = "after #" + seqOf(l.item) + " " + label(l.item.rec);
    else when = "";
    let reason = "";
    if (l && l.after === null && Array.isArray(l.item.rec.events)) {
      const r = l.item.rec.events.find((e) => e.event === "released" && e.sessionId === rec.session);
      if (r && r.reason) { reason = " (" + r.reason + ")"; when = "after #" + seqOf(l.item); }
    }
    const wait = held && typeof rec.t === "number" ? secs(rec.t - held.rec.t) : "";
    addNote(item, "held at #" + rec.of + (wait ? " for " + wait : "") + ", " + rec.decision + " " + when + reason);
    item.held = held;
    if (held) {
      held.release = item;
      held.outcome = rec.decision;
      held.after = l && l.after === null ? seqOf(l.item) : null;
      const notes = held.notes.map((n) => n.replace("; outcome pending", ""));
      notes.push(rec.decision + " " + when + reason);
      setNotes(held, notes);
      if (held.row) {
        held.row.dataset.outcome = rec.decision;
        if (held.after !== null) held.row.dataset.after = held.after;
      }
    }
  }
  function push(item) {
    S.items.push(item);
  }

  // ------------------------------------------------------------ rows
  // Every record has its row element from the start (with its data- attributes and a
  // fixed height, so the layout of 100,000 rows is cheap); a row's text is filled in
  // only while it is near the screen.
  function lines(item) { return Math.min(4, 1 + item.notes.length); }
  function makeRow(item, index) {
    const rec = item.rec;
    let row;
    if (item.kind === "msg") {
      row = el("div", "msg " + (rec.dir === "client->agent" ? "c2a" : "a2c") + " l" + lines(item));
      row.dataset.seq = rec.seq === null || rec.seq === undefined ? "" : rec.seq;
      row.dataset.decision = rec.decision;
      row.dataset.session = typeof rec.session === "string" ? rec.session : "";
      row.dataset.conn = rec.conn === undefined ? 1 : rec.conn;
      if (rec.of !== undefined && rec.of !== null) row.dataset.of = rec.of;
      if (item.outcome) row.dataset.outcome = item.outcome;
      if (item.after !== undefined && item.after !== null) row.dataset.after = item.after;
      if (item.responseSeq !== undefined) row.dataset.response = item.responseSeq;
    } else {
      row = el("div", item.kind + " l1");
      if (item.kind === "boundary") row.dataset.boundary = item.session;
    }
    row.dataset.i = index;
    item.row = row;
    item.filled = false;
    row.hidden = !matches(item);
    return row;
  }
  function fill(item) {
    if (item.filled) return;
    item.filled = true;
    S.filled.add(item);
    const rec = item.rec, row = item.row;
    if (item.kind !== "msg") { row.appendChild(el("span", "text", item.text)); return; }
    row.appendChild(el("span", "seq", row.dataset.seq ? "#" + rec.seq : "\u21b3" + rec.of));
    row.appendChild(el("span", "t", reltime(rec.t)));
    const box = el("span", "box");
    const head = el("span", "head");
    head.appendChild(el("span", "m", label(rec)));
    const bits = [];
    if (typeof rec.session === "string") bits.push(rec.session);
    else if (typeof rec.for_session === "string") bits.push(rec.for_session);
    if (rec.id !== null && rec.id !== undefined) bits.push("id " + idText(rec.id));
    if (typeof rec.size === "number") bits.push(rec.size + " B");
    if (rec.kind !== "request" && rec.kind !== "notification" && rec.kind !== "response") bits.push(rec.kind);
    head.appendChild(el("span", "x", bits.join(" \u00b7 ")));
    head.appendChild(el("span", "d " + rec.decision, rec.decision));
    box.appendChild(head);
    for (const n of item.notes) box.appendChild(el("span", "note", n));
    row.appendChild(box);
  }
  function unfill(item) {
    item.filled = false;
    S.filled.delete(item);
    item.row.replaceChildren();
  }
  function reltime(t) {
    if (typeof t !== "number" || S.t0 === null) return "";
    return "+" + (t - S.t0).toFixed(3);
  }
  function renderSome(n) {
    const frag = document.createDocumentFragment();
    const end = Math.min(S.items.length, S.rendered + n);
    for (let i = S.rendered; i < end; i++) {
      const it = S.items[i];
      frag.appendChild(makeRow(it, i));
      if (!it.row.hidden) S.shown.push(it);
    }
    S.rendered = end;
    $("timeline").appendChild(frag);
    scheduleFill();
    return S.rendered < S.items.length;
  }
  // the rows near the screen get their text; far ones are emptied again
  let fillPending = false;
  function scheduleFill() {
    if (fillPending) return;
    fillPending = true;
    requestAnimationFrame(() => { fillPending = false; fillVisible(); });
  }
  function firstBelow(y) {
    let lo = 0, hi = S.shown.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const r = S.shown[mid].row;
      if (r.offsetTop + r.offsetHeight < y) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  function fillVisible() {
    const timeline = $("timeline");
    const top = window.scrollY - timeline.offsetTop - 800;
    const bottom = window.scrollY - timeline.offsetTop + window.innerHeight + 800;
    const start = firstBelow(top);
    const keep = new Set();
    for (let i = start; i < S.shown.length; i++) {
      const it = S.shown[i];
      if (it.row.offsetTop > bottom) break;
      fill(it);
      keep.add(it);
    }
    if (S.filled.size > 1500) for (const it of Array.from(S.filled)) if (!keep.has(it)) unfill(it);
  }

  // ------------------------------------------------------------ filters
  function matches(item) {
    const f = S.filter;
    if (item.kind === "ev") return !f.session && !f.decision && !f.q;
    if (item.kind === "boundary") return !f.decision && !f.q && (!f.set || f.set.has(item.session));
    const rec = item.rec;
    if (f.decision && rec.decision !== f.decision) return false;
    if (f.set) {
      const sid = typeof rec.session === "string" ? rec.session : rec.for_session;
      if (!f.set.has(sid)) return false;
    }
    if (f.q) {
      const hay = (label(rec) + " " + idText(rec.id) + " " + (rec.kind || "")).toLowerCase();
      if (hay.indexOf(f.q) < 0) return false;
    }
    return true;
  }
  function readHash() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    S.filter.session = p.get("session") || "";
    S.filter.decision = p.get("decision") || "";
    S.filter.q = (p.get("q") || "").toLowerCase();
    S.filter.set = S.filter.session ? descendants(S.filter.session) : null;
  }
  function writeHash() {
    const p = new URLSearchParams();
    const s = $("f-session").value, d = $("f-decision").value, q = $("f-search").value.trim();
    if (s) p.set("session", s);
    if (d) p.set("decision", d);
    if (q) p.set("q", q);
    const h = p.toString();
    history.replaceState(null, "", h ? "#" + h : location.pathname + location.search);
    applyFilter();
  }
  function applyFilter() {
    readHash();
    syncControls();
    let shown = 0;
    S.shown = [];
    for (let i = 0; i < S.rendered; i++) {
      const it = S.items[i];
      const ok = matches(it);
      if (it.row.hidden === ok) it.row.hidden = !ok;
      if (ok) { S.shown.push(it); if (it.kind === "msg") shown++; }
    }
    scheduleFill();
    $("shown").textContent = shown + " of " + S.msgCount + " messages shown";
    for (const n of document.querySelectorAll("#tree .node")) {
      n.classList.toggle("sel", !!S.filter.set && S.filter.set.has(n.parentNode.dataset.session));
    }
  }
  const optionValues = new Map();
  function option(select, value) {
    let have = optionValues.get(select.id);
    if (!have) { have = new Set(); optionValues.set(select.id, have); }
    if (have.has(value)) return;
    have.add(value);
    select.appendChild(el("option", null, value)).value = value;
  }
  function syncControls() {
    const fs = $("f-session"), fd = $("f-decision");
    for (const id of S.sessions.keys()) option(fs, id);
    for (const d of DECISIONS) option(fd, d);
    if (S.filter.session) option(fs, S.filter.session);
    if (S.filter.decision) option(fd, S.filter.decision);
    fs.value = S.filter.session;
    fd.value = S.filter.decision;
    if (document.activeElement !== $("f-search")) $("f-search").value = S.filter.q;
  }

  // ------------------------------------------------------------ totals, tree, detail
  function renderTotals() {
    const box = $("totals");
    box.replaceChildren();
    const all = el("span", "total", "messages");
    all.appendChild(el("b", null, S.msgCount));
    all.addEventListener("click", () => { location.hash = ""; });
    box.appendChild(all);
    for (const d of DECISIONS) {
      if (!S.decisions[d]) continue;
      const t = el("span", "total", d);
      t.dataset.totalDecision = d;
      t.appendChild(el("b", null, S.decisions[d]));
      t.addEventListener("click", () => { setHash({ decision: d }); });
      box.appendChild(t);
    }
    box.appendChild(el("span", "sep"));
    const sessions = Array.from(S.perSession.entries()).sort((a, b) => b[1] - a[1]).slice(0, 12);
    for (const [sid, n] of sessions) {
      const t = el("span", "total", sid);
      t.dataset.totalSession = sid;
      t.appendChild(el("b", null, n));
      t.addEventListener("click", () => { setHash({ session: sid }); });
      box.appendChild(t);
    }
    if (S.perSession.size > sessions.length) box.appendChild(el("span", "hint", "+" + (S.perSession.size - sessions.length) + " sessions"));
    if (S.unreadable) box.appendChild(el("span", "hint", S.unreadable + " unreadable lines skipped"));
  }
  function setHash(parts) {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    for (const k in parts) { if (parts[k]) p.set(k, parts[k]); else p.delete(k); }
    location.hash = p.toString();
  }
  function capsText(s) {
    if (s.caps === undefined) return S.header && S.header.content ? "capabilities: none announced" : "capabilities: not in this trace (recorded without content)";
    const keys = Object.keys(s.caps || {}).filter((k) => k !== "_meta" && s.caps[k] !== null);
    return "capabilities: " + (keys.length ? keys.join(", ") : "none");
  }
  function treeNode(s, seen) {
    const li = el("li");
    li.dataset.session = s.id;
    const node = el("span", "node");
    node.appendChild(el("span", "sid", s.id));
    if (s.parent !== null) {
      li.dataset.child = s.id;
      li.dataset.parent = s.parent;
      li.dataset.fresh = s.fresh ? "true" : "false";
      if (s.caps !== undefined) li.dataset.caps = Object.keys(s.caps || {}).filter((k) => k !== "_meta" && s.caps[k] !== null).join(",");
      node.appendChild(el("span", "caps", capsText(s)));
      node.appendChild(s.fresh ? el("span", "fresh", "fresh") :
        el("span", "stale", "not fresh since #" + s.staleAt + " (parent reloaded; not re-announced)"));
    } else {
      li.dataset.top = "";
    }
    if (s.title) node.appendChild(el("span", "ttl", s.title));
    node.appendChild(el("span", "caps", s.count + " msgs"));
    node.addEventListener("click", () => { setHash({ session: s.id }); });
    li.appendChild(node);
    if (s.children.length) {
      const ul = el("ul");
      let shown = 0;
      for (const c of s.children) {
        if (seen.has(c)) continue;
        if (++shown > 300) { ul.appendChild(el("li", "hint", "+" + (s.children.length - 300) + " more children")); break; }
        seen.add(c);
        ul.appendChild(treeNode(session(c), seen));
      }
      li.appendChild(ul);
    }
    return li;
  }
  function renderTree() {
    const tree = $("tree");
    tree.replaceChildren();
    const seen = new Set();
    let n = 0;
    for (const s of S.sessions.values()) {
      if (s.parent !== null || seen.has(s.id)) continue;
      if (++n > 200) { tree.appendChild(el("li", "hint", "(more sessions not shown)")); break; }
      seen.add(s.id);
      tree.appendChild(treeNode(s, seen));
    }
  }
  function link(item, text) {
    const a = el("span", "link", text);
    a.addEventListener("click", () => {
      if (item.row.hidden) { history.replaceState(null, "", location.pathname + location.search); applyFilter(); }
      item.row.scrollIntoView({ block: "center" });
      select(item);
    });
    return a;
  }
  function select(item) {
    if (S.selected && S.selected.row) S.selected.row.classList.remove("sel");
    S.selected = item;
    if (item.row) item.row.classList.add("sel");
    const d = $("detail");
    d.replaceChildren();
    const rec = Object.assign({}, item.rec);
    const content = rec.content;
    delete rec.content;
    d.appendChild(el("div", null, label(item.rec) + " (" + item.rec.dir + ")"));
    for (const n of item.notes) d.appendChild(el("div", "note", n));
    const joins = [["request", item.request], ["response", item.responseSeq !== undefined ? S.bySeq.get((rec.conn || 1) + ":" + item.responseSeq) : null],
                   ["held as", item.held], ["then", item.release]];
    for (const [name, other] of joins) {
      if (!other || !other.row) continue;
      const line = el("div", null, name + " ");
      line.appendChild(link(other, other.rec.seq !== null && other.rec.seq !== undefined ? "#" + other.rec.seq : "\u21b3" + other.rec.of));
      d.appendChild(line);
    }
    d.appendChild(el("pre", null, JSON.stringify(rec, null, 2)));
    if (typeof content === "string") {
      let text = content;
      try { text = JSON.stringify(JSON.parse(content), null, 2); } catch (e) { /* not JSON: as recorded */ }
      d.appendChild(el("div", "hint", "content (secrets redacted)"));
      d.appendChild(el("pre", null, text));
    }
  }
  function renderMeta() {
    document.title = "acp-proxy trace: " + config.title;
    $("title").textContent = config.title;
    const h = S.header;
    if (h) {
      $("meta").textContent = "format " + h.format + " v" + h.version + (h.started ? " \u00b7 started " + h.started : "") +
        (h.proxy ? " \u00b7 acp-proxy " + h.proxy : "") + (h.content ? " \u00b7 with content" : " \u00b7 without content");
    }
  }
  function refreshAll() { renderMeta(); renderTotals(); renderTree(); syncControls(); }

  // ------------------------------------------------------------ live
  function poll() {
    fetch("records?offset=" + S.offset, { cache: "no-store" })
      .then((r) => {
        if (r.status === 409) location.reload();  // the trace was truncated: a new run
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then((chunk) => {
        for (const rec of chunk.records) ingest(rec);
        S.offset = chunk.offset;
        S.unreadable += chunk.unreadable || 0;
        if (chunk.records.length) {
          renderSome(S.items.length);
          refreshAll();
          applyFilter();
        }
        $("live").textContent = "following the trace (" + S.msgCount + " messages)";
        document.body.dataset.offset = S.offset;
        setTimeout(poll, 500);
      })
      .catch((e) => {
        $("live").textContent = "not following: " + e.message + " (retrying)";
        setTimeout(poll, 3000);
      });
  }

  // ------------------------------------------------------------ start
  function start() {
    performance.mark("acp-view-start");
    const records = JSON.parse($("trace-data").textContent);
    performance.mark("acp-view-parsed");
    // the first records are read and drawn at once; the rest after that frame (rows
    // already drawn get what later records say about them: responses, releases)
    const first = Math.min(records.length, FIRST_CHUNK * 2);
    for (let i = 0; i < first; i++) ingest(records[i]);
    readHash();
    refreshAll();
    document.body.dataset.rendered = "partial";
    renderSome(FIRST_CHUNK);
    fillVisible();
    requestAnimationFrame(() => setTimeout(() => {
      performance.mark("acp-view-first-rows");  // the frame with the first rows has been drawn
      for (let i = first; i < records.length; i++) ingest(records[i]);
      performance.mark("acp-view-ingested");
      renderSome(S.items.length);
      refreshAll();
      applyFilter();
      document.body.dataset.rendered = "all";
      performance.mark("acp-view-rendered");
      if (config.live) poll();
    }, 0));
    window.addEventListener("scroll", scheduleFill, { passive: true });
    window.addEventListener("resize", scheduleFill);
    $("timeline").addEventListener("click", (e) => {
      const row = e.target.closest(".msg");
      if (row) select(S.items[Number(row.dataset.i)]);
    });
    $("f-session").addEventListener("change", writeHash);
    $("f-decision").addEventListener("change", writeHash);
    $("f-search").addEventListener("input", writeHash);
    window.addEventListener("hashchange", applyFilter);
    // a data API for scripts and tests: the records as the trace holds them
    window.acpTrace = { records: () => S.items.filter((i) => i.kind === "msg").map((i) => i.rec),
                        sessions: () => Array.from(S.sessions.values()) };
  }
  start();
})();
