// The Node entry against a real nginx with ngx_pty_module.  PTY_TEST_BASE
// is its http://host:port (t/75-web-client.t starts one); without it these
// tests are skipped.  PTY_TEST_ACCESS_LOG, when set, is a log whose lines
// end with the request's Sec-WebSocket-Protocol header.

import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import { attach, PtyApi, bearerProtocol } from 'ngx-pty-client/node';

const base = process.env.PTY_TEST_BASE;
const skip = base ? false : 'PTY_TEST_BASE is not set (no server to attach to)';
// every test has a deadline of its own
const timeout = 90000;
const api = new PtyApi({ base: (base || '') + '/pty/' });
const PROMPT = /^ready\$$/m;
const SHELL = 'PS1="ready\\$ " exec bash --norc --noprofile -i';

/** @param {string} path */
const wsUrl = (path) => base.replace(/^http/, 'ws') + path;

/** @param {() => boolean} cond @param {number} [ms] @param {string} [what] */
async function until(cond, ms = 10000, what = 'condition') {
    const deadline = Date.now() + ms;
    while (!cond()) {
        if (Date.now() > deadline) {
            throw new Error('timed out waiting for ' + what);
        }
        await new Promise((r) => setTimeout(r, 20));
    }
}

/** @type {import('ngx-pty-client/node').NodeSession[]} */
let opened = [];

/** @param {any} s @param {object} [opts] */
function join(s, opts) {
    const n = attach(Object.assign({ url: wsUrl(s.attach_path), cols: 80,
        rows: 24 }, opts));
    opened.push(n);
    return n;
}

// a failed test must not leave sockets that keep node from exiting
afterEach(() => {
    for (const n of opened) {
        const ws = /** @type {any} */ (n.client)._ws;
        n.client.close();
        if (ws) {
            ws.terminate();
        }
    }
    opened = [];
});

async function shell() {
    const s = await api.start({ command: SHELL, cols: 80, rows: 24,
        wait_ms: 0 });
    assert.match(s.attach_path, /^\/agents\/.+\/attach$/);
    return s;
}

/**
 * A shell with a controller at its prompt and a live observer whose error
 * codes are collected.
 * @param {object} [observer]  more options of the observer's attach
 */
async function pair(observer) {
    const s = await shell();
    const a = join(s);
    await a.waitForScreen(PROMPT);
    const b = join(s, Object.assign({ role: 'observer' }, observer));
    await b.waitForState('live');
    /** @type {string[]} */
    const errors = [];
    b.client.on('error', (e) => errors.push(e.code));
    return { s, a, b, errors };
}

/** Leaves the session and ends it. @param {any} s */
async function finish(s) {
    for (const n of opened) {
        n.close();
    }
    await api.kill(s.id);
}

test('controller: hello, join, echo hello on screen', { skip, timeout }, async () => {
    const s = await shell();
    const a = join(s, { label: 'node-test' });
    /** @type {string[]} */
    const states = [];
    a.client.on('state', (ev) => states.push(ev.state));
    await a.waitForState('live');
    assert.equal(a.client.role, 'controller');
    assert.equal(a.client.sessionId, s.session_id);
    await a.waitForScreen(PROMPT);
    assert.ok(a.client.input('echo hel""lo\r'));
    const lines = await a.waitForScreen(/^hello$/m);
    assert.ok(lines.some((l) => l === 'hello'));
    assert.deepEqual(a.client.membership.controllers.map((m) => m.label),
        ['node-test']);
    assert.deepEqual(states, ['live']);
    a.close();
    await a.waitForState('closed');
    assert.equal(a.client.closedInfo?.reason, 'left');
    await api.kill(s.id);
});

test('observer: same screen, read-only, sees the membership', { skip, timeout },
    async () => {
        const s = await shell();
        const a = join(s, { label: 'ctl' });
        await a.waitForScreen(PROMPT);
        a.client.input('echo from-controller\r');
        await a.waitForScreen(/^from-controller$/m);

        const b = join(s, { role: 'observer', label: 'obs' });
        await b.waitForScreen(/^from-controller$/m);
        assert.equal(b.client.role, 'observer');
        /** @type {string[]} */
        const errors = [];
        b.client.on('error', (e) => errors.push(e.code));
        assert.equal(b.client.input('echo nope\r'), false);
        assert.deepEqual(errors, ['PERMISSION_DENIED']);
        await until(() => a.client.membership.observers.length === 1, 5000,
            'the observer in the controller\'s membership');
        assert.equal(a.client.membership.observers[0].label, 'obs');

        // what the controller types reaches the observer, the same grid
        a.client.input('echo second\r');
        await b.waitForScreen(/^second$/m);
        await a.waitForScreen(/^second$/m);
        assert.deepEqual(await b.screen(), await a.screen());
        assert.doesNotMatch((await a.screen()).join('\n'), /nope/);
        await finish(s);
    });

