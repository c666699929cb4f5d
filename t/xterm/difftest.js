'use strict';

// The differential Keyframe test: a terminal fed the whole stream and a
// terminal fed a Keyframe plus the output after it must be identical, in
// xterm.js (@xterm/headless, each version of xtstate.VERSIONS).
//
//   node difftest.js --cases FILE|DIR...     cases given (JSON, see below)
//   node difftest.js --random N [--seed S] [--classes a,b] [--save DIR]
//
// A case: {"name", "cols", "rows", "ops": [...], "keyframe": ...}.  An op
// is {"d": "text"} (UTF-8), {"x": "hex bytes"}, {"resize": [cols, rows]}
// or {"keyframe": true} (where the late joiner's Keyframe is taken: the
// snapshot comes from build/vtpair, ngx_pty_screen itself).  A case taken
// through nginx carries its Keyframe instead: "keyframe": {"at": index of
// the first op after it, "snapshot": base64, "cols", "rows"}.
//
// Random streams mix the classes of gen.js; a failing one is shrunk to a
// minimal case, printed, and with --save written as DIR/<name>.json.  A
// stream xterm.js itself throws on (its bugs; no Keyframe involved) is
// skipped and counted.  A random stream that differs only through one of
// xterm.js's errors (xtfixes.js: it passes with that error fixed in
// xterm.js) is counted by the error's name; a case names the error it
// shows in "xterm_error", and must then differ without the fix and pass
// with it.  Exit 0 when no case fails, 1 otherwise.

const fs = require('fs');
const path = require('path');
const { spawn } = require('child_process');
const xs = require('./xtstate');
const gen = require('./gen');
const xtfixes = require('./xtfixes');

const VTPAIR = process.env.VTPAIR
    || path.join(__dirname, '..', '..', 'build', 'vtpair');

// --- build/vtpair over a pipe ---------------------------------------------

class Model {
    constructor() {
        this.p = spawn(VTPAIR, [], { stdio: ['pipe', 'pipe', 'inherit'] });
        this.buf = Buffer.alloc(0);
        this.waiting = null;
        this.p.stdout.on('data', (d) => {
            this.buf = Buffer.concat([this.buf, d]);
            this.check();
        });
        this.p.on('exit', (code) => {
            if (this.waiting) {
                this.waiting.reject(new Error('vtpair exited ' + code));
            }
        });
    }
    check() {
        const w = this.waiting;
        if (!w || this.buf.length < w.head) {
            return;
        }
        const len = this.buf.readUInt32LE(0);
        if (this.buf.length < w.head + len) {
            return;
        }
        const r = { data: this.buf.subarray(w.head, w.head + len) };
        if (w.head === 8) {
            r.cols = this.buf.readUInt16LE(4);
            r.rows = this.buf.readUInt16LE(6);
        }
        this.buf = this.buf.subarray(w.head + len);
        this.waiting = null;
        w.resolve(r);
    }
    send(b) { this.p.stdin.write(b); }
    create(cols, rows) { this.send(this.size('N', cols, rows)); }
    resize(cols, rows) { this.send(this.size('R', cols, rows)); }
    size(op, cols, rows) {
        const b = Buffer.alloc(5);
        b.write(op, 0, 'latin1');
        b.writeUInt16LE(cols, 1);
        b.writeUInt16LE(rows, 3);
        return b;
    }
    feed(data) {
        const h = Buffer.alloc(5);
        h.write('D', 0, 'latin1');
        h.writeUInt32LE(data.length, 1);
        this.send(Buffer.concat([h, data]));
    }
    snapshot() {
        return new Promise((resolve, reject) => {
            this.waiting = { resolve, reject, head: 8 };
            this.send(Buffer.from('S'));
            this.check();
        });
    }
    close() { this.p.stdin.end(); }
}

// --- cases -----------------------------------------------------------------

function opBytes(op) {
    if (op.d !== undefined) {
        return Buffer.from(op.d, 'utf8');
    }
    if (op.x !== undefined) {
        return Buffer.from(op.x, 'hex');
    }
    return null;
}

// the Keyframe of a case: {at, snapshot (Buffer), cols, rows}
async function keyframeOf(model, c) {
    if (c.keyframe) {
        return { at: c.keyframe.at, cols: c.keyframe.cols,
                 rows: c.keyframe.rows,
                 snapshot: Buffer.from(c.keyframe.snapshot, 'base64') };
    }
    model.create(c.cols, c.rows);
    for (let i = 0; i < c.ops.length; i++) {
        const op = c.ops[i];
        if (op.keyframe) {
            const s = await model.snapshot();
            return { at: i + 1, cols: s.cols, rows: s.rows, snapshot: s.data };
        }
        if (op.resize) {
            model.resize(op.resize[0], op.resize[1]);
        } else {
            model.feed(opBytes(op));
        }
    }
    const s = await model.snapshot();
    return { at: c.ops.length, cols: s.cols, rows: s.rows, snapshot: s.data };
}

