// ngx-pty-client core: the pty-ws/v1 + pty-extensions/v1 protocol, with no
// dependency.  It drives any terminal that has write/resize (xterm.js in a
// browser, @xterm/headless in Node) over any WebSocket constructor with the
// browser's API (the browser's own, or the `ws` package).

export const SUBPROTOCOL = 'pty-ws.v1';
export const EXTENSION =
    'https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1';
export const SNAPSHOT_FORMAT = 'vt100-screen-state-v1';

/**
 * @typedef {'controller' | 'observer'} Role
 *
 * @typedef {'idle' | 'connecting' | 'replaying' | 'live' | 'reconnecting'
 *     | 'closed'} ConnectionState
 *
 * What the client needs of a terminal: xterm.js and @xterm/headless have it.
 * @typedef {object} TerminalLike
 * @property {(data: string | Uint8Array, callback?: () => void) => void} write
 * @property {(cols: number, rows: number) => void} resize
 * @property {number} cols
 * @property {number} rows
 *
 * A WebSocket as browsers and the `ws` package make it.
 * @typedef {object} SocketLike
 * @property {number} readyState
 * @property {string} protocol
 * @property {((ev: any) => void) | null} onopen
 * @property {((ev: { data: any }) => void) | null} onmessage
 * @property {((ev: { code: number, reason: string }) => void) | null} onclose
 * @property {((ev: any) => void) | null} onerror
 * @property {(data: string) => void} send
 * @property {(code?: number, reason?: string) => void} close
 *
 * @typedef {new (url: string, protocols: string[]) => SocketLike} SocketConstructor
 *
 * @typedef {object} Member
 * @property {string} client_id
 * @property {string} [label]
 *
 * @typedef {object} Membership
 * @property {Member[]} controllers
 * @property {Member[]} observers
 *
 * @typedef {object} ClientOptions
 * @property {string} url  ws:// or wss:// URL of the session's attach path
 * @property {TerminalLike} terminal  where the screen is drawn
 * @property {Role} [role]  asked for at join (default controller)
 * @property {string} [label]  client_label others see in the membership
 * @property {string} [token]  bearer token, sent as the `bearer.` subprotocol
 *     entry (never in the URL)
 * @property {SocketConstructor} [WebSocket]  default: globalThis.WebSocket
 * @property {boolean} [reconnect]  reconnect after a drop (default true)
 * @property {number} [reconnectDelay]  first delay in ms (default 250)
 * @property {number} [reconnectMaxDelay]  backoff cap in ms (default 10000)
 * @property {number} [maxReconnects]  attempts before giving up (default
 *     Infinity; a successful join starts the count again)
 * @property {number} [keyframeWait]  ms to wait for a Keyframe (the join's,
 *     an announced one, a requested one) before asking for one, again
 *     every keyframeWait ms until it comes (default 2000)
 * @property {number} [maxHeldBytes]  Output (base64) held while waiting for
 *     a Keyframe; beyond it the held frames are dropped and a Keyframe
 *     after them is waited for instead (default 4 MiB)
 * @property {() => {cols: number, rows: number} | undefined} [initialSize]
 *     size asked for at a controller's join (default: the terminal's)
 *
 * @typedef {object} ClosedInfo
 * @property {string} reason  the Closed frame's reason, or `left`,
 *     `unauthenticated`, `forbidden`, `not_found`, `revoked`, `gave_up`
 * @property {number | null} exitCode
 * @property {string} [detail]
 *
 * @typedef {object} PtyErrorInfo
 * @property {string} code  binding or PTY error code, or `PROTOCOL`
 * @property {string} message
 * @property {boolean} fatal  the client stops (no reconnect)
 *
 * @typedef {object} RoleInfo
 * @property {Role} role
 * @property {string} clientId
 * @property {boolean} downgraded
 * @property {string} [reason]
 *
 * @typedef {object} ClientStats
 * @property {number} connects  WebSocket connections opened
 * @property {number} reconnects  joins made with replay_from
 * @property {number} replayedFrames  frames received between a join with
 *     replay_from and its Keyframe
 * @property {number} keyframesApplied  Keyframes painted
 * @property {number} keyframesRequested
 * @property {number} outputFrames
 * @property {number} duplicatesDropped
 * @property {number} heldDropped  frames held for a Keyframe and dropped
 *     (more than maxHeldBytes)
 *
 * Events, by name, and what their listeners get.
 * @typedef {object} ClientEvents
 * @property {{state: ConnectionState, previous: ConnectionState,
 *     attempt?: number, delay?: number}} state
 * @property {RoleInfo} role
 * @property {Membership} membership
 * @property {{cols: number, rows: number}} resize
 * @property {PtyErrorInfo} error
 * @property {ClosedInfo} closed
 * @property {{reason: string, anchor?: number}} resync
 * @property {{session_id: string, current_sequence: number}} hello
 * @property {{reason: string, detail?: string}} goodbye
 */