test('reconnect: the drop is replayed, the screen matches', { skip, timeout },
    async () => {
        const { s, a, b } = await pair({
            clientOptions: { reconnectDelay: 1500 } });
        const before = b.client.lastSequence;

        // the connection drops; meanwhile the program prints
        /** @type {any} */ (b.client)._ws.close();
        await b.waitForState('reconnecting');
        a.client.input('for i in 1 2 3; do echo gap-$i; done\r');
        await a.waitForScreen(/^gap-3$/m);

        await b.waitForState('live', 10000);
        await b.waitForScreen(/^gap-3$/m);
        assert.equal(b.client.stats.reconnects, 1);
        assert.ok(b.client.stats.replayedFrames > 0, 'frames were replayed');
        assert.ok(b.client.lastSequence > before);
        assert.deepEqual(await b.screen(), await a.screen());
        await finish(s);
    });

test('replay out of range: the Keyframe repaints', { skip, timeout }, async () => {
    const { s, a, b, errors } = await pair({
        clientOptions: { reconnectDelay: 1000 } });

    /** @type {any} */ (b.client)._ws.close();
    await b.waitForState('reconnecting');
    // more than the ring keeps (t/75-web-client.t: 64k)
    a.client.input('for i in $(seq 1 4000); do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx;'
        + ' done; echo done-$((40+2))\r');
    await a.waitForScreen(/^done-42$/m, 20000);

    await b.waitForScreen(/^done-42$/m, 20000);
    assert.deepEqual(errors, ['REPLAY_OUT_OF_RANGE']);
    assert.ok(b.client.stats.keyframesApplied >= 2);
    assert.deepEqual(await b.screen(), await a.screen());
    await finish(s);
});

test('lag: PTY_OUTPUT_LAGGED, the Keyframe after it repaints', { skip, timeout },
    async () => {
        const { s, a, b, errors } = await pair();

        // b stops reading; far more than the ring (64k) and the socket
        // buffers (nginx's sndbuf is 16k in t/75-web-client.t) goes by
        const sock = /** @type {any} */ (b.client)._ws._socket;
        sock.pause();
        a.client.input('for i in $(seq 1 20000); do echo lag-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx;'
            + ' done; echo lag-done-$((40+2))\r');
        await a.waitForScreen(/^lag-done-42$/m, 30000);
        sock.resume();

        await b.waitForScreen(/^lag-done-42$/m, 20000);
        assert.ok(errors.includes('PTY_OUTPUT_LAGGED'), errors.join());
        assert.equal(b.client.stats.reconnects, 0, 'no reconnect needed');
        assert.deepEqual(await b.screen(), await a.screen());
        await finish(s);
    });

/**
 * A WebSocket that loses the server's frames drop() picks (a Keyframe lost
 * on the way), and calls seen() after each frame it hands on.
 * @param {(f: any) => boolean} drop
 * @param {() => void} [seen]
 */
function lossy(drop, seen) {
    return class extends WebSocket {
        /** @param {any} fn */
        set onmessage(fn) {
            super.onmessage = (/** @type {any} */ ev) => {
                if (!drop(JSON.parse(String(ev.data)))) {
                    fn(ev);
                    if (seen) {
                        seen();
                    }
                }
            };
        }
        get onmessage() { return super.onmessage; }
    };
}

/** @param {any} f */
const isKeyframe = (f) => f.op === 'pty.session_frame'
    && f.payload && f.payload.kind === 'Keyframe';

test('a Keyframe that never comes is asked for, again until one does',
    { skip, timeout }, async () => {
        const s = await shell();
        let lost = 0;
        // the join's Keyframe and the first one asked for are lost
        const a = join(s, { clientOptions: { keyframeWait: 300,
            WebSocket: lossy((f) => isKeyframe(f) && lost++ < 2) } });
        await a.waitForScreen(PROMPT);
        await a.waitForState('live');
        assert.ok(lost >= 3, 'lost ' + lost);
        assert.ok(a.client.stats.keyframesRequested >= 2,
            'requested ' + a.client.stats.keyframesRequested);
        a.client.input('echo after-resync\r');
        await a.waitForScreen(/^after-resync$/m);
        await finish(s);
    });