async function apply(t, ops) {
    for (const op of ops) {
        if (op.resize) {
            t.resize(op.resize[0], op.resize[1]);
        } else if (!op.keyframe) {
            await xs.write(t, opBytes(op));
        }
    }
}

const terms = {};

// a new terminal each time: RIS leaves some options as the last case set
// them (5.5 keeps DECSCUSR and ?12 in the options)
function fresh(X, v, slot, cols, rows) {
    const key = v + '/' + slot;
    if (terms[key]) {
        terms[key].dispose();
    }
    return (terms[key] = xs.newTerminal(X, cols, rows));
}

// xterm.js itself throws on the stream (its own bug, not the Keyframe's:
// e.g. a line a reflow popped, erased later): the case cannot be judged
class StreamThrows extends Error {}

// the stream's terminal after each op: xterm.js can leave a buffer
// holding fewer lines than its screen needs (the alternate one, when a
// resize that adds rows finds the cursor above lines it keeps above the
// screen: it adds blank lines, then cuts the list to the rows), so that
// the screen reads past the list's end; what it does from there (a later
// resize cuts the list again, from a line that is not there) no late
// joiner could match, even when the end state reads well
async function applyStream(t, ops, v) {
    for (const op of ops) {
        try {
            await apply(t, [op]);
        } catch (e) {
            throw new StreamThrows('xterm ' + v + ' throws on the stream'
                + ' itself: ' + e.message);
        }
        screenOrThrow(t, v);
    }
}

function screenOrThrow(t, v) {
    const bs = t._core._bufferService;
    for (const k of ['normal', 'alt']) {
        const b = bs.buffers[k];
        if (b.lines.length && b.lines.length < b.ybase + t.rows) {
            throw new StreamThrows('xterm ' + v + ' leaves the ' + k
                + ' buffer without a screen (' + b.lines.length
                + ' lines, the screen from line ' + b.ybase + ')');
        }
    }
}

// whether a buffer's list holds a line past its end (CircularList.get()
// does not check its bounds)
function staleLine(t) {
    const bs = t._core._bufferService;
    return ['normal', 'alt'].some((k) => {
        const l = bs.buffers[k].lines;
        return l.length < l.maxLength
            && l._array[l._getCyclicIndex(l.length)] !== undefined;
    });
}

function streamState(t, v) {
    screenOrThrow(t, v);
    try {
        return xs.state(t);
    } catch (e) {
        throw new StreamThrows('xterm ' + v + ' cannot be read after the'
            + ' stream: ' + e.message);
    }
}

// [] when the case passes, else the differences found; throws
// StreamThrows when xterm.js fails on the stream without any Keyframe.
// What the stream's terminal holds at the Keyframe that no byte stream can
// make (tab stops past the edge, the alternate buffer's lines above the
// screen, a wide glyph without its right half where the Keyframe left a
// blank: xtstate.giveUnwritable), and the lines older than the scrollback
// the Keyframe carries, are given to the late joiner before the two are
// compared (docs/SNAPSHOT.md);
// c.copied names it, and the runs count such streams
async function runCase(model, c) {
    const kf = await keyframeOf(model, c);
    const problems = [];
    for (const v of xs.VERSIONS) {
        const X = xs.load(v);
        const a = fresh(X, v, 'a', c.cols, c.rows);
        await applyStream(a, c.ops.slice(0, kf.at), v);
        const sa = streamState(a, v);
        const b = fresh(X, v, 'b', kf.cols, kf.rows);
        await xs.write(b, kf.snapshot);
        for (const k of xs.giveUnwritable(a, b)) {
            c.copied = c.copied || {};
            c.copied[k] = true;
        }
        let d = xs.diff(sa, xs.state(b), 8);
        if (!d.length) {
            await applyStream(a, c.ops.slice(kf.at), v);
            try {
                await apply(b, c.ops.slice(kf.at));
                d = xs.diff(streamState(a, v), xs.state(b), 8)
                    .map((l) => 'later' + l);
            } catch (e) {
                // the late joiner's terminal throws where the stream's
                // does not: a difference, unless the stream's only read
                // a stale line past its list's end (ED 1 from the last
                // column of the last row reads the line after it
                // unchecked; a resize that cut the list left one there)
                if (staleLine(a)) {
                    throw new StreamThrows('xterm ' + v + ' throws on the'
                        + ' late joiner, where the stream read a stale line'
                        + ' past its list: ' + e.message);
                }
                d = ['later: the Keyframe terminal throws: ' + e.message];
            }
        }
        if (d.length) {
            problems.push(...d.map((l) => 'xterm ' + v + ': ' + l));
        }
    }
    return problems;
}

