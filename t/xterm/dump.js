// The screen a case's stream leaves in xterm.js, up to its Keyframe: every
// line of the active buffer (scrollback too) as text, "w" where a line is
// wrapped and ">" on the screen's first, then the cells of each with their
// widths, and the cursor.  A help for reading a failing case:
//
//   node t/xterm/dump.js CASE.json [5.5|6.0]

'use strict';

const fs = require('fs');
const xs = require('./xtstate');

async function main() {
    const c = JSON.parse(fs.readFileSync(process.argv[2]));
    const X = xs.load(process.argv[3] || '6.0');
    const t = xs.newTerminal(X, c.cols, c.rows);

    for (const op of c.ops) {
        if (op.keyframe) {
            break;
        }
        if (op.resize) {
            t.resize(op.resize[0], op.resize[1]);
        } else {
            await xs.write(t, op.d !== undefined ? Buffer.from(op.d, 'utf8')
                                                 : Buffer.from(op.x, 'hex'));
        }
    }

    const b = t.buffer.active;
    for (let y = 0; y < b.length; y++) {
        const l = b.getLine(y);
        const cells = [];
        for (let x = 0; x < t.cols; x++) {
            const cell = l.getCell(x);
            cells.push(JSON.stringify(cell.getChars()) + cell.getWidth());
        }
        console.log((y === b.baseY ? '>' : ' ') + (l.isWrapped ? 'w' : ' ')
            + '|' + l.translateToString(false) + '|  ' + cells.join(' '));
    }
    console.log('cursor', b.cursorX, b.cursorY);
}

main();
