'use strict';

// What a web IDE's terminal shows and keeps, read out of an @xterm/headless
// Terminal: every visible cell (character, width, attributes, colours,
// underline style and colour), soft-wrap flags, the cursor, the active
// buffer, modes, charsets, tab stops, margins, the saved cursor, the pen
// and the title.  state() gives a plain object; diff() lists differences.

const path = require('path');

const VERSIONS = ['5.5', '6.0'];

function load(version) {
    return require(path.join(__dirname, 'node_modules', 'xterm-' + version));
}

function newTerminal(X, cols, rows) {
    const t = new X.Terminal({ cols, rows, allowProposedApi: true,
                               scrollback: 1000, logLevel: 'off' });
    t._title = '';
    t.onTitleChange((s) => { t._title = s; });
    return t;
}

// parsed at once (the public write() waits for a timer between chunks)
function write(t, data) {
    const wb = t._core._writeBuffer;
    if (wb && wb.writeSync) {
        wb.writeSync(data);
        return Promise.resolve();
    }
    return new Promise((resolve) => t.write(data, resolve));
}

function attrs(a) {
    // a CellData or an AttributeData: colours, flags, extended attributes
    const ext = a.extended || {};
    return {
        fg: a.getFgColorMode() + ':' + a.getFgColor(),
        bg: a.getBgColorMode() + ':' + a.getBgColor(),
        bold: !!a.isBold(), dim: !!a.isDim(), italic: !!a.isItalic(),
        underline: a.isUnderline() ? (ext.underlineStyle || 1) : 0,
        ulcolor: a.isUnderlineColorDefault && !a.isUnderlineColorDefault()
            ? a.getUnderlineColorMode() + ':' + a.getUnderlineColor() : '',
        blink: !!a.isBlink(), inverse: !!a.isInverse(),
        invisible: !!a.isInvisible(), strike: !!a.isStrikethrough(),
        overline: !!(a.isOverline && a.isOverline()),
        protected: !!(a.isProtected && a.isProtected()),
    };
}

function attrKey(o) {
    return Object.keys(o).filter((k) => o[k]).map((k) =>
        o[k] === true ? k : k + '=' + o[k]).join(',');
}

function lines(core, buf, rows, cols) {
    const out = [];
    const cell = new (buf.getNullCell().constructor)();
    for (let y = 0; y < rows; y++) {
        const line = buf.lines.get(buf.ybase + y);
        const cells = [];
        for (let x = 0; x < cols; x++) {
            line.loadCell(x, cell);
            if (cell.getWidth() === 2
                && (x === cols - 1 || line.getWidth(x + 1) !== 0))
            {
                // a wide glyph cut by a narrowing resize in the line
                // xterm.js does not reflow (its right half gone, or a
                // blank since the line grew again): no byte stream writes
                // it, a Keyframe leaves a blank (docs/SNAPSHOT.md)
                cells.push('""/1 fg=0:-1,bg=0:-1');
                continue;
            }
            cells.push(JSON.stringify(cell.getChars()) + '/' + cell.getWidth()
                + ' ' + attrKey(attrs(cell)));
        }
        out.push({ wrapped: !!line.isWrapped, cells });
    }
    return out;
}

function charsetName(cs) {
    if (!cs) {
        return 'ascii';
    }
    if (cs.q === '\u2500') {
        return 'dec-graphics';
    }
    if (cs['#'] === '\u00a3' && Object.keys(cs).length === 1) {
        return 'uk';
    }
    return JSON.stringify(cs);
}

function bufState(core, buf, rows, cols) {
    const tabs = Object.keys(buf.tabs).map(Number).filter((x) => x < cols)
        .sort((a, b) => a - b).join(',');
    return {
        lines: lines(core, buf, rows, cols),
        scrollTop: buf.scrollTop, scrollBottom: buf.scrollBottom,
        tabs,
        // where DECRC puts the cursor: xterm.js clamps the column (a save
        // with a wrap pending holds cols) and counts the row from the
        // scrollback's top (a snapshot rebuilds less scrollback); a reflow
        // can leave the row below the screen, where DECRC breaks xterm.js
        // and a Keyframe cannot save it: the last row
        savedX: Math.min(buf.savedX || 0, cols - 1),
        savedY: Math.min(Math.max((buf.savedY || 0) - buf.ybase, 0),
            rows - 1),
        savedAttr: attrKey(attrs(buf.savedCurAttrData)),
        savedCharset: charsetName(buf.savedCharset),
    };
}