/** Errors after which reconnecting cannot help. */
const FATAL_CLOSE = /** @type {Record<number, string>} */ ({
    4401: 'unauthenticated',
    4403: 'forbidden',
    4404: 'not_found',
});

/** @param {Uint8Array} bytes */
export function toBase64(bytes) {
    let s = '';
    for (let i = 0; i < bytes.length; i += 0x8000) {
        s += String.fromCharCode.apply(null,
            Array.from(bytes.subarray(i, i + 0x8000)));
    }
    return btoa(s);
}

/** @param {string} b64 */
export function fromBase64(b64) {
    const s = atob(b64);
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) {
        out[i] = s.charCodeAt(i);
    }
    return out;
}

/**
 * The subprotocol entry that carries a bearer token: `bearer.` and the
 * token in unpadded base64url, so any token fits the header's syntax.
 * @param {string} token
 */
export function bearerProtocol(token) {
    const b64 = toBase64(new TextEncoder().encode(token));
    return 'bearer.' + b64.replace(/\+/g, '-').replace(/\//g, '_')
        .replace(/=+$/, '');
}

/** A UUIDv7, as the binding's ids are. */
export function uuid7() {
    const b = new Uint8Array(16);
    globalThis.crypto.getRandomValues(b);
    let ms = Date.now();
    for (let i = 5; i >= 0; i--) {
        b[i] = ms % 256;
        ms = Math.floor(ms / 256);
    }
    b[6] = 0x70 | (b[6] & 0x0f);
    b[8] = 0x80 | (b[8] & 0x3f);
    const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16)
        + '-' + h.slice(16, 20) + '-' + h.slice(20);
}

/**
 * The attach URL of a session for a page served by the same nginx:
 * ws(s)://host + attach_path.
 * @param {string} attachPath
 * @param {{protocol: string, host: string}} [loc]  default: the page's
 */
export function attachUrl(attachPath, loc) {
    const l = loc || globalThis.location;
    return (l.protocol === 'https:' ? 'wss://' : 'ws://') + l.host + attachPath;
}

/**
 * One terminal session seen through pty-ws/v1: joins, paints, follows,
 * reconnects.  Events (`on(name, fn)`): state, role, membership, resize,
 * error, closed, resync, hello, goodbye.
 */
export class PtyClient {
    /** @param {ClientOptions} options */
    constructor(options) {
        if (!options || !options.url || !options.terminal) {
            throw new TypeError('PtyClient needs url and terminal');
        }
        this.options = options;
        /** @type {TerminalLike} */
        this.terminal = options.terminal;
        /** @type {Role} */
        this.requestedRole = options.role || 'controller';
        /** @type {Role | null} the role the server gave, null before */
        this.role = null;
        /** @type {string | null} */
        this.clientId = null;
        /** @type {ConnectionState} */
        this.state = 'idle';
        /** @type {Membership} */
        this.membership = { controllers: [], observers: [] };
        /** @type {string | null} */
        this.sessionId = null;
        /** highest sequence received; the replay_from of a reconnect */
        this.lastSequence = -1;
        /** sequence of the last Output/Resize painted (or of a Keyframe's
         *  anchor): what a Keyframe's anchor_sequence must match */
        this.paintedSequence = -1;
        /** @type {ClosedInfo | null} */
        this.closedInfo = null;
        /** @type {ClientStats} */
        this.stats = {
            connects: 0, reconnects: 0, replayedFrames: 0,
            keyframesApplied: 0, keyframesRequested: 0, outputFrames: 0,
            duplicatesDropped: 0, heldDropped: 0,
        };

        /** @type {Map<string, Set<(ev: any) => void>>} */
        this._listeners = new Map();
        /** @type {SocketLike | null} */
        this._ws = null;
        this._attempt = 0;
        /** the screen is not known: frames wait for a Keyframe */
        this._needKeyframe = true;
        /** the next Keyframe is painted even if its anchor matches */
        this._forceKeyframe = false;
        /** @type {any[]} frames held until the Keyframe */
        this._held = [];
        /** base64 bytes of Output in _held */
        this._heldBytes = 0;
        /** the last held frame dropped: an older Keyframe cannot be used */
        this._heldDroppedSeq = -1;
        this._replaying = false;
        this._leaving = false;
        /** @type {ReturnType<typeof setTimeout> | null} */
        this._retryTimer = null;
        /** @type {ReturnType<typeof setTimeout> | null} */
        this._keyframeTimer = null;
        /** @type {{cols: number, rows: number} | null} the session's size */
        this.size = null;
        /** binding_hello seen on this connection */
        this._hello = false;
        /** the join's flush is not over until its Keyframe */
        this._expectKeyframe = false;
        /** @type {ClosedInfo | null} the session's Closed frame */
        this._closedFrame = null;
    }

