// The fleetstate dashboard: the fleet's snapshot from /events, then each
// event folded into it, as the terminal view does. The transcripts of the
// turns come from the daemon once per snapshot (it keeps the questions and
// answers asked before the page opened) and are kept up by the events
// that follow. Everything untrusted is set as text, never as HTML.
//
// The page acts too: an answer to a question, a cancel of a ticket, a
// detached send and the dismissal (ack) of a finished ticket the login
// sent, and logging out, are POSTs to the daemon with the login's CSRF
// token (from the page's csrf-token meta element) in a header. A lead's login gets the
// controls on its own tickets only; the operator's, on every ticket.
//
// Where members have git work trees of their own, the page shows what
// each holds (read from /dashboard/changes whenever a merge ends or the
// member's turn does, and on demand), its diff on request, and merges it
// into the lead's checkout once the person confirms.
'use strict';
(function () {
  // The same bounds as the daemon's transcripts.
  const MAX_EVENTS = 50, MAX_TURNS = 200, MAX_ENTRIES = 50, MAX_CONTENT = 4096;
  // How many characters of a request's input its row shows, escaped.
  const MAX_INPUT = 300;
  const text = window.fleetstateText;

  const members = new Map(); // name -> MemberInfo
  const tickets = new Map(); // ticket (or turn ID) -> TicketInfo
  const turns = new Map();   // turn ID -> transcript, oldest first
  const openTurns = new Set(); // turn IDs whose details the reader opened
  let events = [];           // the last events, newest first
  let trSeq = 0;             // the sequence number the transcripts hold
  let pending = null;        // events that came while the transcripts load
  let source = null;
  const perms = new Map();   // permission request ID -> request, pending only
  const ticketRows = new Map(); // ticket key -> {tr, tds, actKey}
  const drafts = new Map();  // turn ID -> answer being typed
  const work = new Map();    // member -> its work tree's entry (see workEntry)

  const $ = (id) => document.getElementById(id);
  const meta = (name) => (document.querySelector('meta[name="' + name + '"]') || { content: '' }).content;
  const csrf = meta('csrf-token');
  const myLead = meta('fleetstate-lead'); // empty for the operator
  const sender = meta('fleetstate-sender'); // the lead name this login sends as

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null && v !== '') e.setAttribute(k, v);
    }
    for (const c of children) {
      e.append(c instanceof Node ? c : document.createTextNode(c === undefined || c === null ? '' : String(c)));
    }
    return e;
  }

  function clip(s, n) {
    s = s || '';
    return s.length > n ? s.slice(0, n) + '…' : s;
  }

  function age(since) {
    if (!since) return '';
    let s = Math.max(0, Math.floor((Date.now() - Date.parse(since)) / 1000));
    if (s < 60) return s + 's';
    const m = Math.floor(s / 60); s %= 60;
    if (m < 60) return m + 'm' + String(s).padStart(2, '0') + 's';
    return Math.floor(m / 60) + 'h' + String(m % 60).padStart(2, '0') + 'm';
  }

  function clock(t) {
    const d = new Date(t);
    return isNaN(d) ? '' : d.toLocaleTimeString([], { hour12: false });
  }

  function setConn(text, cls) {
    const c = $('conn');
    c.textContent = text;
    c.className = 'conn ' + (cls || '');
  }

  // connect opens the event stream; a fresh one starts with a snapshot.
  function connect() {
    if (source) source.close();
    source = new EventSource('/events');
    source.addEventListener('snapshot', (m) => onSnapshot(JSON.parse(m.data)));
    source.addEventListener('event', (m) => onEvent(JSON.parse(m.data)));
    source.onopen = () => setConn('live', 'live');
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        setConn('disconnected: the login may have ended; run fleetstate web for a new one', 'down');
      } else {
        setConn('reconnecting…', 'down');
      }
    };
  }

  function ticketKey(t) { return t.ticket || t.turn_id; }

  function onSnapshot(snap) {
    members.clear();
    for (const m of snap.members || []) members.set(m.name, m);
    tickets.clear();
    for (const t of snap.tickets || []) tickets.set(ticketKey(t), t);
    perms.clear();
    for (const p of snap.permissions || []) if (!p.decision) perms.set(p.id, p);
    // The events just before the snapshot, so that the list is not empty
    // until the next one; a daemon that started afresh counts anew.
    const newest = events.length ? events[0].seq : 0;
    if (snap.seq < newest) events = [];
    const have = new Set(events.map((e) => e.seq));
    for (const e of snap.recent || []) if (!have.has(e.seq) && e.kind !== 'usage') events.push(e);
    events.sort((a, b) => b.seq - a.seq);
    if (events.length > MAX_EVENTS) events.length = MAX_EVENTS;
    setConn('live', 'live');
    for (const name of work.keys()) readWork(name);
    pending = [];
    fetch('/dashboard/transcripts?after=' + snap.seq, { credentials: 'same-origin', cache: 'no-store' })
      .then((r) => { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then((v) => {
        turns.clear();
        for (const t of v.turns || []) turns.set(t.turn_id, t);
        trSeq = v.seq;
        const later = pending || [];
        pending = null;
        for (const e of later) if (e.seq > trSeq) foldTranscript(e);
        render();
      })
      .catch(() => { pending = null; render(); });
    render();
  }

  function onEvent(e) {
    // A member's usage grows at every tool call: its row tells it, the
    // event list does not.
    if (e.kind !== 'usage') events.unshift(e);
    if (events.length > MAX_EVENTS) events.length = MAX_EVENTS;
    if (e.gap > 0) {
      // The stream lost events: start again from a fresh snapshot.
      connect();
      return;
    }
    foldState(e);
    workEvent(e);
    if (pending) pending.push(e);
    else if (e.seq > trSeq) foldTranscript(e);
    render();
  }

  // foldState applies e to the members and tickets, as the rendezvous did.
  function foldState(e) {
    const m = members.get(e.member);
    const key = e.ticket || e.turn_id;
    const t = key ? tickets.get(key) : undefined;
    switch (e.kind) {
      case 'queued':
        if (m) m.queued++;
        tickets.set(key, { ticket: e.ticket, turn_id: e.turn_id, lead: e.lead, from: e.member, brief: e.content, created: e.time, state: 'queued', outcome: 'pending' });
        break;
      case 'delivered':
        if (m) { m.queued = Math.max(0, m.queued - 1); m.open_turn = e.turn_id; m.open_since = e.time; }
        if (t) t.state = 'working';
        break;
      case 'status':
        if (m) m.status = e.status;
        break;
      case 'usage':
        if (m && e.usage) { m.usage = e.usage; m.cost = e.cost; m.unpriced = e.unpriced; }
        break;
      case 'budget_set':
      case 'budget_warning':
      case 'budget_exhausted':
        if (m) m.budget = e.budget;
        break;
      case 'asked':
        if (t) { t.state = 'question'; t.outcome = 'question'; t.content = e.content; }
        break;
      case 'answered':
      case 'withdrawn':
        if (t) { t.state = 'working'; t.outcome = 'pending'; t.content = ''; }
        break;
      case 'outcome': {
        const o = e.outcome || {};
        if (o.outcome === 'pending' || o.outcome === 'question') break;
        if (t) {
          if (t.state === 'queued' && m) m.queued = Math.max(0, m.queued - 1);
          t.state = 'done'; t.outcome = o.outcome; t.reason = o.reason; t.content = o.content;
        }
        if (m && m.open_turn === e.turn_id) { m.open_turn = ''; m.open_since = ''; }
        break;
      }
      case 'acked':
        if (key) tickets.delete(key);
        break;
      case 'ready':
      case 'gone':
        if (m) m.ready = e.kind === 'ready';
        break;
      case 'member_added':
        if (!m) members.set(e.member, { name: e.member, ready: false, status: '', queued: 0 });
        break;
      case 'member_removed':
        members.delete(e.member);
        break;
      case 'permission_requested':
        if (e.permission) perms.set(e.permission.id, e.permission);
        break;
      case 'permission_decided':
      case 'permission_expired':
        if (e.permission) perms.delete(e.permission.id);
        break;
    }
  }

  // foldTranscript adds e to its turn's transcript, as the daemon does.
  function foldTranscript(e) {
    if (!e.turn_id) return;
    const entry = { time: e.time, content: e.content };
    switch (e.kind) {
      case 'queued': entry.kind = 'brief'; break;
      case 'asked': entry.kind = 'question'; break;
      case 'answered': entry.kind = 'answer'; break;
      case 'withdrawn': entry.kind = 'withdrawn'; break;
      case 'cancelled': entry.kind = 'cancelled'; break;
      case 'outcome': {
        const o = e.outcome || {};
        if (!o.outcome || o.outcome === 'question' || o.outcome === 'pending') return;
        entry.kind = 'outcome'; entry.outcome = o.outcome; entry.reason = o.reason; entry.content = o.content;
        break;
      }
      default: return;
    }
    if (entry.content && entry.content.length > MAX_CONTENT) {
      entry.content = entry.content.slice(0, MAX_CONTENT); entry.clipped = true;
    }
    let tr = turns.get(e.turn_id);
    if (!tr) {
      if (turns.size >= MAX_TURNS) turns.delete(turns.keys().next().value);
      tr = { turn_id: e.turn_id, ticket: e.ticket, member: e.member, lead: e.lead, opened: e.time, entries: [] };
      turns.set(e.turn_id, tr);
    }
    if (tr.entries.length >= MAX_ENTRIES) tr.entries.splice(1, 1);
    tr.entries.push(entry);
  }

  function render() {
    renderMembers();
    renderTickets();
    renderRequests();
    renderSendForm();
    renderTurns();
    renderEvents();
  }

  function renderMembers() {
    const body = $('members').tBodies[0];
    const rows = [];
    for (const m of [...members.values()].sort((a, b) => a.name < b.name ? -1 : 1)) {
      rows.push(el('tr', { 'data-member': m.name },
        el('td', { 'data-label': 'member' }, m.name),
        el('td', { 'data-label': 'status', class: 'status-' + (m.status || '') }, m.status || '?'),
        el('td', { 'data-label': 'ready' }, m.ready ? 'ready' : 'not ready'),
        el('td', { 'data-label': 'queued' }, m.queued || 0),
        el('td', { 'data-label': 'used', title: usageTitle(m.usage) }, usageText(m.usage) + costText(m) + budgetShare(m.budget)),
        el('td', { 'data-label': 'open turn', class: 'mono' }, m.open_turn || ''),
        el('td', { 'data-label': 'age', class: 'age', 'data-since': m.open_turn ? m.open_since : '' }, m.open_turn ? age(m.open_since) : '')));
    }
    if (!rows.length) rows.push(el('tr', { class: 'empty' }, el('td', { colspan: 7 }, 'no members')));
    body.replaceChildren(...rows);
  }

  // usageText tells a member's tokens in a few characters, usageTitle
  // whole.
  function usageText(u) {
    if (!u || !(u.input_tokens || u.output_tokens)) return '-';
    return tokens(u.input_tokens) + ' in ' + tokens(u.output_tokens) + ' out';
  }
  function usageTitle(u) {
    if (!u) return '';
    const n = (x) => (x || 0).toLocaleString('en-US');
    return n(u.input_tokens) + ' input, ' + n(u.output_tokens) + ' output, ' +
      n(u.cache_read_tokens) + ' cache read, ' + n(u.cache_write_tokens) + ' cache written tokens';
  }
  // costText tells a member's cost at the fleet's prices, if it has
  // prices; "+?" where a model it used has none.
  function costText(m) {
    if (m.cost === undefined || m.cost === null) return '';
    return ' ' + money(m.cost) + (m.unpriced ? '+?' : '');
  }
  function money(c) {
    return c !== 0 && c < 1 ? String(Number(c.toFixed(4))) : c.toFixed(2);
  }
  // budgetShare says how much of a member's budget is spent, if it has one.
  function budgetShare(b) {
    const limit = b && (b.tokens || b.cost);
    if (!limit) return '';
    return b.held ? ' (budget spent)' : ' (' + Math.floor(b.spent * 100 / limit) + '% of budget)';
  }
  function budgetText(e) {
    const who = e.member ? 'budget' : "the fleet's budget";
    const b = e.budget;
    if (!b) return who + ' removed';
    const limit = b.cost ? 'cost ' + money(b.cost) : b.tokens + ' tokens';
    const spent = b.cost ? money(b.spent) : b.spent;
    const unpriced = (b.unpriced || []).length ? ', no price for ' + text.clip(b.unpriced.join(', '), 80) : '';
    return who + ' of ' + limit + (b.per === 'day' ? ' per day' : '') + ': ' + spent + ' spent' + unpriced + (b.held ? ', no new turns' : '');
  }
  function tokens(n) {
    n = n || 0;
    if (n < 1000) return String(n);
    if (n < 1e6) return (n / 1e3).toFixed(1) + 'k';
    return (n / 1e6).toFixed(1) + 'M';
  }

  // mayAct reports whether this login may act on ticket t.
  function mayAct(t) { return !myLead || t.lead === myLead; }

  function outcomeText(t) {
    if (t.state === 'question') return 'question: ' + clip(t.content, 200);
    let s = (t.outcome || '') + (t.reason ? ' (' + t.reason + ')' : '');
    if (t.state === 'done' && t.content) s += ': ' + clip(t.content, 200);
    return s;
  }

  // The rows of the tickets are kept, not rebuilt, so that an answer
  // being typed keeps its text and its focus while events come in.
  const ticketLabels = ['ticket', 'member', 'lead', 'brief', 'state', 'outcome', 'act'];

  function renderTickets() {
    const body = $('tickets').tBodies[0];
    const want = [];
    for (const t of tickets.values()) {
      const key = ticketKey(t);
      let r = ticketRows.get(key);
      if (!r) {
        const tds = ticketLabels.map((l) => el('td', { 'data-label': l }));
        r = { tr: el('tr', { 'data-ticket': key }, ...tds), tds, actKey: null };
        tds[0].className = 'mono';
        tds[6].className = 'actions';
        ticketRows.set(key, r);
      }
      const texts = [t.ticket || '', t.from || '', t.lead || '', clip(t.brief, 120), t.state || '', outcomeText(t)];
      texts.forEach((x, i) => { if (r.tds[i].textContent !== x) r.tds[i].textContent = x; });
      r.tds[4].className = 'state-' + (t.state || '');
      r.tds[5].className = 'outcome-' + (t.outcome || '');
      const open = t.state === 'queued' || t.state === 'working' || t.state === 'question';
      const acts = [];
      if (mayAct(t) && t.state === 'question') acts.push('answer:' + t.turn_id);
      if (mayAct(t) && open) acts.push('cancel');
      if (t.state === 'done' && sender && t.lead === sender && t.ticket) acts.push('dismiss');
      const actKey = acts.join(' ');
      if (r.actKey !== actKey) {
        r.actKey = actKey;
        if (t.state !== 'question') drafts.delete(t.turn_id);
        r.tds[6].replaceChildren(...actions(t, actKey));
      }
      want.push(r.tr);
    }
    for (const [key, r] of ticketRows) if (!tickets.has(key)) { ticketRows.delete(key); r.tr.remove(); }
    for (const turn of drafts.keys()) if (![...tickets.values()].some((t) => t.turn_id === turn)) drafts.delete(turn);
    if (!want.length) want.push(emptyRow(body, 7, 'no tickets'));
    reconcile(body, want);
  }

  // actions returns the controls of ticket t: an answer box for its
  // question, a Cancel button while it is unfinished, a Dismiss button
  // (an ack) once a ticket this login sent has finished.
  function actions(t, actKey) {
    const out = [];
    const has = (a) => actKey.split(' ').some((k) => k === a || k.startsWith(a + ':'));
    if (has('answer')) {
      const turn = t.turn_id;
      const box = el('input', { type: 'text', 'aria-label': 'Answer', class: 'answer', autocomplete: 'off' });
      box.value = drafts.get(turn) || '';
      box.addEventListener('input', () => drafts.set(turn, box.value));
      const b = el('button', { type: 'button', class: 'answer' }, 'Answer');
      const send = async () => {
        if (!box.value) { status('type an answer first', 'bad'); box.focus(); return; }
        if (await act('answer', { turn_id: turn, answer: box.value }, b, 'answered ' + turn)) {
          drafts.delete(turn);
          box.value = '';
        }
      };
      b.addEventListener('click', send);
      box.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); send(); } });
      out.push(el('span', { class: 'answer-box' }, box, b));
    }
    if (has('cancel')) {
      const key = ticketKey(t);
      const b = el('button', { type: 'button', class: 'cancel' }, 'Cancel');
      b.addEventListener('click', () => act('cancel', { ticket: key }, b, 'cancelled ' + key));
      out.push(b);
    }
    if (has('dismiss')) {
      const b = el('button', { type: 'button', class: 'dismiss' }, 'Dismiss');
      b.addEventListener('click', () => act('ack', { ticket: t.ticket }, b, 'dismissed ' + t.ticket));
      out.push(b);
    }
    return out;
  }

  const emptyRows = new Map();
  function emptyRow(body, cols, text) {
    let tr = emptyRows.get(body);
    if (!tr) { tr = el('tr', { class: 'empty' }, el('td', { colspan: cols }, text)); emptyRows.set(body, tr); }
    return tr;
  }

  // reconcile makes body's rows want, in order, moving only what moved.
  function reconcile(body, want) {
    const keep = new Set(want);
    for (const tr of [...body.rows]) if (!keep.has(tr)) tr.remove();
    want.forEach((tr, i) => { if (body.rows[i] !== tr) body.insertBefore(tr, body.rows[i] || null); });
  }

  // renderRequests shows the pending permission requests, in a section
  // that is hidden while there are none, each with Allow, and Deny with
  // an optional message (for the operator's login: the daemon refuses
  // the others). What the agent wrote (tool, input, cwd) is shown
  // escaped, the input clipped with a mark and whole beneath it. A row
  // being typed in is kept, not rebuilt.
  const reqRows = new Map(); // request ID -> its row
  function renderRequests() {
    const section = $('requests-section');
    if (!section) return;
    section.hidden = perms.size === 0;
    for (const id of [...reqRows.keys()]) if (!perms.has(id)) reqRows.delete(id);
    const rows = [];
    for (const p of perms.values()) {
      let tr = reqRows.get(p.id);
      if (!tr) {
        tr = el('tr', { 'data-request': p.id },
          el('td', { 'data-label': 'member' }, text.escape(p.member)),
          el('td', { 'data-label': 'tool', class: 'mono' }, text.clip(p.tool, 60)),
          el('td', { 'data-label': 'input', class: 'mono' }, ...inputCell(p)),
          el('td', { 'data-label': 'cwd', class: 'mono' }, text.clip(p.cwd, 120)),
          el('td', { 'data-label': 'age', class: 'age', 'data-since': p.asked || '' }, age(p.asked)),
          el('td', { 'data-label': 'act', class: 'actions' }, ...decideControls(p)));
        reqRows.set(p.id, tr);
      }
      rows.push(tr);
    }
    $('requests').tBodies[0].replaceChildren(...rows);
  }

  // inputCell is a request's input as its row shows it: the main input
  // escaped and clipped, with a mark of how much is left out, and a
  // disclosure that shows it whole, and the whole JSON input, escaped.
  function inputCell(p) {
    const main = mainInput(p);
    const c = text.cut(main, MAX_INPUT);
    const out = [el('span', { class: 'input-head' }, c.head + (c.rest ? text.mark(c.rest) : ''))];
    const all = [el('pre', { class: 'input-whole', 'aria-label': 'Whole input' }, text.escape(main))];
    if (main !== (p.input || '')) all.push(el('pre', { class: 'input-json', 'aria-label': 'Whole input as JSON' }, text.escape(p.input)));
    if (p.input_bytes > 0) all.push(el('p', { class: 'bad' }, 'the daemon sent ' + (p.input || '').length + ' of the input\'s ' + p.input_bytes + ' bytes: fleetstate requests ' + p.id + ' shows it whole'));
    const label = c.rest ? 'show all ' + [...text.escape(main)].length + ' characters' : 'show whole input';
    out.push(el('details', { class: 'input-all' }, el('summary', {}, label), ...all));
    return out;
  }

  // mainInput is what a person reads first of a request: the command,
  // the file or the URL where its input names one.
  function mainInput(p) {
    try {
      const inp = JSON.parse(p.input || '');
      for (const k of ['command', 'file_path', 'notebook_path', 'url']) if (typeof inp[k] === 'string') return inp[k];
    } catch (e) { /* not JSON: as it is */ }
    return p.input || '';
  }

  function decideControls(p) {
    const allow = el('button', { type: 'button', class: 'allow' }, 'Allow');
    allow.addEventListener('click', () => act('decide', { id: p.id, behavior: 'allow' }, allow, 'allowed ' + p.id));
    const msg = el('input', { type: 'text', 'aria-label': 'Deny message', class: 'deny-message', autocomplete: 'off', placeholder: 'why (optional)' });
    const deny = el('button', { type: 'button', class: 'deny' }, 'Deny');
    deny.addEventListener('click', () => act('decide', { id: p.id, behavior: 'deny', message: msg.value }, deny, 'denied ' + p.id));
    return [allow, el('span', { class: 'answer-box' }, msg, deny)];
  }

  // renderSendForm keeps the Member list to the members, keeping the
  // choice made.
  function renderSendForm() {
    const sel = $('send-member');
    if (!sel) return;
    const names = [...members.keys()].sort();
    if ([...sel.options].map((o) => o.value).join('\n') === names.join('\n')) return;
    const chosen = sel.value;
    sel.replaceChildren(...names.map((n) => el('option', { value: n }, n)));
    if (names.includes(chosen)) sel.value = chosen;
  }

  function status(text, cls) {
    const s = $('act-status');
    s.textContent = text;
    s.className = 'act-status ' + (cls || '');
  }

  // post POSTs an action and returns the daemon's answer; it throws an
  // Error with the daemon's message if the action failed.
  async function post(path, body) {
    const r = await fetch('/dashboard/' + path, {
      method: 'POST', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/json', 'X-Fleetstate-CSRF': csrf },
      body: JSON.stringify(body),
    });
    return answer(r);
  }

  // answer returns the JSON of r, or throws an Error with its message if
  // r is a failure.
  async function answer(r) {
    const text = await r.text();
    if (!r.ok) {
      let msg = text.trim();
      try { msg = JSON.parse(text).message || msg; } catch (e) { /* plain text */ }
      throw new Error(msg);
    }
    return JSON.parse(text);
  }

  // act POSTs an action and says how it went; it reports success.
  async function act(path, body, button, done) {
    button.disabled = true;
    try {
      await post(path, body);
      status(done, 'good');
      return true;
    } catch (e) {
      status(path + ' failed: ' + e.message, 'bad');
      return false;
    } finally {
      button.disabled = false;
    }
  }

  // Log out ends this login on the daemon; the page then asks for a new
  // login URL.
  const logout = $('logout');
  if (logout) {
    logout.addEventListener('click', async () => {
      if (await act('logout', {}, logout, 'logged out')) {
        if (source) source.close();
        window.location.assign('/dashboard/');
      }
    });
  }

  const form = $('send');
  if (form) {
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const to = $('send-member').value, brief = $('send-brief').value;
      if (!to || !brief) { status('choose a member and write a brief', 'bad'); return; }
      const b = $('send-button');
      if (await act('send', { to: to, brief: brief }, b, 'sent to ' + to)) $('send-brief').value = '';
    });
  }

  // The operator sets, raises or removes a budget: work a spent budget
  // held goes on at once when the new one has room.
  const budgetForm = $('budget');
  if (budgetForm) {
    const who = () => $('budget-member').value;
    const named = () => who() || "the fleet's";
    budgetForm.addEventListener('submit', async (e) => {
      e.preventDefault();
      const limit = Number($('budget-limit').value);
      if (!(limit > 0)) { status('give the budget a positive limit', 'bad'); return; }
      const b = { per: $('budget-daily').checked ? 'day' : undefined };
      b[$('budget-unit').value] = limit;
      await act('budget', { member: who(), budget: b }, $('budget-button'), 'budget of ' + named() + ' set');
    });
    $('budget-remove').addEventListener('click', async () => {
      await act('budget', { member: who(), budget: null }, $('budget-remove'), 'budget of ' + named() + ' removed');
    });
  }

  // The members' work trees. Each has an entry, made once and kept, so
  // that a reading coming in leaves its buttons and their focus alone:
  // what the daemon said of it (changes), whether its diff is shown, the
  // last merge asked from this page. A reading is asked when the page
  // gets a snapshot, when a merge of the member ends or its turn does
  // (its branch may have moved), when any member's merge is done (the
  // lead's branch moved), and on demand; one at a time for each member,
  // the requests meanwhile folded into one more. Everything from the
  // repository (branches, paths, the diff, the check's output) is text
  // from agents, and is shown escaped.
  const MAX_WORK_FILES = 200, MAX_UNCOMMITTED = 20;

  function workEntry(box) {
    const name = box.getAttribute('data-work');
    const w = { name, box, changes: null, err: '', reading: false, again: false, diffShown: false, diffRead: false };
    w.info = el('div', { class: 'work-info' }, el('p', { class: 'empty' }, 'reading…'));
    const refresh = el('button', { type: 'button', class: 'refresh' }, 'Refresh');
    refresh.addEventListener('click', () => readWork(name));
    const diff = el('button', { type: 'button', class: 'diff', 'aria-expanded': 'false' }, 'Show diff');
    diff.addEventListener('click', () => {
      w.diffShown = !w.diffShown;
      diff.textContent = w.diffShown ? 'Hide diff' : 'Show diff';
      diff.setAttribute('aria-expanded', String(w.diffShown));
      if (w.diffShown) readWork(name);
      else { w.diffRead = false; if (w.changes) delete w.changes.diff; renderDiff(w); }
    });
    // Merge asks first: the merge moves the lead's branch.
    const merge = el('button', { type: 'button', class: 'merge' }, 'Merge');
    const question = el('span', { class: 'question' });
    const confirm = el('button', { type: 'button', class: 'merge' }, 'Confirm merge');
    const keep = el('button', { type: 'button' }, 'Not now');
    const ask = el('span', { class: 'confirm' }, question, confirm, keep);
    ask.hidden = true;
    // The merge is of the commit the question named: refused if the
    // member committed since.
    let seen = '';
    const asking = (on) => { ask.hidden = !on; merge.hidden = on; (on ? confirm : merge).focus(); };
    merge.addEventListener('click', () => {
      seen = w.changes ? w.changes.commit : '';
      question.textContent = mergeQuestion(w);
      asking(true);
    });
    keep.addEventListener('click', () => asking(false));
    confirm.addEventListener('click', () => { asking(false); mergeWork(w, seen, merge); });
    w.result = el('div', { class: 'work-result', role: 'status' });
    w.diff = el('div', { class: 'work-diff' });
    box.replaceChildren(el('h3', {}, name), w.info, el('div', { class: 'actions' }, refresh, diff, merge, ask), w.result, w.diff);
    return w;
  }

  for (const box of document.querySelectorAll('#work [data-work]')) {
    const w = workEntry(box);
    work.set(w.name, w);
  }

  // workEvent asks for the readings that e calls for.
  function workEvent(e) {
    if (e.kind === 'merged') {
      for (const name of work.keys()) readWork(name);
    } else if ((e.kind === 'merge_refused' || e.kind === 'outcome') && work.has(e.member)) {
      readWork(e.member);
    }
  }

  // readWork reads what member's work tree holds, with its diff if shown.
  async function readWork(name) {
    const w = work.get(name);
    if (!w) return;
    if (w.reading) { w.again = true; return; }
    w.reading = true;
    const diff = w.diffShown;
    try {
      const r = await fetch('/dashboard/changes?member=' + encodeURIComponent(name) + (diff ? '&diff=1' : ''),
        { credentials: 'same-origin', cache: 'no-store' });
      w.changes = await answer(r);
      w.diffRead = diff;
      w.err = '';
    } catch (e) {
      w.err = e.message; // the last reading stays shown, marked
    } finally {
      w.reading = false;
    }
    renderWork(w);
    if (w.again) { w.again = false; readWork(name); }
  }

  function renderWork(w) {
    const c = w.changes, out = [];
    if (c) {
      out.push(el('p', { class: 'work-branch' }, 'branch ', el('code', {}, text.escape(c.branch)), ' → ',
        el('code', {}, text.escape(c.into)), ': ' + c.ahead + ' ahead, ' + c.behind + ' behind, at ',
        el('code', {}, text.cut(c.commit, 12).head)),
        el('p', { class: 'work-path' }, 'work tree ', el('code', {}, text.escape(c.worktree))));
      const u = c.uncommitted || [];
      out.push(u.length ?
        el('p', { class: 'work-dirty' }, 'uncommitted: ' + some(u.map(text.escape), MAX_UNCOMMITTED)) :
        el('p', { class: 'work-clean' }, 'nothing uncommitted'));
      out.push(c.files && c.files.length ? filesTable(c.files) : el('p', { class: 'empty' }, 'no files changed'));
    }
    if (w.err) out.push(el('p', { class: 'bad' }, (c ? 'the last reading failed: ' : 'could not read the work tree: ') + w.err));
    if (!out.length) out.push(el('p', { class: 'empty' }, 'reading…'));
    w.info.replaceChildren(...out);
    renderDiff(w);
  }

  // some joins the first n of list, and says how many more there are.
  function some(list, n) {
    return list.slice(0, n).join(', ') + (list.length > n ? ' and ' + (list.length - n) + ' more' : '');
  }

  function filesTable(files) {
    const rows = files.slice(0, MAX_WORK_FILES).map((f) => el('tr', {},
      el('td', { 'data-label': 'file', class: 'mono' }, text.escape(f.path)),
      el('td', { 'data-label': 'added', class: 'added' }, f.binary ? 'binary' : '+' + f.added),
      el('td', { 'data-label': 'deleted', class: 'deleted' }, f.binary ? '' : '-' + f.deleted)));
    if (files.length > MAX_WORK_FILES) rows.push(el('tr', { class: 'empty' }, el('td', { colspan: 3 }, 'and ' + (files.length - MAX_WORK_FILES) + ' more files')));
    return el('table', { class: 'work-files' },
      el('thead', {}, el('tr', {}, el('th', {}, 'file'), el('th', {}, 'added'), el('th', {}, 'deleted'))),
      el('tbody', {}, ...rows));
  }

  // renderDiff shows the diff, once read, each line escaped and marked
  // as added or deleted; a clipped one says the size of the whole.
  function renderDiff(w) {
    const c = w.changes;
    if (!w.diffShown) { w.diff.replaceChildren(); return; }
    if (!w.diffRead || !c) { w.diff.replaceChildren(el('p', { class: 'empty' }, 'reading the diff…')); return; }
    if (!c.diff) { w.diff.replaceChildren(el('p', { class: 'empty' }, 'no diff')); return; }
    const lines = text.escapeText(c.diff).split('\n').map((l) => {
      const cls = l.startsWith('+') && !l.startsWith('+++') ? 'diff-add' : l.startsWith('-') && !l.startsWith('---') ? 'diff-del' : '';
      return el('span', { class: cls }, l + '\n');
    });
    const said = c.diff_clipped ?
      'the first ' + size(new TextEncoder().encode(c.diff).length) + ' of the diff\'s ' + size(c.diff_bytes) +
        ': git diff ' + text.escape(c.into) + '...' + text.escape(c.branch) + ' in the lead\'s checkout shows it whole' :
      'the diff, ' + size(c.diff_bytes);
    w.diff.replaceChildren(el('p', { class: c.diff_clipped ? 'work-clipped' : 'empty' }, said),
      el('pre', { class: 'diff', 'aria-label': 'Diff of ' + w.name }, ...lines));
  }

  function size(n) {
    if (n < 1024) return n + ' bytes';
    if (n < 1 << 20) return (n / 1024).toFixed(1) + ' KiB';
    return (n / (1 << 20)).toFixed(1) + ' MiB';
  }

  // mergeQuestion asks the person to confirm what the merge does.
  function mergeQuestion(w) {
    const c = w.changes;
    if (!c) return 'Merge ' + w.name + '\'s branch into the lead\'s checkout?';
    return 'Merge ' + text.escape(c.branch) + ' at ' + text.cut(c.commit, 12).head + ' (' + c.ahead + ' commits, ' +
      (c.files || []).length + ' files) into ' + text.escape(c.into) + ' in the lead\'s checkout?';
  }

  // mergeWork asks the daemon to merge commit of w's branch, and shows
  // how it ended: merged and the lead's commit now, or refused and why,
  // with the files in conflict or the end of the check's output.
  async function mergeWork(w, commit, button) {
    button.disabled = true;
    w.result.className = 'work-result';
    w.result.replaceChildren(el('p', {}, 'merging… (the fleet file\'s check, or a person\'s approval, may take a while)'));
    let m;
    try {
      m = await post('merge', { member: w.name, commit: commit });
    } catch (e) {
      w.result.className = 'work-result bad';
      w.result.replaceChildren(el('p', {}, 'the merge failed: ' + e.message));
      status('merge of ' + w.name + ' failed: ' + e.message, 'bad');
      return;
    } finally {
      button.disabled = false;
    }
    const out = [];
    if (m.merged && m.up_to_date) {
      out.push(el('p', {}, 'merged: ' + text.escape(m.into) + ' holds ' + text.escape(m.branch) + ' already'));
      status('merged ' + w.name, 'good');
    } else if (m.merged) {
      out.push(el('p', {}, 'merged ' + text.escape(m.branch) + ' into ' + text.escape(m.into) + ', now at ',
        el('code', { class: 'commit' }, text.escape(m.commit))));
      status('merged ' + w.name, 'good');
    } else {
      const why = m.reason === 'check_failed' || m.reason === 'conflict' ? '' : ': ' + text.clip(m.message, 300);
      out.push(el('p', {}, 'refused, nothing changed: ' + text.escape(m.reason) + why));
      if (m.files && m.files.length) out.push(el('p', {}, 'in conflict: ' + some(m.files.map(text.escape), MAX_WORK_FILES)));
      if (m.reason === 'check_failed') {
        out.push(el('p', {}, 'the check\'s output ends:'), el('pre', { class: 'check-output' }, text.escapeText(m.check_output)));
      }
      status('merge of ' + w.name + ' refused: ' + text.escape(m.reason), 'bad');
    }
    w.result.className = 'work-result ' + (m.merged ? 'good' : 'bad');
    w.result.replaceChildren(...out);
    readWork(w.name);
  }

  const who = { brief: 'brief', question: 'question', answer: 'answer', withdrawn: 'no answer', cancelled: 'cancelled', outcome: 'outcome' };

  function renderTurns() {
    const box = $('turns');
    const items = [];
    for (const tr of [...turns.values()].reverse()) {
      const last = tr.entries[tr.entries.length - 1];
      const brief = tr.entries.length && tr.entries[0].kind === 'brief' ? tr.entries[0].content : '';
      const where = !last ? '' : last.kind === 'outcome' ? last.outcome : last.kind === 'question' ? 'question' : last.kind === 'cancelled' ? 'cancelled' : 'open';
      const d = el('details', { class: 'turn', 'data-turn': tr.turn_id },
        el('summary', {}, clock(tr.opened) + '  ' + (tr.lead || '?') + ' → ' + tr.member + ': ' + clip(brief, 100) + '  [' + where + ']'),
        el('ol', {}, ...tr.entries.map((e) => el('li', { class: 'entry-' + e.kind },
          el('span', { class: 'who' }, who[e.kind] || e.kind),
          (e.kind === 'outcome' ? e.outcome + (e.reason ? ' (' + e.reason + ')' : '') + (e.content ? ': ' : '') : '') +
          (e.content || '') + (e.clipped ? ' …' : '')))));
      if (openTurns.has(tr.turn_id)) d.open = true;
      d.addEventListener('toggle', () => { if (d.open) openTurns.add(tr.turn_id); else openTurns.delete(tr.turn_id); });
      items.push(d);
    }
    if (!items.length) items.push(el('p', { class: 'empty' }, 'no turns yet'));
    box.replaceChildren(...items);
  }

  // shortID is an ID as the terminal view shows it: its UUID's first
  // eight digits.
  function shortID(id) {
    id = id || '';
    if ((id.match(/-/g) || []).length >= 5) id = id.slice(id.indexOf('-') + 1);
    return id.slice(0, 8);
  }

  // permissionText says what a permission event is about, as the
  // terminal view does: what was asked, how it ended, by whom.
  function permissionText(e) {
    const p = e.permission;
    if (!p) return text.clip(e.content, 160);
    const asked = text.clip(p.tool, 40) + ' ' + text.quote(mainInput(p), 120);
    if (e.kind === 'permission_requested') return shortID(p.id) + ' asks ' + asked;
    const by = e.by || (p.decision && p.decision.by) || '';
    let end;
    if (e.kind === 'permission_expired') {
      end = 'ended undecided' + (by ? ' (' + text.clip(by, 40) + ')' : '') + (e.content ? ': ' + text.clip(e.content, 160) : '');
    } else {
      const b = p.decision && p.decision.behavior;
      end = (b === 'allow' ? 'allowed' : b === 'deny' ? 'denied' : 'decided') + (by ? ' by ' + text.clip(by, 40) : '') +
        (e.content ? ': ' + text.quote(e.content, 160) : '');
    }
    return shortID(p.id) + ' ' + asked + ': ' + end;
  }

  function renderEvents() {
    const list = $('events');
    const items = events.map((e) => {
      let what = text.clip(e.content || e.status || '', 160);
      if (e.outcome) what = e.outcome.outcome + (e.outcome.reason ? ' (' + e.outcome.reason + ')' : '') + (e.outcome.content ? ': ' + text.clip(e.outcome.content, 160) : '');
      if (e.kind.startsWith('permission_')) what = permissionText(e);
      if (e.kind.startsWith('merge')) what = 'by ' + text.clip(e.by || '', 40) + ': ' + what;
      if (e.kind.startsWith('budget_')) what = budgetText(e);
      return el('li', { 'data-seq': e.seq },
        clock(e.time) + '  ' + e.kind.padEnd(9) + ' ' + (e.member || '') + (e.turn_id ? ' ' + e.turn_id : '') +
        (what ? '  ' + what : '') + (e.gap ? '  (missed ' + e.gap + ')' : ''));
    });
    if (!items.length) items.push(el('li', { class: 'empty' }, 'none yet'));
    list.replaceChildren(...items);
  }

  // The ages of the open turns tick in the page; nothing is asked of the
  // daemon for it.
  setInterval(() => {
    for (const td of document.querySelectorAll('td.age')) {
      const since = td.getAttribute('data-since');
      if (since) td.textContent = age(since);
    }
  }, 1000);

  connect();
})();