function state(t) {
    const core = t._core;
    const bs = core._bufferService;
    const cols = t.cols, rows = t.rows;
    const ih = core._inputHandler;
    const cs = core._charsetService;
    const dec = core.coreService.decPrivateModes;
    const opt = core.optionsService.rawOptions || core.optionsService.options;
    const st = {
        size: cols + 'x' + rows,
        active: t.buffer.active.type,
        x: bs.buffer.x, y: bs.buffer.y,
        cursorHidden: !!core.coreService.isCursorHidden,
        cursorStyle: dec.cursorStyle !== undefined ? dec.cursorStyle
            : opt.cursorStyle,
        cursorBlink: dec.cursorBlink !== undefined ? dec.cursorBlink
            : opt.cursorBlink,
        modes: JSON.stringify(Object.assign({}, dec, {
            cursorStyle: undefined, cursorBlink: undefined })),
        insert: !!core.coreService.modes.insertMode,
        mouse: core.coreMouseService.activeProtocol + '/'
            + core.coreMouseService.activeEncoding,
        glevel: cs.glevel,
        charsets: [0, 1, 2, 3].map((i) => charsetName(cs._charsets[i])),
        // the set GL draws: after a DECRC, not always its designation
        charset: charsetName(cs.charset),
        pen: attrKey(attrs(ih._curAttrData)),
        title: t._title,
        buffer: bufState(core, bs.buffer, rows, cols),
    };
    if (st.active === 'alternate') {
        st.normal = bufState(core, bs.buffers.normal, rows, cols);
    }
    return st;
}

// What a terminal holds that no byte stream (and so no Keyframe) can make,
// given from a (the stream's) to b (the late joiner's); returns the names
// of those that differed:
//
//   tabs         tab stops at or past the edge, in each buffer: xterm.js
//                keeps the ones set while the terminal was wider, for a
//                resize wider, but HTS sets one under the cursor only
//   alt-lines    the alternate buffer's line list: it holds the most rows
//                the terminal had since the buffer was last left (only a
//                resize makes it longer), and lines above the screen that
//                text scrolled there, which a resize brings back
//   older-lines  the main buffer's lines older than the Keyframe's
//                scrollback, which the model's ring does not hold
//   alt-cells    the alternate buffer's cells past the edge (its lines
//                keep them when it narrows, a widening shows them again)
//   saved-row    a saved cursor's line below the screen (a resize that
//                took rows away can leave it past the buffer's end) or
//                above the buffer's first line (a reflow moved it there)
//   cut-glyphs   on the screen, where the Keyframe left a blank: a cell
//   lone-halves  two columns wide without its right half, a right half
//   lone-marks   without its glyph, a combining mark alone (unwritable())
//   cursor       the cursor more than one column past the edge
//   half-pens    a wide glyph's right half in another pen than the glyph
//                (a reflow that read past a line ending in half a glyph
//                makes one in the default pen: copyHalfPens())
function giveUnwritable(a, b) {
    const out = [];
    if (copyTabs(a, b)) {
        out.push('tabs');
    }
    if (copyAltLines(a, b)) {
        out.push('alt-lines');
    }
    if (copyOlderLines(a, b)) {
        out.push('older-lines');
    }
    if (copyAltCells(a, b)) {
        out.push('alt-cells');
    }
    if (copySavedOutside(a, b)) {
        out.push('saved-row');
    }
    for (const k of copyUnwritableCells(a, b)) {
        out.push(k);
    }
    if (copyCursorPast(a, b)) {
        out.push('cursor');
    }
    if (copyJoinState(a, b)) {
        out.push('join-state');
    }
    if (copyHalfPens(a, b)) {
        out.push('half-pens');
    }
    return out;
}

