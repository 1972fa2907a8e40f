// The cairn dashboard: vanilla JavaScript over the server's API
// (docs/SERVER.md, "Web dashboard"). The session cookie authenticates each
// request; every request that changes something carries the session's CSRF
// token. What the page offers follows the token's role, but the server
// decides: a refused action shows the server's message.
'use strict';

const S = { session: null, stores: [], timers: {}, task: null, logLines: 0 };

// --- helpers ---------------------------------------------------------------
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
function bytes(n) {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(n < 10 ? 2 : 1)) + ' ' + units[i];
}
function when(t) {
  if (!t) return 'never';
  const d = typeof t === 'number' ? new Date(t * 1000) : new Date(t);
  return isNaN(d) ? String(t) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}
function can(what) {
  const role = S.session ? S.session.role : '';
  if (what === 'verify') return role === 'verify' || role === 'admin';
  if (what === 'notes') return role === 'admin' || role === 'backup';
  if (what === 'status') return role !== 'backup';
  return role === 'admin';  // protect, gc, prune
}
function notice(text, kind) {
  const n = document.getElementById('notice');
  n.textContent = text;
  n.className = 'notice ' + (kind || 'error');
  n.hidden = !text;
  if (text) n.scrollIntoView({ block: 'nearest' });
}
async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (method !== 'GET') opts.headers['X-CSRF-Token'] = S.session.csrf;
  if (body !== undefined) {
    opts.body = typeof body === 'string' ? body : JSON.stringify(body);
    opts.headers['Content-Type'] = typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json';
  }
  const res = await fetch(path, opts);
  if (res.status === 401) { location.href = '/ui/login'; throw new Error('logged out'); }
  const type = res.headers.get('Content-Type') || '';
  const data = type.startsWith('application/json') ? await res.json() : await res.text();
  if (res.status >= 400) {
    const err = new Error((data && data.error) || (res.status + ' ' + res.statusText));
    err.status = res.status;
    throw err;
  }
  return { status: res.status, data, headers: res.headers };
}
const storePath = (store, rest) => '/api/v1/stores/' + encodeURIComponent(store) + rest;
function query(params) {
  return '?' + Object.entries(params).map(([k, v]) => k + '=' + encodeURIComponent(v)).join('&');
}
// An SVG element (the throughput chart): attributes only, no inline style.
function svg(tag, attrs, ...children) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children.flat()) e.append(c);
  return e;
}
async function act(fn, done) {
  try { await fn(); notice(''); if (done) done(); } catch (e) { notice(e.message); }
}

// --- tabs ------------------------------------------------------------------
function showTab(name) {
  if (!['stores', 'snapshots', 'tasks'].includes(name)) name = 'stores';
  for (const a of document.querySelectorAll('#tabs a')) a.classList.toggle('active', a.dataset.tab === name);
  for (const s of document.querySelectorAll('.tab')) s.hidden = s.id !== 'tab-' + name;
  clearInterval(S.timers.tasks);
  if (name === 'stores') loadStores();
  if (name === 'snapshots') loadSnapshots();
  if (name === 'tasks') { loadTasks(); S.timers.tasks = setInterval(loadTasks, 2000); }
}