// a case that shows an xterm.js error (xtfixes.js): it must differ as it
// is, and pass with the error fixed; the differences, [] when both hold
async function expectXtermError(model, c, d) {
    if (!xtfixes.FIXES[c.xterm_error]) {
        return ['no xterm.js error ' + c.xterm_error + ' in xtfixes.js'];
    }
    if (!d.length) {
        return ['passes without the fix of xterm.js error ' + c.xterm_error
                + ' (fixed in xterm.js? then make it a plain case)'];
    }
    const f = await xtfixes.withFix(c.xterm_error, () => runCase(model, c));
    return f.map((l) => 'with ' + c.xterm_error + ' fixed: ' + l);
}

// --- shrinking ---------------------------------------------------------------

// the case's ops as [bytes...], the keyframe and resizes kept as markers
function flatten(c) {
    return c.ops.map((op) => op.keyframe || op.resize ? op
        : { x: opBytes(op).toString('hex') });
}

function validUtf8(c) {
    const b = Buffer.concat(c.ops.map(opBytes).filter((x) => x));
    return Buffer.from(b.toString('utf8'), 'utf8').equals(b);
}

// what kind of difference: the first one's place, without numbers
function signature(problems) {
    return problems.length
        ? problems[0].replace(/^xterm [\d.]+: /, '').replace(/:.*/, '')
            .replace(/\d+/g, 'N')
        : '';
}

// still failing the same way, and no byte string the original could not
// have been
async function fails(model, c, utf8, sig) {
    if (utf8 && !validUtf8(c)) {
        return false;
    }
    try {
        return signature(await runCase(model, c)) === sig;
    } catch (e) {
        if (e instanceof StreamThrows) {
            return false;
        }
        throw e;
    }
}

// bytes of each op, halving the piece size (this can make sequences no
// program writes: only with --shrink-bytes)
async function shrinkBytes(model, cur, utf8, sig) {
    for (let i = 0; i < cur.ops.length; i++) {
        if (cur.ops[i].x === undefined) {
            continue;
        }
        let bytes = Buffer.from(cur.ops[i].x, 'hex');
        for (let n = bytes.length >> 1 || 1; n >= 1; n = n > 1 ? n >> 1 : 0) {
            for (let k = 0; k + n <= bytes.length; /* */) {
                const nb = Buffer.concat([bytes.subarray(0, k),
                                          bytes.subarray(k + n)]);
                const ops = cur.ops.slice();
                ops[i] = { x: nb.toString('hex') };
                const t = { ...cur, ops };
                if (await fails(model, t, utf8, sig)) {
                    cur = t;
                    bytes = nb;
                } else {
                    k += n;
                }
            }
        }
    }
    return cur;
}

let bytes = false;

async function shrink(model, c) {
    const utf8 = validUtf8(c);
    const sig = signature(await runCase(model, c));
    let cur = { ...c, ops: flatten(c) };
    // whole ops first, then bytes of each op, halving the piece size
    for (let i = cur.ops.length - 1; i >= 0; i--) {
        if (cur.ops[i].keyframe) {
            continue;
        }
        const t = { ...cur, ops: cur.ops.filter((_, k) => k !== i) };
        if (await fails(model, t, utf8, sig)) {
            cur = t;
        }
    }
    if (bytes) {
        cur = await shrinkBytes(model, cur, utf8, sig);
    }
    // readable again where the bytes are UTF-8
    cur.ops = cur.ops.map((op) => {
        if (op.x === undefined) {
            return op;
        }
        const b = Buffer.from(op.x, 'hex');
        const s = b.toString('utf8');
        return Buffer.from(s, 'utf8').equals(b) ? { d: s } : op;
    });
    return cur;
}

// --- main --------------------------------------------------------------------

function readCases(p) {
    if (fs.statSync(p).isDirectory()) {
        return fs.readdirSync(p).filter((f) => f.endsWith('.json')).sort()
            .flatMap((f) => readCases(path.join(p, f)));
    }
    const j = JSON.parse(fs.readFileSync(p, 'utf8'));
    return (Array.isArray(j) ? j : [j]).map((c, i) =>
        ({ name: path.basename(p, '.json') + (Array.isArray(j) ? '#' + i : ''),
           ...c }));
}

