'use strict';
// xterm.js's own errors that the screen model does not copy, because the
// agent's read would then be wrong too (docs/SNAPSHOT.md, "xterm.js's
// errors").  Each is a patch that makes xterm.js do what the code means
// to do.  A stream that differs from its Keyframe only through one of
// them (it passes with that patch, and only then) is counted as that
// error, by name, and not as a failure: the Keyframe is right, the
// stream's own terminal is not.
//
// A patch is put on the prototypes of both versions for one run and
// taken off after it.

const xs = require('./xtstate');

// the prototypes a patch replaces a method of, for a loaded version
function protos(X) {
    const t = xs.newTerminal(X, 2, 1);
    const p = {
        BufferLine: Object.getPrototypeOf(t._core.buffer.lines.get(0)),
        InputHandler: Object.getPrototypeOf(t._core._inputHandler),
    };
    t.dispose();
    return p;
}

const FIXES = {
    // copyCellsFrom() moves the combined strings of every cell from srcCol
    // on, not of the cells it copies, and in place: a reflow that moves a
    // row's cells right copies a cell with marks over the next one ('ãñ'
    // comes out 'ãã')
    'reflow-copies-combined-cells': {
        proto: 'BufferLine',
        method: 'copyCellsFrom',
        patch(orig) {
            return function (src, srcCol, destCol, length, reverse) {
                const mine = Object.assign({}, this._combined);
                const theirs = Object.assign({}, src._combined);
                orig.call(this, src, srcCol, destCol, length, reverse);
                for (const k of Object.keys(this._combined)) {
                    delete this._combined[k];
                }
                Object.assign(this._combined, mine);
                for (const k of Object.keys(theirs)) {
                    const key = Number(k);
                    if (key >= srcCol && key < srcCol + length) {
                        this._combined[key - srcCol + destCol] = theirs[k];
                    }
                }
            };
        },
    },
    // DECSC saves the pen's colour words only, not its extended part
    // (underline style and colour), and DECRC gives back the colour words
    // with the extended part the pen has then
    'decsc-saves-colours-only': {
        proto: 'InputHandler',
        method: ['saveCursor', 'restoreCursor'],
        patch(orig, method) {
            if (method === 'saveCursor') {
                return function (params) {
                    const r = orig.call(this, params);
                    this._activeBuffer.savedCurAttrData.extended =
                        this._curAttrData.extended.clone();
                    return r;
                };
            }
            return function (params) {
                const r = orig.call(this, params);
                this._curAttrData.extended =
                    this._activeBuffer.savedCurAttrData.extended.clone();
                return r;
            };
        },
    },
};

// run fn() with the named fix on both versions
async function withFix(name, fn) {
    const fix = FIXES[name];
    const methods = [].concat(fix.method);
    const undo = [];
    for (const v of xs.VERSIONS) {
        const p = protos(xs.load(v))[fix.proto];
        for (const m of methods) {
            const orig = p[m];
            p[m] = fix.patch(orig, m);
            undo.push(() => { p[m] = orig; });
        }
    }
    try {
        return await fn();
    } finally {
        undo.forEach((u) => u());
    }
}

module.exports = { FIXES, withFix };