    /**
     * @template {keyof ClientEvents} K
     * @param {K} name
     * @param {(ev: ClientEvents[K]) => void} fn
     * @returns {() => void} removes the listener
     */
    on(name, fn) {
        let set = this._listeners.get(name);
        if (!set) {
            set = new Set();
            this._listeners.set(name, set);
        }
        set.add(fn);
        return () => { set.delete(fn); };
    }

    /**
     * @template {keyof ClientEvents} K
     * @param {K} name
     * @param {ClientEvents[K]} ev
     */
    _emit(name, ev) {
        const set = this._listeners.get(name);
        if (!set) {
            return;
        }
        for (const fn of Array.from(set)) {
            try {
                fn(ev);
            } catch (e) {
                // a listener's bug must not break the protocol
                setTimeout(() => { throw e; });
            }
        }
    }

    /** @param {ConnectionState} state @param {object} [extra] */
    _setState(state, extra) {
        if (state === this.state) {
            return;
        }
        const previous = this.state;
        this.state = state;
        this._emit('state', Object.assign({ state, previous }, extra || {}));
    }

    /** Opens the connection (once; reconnects are automatic). */
    connect() {
        if (this.state !== 'idle') {
            return this;
        }
        this._open();
        return this;
    }

    _open() {
        const Ctor = this.options.WebSocket
            || /** @type {SocketConstructor} */ (
                /** @type {any} */ (globalThis).WebSocket);
        if (!Ctor) {
            throw new Error('no WebSocket: pass options.WebSocket');
        }
        const protocols = [SUBPROTOCOL];
        if (this.options.token) {
            protocols.push(bearerProtocol(this.options.token));
        }
        this._setState(this.lastSequence >= 0 ? 'reconnecting' : 'connecting',
            { attempt: this._attempt });
        this.stats.connects++;
        let ws;
        try {
            ws = new Ctor(this.options.url, protocols);
        } catch (e) {
            this._fail('PROTOCOL', 'cannot open ' + this.options.url + ': '
                + (e instanceof Error ? e.message : String(e)));
            return;
        }
        this._ws = ws;
        this._hello = false;
        ws.onmessage = (ev) => {
            if (ws !== this._ws) {
                return;
            }
            if (typeof ev.data !== 'string') {
                this._protocolError('binary frame from the server');
                return;
            }
            let frame;
            try {
                frame = JSON.parse(ev.data);
            } catch (e) {
                this._protocolError('a frame that is not JSON');
                return;
            }
            this._frame(frame);
        };
        ws.onclose = (ev) => {
            if (ws === this._ws) {
                this._closed(ev.code, ev.reason);
            }
        };
        ws.onerror = () => {};
    }

    /**
     * @param {string} op
     * @param {object} payload
     * @param {object} [envelope]
     * @returns {string | null} the request id, null when not connected
     */
    send(op, payload, envelope) {
        const ws = this._ws;
        if (!ws || ws.readyState !== 1) {
            return null;
        }
        const id = uuid7();
        ws.send(JSON.stringify(Object.assign(
            { op, id, ts: new Date().toISOString() }, envelope || {},
            { payload })));
        return id;
    }