async function main() {
    const argv = process.argv.slice(2);
    const opt = { cases: [], random: 0, seed: 1, classes: null, save: null,
                  quiet: false, maxFail: 10 };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === '--cases') {
            while (argv[i + 1] && !argv[i + 1].startsWith('--')) {
                opt.cases.push(...readCases(argv[++i]));
            }
        } else if (a === '--random') {
            opt.random = Number(argv[++i]);
        } else if (a === '--seed') {
            opt.seed = Number(argv[++i]);
        } else if (a === '--classes') {
            opt.classes = argv[++i].split(',');
        } else if (a === '--save') {
            opt.save = argv[++i];
        } else if (a === '--max-fail') {
            opt.maxFail = Number(argv[++i]);
        } else if (a === '--shrink-bytes') {
            bytes = true;
        } else if (a === '--quiet') {
            opt.quiet = true;
        } else {
            console.error('unknown argument ' + a);
            process.exit(2);
        }
    }

    const model = new Model();
    let passed = 0, failed = 0, skipped = 0;
    const copied = {};

    const xtErrors = {};

    // the xterm.js error (xtfixes.js) a case differs through alone, if any
    async function xtermError(c) {
        for (const name of Object.keys(xtfixes.FIXES)) {
            const d = await xtfixes.withFix(name, () => runCase(model, c));
            if (!d.length) {
                return name;
            }
        }
        return null;
    }

    // the differences, or null when xterm.js cannot take the stream
    async function judge(c) {
        try {
            let d = await runCase(model, c);
            for (const k of Object.keys(c.copied || {})) {
                copied[k] = (copied[k] || 0) + 1;
            }
            if (c.xterm_error) {
                d = await expectXtermError(model, c, d);
            } else if (d.length && c.random) {
                c.xtermError = await xtermError(c);
                if (c.xtermError) {
                    xtErrors[c.xtermError] = (xtErrors[c.xtermError] || 0)
                        + 1;
                    console.log('ok - ' + c.name + ' # xterm.js error '
                        + c.xtermError);
                    return [];
                }
            }
            return d;
        } catch (e) {
            if (!(e instanceof StreamThrows)) {
                throw e;
            }
            skipped++;
            console.log('skip - ' + c.name + ': ' + e.message);
            return null;
        }
    }

    for (const c of opt.cases) {
        const d = await judge(c);
        if (d === null) {
            continue;
        }
        if (d.length) {
            failed++;
            console.log('not ok - ' + c.name + '\n  ' + d.join('\n  '));
        } else {
            passed++;
            if (!opt.quiet) {
                console.log('ok - ' + c.name);
            }
        }
    }

    const rng = gen.rng(opt.seed);
    for (let i = 0; i < opt.random && failed < opt.maxFail; i++) {
        const c = gen.randomCase(rng, opt.classes);
        c.name = 'random seed ' + opt.seed + ' #' + i;
        c.random = true;
        const d = await judge(c);
        if (d === null) {
            continue;
        }
        if (!d.length) {
            passed += c.xtermError ? 0 : 1;
            continue;
        }
        failed++;
        const m = await shrink(model, c);
        const dm = await runCase(model, m);
        m.name = 'shrunk-' + opt.seed + '-' + i;
        console.log('not ok - ' + c.name + ' (shrunk: '
            + JSON.stringify({ cols: m.cols, rows: m.rows, ops: m.ops })
            + ')\n  ' + (dm.length ? dm : d).join('\n  '));
        if (opt.save) {
            fs.mkdirSync(opt.save, { recursive: true });
            fs.writeFileSync(path.join(opt.save, m.name + '.json'),
                JSON.stringify({ cols: m.cols, rows: m.rows, ops: m.ops },
                               null, 1) + '\n');
        }
    }

    model.close();
    if (skipped) {
        console.log(skipped + ' skipped (xterm.js fails on the stream)');
    }
    for (const k of Object.keys(copied)) {
        console.log(copied[k] + ' given ' + k + ' at the Keyframe ('
            + (k === 'older-lines' ? 'past the scrollback it carries'
                : 'no byte stream makes them') + ')');
    }
    for (const k of Object.keys(xtErrors)) {
        console.log(xtErrors[k] + ' differ through xterm.js error ' + k
            + ' only (they pass with it fixed)');
    }
    console.log(passed + ' passed, ' + failed + ' failed');
    process.exit(failed ? 1 : 0);
}

if (require.main === module) {
    main().catch((e) => { console.error(e); process.exit(2); });
}

module.exports = { runCase, Model };