// --- datastores ------------------------------------------------------------
async function startTask(store, kind, params) {
  const r = await api('POST', storePath(store, '/' + kind), params || {});
  location.hash = '#tasks';
  openTask(r.data.task);
}
function stat(label, value, cls) {
  return el('div', { class: 'stat ' + (cls || '') }, el('span', { class: 'label' }, label), el('span', { class: 'value' }, value));
}
async function loadStores() {
  const box = document.getElementById('store-cards');
  const cards = [];
  for (const name of S.stores) {
    const body = el('div', { class: 'stats' }, can('status') ? 'reading status…' : 'status: not for backup tokens');
    const actions = el('div', { class: 'actions' },
      can('verify') && el('button', { type: 'button', class: 'verify-store', onclick: () => act(() => startTask(name, 'verify')) }, 'Start verify'),
      can('gc') && el('button', { type: 'button', class: 'gc-store', onclick: () => act(() => startTask(name, 'gc')) }, 'Start gc'),
      el('button', { type: 'button', class: 'quiet', onclick: () => { document.getElementById('snap-store').value = name; location.hash = '#snapshots'; } }, 'Snapshots'));
    cards.push(el('article', { class: 'card store', 'data-store': name }, el('h2', {}, name), body, actions));
    if (can('status')) {
      api('GET', storePath(name, '/status')).then(({ data: s }) => {
        const free = s.fs_total_bytes ? s.fs_free_bytes / s.fs_total_bytes : 0;
        const used = 1 - free;
        body.replaceChildren(
          el('div', { class: 'usage' }, el('div', { class: 'bar' }, el('span', { style: null, 'data-w': used })),
            el('small', {}, bytes(s.fs_total_bytes - s.fs_free_bytes) + ' used of ' + bytes(s.fs_total_bytes) + ' (' + bytes(s.fs_free_bytes) + ' free)')),
          stat('snapshots', s.snapshots + ' in ' + s.groups + ' groups'),
          stat('data', bytes(s.logical_bytes)),
          stat('on disk', bytes(s.chunk_bytes)),
          stat('dedup', s.dedup_factor ? s.dedup_factor.toFixed(2) + '×' : '–'),
          stat('chunks', s.chunks.toLocaleString('en')),
          stat('last verify', when(s.last_verify), s.failed_verify ? 'bad' : ''),
          stat('verify state', !s.snapshots ? 'no snapshots' : s.failed_verify ? s.failed_verify + ' failed' : s.never_verified ? s.never_verified + ' never verified' : 'all verified', s.failed_verify ? 'bad' : s.never_verified ? 'warn' : s.snapshots ? 'good' : ''),
          stat('bad chunks', s.bad_chunks, s.bad_chunks ? 'bad' : ''),
          stat('last gc', s.last_gc ? when(s.last_gc.time) + ', freed ' + bytes(s.last_gc.removed_bytes) : 'never'));
        // Widths set from script (the page's CSP allows no inline styles).
        for (const b of body.querySelectorAll('[data-w]')) b.style.width = (100 * b.dataset.w).toFixed(1) + '%';
        return api('GET', storePath(name, '/throughput')).then(({ data }) => body.append(throughputChart(data)));
      }).catch(e => body.replaceChildren(el('p', { class: 'error' }, e.message)));
    }
  }
  box.replaceChildren(...(cards.length ? cards : [el('p', {}, 'This token sees no datastore.')]));
}

// The last half hour of a datastore's traffic through the server, per
// 30 s: bytes in (backups, green) and out (restores, verifies, syncs,
// blue), side by side. Drawn as inline SVG by this script: no chart library
// to embed or update, and the page's CSP (no inline script or style) holds.
function throughputChart(data) {
  const per = Math.max(1, Math.round(30 / data.interval_s));  // server intervals per bar
  const iv = data.interval_s * per;
  const recent = data.points.slice(-Math.round(1800 / data.interval_s));
  const pts = [];
  for (let i = 0; i < recent.length; i += per) {
    const group = recent.slice(i, i + per);
    pts.push([group[0][0], group.reduce((n, p) => n + p[1], 0), group.reduce((n, p) => n + p[2], 0)]);
  }
  const w = 360, h = 64, bw = w / pts.length;
  const peak = Math.max(...pts.map(p => Math.max(p[1], p[2])), 1);
  const bars = [];
  let total_in = 0, total_out = 0;
  pts.forEach((p, i) => {
    total_in += p[1];
    total_out += p[2];
    for (const [k, v] of [[0, p[1]], [1, p[2]]]) {
      if (!v) continue;
      const bh = Math.max(1, h * v / peak);
      bars.push(svg('rect', { class: k ? 'out' : 'in', x: (i * bw + k * bw / 2).toFixed(2), y: (h - bh).toFixed(2),
        width: (bw / 2).toFixed(2), height: bh.toFixed(2) }, svg('title', {}, when(p[0]) + (k ? ' out ' : ' in ') + bytes(v / iv) + '/s')));
    }
  });
  return el('div', { class: 'throughput', 'data-in-bytes': total_in, 'data-out-bytes': total_out },
    el('span', { class: 'label' }, 'throughput, last 30 min'),
    svg('svg', { viewBox: '0 0 ' + w + ' ' + h, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'throughput' },
      svg('line', { x1: 0, y1: h - 0.5, x2: w, y2: h - 0.5, class: 'axis' }), bars),
    el('small', {}, el('span', { class: 'key in' }, '■'), ' in ' + bytes(total_in) + '  ',
      el('span', { class: 'key out' }, '■'), ' out ' + bytes(total_out) + (total_in + total_out ? ' · peak ' + bytes(peak / iv) + '/s' : '')));
}