    _join() {
        /** @type {{role: Role, client_label?: string, cols?: number,
         *    rows?: number}} */
        const payload = { role: this.requestedRole };
        if (this.options.label) {
            payload.client_label = this.options.label.slice(0, 128);
        }
        if (this.requestedRole === 'controller') {
            const size = this.options.initialSize
                ? this.options.initialSize()
                : { cols: this.terminal.cols, rows: this.terminal.rows };
            if (size && size.cols > 0 && size.rows > 0) {
                payload.cols = Math.min(size.cols, 1024);
                payload.rows = Math.min(size.rows, 1024);
            }
        }
        /** @type {{extensions: string[], replay_from?: number}} */
        const env = { extensions: [EXTENSION] };
        if (this.lastSequence >= 0) {
            env.replay_from = this.lastSequence;
            this._replaying = true;
            this.stats.reconnects++;
            this._setState('replaying');
        }
        // the joiner's Keyframe ends the flush: wait for it
        this._needKeyframe = this.paintedSequence < 0 || this._needKeyframe;
        this._expectKeyframe = true;
        if (this.send('pty.join_session', payload, env) !== null
            && this._needKeyframe)
        {
            this._armKeyframeTimer();
        }
    }

    /** @param {any} f */
    _frame(f) {
        if (!f || typeof f.op !== 'string') {
            this._protocolError('a frame without op');
            return;
        }
        switch (f.op) {
        case 'binding_hello':
            this._hello = true;
            if (f.payload && f.payload.session) {
                this.sessionId = f.payload.session.session_id;
                this._emit('hello', f.payload.session);
            }
            this._join();
            return;
        case 'binding_goodbye':
            this._goodbye(f.payload || {});
            return;
        case 'Error':
            this._bindingError(f.payload || {});
            return;
        case 'pong':
            return;
        case 'pty.session_frame':
            this._sessionFrame(f);
            return;
        default:
            // A2A task frames and later ops are not ours to draw
            return;
        }
    }

    /** @param {any} f */
    _sessionFrame(f) {
        const p = f.payload || {};
        const seq = typeof f.sequence === 'number' ? f.sequence : -1;

        // RoleAssigned comes first, out of band, ahead of the replay
        if (p.kind === 'RoleAssigned') {
            this._roleAssigned(p);
            return;
        }
        if (seq >= 0 && seq <= this.lastSequence) {
            this.stats.duplicatesDropped++;
            return;
        }
        if (seq >= 0) {
            this.lastSequence = seq;
        }
        if (this._replaying && p.kind !== 'Keyframe') {
            this.stats.replayedFrames++;
        }

        switch (p.kind) {
        case 'Keyframe':
            this._keyframe(p);
            return;
        case 'Output':
        case 'Resize':
            if (this._needKeyframe) {
                this._hold(f);
                return;
            }
            this._paint(f);
            return;
        case 'MembershipChanged':
            this.membership = {
                controllers: p.controllers || [], observers: p.observers || [],
            };
            this._emit('membership', this.membership);
            return;
        case 'Closed':
            this._sessionClosed(p);
            return;
        case 'Error':
            this._ptyError(p);
            return;
        default:
            return;
        }
    }

    /** @param {any} p */
    _roleAssigned(p) {
        this.role = p.role;
        this.clientId = p.client_id;
        this._attempt = 0;
        /** @type {RoleInfo} */
        const info = { role: p.role, clientId: p.client_id,
            downgraded: !!p.downgraded };
        if (p.reason) {
            info.reason = p.reason;
        }
        this._emit('role', info);
    }

    /** Output or Resize while waiting for a Keyframe. @param {any} f */
    _hold(f) {
        this._held.push(f);
        if (f.payload.kind === 'Output' && typeof f.payload.data === 'string') {
            this._heldBytes += f.payload.data.length;
        }
        if (this._heldBytes > (this.options.maxHeldBytes ?? 4 << 20)) {
            // a Keyframe anchored at or after this frame covers them all
            this.stats.heldDropped += this._held.length;
            this._heldDroppedSeq = f.sequence;
            this._dropHeld();
        }
    }

    _dropHeld() {
        this._held = [];
        this._heldBytes = 0;
    }

    /** Output or Resize, in sequence order. @param {any} f */
    _paint(f) {
        const p = f.payload;
        if (p.kind === 'Output') {
            let bytes;
            try {
                bytes = fromBase64(p.data);
            } catch (e) {
                this._resync('undecodable Output');
                return;
            }
            this.stats.outputFrames++;
            this.terminal.write(bytes);
        } else {
            this._resizeTerminal(p.cols, p.rows);
        }
        this.paintedSequence = f.sequence;
    }

