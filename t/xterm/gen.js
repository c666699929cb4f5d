'use strict';

// Random streams for difftest.js: pieces of the classes below strung
// together, fed in random cuts (so a Keyframe may fall inside a sequence
// or a UTF-8 character), the Keyframe at a random cut, resizes between.

function rng(seed) {
    // mulberry32
    let a = seed >>> 0;
    const r = () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    r.int = (n) => Math.floor(r() * n);
    r.pick = (a) => a[r.int(a.length)];
    return r;
}

const E = '\x1b';
const CSI = E + '[';

const SGR = ['0', '1', '2', '1;2', '3', '4', '4:0', '4:1', '4:2', '4:3',
    '4:4', '4:5', '5', '7', '8', '9', '21', '22', '23', '24', '25', '27',
    '28', '29', '53', '55', '39', '49', '59'];

function color(r, base) {
    switch (r.int(5)) {
    case 0: return String(base + r.int(8));
    case 1: return String(base + 60 + r.int(8));
    case 2: return (base + 8) + ';5;' + r.int(256);
    case 3: return (base + 8) + ':5:' + r.int(256);
    default:
        return (base + 8) + ';2;' + r.int(256) + ';' + r.int(256) + ';'
            + r.int(256);
    }
}

function sgr(r) {
    const n = 1 + r.int(3), a = [];
    for (let i = 0; i < n; i++) {
        switch (r.int(4)) {
        case 0: a.push(color(r, 30)); break;
        case 1: a.push(color(r, 40)); break;
        case 2: {
            const k = r.int(3);
            a.push(k === 0 ? '58;5;' + r.int(256)
                : k === 1 ? '58:5:' + r.int(256)
                : '58;2;' + r.int(256) + ';' + r.int(256) + ';' + r.int(256));
            break;
        }
        default: a.push(r.pick(SGR));
        }
    }
    return CSI + a.join(';') + 'm';
}

const WORDS = ['hello', 'world', 'ls', '-la', 'a', 'xyz', 'foo_bar', '$',
    '1234567890', '~/src', '#', '  '];

const CLASSES = {
    text: (r) => r.pick(WORDS) + (r.int(3) ? ' ' : ''),
    lines: (r) => r.pick(WORDS) + r.pick(['\r\n', '\n', '\r']),
    wide: (r) => r.pick(['漢字', 'か', '한국어', 'ｱ', '中文字', 'x漢']),
    combining: (r) => r.pick(['e\u0301', 'か\u3099', 'a\u0308\u0323',
        '\u0301', 'n\u0303', 'ｶ\u3099']),
    sgr,
    cursor: (r) => r.pick([
        CSI + (1 + r.int(30)) + ';' + (1 + r.int(90)) + 'H', CSI + 'H',
        CSI + r.int(5) + 'A', CSI + r.int(5) + 'B', CSI + r.int(9) + 'C',
        CSI + r.int(9) + 'D', CSI + (1 + r.int(90)) + 'G',
        CSI + (1 + r.int(30)) + 'd', '\b', '\r', '\n', CSI + 'E',
        E + 'D', E + 'M', E + 'E']),
    erase: (r) => r.pick([CSI + 'K', CSI + '1K', CSI + '2K', CSI + 'J',
        CSI + '1J', CSI + '2J', CSI + r.int(6) + 'X', CSI + r.int(4) + '@',
        CSI + r.int(4) + 'P', CSI + r.int(3) + 'L', CSI + r.int(3) + 'M']),
    scroll: (r) => r.pick([
        CSI + (1 + r.int(5)) + ';' + (6 + r.int(20)) + 'r', CSI + 'r',
        CSI + r.int(3) + 'S', CSI + r.int(3) + 'T']),
    modes: (r) => r.pick([CSI + '?7l', CSI + '?7h', CSI + '?25l',
        CSI + '?25h', CSI + '?1h', CSI + '?1l', CSI + '?2004h',
        CSI + '?1000h', CSI + '?1002h', CSI + '?1006h', CSI + '?1000l',
        CSI + '4h', CSI + '4l', CSI + '?1049h', CSI + '?1049l',
        CSI + '?1047h', CSI + '?1047l', E + '7', E + '8', CSI + '?12l',
        CSI + '?12h', CSI + r.int(7) + ' q', E + '=', E + '>',
        CSI + '?6h', CSI + '?6l', CSI + '?1004h', CSI + '20h',
        CSI + '20l', CSI + '?5h', CSI + '?5l']),
    charsets: (r) => r.pick([E + '(0', E + '(B', E + ')0', E + ')B',
        '\x0e', '\x0f', 'lqqk', 'x', 'mqj', E + '*0', E + '+0', E + 'n',
        E + 'o']),
    tabs: (r) => r.pick(['\t', E + 'H', CSI + 'g', CSI + '3g',
        CSI + r.int(3) + 'I', CSI + r.int(3) + 'Z']),
    wrap: (r) => 'x'.repeat(20 + r.int(100)),
    // at most a row's width (the narrowest is 10): docs/SNAPSHOT.md
    rep: (r) => CSI + (r.int(4) ? r.int(11) : '') + 'b',
    // DECSCA and the selective erases it protects from
    protect: (r) => r.pick([CSI + '1"q', CSI + '0"q', CSI + '2"q',
        CSI + '?K', CSI + '?1K', CSI + '?2K', CSI + '?J', CSI + '?1J',
        CSI + '?2J']),
    resize: null,
    'late-resize': null,
};