// a wide glyph's right half in a pen other than its glyph's, where the
// late joiner has the same glyph with a right half in the glyph's pen
// (print() writes both halves in one pen, and an erase or a write into
// either half takes the whole glyph)
function copyHalfPens(a, b) {
    let given = false;
    if (a.cols !== b.cols || a.rows !== b.rows
        || a.buffer.active.type !== b.buffer.active.type)
    {
        return false;
    }
    for (const k of ['normal', 'alt']) {
        const from = a._core._bufferService.buffers[k];
        const to = b._core._bufferService.buffers[k];
        const Cell = from.getNullCell().constructor;
        const [fg, fh, tg, th] = [new Cell(), new Cell(), new Cell(),
                                  new Cell()];
        const key = (c) => c.getChars() + '/' + attrKey(attrs(c));
        for (let y = 0; y < a.rows; y++) {
            const fl = from.lines.get(from.ybase + y);
            const tl = to.lines.get(to.ybase + y);
            if (!fl || !tl) {
                continue;
            }
            const n = Math.min(a.cols, fl.length, tl.length);
            for (let x = 1; x < n; x++) {
                if (fl.getWidth(x) !== 0 || fl.getWidth(x - 1) !== 2
                    || tl.getWidth(x) !== 0 || tl.getWidth(x - 1) !== 2)
                {
                    continue;
                }
                fl.loadCell(x - 1, fg);
                fl.loadCell(x, fh);
                tl.loadCell(x - 1, tg);
                tl.loadCell(x, th);
                const pen = (c) => attrKey(attrs(c));
                if (key(fg) !== key(tg) || pen(fh) === pen(fg)
                    || pen(th) !== pen(tg))
                {
                    continue;
                }
                tl.copyCellsFrom(fl, x, x, 1, false);
                given = true;
            }
        }
    }
    return given;
}

// xterm.js's join state (a mark that comes next joins the cell left of
// the cursor with its width) where no write leaves it: a resize moved the
// cursor since the glyph (or a mark joined to it) was printed.  After a
// write, the cell left of the cursor is the glyph's: a right half for a
// wide one, for a narrow one a cell that holds it.  A wide state over any
// other cell comes only from a wide glyph dropped at the last column with
// autowrap off; a narrow one never has an empty cell or a right half
// there.  Any move or escape sequence ends the state.
function copyJoinState(a, b) {
    const pa = a._core._inputHandler._parser;
    const pb = b._core._inputHandler._parser;
    const from = a._core._bufferService.buffer;
    const to = b._core._bufferService.buffer;
    const w = (pa.precedingJoinState >> 1) & 3;
    if (w === 0 || pb.precedingJoinState === pa.precedingJoinState
        || from.x !== to.x || from.y !== to.y || from.x === 0
        || a.cols !== b.cols)
    {
        return false;
    }
    const line = from.lines.get(from.ybase + from.y);
    if (!line) {
        return false;
    }
    const lw = line.getWidth(from.x - 1);
    // a glyph in another pen than the one in use: any SGR after the
    // glyph printed last ends the join, so a resize moved the cursor
    // next to another glyph
    const cell = line.loadCell(from.x - 1,
                               new (from.getNullCell().constructor)());
    const cur = a._core._inputHandler._curAttrData;
    const unwritable = w === 2
        ? lw !== 0 && (a._core.coreService.decPrivateModes.wraparound
                       || from.x !== a.cols - 1)
        : lw === 0 || line.getString(from.x - 1) === ''
          || cell.fg !== cur.fg || cell.bg !== cur.bg;
    if (!unwritable) {
        return false;
    }
    pb.precedingJoinState = pa.precedingJoinState;
    return true;
}

// a cursor more than one column past the edge (marks past the edge, each
// with a column of its own, move it there), where the Keyframe's waits
// to wrap in the last column or past it
function copyCursorPast(a, b) {
    const from = a._core._bufferService.buffer;
    const to = b._core._bufferService.buffer;
    if (from.x <= a.cols || a.cols !== b.cols || from.y !== to.y
        || to.x < b.cols - 1 || to.x === from.x)
    {
        return false;
    }
    to.x = from.x;
    return true;
}