    /** In order with the writes queued before it. */
    _resizeTerminal(/** @type {number} */ cols, /** @type {number} */ rows) {
        this.size = { cols, rows };
        this.terminal.write('', () => {
            if (this.terminal.cols !== cols || this.terminal.rows !== rows) {
                this.terminal.resize(cols, rows);
            }
        });
        this._emit('resize', { cols, rows });
    }

    /** @param {any} p */
    _keyframe(p) {
        const wanted = this._needKeyframe || this._forceKeyframe;
        const ending = this._expectKeyframe;
        this._expectKeyframe = false;
        this._clearKeyframeTimer();

        if (!wanted && p.anchor_sequence === this.paintedSequence) {
            // the screen we have is the one it describes: no repaint
            // (a periodic Keyframe, or the end of a clean replay)
            this._flushEnd(ending);
            return;
        }
        if (wanted && p.anchor_sequence < this._heldDroppedSeq) {
            // frames after its anchor were dropped: wait for a later one
            this._resync('held output dropped');
            return;
        }
        if (!wanted) {
            // it names an Output/Resize we never painted
            this._emit('resync', { reason: 'anchor mismatch',
                anchor: p.anchor_sequence });
        }
        if (p.snapshot_format !== SNAPSHOT_FORMAT) {
            this._emit('error', { code: 'PROTOCOL', fatal: false,
                message: 'unknown snapshot format ' + p.snapshot_format });
            return;
        }
        let snap;
        try {
            snap = fromBase64(p.snapshot);
        } catch (e) {
            this._protocolError('undecodable Keyframe');
            return;
        }
        this.size = { cols: p.snapshot_cols, rows: p.snapshot_rows };
        // RIS, the snapshot's size, then the snapshot (docs/SNAPSHOT.md);
        // the resize runs between the queued writes, in order
        this.terminal.write('\x1bc', () => {
            this.terminal.resize(p.snapshot_cols, p.snapshot_rows);
        });
        this.terminal.write(snap);
        this._emit('resize', { cols: p.snapshot_cols, rows: p.snapshot_rows });
        this.stats.keyframesApplied++;
        this.paintedSequence = p.anchor_sequence;
        this._needKeyframe = false;
        this._forceKeyframe = false;

        // frames held meanwhile: those after the anchor are painted
        const held = this._held;
        this._dropHeld();
        for (const f of held) {
            if (f.sequence > p.anchor_sequence) {
                this._paint(f);
            }
        }
        this._flushEnd(ending);
    }

    /** @param {boolean} ending */
    _flushEnd(ending) {
        if (ending || this.state !== 'live') {
            this._replaying = false;
            if (this.state !== 'closed') {
                this._setState('live');
            }
        }
    }

    /** @param {any} p */
    _ptyError(p) {
        if (p.code === 'PTY_OUTPUT_LAGGED') {
            // a Keyframe follows: hold everything until it comes
            this._needKeyframe = true;
            this._armKeyframeTimer();
        }
        this._emit('error', { code: p.code, message: p.message || p.code,
            fatal: false });
    }

    /** @param {any} p */
    _bindingError(p) {
        const code = p.code || 'INTERNAL';
        if (code === 'REPLAY_OUT_OF_RANGE') {
            // our screen is lost; the Keyframe that follows repaints it
            this._needKeyframe = true;
            this._dropHeld();
            this._armKeyframeTimer();
        }
        const fatal = code === 'UNAUTHENTICATED';
        this._emit('error', { code, message: p.message || code, fatal });
        if (fatal) {
            this._finish({ reason: 'unauthenticated', exitCode: null,
                detail: p.message });
        }
    }

    _armKeyframeTimer() {
        this._clearKeyframeTimer();
        const wait = this.options.keyframeWait ?? 2000;
        this._keyframeTimer = setTimeout(() => {
            this._keyframeTimer = null;
            // (not while away: the join after the reconnect asks anew)
            if (this._needKeyframe && this.state !== 'closed'
                && this._ws && this._ws.readyState === 1)
            {
                this._resync('no Keyframe after ' + wait + ' ms');
            }
        }, wait);
    }

    _clearKeyframeTimer() {
        if (this._keyframeTimer) {
            clearTimeout(this._keyframeTimer);
            this._keyframeTimer = null;
        }
    }

    /** A gap or damage we cannot explain: hold, and ask for a Keyframe
     * (again after keyframeWait if none comes). @param {string} reason */
    _resync(reason) {
        this._emit('resync', { reason });
        this._needKeyframe = true;
        this.requestKeyframe();
        this._armKeyframeTimer();
    }