// every class but REP and DECSCA, which came later: the seeds' figures
// in docs/SNAPSHOT.md stay those of the same streams
const ALL = Object.keys(CLASSES).filter((k) => k !== 'rep'
    && k !== 'protect');

// ops: one per piece (so shrinking drops whole pieces), the Keyframe
// between two or inside one (then cut in two there), resizes between:
// "resize" before the Keyframe only, "late-resize" after it too (the late
// joiner has no scrollback to pull rows back from: docs/SNAPSHOT.md)
function randomCase(r, classes) {
    // the model keeps five marks on a glyph (docs/SNAPSHOT.md): streams
    // that put more on one are drawn again
    for (;;) {
        const c = drawCase(r, classes);
        if (!tooManyMarks(c)) {
            return c;
        }
    }
}

const MARKS = /[\u0301\u0303\u0308\u0323\u3099]{6,}/u;

function tooManyMarks(c) {
    const bytes = c.ops.filter((op) => op.x !== undefined)
        .map((op) => Buffer.from(op.x, 'hex'));
    return MARKS.test(Buffer.concat(bytes).toString('utf8'));
}

function drawCase(r, classes) {
    classes = classes || ALL;
    const pieces = classes.filter((k) => CLASSES[k]);
    const cols = 10 + r.int(70), rows = 3 + r.int(20);
    const n = 5 + r.int(60);
    const kf = r.int(n + 1);
    const ops = [];
    for (let i = 0; i <= n; i++) {
        const late = classes.includes('late-resize');
        if ((late || (classes.includes('resize') && i <= kf))
            && r.int(12) === 0)
        {
            ops.push({ resize: [5 + r.int(80), 2 + r.int(25)] });
        }
        const b = i < n ? Buffer.from(CLASSES[r.pick(pieces)](r), 'utf8')
                        : Buffer.alloc(0);
        if (i === kf) {
            // at a random byte of this piece: maybe inside a sequence
            const cut = b.length ? r.int(b.length) : 0;
            if (cut) {
                ops.push({ x: b.subarray(0, cut).toString('hex') });
            }
            ops.push({ keyframe: true });
            if (b.length > cut) {
                ops.push({ x: b.subarray(cut).toString('hex') });
            }
        } else if (b.length) {
            ops.push({ x: b.toString('hex') });
        }
    }
    return { cols, rows, ops };
}

module.exports = { rng, randomCase, CLASSES: ALL };