// --- snapshots -------------------------------------------------------------
function verifyCell(v) {
  if (!v) return el('span', { class: 'badge warn' }, 'not verified');
  return el('span', { class: 'badge ' + (v.state === 'ok' ? 'good' : 'bad'), title: when(v.time) }, v.state + ' ' + when(v.time).slice(0, 10));
}
function notesEditor(store, snap, row, cols) {
  const area = el('textarea', { rows: 3, maxlength: 65536, class: 'notes-text' });
  area.value = snap.notes;
  const editor = el('tr', { class: 'notes-row' }, el('td', { colspan: cols },
    area,
    el('div', { class: 'actions' },
      el('button', { type: 'button', class: 'save-notes', onclick: () => act(() => api('PUT', storePath(store, '/notes' + query({ ns: snap.ns, snapshot: snap.snapshot })), area.value), loadSnapshots) }, 'Save notes'),
      el('button', { type: 'button', class: 'quiet', onclick: () => editor.remove() }, 'Cancel'))));
  row.after(editor);
  area.focus();
}
// A tree archive's browser, under the snapshot's row: directories open in
// place, files download through GET …/tree?download=1 (the session cookie
// goes with a same-origin link; the server checks the token as for any route).
function treeBrowser(store, snap, archive, row, cols) {
  const cell = el('td', { colspan: cols });
  const box = el('tr', { class: 'tree-row', 'data-archive': archive }, cell);
  const params = path => ({ ns: snap.ns, snapshot: snap.snapshot, archive, path });
  async function show(path) {
    let data;
    try { ({ data } = await api('GET', storePath(store, '/tree' + query(params(path))))); } catch (e) { cell.replaceChildren(el('p', { class: 'error' }, e.message)); return; }
    const up = path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '';
    const rows = data.entries.map(e => el('li', { 'data-path': e.path, class: e.kind },
      e.kind === 'dir' ? el('button', { type: 'button', class: 'link', onclick: () => show(e.path) }, e.name + '/')
        : e.kind === 'file' || e.kind === 'hardlink' ? el('a', { class: 'download', href: storePath(store, '/tree' + query({ ...params(e.path), download: 1 })), download: e.name }, e.name)
        : el('span', {}, e.name + ' (' + e.kind + ')'),
      e.kind === 'file' ? el('small', {}, ' ' + bytes(e.size)) : null));
    cell.replaceChildren(
      el('div', { class: 'panel-head' }, el('strong', { class: 'mono' }, archive + ':/' + path),
        el('span', { class: 'actions' }, path && el('button', { type: 'button', class: 'quiet up', onclick: () => show(up) }, 'Up'),
          el('button', { type: 'button', class: 'quiet', onclick: () => box.remove() }, 'Close'))),
      el('ul', { class: 'tree-list' }, rows.length ? rows : el('li', {}, 'empty')),
      ...(data.truncated ? [el('small', {}, 'only the first ' + rows.length + ' entries')] : []));
  }
  for (const old of row.parentNode.querySelectorAll('tr.tree-row')) old.remove();
  row.after(box);
  show('');
}
function snapshotRow(store, snap) {
  const cols = 7;
  const row = el('tr', { 'data-snapshot': snap.snapshot },
    el('td', { class: 'mono' }, snap.time),
    el('td', { class: 'num' }, bytes(snap.size)),
    el('td', { class: 'wide' }, snap.archives.map(a => a.name).join(' ')),
    el('td', {}, verifyCell(snap.verify)),
    el('td', { class: 'protected' }, snap.protected ? el('span', { class: 'badge good' }, 'protected') : '–'),
    el('td', { class: 'notes' }, snap.notes.split('\n')[0]),
    el('td', { class: 'actions' },
      can('protect') && el('button', { type: 'button', class: 'protect', onclick: () => act(() => api('PUT', storePath(store, '/protected' + query({ ns: snap.ns, snapshot: snap.snapshot })), { protected: !snap.protected }), loadSnapshots) }, snap.protected ? 'Unprotect' : 'Protect'),
      can('notes') && el('button', { type: 'button', class: 'edit-notes quiet', onclick: () => notesEditor(store, snap, row, cols) }, 'Notes'),
      can('verify') && el('button', { type: 'button', class: 'verify quiet', onclick: () => act(() => startTask(store, 'verify', { ns: snap.ns, snapshot: snap.snapshot })) }, 'Verify'),
      snap.archives.filter(a => a.name.endsWith('.tree')).map(a =>
        el('button', { type: 'button', class: 'browse quiet', 'data-archive': a.name, onclick: () => treeBrowser(store, snap, a.name, row, cols) }, 'Browse ' + a.name))));
  return row;
}
async function prunePreview(store, group, ns, out, keep) {
  const last = parseInt(keep.value, 10);
  if (!(last >= 1)) { notice('keep last: give the number of snapshots to keep (1 or more)'); return; }
  const r = await api('POST', storePath(store, '/prune'), { ns, group, dry_run: true, keep: { last } });
  const rows = [];
  for (const g of r.data.groups) {
    for (const s of g.snapshots) {
      rows.push(el('li', { class: s.action === 'keep' ? 'keep' : 'remove' }, s.snapshot + ': ' + s.action + (s.action === 'keep' && s.reason ? ' (' + s.reason + ')' : '')));
    }
  }
  out.replaceChildren(el('p', {}, 'Dry run: would keep ' + r.data.kept + ', remove ' + r.data.removed + '. Nothing was changed.'), el('ul', { class: 'prune-list' }, rows));
}
async function loadSnapshots() {
  const select = document.getElementById('snap-store');
  const box = document.getElementById('snap-groups');
  if (!select.options.length) {
    for (const s of S.stores) select.append(el('option', { value: s }, s));
  }
  const store = select.value;
  if (!store) { box.replaceChildren(el('p', {}, 'This token sees no datastore.')); return; }
  let data;
  try { ({ data } = await api('GET', storePath(store, '/snapshots?details=1'))); } catch (e) { box.replaceChildren(el('p', { class: 'error' }, e.message)); return; }
  const filter = document.getElementById('snap-filter').value.trim();
  const groups = new Map();
  for (const s of data.snapshots) {
    const key = (s.ns ? s.ns + ': ' : '') + s.type + '/' + s.id;
    if (filter && !key.includes(filter)) continue;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(s);
  }
  const out = [];
  for (const [key, snaps] of groups) {
    snaps.sort((a, b) => (a.time < b.time ? 1 : -1));
    const total = snaps.reduce((n, s) => n + s.size, 0);
    const group = snaps[0].type + '/' + snaps[0].id;
    const preview = el('div', { class: 'prune-preview' });
    const keep = el('input', { type: 'number', min: 1, value: 3, class: 'keep-last', 'aria-label': 'keep last' });
    out.push(el('details', { class: 'card group', open: true, 'data-group': key },
      el('summary', {}, el('strong', {}, key), el('span', { class: 'muted' }, ' · ' + snaps.length + ' snapshots · ' + bytes(total) + ' · newest ' + snaps[0].time)),
      el('div', { class: 'table-wrap' }, el('table', {},
        el('thead', {}, el('tr', {}, el('th', {}, 'Time'), el('th', { class: 'num' }, 'Size'), el('th', { class: 'wide' }, 'Archives'), el('th', {}, 'Verify'), el('th', {}, 'Protected'), el('th', {}, 'Notes'), el('th', {}, ''))),
        el('tbody', {}, snaps.map(s => snapshotRow(store, s))))),
      el('div', { class: 'actions' },
        can('verify') && el('button', { type: 'button', class: 'quiet', onclick: () => act(() => startTask(store, 'verify', { ns: snaps[0].ns, snapshot: group })) }, 'Verify group'),
        can('prune') && el('label', { class: 'inline' }, 'keep last ', keep),
        can('prune') && el('button', { type: 'button', class: 'quiet prune', onclick: () => act(() => prunePreview(store, group, snaps[0].ns, preview, keep)) }, 'Prune preview')),
      preview));
  }
  box.replaceChildren(...(out.length ? out : [el('p', {}, filter ? 'No group matches.' : 'No snapshots in this datastore.')]));
}