// the kind of cell no write makes that the stream's line holds at x, or
// null: a wide glyph without its right half (xterm.js's join of a mark to
// the glyph before a wide one it dropped at the edge, a reflow; a lone
// mark in that half, which only a second lone mark past the edge writes
// there with autowrap off), a right half without its glyph (and the
// blank before it), a combining mark alone (joined to an empty cell
// after a resize moved the cursor)
function unwritable(line, x, cols, cell, unicode) {
    const w = line.getWidth(x);
    if (w === 2 && (x === cols - 1 || line.getWidth(x + 1) !== 0
                    || line.hasContent(x + 1)))
    {
        return 'cut-glyphs';
    }
    if (w === 0 && (x === 0 || line.getWidth(x - 1) !== 2)) {
        return 'lone-halves';
    }
    if (w === 1 && x + 1 < cols && line.getWidth(x + 1) === 0
        && !line.hasContent(x) && !line.hasContent(x + 1))
    {
        // the blank before a lone right half: one in a whole pen (which
        // xterm.js's print() leaves of a wide glyph's left half) cannot
        // be written there, only ICH's in a background
        return 'lone-halves';
    }
    line.loadCell(x, cell);
    if (w === 1 && cell.getChars() !== ''
        && unicode.getStringCellWidth(cell.getChars()) === 2)
    {
        // a wide glyph in one column: a mark joined to it after a resize
        // moved the cursor there, in the width of the narrow glyph
        // printed last (xterm.js's join state)
        return 'cut-glyphs';
    }
    return /^\p{M}/u.test(cell.getChars()) ? 'lone-marks' : null;
}

// such cells of the screen where the Keyframe left a blank
function copyUnwritableCells(a, b) {
    const out = new Set();
    const cols = a.cols;
    if (cols !== b.cols || a.rows !== b.rows
        || a.buffer.active.type !== b.buffer.active.type)
    {
        return out;
    }
    for (const k of ['normal', 'alt']) {
        const from = a._core._bufferService.buffers[k];
        const to = b._core._bufferService.buffers[k];
        const cell = new (from.getNullCell().constructor)();
        const blank = new (to.getNullCell().constructor)();
        // the scrollback's too, line for line up from the screen (a
        // resize after the Keyframe brings them back)
        const above = Math.min(from.ybase, to.ybase);
        for (let y = -above; y < a.rows; y++) {
            const fl = from.lines.get(from.ybase + y);
            const tl = to.lines.get(to.ybase + y);
            if (!fl || !tl) {
                continue;
            }
            for (let x = 0; x < cols && x < fl.length && x < tl.length; x++) {
                const kind = unwritable(fl, x, cols, cell,
                                        a._core.unicodeService);
                if (kind === null) {
                    continue;
                }
                tl.loadCell(x, blank);
                if (blank.getChars() !== '' || blank.getWidth() !== 1) {
                    continue;
                }
                tl.copyCellsFrom(fl, x, x, 1, false);
                out.add(kind);
            }
        }
    }
    return out;
}

function copyAltLines(a, b) {
    const from = a._core._bufferService.buffers.alt;
    const to = b._core._bufferService.buffers.alt;
    let differed = false;
    if (from.lines.maxLength > to.lines.maxLength) {
        to.lines.maxLength = from.lines.maxLength;
        differed = true;
    }
    if (a.buffer.active.type !== 'alternate'
        || b.buffer.active.type !== 'alternate')
    {
        return differed;
    }
    const n = from.ybase - to.ybase;
    if (n > 0) {
        prependLines(from, to, n);
        // the saved row: the Keyframe's, unless it is a line above
        to.savedY = from.savedY < from.ybase ? from.savedY : to.savedY + n;
        differed = true;
    }
    return differed;
}

// the main buffer's lines older than the Keyframe's scrollback: the model
// keeps a ring of scrollback, at least 48 lines (NGX_PTY_SB_MIN), not
// xterm.js's 1,000, and a later resize reflows a line that started above
// the ring from its start (docs/SNAPSHOT.md, "Scrollback the ring does
// not hold").  Given only where the Keyframe carried at least that many
// lines and its oldest is the stream's line there, so that a ring that
// lost lines it should hold still fails.
const SB_MIN = 48;