    /** @param {any} p */
    _sessionClosed(p) {
        this._closedFrame = {
            reason: p.reason, exitCode: p.exit_code ?? null,
        };
        if (p.detail) {
            this._closedFrame.detail = p.detail;
        }
        // goodbye and the close follow; the session is over either way
        this._finish(this._closedFrame);
    }

    /** @param {{reason?: string, detail?: string}} p */
    _goodbye(p) {
        this._emit('goodbye', { reason: p.reason || 'other',
            detail: p.detail });
        if (p.reason === 'session_closed' && !this._closedFrame) {
            this._finish({ reason: 'normal', exitCode: null,
                detail: p.detail });
        } else if (p.reason === 'principal_revoked') {
            this._finish({ reason: 'revoked', exitCode: null,
                detail: p.detail });
        }
        // server_shutdown, rate_limited, other: the close follows, and we
        // come back with replay_from
    }

    /** @param {number} code @param {string} reason */
    _closed(code, reason) {
        this._ws = null;
        this._clearKeyframeTimer();
        if (this.state === 'closed') {
            return;
        }
        if (this._leaving) {
            this._finish({ reason: 'left', exitCode: null });
            return;
        }
        if (FATAL_CLOSE[code]) {
            this._fail(code === 4401 ? 'UNAUTHENTICATED'
                : code === 4403 ? 'PERMISSION_DENIED' : 'TASK_NOT_FOUND',
                'the server closed the connection (' + code
                + (reason ? ': ' + reason : '') + ')', FATAL_CLOSE[code]);
            return;
        }
        this._scheduleReconnect();
    }

    _scheduleReconnect() {
        if (this.options.reconnect === false) {
            this._finish({ reason: 'gave_up', exitCode: null,
                detail: 'the connection dropped' });
            return;
        }
        const max = this.options.maxReconnects ?? Infinity;
        if (this._attempt >= max) {
            this._finish({ reason: 'gave_up', exitCode: null,
                detail: this._attempt + ' reconnects failed' });
            return;
        }
        const base = this.options.reconnectDelay ?? 250;
        const cap = this.options.reconnectMaxDelay ?? 10000;
        const exp = Math.min(cap, base * Math.pow(2, this._attempt));
        // jitter, so that clients dropped together do not return together
        const delay = Math.round(exp / 2 + Math.random() * exp / 2);
        this._attempt++;
        this._setState('reconnecting', { attempt: this._attempt, delay });
        this._retryTimer = setTimeout(() => {
            this._retryTimer = null;
            if (this.state === 'reconnecting') {
                this._open();
            }
        }, delay);
    }

    /** @param {string} message */
    _protocolError(message) {
        this._emit('error', { code: 'PROTOCOL', message, fatal: false });
        this._resync(message);
    }

    /** @param {string} code @param {string} message @param {string} [why] */
    _fail(code, message, why) {
        this._emit('error', { code, message, fatal: true });
        this._finish({ reason: why || 'error', exitCode: null,
            detail: message });
    }

    /** @param {ClosedInfo} info */
    _finish(info) {
        if (this.state === 'closed') {
            return;
        }
        this._clearKeyframeTimer();
        if (this._retryTimer) {
            clearTimeout(this._retryTimer);
            this._retryTimer = null;
        }
        this.closedInfo = info;
        this._setState('closed');
        this._emit('closed', info);
    }

    /**
     * Sends keystrokes or pasted text (UTF-8).  Observers cannot type:
     * false, and an `error` event PERMISSION_DENIED, without asking the
     * server.
     * @param {string | Uint8Array} data
     * @returns {boolean} sent
     */
    input(data) {
        if (this.role !== 'controller') {
            this._emit('error', { code: 'PERMISSION_DENIED', fatal: false,
                message: 'observers cannot type (read-only)' });
            return false;
        }
        const bytes = typeof data === 'string'
            ? new TextEncoder().encode(data) : data;
        if (bytes.length === 0) {
            return true;
        }
        // pty_input_max is 64 KiB by default: send big pastes in pieces
        for (let i = 0; i < bytes.length; i += 32768) {
            if (this.send('pty.session_input',
                { data: toBase64(bytes.subarray(i, i + 32768)) }) === null) {
                return false;
            }
        }
        return true;
    }