// --- tasks -----------------------------------------------------------------
function progressOf(t) {
  const p = t.progress || {};
  if (t.state !== 'running') return t.state === 'ok' ? 1 : null;
  return p.total_bytes ? p.done_bytes / p.total_bytes : 0;
}
function bar(fraction) {
  const inner = el('span');
  inner.style.width = (100 * (fraction || 0)).toFixed(1) + '%';
  return el('div', { class: 'bar' }, inner);
}
async function loadTasks() {
  let data;
  try { ({ data } = await api('GET', '/api/v1/tasks')); } catch (e) { notice(e.message); return; }
  const rows = data.tasks.map(t => el('tr', { 'data-task': t.id, class: 'clickable' + (S.task === t.id ? ' selected' : ''), onclick: () => openTask(t.id) },
    el('td', {}, t.kind + ' ', el('small', { class: 'mono muted' }, t.id.slice(0, 8))),
    el('td', {}, t.store),
    el('td', {}, el('span', { class: 'badge state ' + (t.state === 'ok' ? 'good' : t.state === 'running' ? 'run' : 'bad') }, t.state)),
    el('td', {}, bar(progressOf(t))),
    el('td', { class: 'wide' }, when(t.started)),
    el('td', { class: 'result' }, t.error || t.result || t.summary || '')));
  document.querySelector('#task-table tbody').replaceChildren(...(rows.length ? rows : [el('tr', {}, el('td', { colspan: 6 }, 'No tasks this token may see.'))]));
}
async function openTask(id) {
  if (S.task !== id) {
    S.task = id;
    S.logLines = 0;
    document.getElementById('task-log').textContent = '';
  }
  document.getElementById('task-detail').hidden = false;
  clearTimeout(S.timers.task);
  try {
    const { data: t } = await api('GET', '/api/v1/tasks/' + id);
    document.getElementById('task-title').textContent = t.kind + ' of ' + t.store + ' · ' + t.state;
    const p = t.progress || {};
    document.getElementById('task-progress').replaceChildren(bar(progressOf(t)),
      el('small', { id: 'task-bytes' }, (p.phase ? p.phase + ': ' : '') + bytes(p.done_bytes) + ' of ' + bytes(p.total_bytes) + (t.summary ? ' · ' + t.summary : '') + (t.result ? ' · ' + t.result : '')),
      // What limits it (the stage meter: while running, since its start).
      t.bottleneck ? el('div', { id: 'task-limit', class: 'muted' }, (t.state === 'running' ? 'limit so far: ' : 'bottleneck: ') + t.bottleneck.line) : null);
    const log = await api('GET', '/api/v1/tasks/' + id + '/log?since=' + S.logLines);
    const total = parseInt(log.headers.get('X-Cairn-Log-Lines') || '0', 10);
    if (log.data) document.getElementById('task-log').append(log.data);
    S.logLines = total;
    if (t.state === 'running' && S.task === id) S.timers.task = setTimeout(() => openTask(id), 500);
    else loadTasks();  // the list shows the end as well
  } catch (e) { notice(e.message); }
}

// --- start -----------------------------------------------------------------
async function main() {
  const res = await fetch('/ui/session', { credentials: 'same-origin' });
  if (res.status !== 200) { location.href = '/ui/login'; return; }
  S.session = await res.json();
  document.getElementById('who').textContent = S.session.token + ' (' + S.session.role + (S.session.store === '*' ? '' : ', ' + S.session.store) + ')';
  document.body.dataset.role = S.session.role;
  ({ data: { stores: S.stores } } = await api('GET', '/api/v1/stores'));
  document.getElementById('logout').addEventListener('click', async () => {
    await fetch('/ui/logout', { method: 'POST', headers: { 'X-CSRF-Token': S.session.csrf }, credentials: 'same-origin' });
    location.href = '/ui/login';
  });
  document.getElementById('snap-store').addEventListener('change', loadSnapshots);
  document.getElementById('snap-filter').addEventListener('input', loadSnapshots);
  document.getElementById('task-close').addEventListener('click', () => { S.task = null; clearTimeout(S.timers.task); document.getElementById('task-detail').hidden = true; });
  window.addEventListener('hashchange', () => showTab(location.hash.slice(1)));
  showTab(location.hash.slice(1));
}
main().catch(e => notice(e.message));
