// The demo page: the agent API lists and starts sessions, ngx-pty-client
// attaches to them.  Everything the page shows comes from the client's
// events; an IDE would draw the same things its own way.

import { mountTerminal, PtyApi, screenLines } from 'ngx-pty-client/browser';

const $ = (/** @type {string} */ sel) => document.querySelector(sel);
const params = new URLSearchParams(location.search);
const token = readToken();
const api = new PtyApi({ base: '/pty/', token });
const label = params.get('label') || 'browser';
const reconnectDelay = Number(params.get('reconnect_delay')) || undefined;

let view = null;          // the mounted terminal, or null
let current = null;       // the session it shows (an API list entry)
let sessions = [];

// The token comes once in the URL's fragment (#token=...), as make run
// prints it: a fragment is never sent to the server.  It is kept for this
// tab and taken out of the address bar.  One in the query is not used (it
// went into the server's access log with the page's request); it is only
// taken out, so that a reload does not send it again.
function readToken() {
    const t = new URLSearchParams(location.hash.slice(1)).get('token');
    if (t || params.has('token')) {
        if (t) {
            sessionStorage.setItem('pty-token', t);
        }
        params.delete('token');
        history.replaceState(null, '', location.pathname
            + (params.toString() ? '?' + params : ''));
    }
    return t || sessionStorage.getItem('pty-token') || undefined;
}

function notice(text, isError) {
    const n = $('#notice');
    n.textContent = text || '';
    n.className = isError ? 'error' : '';
}

function selectedRole() {
    return document.querySelector('input[name=role]:checked').value;
}

function setState(ev) {
    const b = $('#state');
    let text = ev.state;
    if (ev.state === 'reconnecting' && ev.delay !== undefined) {
        text += ' (try ' + ev.attempt + ', ' + (ev.delay / 1000).toFixed(1) + ' s)';
    }
    if (ev.state === 'closed' && view && view.client.closedInfo) {
        const c = view.client.closedInfo;
        text += ': ' + c.reason + (c.exitCode !== null ? ', exit ' + c.exitCode : '');
    }
    b.textContent = text;
    b.className = 'badge state-' + ev.state;
    b.dataset.state = ev.state;
    const usable = ev.state !== 'closed';
    for (const id of ['#repaint', '#copy', '#paste', '#switch-role']) {
        $(id).disabled = !usable;
    }
    $('#detach').disabled = !view;
}

function setRole(r) {
    const b = $('#role');
    b.hidden = false;
    b.textContent = r.role === 'observer' ? 'observer (read-only)' : 'controller';
    b.className = 'badge role-' + r.role;
    b.dataset.role = r.role;
    $('#switch-role').textContent = r.role === 'observer' ? 'Take control' : 'Observe only';
    $('#paste').disabled = r.role !== 'controller';
    if (r.downgraded) {
        notice('joined as observer: ' + (r.reason || 'no controller seat'), false);
    }
}

function showMembers(m) {
    const ul = $('#members');
    ul.textContent = '';
    const me = view && view.client.clientId;
    for (const [role, list] of [['controller', m.controllers], ['observer', m.observers]]) {
        for (const c of list) {
            const li = document.createElement('li');
            li.textContent = (c.label || c.client_id) + ' \u00b7 ' + role
                + (c.client_id === me ? ' (you)' : '');
            if (c.client_id === me) {
                li.className = 'you';
            }
            ul.appendChild(li);
        }
    }
    if (!ul.firstChild) {
        ul.innerHTML = '<li class="muted">nobody</li>';
    }
}

function detach() {
    if (view) {
        view.dispose();
        view = null;
    }
    current = null;
    $('#placeholder').hidden = false;
    $('#session-name').textContent = 'no session';
    $('#role').hidden = true;
    $('#size').textContent = '';
    setState({ state: 'idle' });
    showMembers({ controllers: [], observers: [] });
    params.delete('attach');
    params.delete('role');
    history.replaceState(null, '', location.pathname + (params.toString() ? '?' + params : ''));
    renderSessions();
}