    /**
     * Asks the server to resize the session (controllers only); the
     * terminal follows when the Resize frame comes back.
     * @param {number} cols @param {number} rows
     * @returns {boolean} asked
     */
    resize(cols, rows) {
        cols = Math.max(1, Math.min(1024, Math.floor(cols)));
        rows = Math.max(1, Math.min(1024, Math.floor(rows)));
        if (this.role !== 'controller'
            || (this.size && this.size.cols === cols && this.size.rows === rows))
        {
            return false;
        }
        return this.send('pty.session_resize', { cols, rows }) !== null;
    }

    /** Repaint: the next Keyframe (within 1 s) replaces the screen. */
    requestKeyframe() {
        this._forceKeyframe = true;
        if (this.send('pty.request_keyframe', {}) !== null) {
            this.stats.keyframesRequested++;
            return true;
        }
        return false;
    }

    /** @param {Role} role */
    requestRole(role) {
        this.requestedRole = role;
        return this.send('pty.request_role', { role }) !== null;
    }

    /** Leaves the session and closes the connection for good. */
    close() {
        this._leaving = true;
        if (this._ws && this._ws.readyState === 1) {
            this.send('pty.leave_session', {});
            const ws = this._ws;
            // the server answers goodbye and closes; do not wait long
            setTimeout(() => { try { ws.close(1000); } catch (e) { /* */ } },
                1000);
        } else {
            if (this._ws) {
                try { this._ws.close(1000); } catch (e) { /* gone */ }
            }
            this._finish({ reason: 'left', exitCode: null });
        }
    }
}

/**
 * The agent HTTP API of the same nginx (docs/API.md): list, start, kill,
 * read.  `base` is the API location ("/pty/" by default).
 */
export class PtyApi {
    /**
     * @param {{base?: string, token?: string,
     *     fetch?: typeof globalThis.fetch}} [options]
     */
    constructor(options) {
        const o = options || {};
        this.base = (o.base || '/pty/').replace(/\/?$/, '/');
        this.token = o.token;
        this._fetch = o.fetch || globalThis.fetch.bind(globalThis);
    }

    /**
     * @param {string} call
     * @param {object} [body]
     * @returns {Promise<any>}
     */
    async call(call, body) {
        /** @type {Record<string, string>} */
        const headers = { 'Content-Type': 'application/json' };
        if (this.token) {
            headers.Authorization = 'Bearer ' + this.token;
        }
        const r = await this._fetch(this.base + call, {
            method: 'POST', headers, body: JSON.stringify(body || {}),
        });
        let json;
        try {
            json = await r.json();
        } catch (e) {
            json = null;
        }
        if (!r.ok) {
            const err = json && json.error;
            const e = /** @type {Error & {status?: number, code?: string}} */ (
                new Error(err && err.message ? err.message
                    : 'HTTP ' + r.status + ' from ' + call));
            e.status = r.status;
            e.code = err && err.code;
            throw e;
        }
        return json;
    }

    /**
     * The sessions the caller may see, newest first, each with where and
     * how to attach (`full`); filters as docs/API.md gives them.
     * @param {{running?: boolean, command?: string, limit?: number}} [filter]
     * @returns {Promise<any[]>}
     */
    async list(filter) {
        const r = await this.call('list', Object.assign({ full: true }, filter));
        return r.sessions || [];
    }

    /** @param {{command: string, cols?: number, rows?: number,
     *    wait_ms?: number}} req */
    start(req) { return this.call('start', req); }

    /** @param {string} id */
    kill(id) { return this.call('kill', { id }); }

    /** @param {string} id @param {object} [opts] */
    read(id, opts) { return this.call('read', Object.assign({ id }, opts)); }

    /** @param {string} id @param {object} req */
    write(id, req) { return this.call('write', Object.assign({ id }, req)); }
}

/**
 * The terminal's visible screen as text, one string per row with trailing
 * spaces trimmed (xterm.js and @xterm/headless alike).
 * @param {{rows: number, buffer: {active: {viewportY: number,
 *     getLine(y: number): ({translateToString(trim?: boolean): string}
 *     | undefined)}}}} terminal
 * @returns {string[]}
 */
export function screenLines(terminal) {
    const b = terminal.buffer.active;
    const lines = [];
    for (let y = 0; y < terminal.rows; y++) {
        const line = b.getLine(b.viewportY + y);
        // blanks a program wrote and blanks never written look the same
        lines.push(line ? line.translateToString(true).replace(/ +$/, '') : '');
    }
    return lines;
}