test('output held for a Keyframe is bounded (maxHeldBytes)',
    { skip, timeout }, async () => {
        const s = await shell();
        const a = join(s);
        await a.waitForScreen(PROMPT);

        // b's Keyframes are lost while the program prints ~200 KB
        let losing = true;
        let most = 0;
        /** @type {any} */
        let b = null;
        b = join(s, { role: 'observer', clientOptions: {
            keyframeWait: 300, maxHeldBytes: 32768,
            WebSocket: lossy((f) => losing && isKeyframe(f), () => {
                most = Math.max(most, b ? b.client._heldBytes : 0);
            }) } });
        await until(() => b.client.role === 'observer', 10000, 'the join');
        a.client.input('for i in $(seq 1 4000); do echo held-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx;'
            + ' done; echo held-done-$((40+2))\r');
        await a.waitForScreen(/^held-done-42$/m, 30000);
        await until(() => b.client.stats.heldDropped > 0, 20000,
            'held frames dropped');
        assert.equal(b.client.state, 'connecting', 'still waiting');
        assert.ok(most > 0 && most <= 32768, 'held at most ' + most);

        losing = false;
        await b.waitForScreen(/^held-done-42$/m, 20000);
        await b.waitForState('live');
        assert.deepEqual(await b.screen(), await a.screen());
        await finish(s);
    });

test('resize: the controller asks, everyone follows, stty sees it',
    { skip, timeout }, async () => {
        const s = await shell();
        const a = join(s);
        // (the first connection on a fresh session controls it, whatever
        // it asked for: the observer joins once the controller has)
        await a.waitForScreen(PROMPT);
        const b = join(s, { role: 'observer' });
        await b.waitForState('live');
        /** @type {any[]} */
        const seen = [];
        b.client.on('resize', (r) => seen.push(r));
        assert.ok(a.client.resize(100, 30));
        await until(() => seen.some((r) => r.cols === 100 && r.rows === 30),
            5000, 'the Resize at the observer');
        assert.equal(b.client.resize(90, 20), false, 'observers cannot');
        a.client.input('stty size\r');
        await a.waitForScreen(/^30 100$/m);
        await b.waitForScreen(/^30 100$/m);
        assert.equal(b.terminal.cols, 100);
        assert.equal(b.terminal.rows, 30);
        await finish(s);
    });

test('repaint: a requested Keyframe is painted', { skip, timeout }, async () => {
    const s = await shell();
    const a = join(s);
    await a.waitForScreen(PROMPT);
    const n = a.client.stats.keyframesApplied;
    assert.ok(a.client.requestKeyframe());
    await until(() => a.client.stats.keyframesApplied > n, 5000,
        'the requested Keyframe');
    await a.waitForScreen(PROMPT);
    a.close();
    await api.kill(s.id);
});

test('Closed: the exit code, no reconnect', { skip, timeout }, async () => {
    const s = await shell();
    const a = join(s);
    await a.waitForScreen(PROMPT);
    a.client.input('exit 3\r');
    await a.waitForState('closed');
    assert.equal(a.client.closedInfo?.exitCode, 3);
    assert.equal(a.client.closedInfo?.reason, 'normal');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(a.client.stats.connects, 1);
});

test('the token rides in the subprotocol list, not the URL', { skip, timeout },
    async () => {
        const log = process.env.PTY_TEST_ACCESS_LOG;
        const s = await shell();
        const a = join(s, { token: 'tok/en+1' });
        await a.waitForState('live');
        a.close();
        await a.waitForState('closed');
        await api.kill(s.id);
        if (!log) {
            return;
        }
        const line = readFileSync(log, 'utf8').split('\n')
            .filter((l) => l.includes(s.session_id)).pop() || '';
        assert.match(line, new RegExp('"pty-ws\\.v1, ?'
            + bearerProtocol('tok/en+1') + '"'));
        assert.ok(!line.includes('tok/en'), 'not in the request line');
    });

test('unknown session: not_found, no reconnect loop', { skip, timeout }, async () => {
    const a = attach({ url: wsUrl('/agents/test/sessions/'
        + '01900000-0000-7000-8000-000000000000/attach'),
    clientOptions: { maxReconnects: 2, reconnectDelay: 50 } });
    await a.waitForState('closed', 10000);
    assert.ok(['not_found', 'gave_up'].includes(a.client.closedInfo?.reason
        || ''), a.client.closedInfo?.reason);
});