function attach(s, role) {
    if (view) {
        view.dispose();
        view = null;
    }
    current = s;
    $('#placeholder').hidden = true;
    $('#session-name').textContent = s.id + ' \u00b7 ' + s.command;
    notice('');
    view = mountTerminal($('#terminal'), {
        attachPath: s.attach_path, role, label, token,
        terminalOptions: { theme: { background: '#15181d' } },
        clientOptions: reconnectDelay ? { reconnectDelay } : {},
    });
    const c = view.client;
    c.on('state', setState);
    c.on('role', setRole);
    c.on('membership', showMembers);
    c.on('resize', (r) => { $('#size').textContent = r.cols + '\u00d7' + r.rows; });
    c.on('error', (e) => {
        if (e.code === 'PERMISSION_DENIED' && c.role === 'observer') {
            notice('read-only: you are observing (Take control to type)', false);
        } else if (e.code === 'UNAUTHENTICATED') {
            notice('not authenticated: open the URL make run printed, with its #token=', true);
        } else {
            notice(e.code + ': ' + e.message, e.fatal || e.code !== 'REPLAY_OUT_OF_RANGE');
        }
    });
    c.on('resync', (r) => notice('repainted (' + r.reason + ')', false));
    c.on('closed', (info) => {
        if (info.reason !== 'left') {
            notice('session ended: ' + info.reason
                + (info.exitCode !== null ? ', exit code ' + info.exitCode : '')
                + (info.detail ? ' (' + info.detail + ')' : ''), info.reason === 'error');
        }
        refresh();
    });
    setState({ state: c.state });
    // a reload comes back to the same session, in the same role
    params.set('attach', s.id);
    params.set('role', role);
    history.replaceState(null, '', location.pathname + '?' + params);
    renderSessions();
    view.terminal.focus();
}

function renderSessions() {
    const ul = $('#sessions');
    ul.textContent = '';
    for (const s of sessions) {
        const li = document.createElement('li');
        li.dataset.id = s.id;
        li.className = (current && current.id === s.id ? 'current ' : '')
            + (s.running ? '' : 'ended');
        li.title = 'attach as ' + selectedRole();
        const id = document.createElement('span');
        id.className = 'id';
        id.textContent = s.id;
        const cmd = document.createElement('span');
        cmd.className = 'cmd';
        cmd.textContent = s.command + (s.running ? '' : ' (exit ' + s.exit_code + ')');
        li.append(id, cmd);
        if (s.running) {
            const kill = document.createElement('button');
            kill.className = 'link';
            kill.title = 'kill';
            kill.textContent = '\u00d7';
            kill.onclick = async (ev) => {
                ev.stopPropagation();
                await api.kill(s.id).catch((e) => notice(e.message, true));
                refresh();
            };
            li.append(kill);
        }
        li.onclick = () => attach(s, selectedRole());
        ul.appendChild(li);
    }
    if (!sessions.length) {
        ul.innerHTML = '<li class="muted">none yet</li>';
    }
}

async function refresh() {
    try {
        sessions = await api.list();
    } catch (e) {
        notice('list: ' + e.message + (e.status === 401 ? ' (open the URL make run printed, with its #token=)' : ''), true);
        return;
    }
    renderSessions();
}

$('#start-form').onsubmit = async (ev) => {
    ev.preventDefault();
    const command = $('#command').value.trim();
    if (!command) {
        return;
    }
    try {
        const s = await api.start({ command, wait_ms: 0 });
        await refresh();
        attach(s, selectedRole());
    } catch (e) {
        notice('start: ' + e.message, true);
    }
};
$('#refresh').onclick = refresh;
// the buttons give the keyboard back to the terminal
const refocus = () => { view && view.terminal.focus(); };
$('#repaint').onclick = () => { view && view.client.requestKeyframe(); refocus(); };
// (at once, before the clipboard answers: a key pressed meanwhile must
// reach the terminal, not press the button again)
$('#copy').onclick = async () => {
    const v = view;
    refocus();
    if (v && !(await v.copySelection().catch(() => false))) {
        notice('select text first (the clipboard needs https or localhost)', false);
    }
};
$('#paste').onclick = async () => {
    const v = view;
    refocus();
    if (v) {
        await v.paste().catch((e) => notice('paste: ' + e.message, true));
    }
};
$('#switch-role').onclick = () => {
    if (view) {
        const next = view.client.role === 'observer' ? 'controller' : 'observer';
        view.client.requestRole(next);
        params.set('role', next);
        history.replaceState(null, '', location.pathname + '?' + params);
    }
    refocus();
};
$('#detach').onclick = detach;

// for tests and the curious: window.ptyDemo.screen() is what is drawn
window.ptyDemo = {
    api,
    get view() { return view; },
    screen() { return view ? screenLines(view.terminal) : []; },
};

(async () => {
    await refresh();
    const want = params.get('attach');
    if (want) {
        const s = sessions.find((x) => x.id === want || x.session_id === want);
        if (s) {
            const role = params.get('role') === 'observer' ? 'observer' : 'controller';
            document.querySelector('input[name=role][value=' + role + ']').checked = true;
            attach(s, role);
        } else {
            notice('no session ' + want, true);
        }
    }
    setInterval(refresh, 3000);
})();