function copyOlderLines(a, b) {
    const from = a._core._bufferService.buffers.normal;
    const to = b._core._bufferService.buffers.normal;
    const n = from.lines.length - to.lines.length;
    if (n <= 0 || a.cols !== b.cols || a.rows !== b.rows
        || to.lines.length - b.rows < SB_MIN
        || from.lines.get(n).translateToString(true)
           !== to.lines.get(0).translateToString(true))
    {
        return false;
    }
    prependLines(from, to, n);
    to.savedY = from.savedY < n ? from.savedY : to.savedY + n;
    // the line the Keyframe starts with goes on where it went on
    to.lines.get(n).isWrapped = from.lines.get(n).isWrapped;
    return true;
}

// from's first n lines put before to's, which its screen stays below
function prependLines(from, to, n) {
    const lines = [];
    for (let i = 0; i < n; i++) {
        lines.push(from.lines.get(i).clone());
    }
    to.lines.splice(0, 0, ...lines);
    to.ybase += n;
    to.ydisp += n;
}

// a saved row outside the buffer: a resize that took rows away can leave
// xterm.js's saved line past the buffer's end, where DECSC never saves;
// or above its first line: a reflow of a first line marked wrapped (SU
// after its text was erased) moves it to -1
function copySavedOutside(a, b) {
    let differed = false;
    for (const k of ['normal', 'alt']) {
        const from = a._core._bufferService.buffers[k];
        const to = b._core._bufferService.buffers[k];
        const row = from.savedY - from.ybase;
        if ((row >= a.rows || from.savedY < 0)
            && to.savedY - to.ybase !== row)
        {
            to.savedY = to.ybase + row;
            differed = true;
        }
    }
    return differed;
}

// the alternate buffer's cells past the edge: xterm.js does not cut its
// lines when it narrows (no reflow there), and a widening shows them
function copyAltCells(a, b) {
    const from = a._core._bufferService.buffers.alt;
    const to = b._core._bufferService.buffers.alt;
    const cols = b.cols;
    let differed = false;
    if (a.buffer.active.type !== 'alternate'
        || b.buffer.active.type !== 'alternate'
        || from.lines.length !== to.lines.length)
    {
        return false;
    }
    for (let i = 0; i < from.lines.length; i++) {
        const fl = from.lines.get(i);
        const tl = to.lines.get(i);
        if (fl.length <= cols || tl.length !== cols) {
            continue;
        }
        // from the last column where a wide glyph there has its right
        // half past the edge (the Keyframe's blank reads the same)
        const at = fl.getWidth(cols - 1) === 2 ? cols - 1 : cols;
        tl.resize(fl.length, to.getNullCell());
        tl.copyCellsFrom(fl, at, at, fl.length - at, false);
        differed = true;
    }
    return differed;
}

function copyTabs(a, b) {
    const cols = b.cols;
    let differed = false;
    for (const k of ['normal', 'alt']) {
        const from = a._core._bufferService.buffers[k].tabs;
        const to = b._core._bufferService.buffers[k].tabs;
        const keys = new Set([...Object.keys(from), ...Object.keys(to)]);
        for (const x of keys) {
            if (Number(x) < cols || !!from[x] === !!to[x]) {
                continue;
            }
            differed = true;
            if (from[x]) {
                to[x] = true;
            } else {
                delete to[x];
            }
        }
    }
    return differed;
}

// differences between two states, as readable lines (at most max)
function diff(a, b, max) {
    const out = [];
    max = max || 20;
    function cmp(pfx, x, y) {
        if (out.length >= max) {
            return;
        }
        if (x && typeof x === 'object') {
            for (const k of new Set([...Object.keys(x), ...Object.keys(y || {})])) {
                cmp(pfx + '.' + k, x[k], (y || {})[k]);
            }
            return;
        }
        if (x !== y) {
            out.push(pfx + ': stream ' + JSON.stringify(x) + ' keyframe '
                + JSON.stringify(y));
        }
    }
    cmp('', a, b);
    return out;
}

module.exports = { VERSIONS, load, newTerminal, write, state, diff,
                   giveUnwritable };
