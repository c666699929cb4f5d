
/*
 * ngx_pty_module: a resize of one buffer as xterm.js 5.5 and 6.0 do it
 * (Buffer.resize() and BufferReflow): rows added are pulled back from the
 * scrollback when the cursor is on the last row, rows taken away go from
 * below the cursor first, and on the main buffer lines that wrapped are
 * joined or wrapped again at the new width, except the one the cursor is
 * in.  Web IDEs draw with xterm.js; a Keyframe taken after a resize must
 * show what their terminals show, odd corners included (the cursor moves
 * up with every line a join removes, wherever that line was).
 *
 * The model holds fewer scrollback lines than xterm.js: lines it does not
 * hold count in "lost" and come back blank.
 *
 * The alternate buffer is not reflowed, and its lines are not cut when it
 * narrows: a line keeps its cells past the edge (the row's tail) until a
 * widening shows them or cuts the line to the new width.  ICH, DCH and
 * ECH work on the whole line there (BufferLine's insertCells(),
 * deleteCells(), replaceCells(), below).
 */


#include <stdlib.h>
#include <string.h>

#include "ngx_pty_reflow.h"


typedef struct {
    long              start;
    unsigned          count;
    ngx_pty_row_t   **lines;
    ngx_pty_row_t   **mem;     /* lines is inside it */
} ngx_pty_rinsert_t;


#define ngx_pty_rmin(a, b)  ((a) < (b) ? (a) : (b))
#define ngx_pty_rmax(a, b)  ((a) > (b) ? (a) : (b))


static ngx_pty_row_t *
ngx_pty_rline_new(ngx_pty_rbuf_t *b, unsigned len, unsigned wrapped)
{
    unsigned         i;
    ngx_pty_row_t   *row;
    ngx_pty_cell_t  *c;

    row = malloc(sizeof(ngx_pty_row_t) + b->width * sizeof(ngx_pty_cell_t));
    if (row == NULL) {
        return NULL;
    }

    memset(row, 0, sizeof(ngx_pty_row_t));
    row->cells = (ngx_pty_cell_t *) (row + 1);
    row->len = len;
    row->wrapped = wrapped;
    row->own = 1;
    row->fill = b->null_pen;

    /* past len a cell is written before it is read (lines grow by nulls) */
    for (i = 0; i < len; i++) {
        c = &row->cells[i];
        c->ch = 0;
        c->ncomb = 0;
        c->width = 1;
        c->pen = b->null_pen;
    }

    return row;
}


static void
ngx_pty_rline_free(ngx_pty_row_t *row)
{
    if (row != NULL) {
        free(row->comb);
        free(row);
    }
}


static int
ngx_pty_rbuf_room(ngx_pty_rbuf_t *b, unsigned more)
{
    unsigned          cap;
    ngx_pty_row_t   **p;

    if (b->n + more <= b->cap) {
        return 0;
    }

    cap = (b->n + more) * 2;
    p = realloc(b->line, cap * sizeof(ngx_pty_row_t *));

    if (p == NULL) {
        return -1;
    }

    b->line = p;
    b->cap = cap;

    return 0;
}


int
ngx_pty_rbuf_init(ngx_pty_rbuf_t *b, unsigned lines, unsigned width)
{
    b->line = NULL;
    b->n = 0;
    b->stale = 0;
    b->cap = 0;
    b->width = width;
    b->max_length = 0;

    return ngx_pty_rbuf_room(b, lines);
}


void
ngx_pty_rbuf_free(ngx_pty_rbuf_t *b)
{
    unsigned  i;

    for (i = 0; i < b->n + b->stale; i++) {
        ngx_pty_rline_free(b->line[i]);
    }

    free(b->line);
    b->line = NULL;
    b->n = 0;
    b->cap = 0;
}


/*
 * xterm.js's line i, or NULL for one the model does not hold.  Past the
 * end, a line popped while _reflowSmaller() runs: xterm.js's CircularList
 * does not check the bounds, and its pop() leaves the line in its slot,
 * so the reflow goes on reading (and wrapping) the lines it popped.
 */
ngx_pty_row_t *
ngx_pty_rbuf_get(ngx_pty_rbuf_t *b, long i)
{
    if (i < (long) b->lost || i - (long) b->lost >= (long) (b->n + b->stale))
    {
        return NULL;
    }

    return b->line[i - b->lost];
}


static unsigned
ngx_pty_rbuf_length(ngx_pty_rbuf_t *b)
{
    return b->lost + b->n;
}


static uint32_t *
ngx_pty_rline_comb(ngx_pty_rbuf_t *b, ngx_pty_row_t *row)
{
    if (row->comb == NULL) {
        row->comb = malloc((size_t) b->width * NGX_PTY_MAX_COMB
                           * sizeof(uint32_t));
    }

    return row->comb;
}


/* a copy of a model row, cols cells wide: blanks past its len materialised */
ngx_pty_row_t *
ngx_pty_rbuf_add(ngx_pty_rbuf_t *b, const ngx_pty_row_t *row,
    const uint32_t *comb, unsigned cols)
{
    unsigned         i, n;
    uint32_t        *dc;
    ngx_pty_row_t   *r;

    if (ngx_pty_rbuf_room(b, 1) != 0) {
        return NULL;
    }

    r = ngx_pty_rline_new(b, 0, row->wrapped);
    if (r == NULL) {
        return NULL;
    }

    r->len = cols;
    n = ngx_pty_rmin(row->len, cols);
    memcpy(r->cells, row->cells, n * sizeof(ngx_pty_cell_t));

    for (i = n; i < cols; i++) {
        r->cells[i].ch = 0;
        r->cells[i].ncomb = 0;
        r->cells[i].width = 1;
        r->cells[i].pen = row->fill;
    }

    for (i = 0; comb != NULL && i < n; i++) {
        if (r->cells[i].ncomb == 0) {
            continue;
        }

        dc = ngx_pty_rline_comb(b, r);

        if (dc == NULL) {
            r->cells[i].ncomb = 0;
            continue;
        }

        memcpy(&dc[i * NGX_PTY_MAX_COMB], &comb[i * NGX_PTY_MAX_COMB],
               NGX_PTY_MAX_COMB * sizeof(uint32_t));
    }

    b->line[b->n++] = r;

    return r;
}


/*
 * BufferLine's hasContent(), getWidth(), getTrimmedLength(); past a line's
 * end xterm.js reads zeros (a line can end in a glyph two columns wide)
 */

static int
ngx_pty_rcell_content(const ngx_pty_row_t *row, unsigned col)
{
    uint32_t  ch;

    if (col >= row->len) {
        return 0;
    }

    ch = row->cells[col].ch;

    /* a blank with marks: one xterm.js joined to an empty cell */
    return (ch != 0 && ch != NGX_PTY_CONT)
           || (ch == 0 && row->cells[col].ncomb);
}


static unsigned
ngx_pty_rcell_width(const ngx_pty_row_t *row, unsigned col)
{
    if (col >= row->len || row->cells[col].ch == NGX_PTY_CONT) {
        return 0;
    }

    return row->cells[col].width;
}


static unsigned
ngx_pty_rline_trimmed(const ngx_pty_row_t *row)
{
    unsigned  i;

    for (i = row->len; i-- > 0; /* void */) {
        if (ngx_pty_rcell_content(row, i)) {
            return i + ngx_pty_rcell_width(row, i);
        }
    }

    return 0;
}


/* getWrappedLineTrimmedLength(): a null before a wide glyph that wrapped */
static unsigned
ngx_pty_rwrapped_trimmed(ngx_pty_row_t **l, unsigned n, unsigned i,
    unsigned cols)
{
    if (i == n - 1) {
        return ngx_pty_rline_trimmed(l[i]);
    }

    if (!ngx_pty_rcell_content(l[i], cols - 1)
        && ngx_pty_rcell_width(l[i], cols - 1) == 1
        && ngx_pty_rcell_width(l[i + 1], 0) == 2)
    {
        return cols - 1;
    }

    return cols;
}


static void
ngx_pty_rcell_fill(ngx_pty_row_t *row, unsigned col, const ngx_pty_pen_t *pen)
{
    ngx_pty_cell_t  *c;

    c = &row->cells[col];
    c->ch = 0;
    c->ncomb = 0;
    c->width = 1;
    c->pen = *pen;
}


static void
ngx_pty_rcell_null(ngx_pty_rbuf_t *b, ngx_pty_row_t *row, unsigned col)
{
    ngx_pty_rcell_fill(row, col, &b->null_pen);
}


static void
ngx_pty_rcell_copy(ngx_pty_rbuf_t *b, ngx_pty_row_t *dst, unsigned dcol,
    ngx_pty_row_t *src, unsigned scol)
{
    uint32_t        *comb;
    ngx_pty_cell_t  *c;

    if (scol >= src->len) {
        /*
         * a glyph two columns wide in a line's last column makes the line
         * one cell longer than it is: past its end xterm.js's cells read
         * as zeros, which is a right half in the default pen
         */
        c = &dst->cells[dcol];
        c->ch = NGX_PTY_CONT;
        c->ncomb = 0;
        c->width = 1;
        c->pen = b->null_pen;
        return;
    }

    dst->cells[dcol] = src->cells[scol];

    if (dst->cells[dcol].ncomb == 0) {
        return;
    }

    comb = (src->comb != NULL) ? ngx_pty_rline_comb(b, dst) : NULL;

    if (comb == NULL) {
        dst->cells[dcol].ncomb = 0;
        return;
    }

    memmove(&comb[dcol * NGX_PTY_MAX_COMB], &src->comb[scol * NGX_PTY_MAX_COMB],
            NGX_PTY_MAX_COMB * sizeof(uint32_t));
}


/* copyCellsFrom(): backwards when it moves cells right within a line */
static void
ngx_pty_rcells_copy(ngx_pty_rbuf_t *b, ngx_pty_row_t *dst, ngx_pty_row_t *src,
    unsigned scol, unsigned dcol, unsigned n, int reverse)
{
    unsigned  k;

    if (reverse) {
        for (k = n; k-- > 0; /* void */) {
            ngx_pty_rcell_copy(b, dst, dcol + k, src, scol + k);
        }

        return;
    }

    for (k = 0; k < n; k++) {
        ngx_pty_rcell_copy(b, dst, dcol + k, src, scol + k);
    }
}


/* replaceCells() with a null cell: a wide glyph cut in two goes too */
static void
ngx_pty_rcells_clear(ngx_pty_rbuf_t *b, ngx_pty_row_t *row, unsigned from,
    unsigned to)
{
    if (from > 0 && ngx_pty_rcell_width(row, from - 1) == 2) {
        ngx_pty_rcell_null(b, row, from - 1);
    }

    if (to < row->len && ngx_pty_rcell_width(row, to - 1) == 2) {
        ngx_pty_rcell_null(b, row, to);
    }

    for ( /* void */ ; from < to && from < row->len; from++) {
        ngx_pty_rcell_null(b, row, from);
    }
}


/* the row's cells past the edge, after its line just added */
void
ngx_pty_rbuf_add_tail(ngx_pty_rbuf_t *b, ngx_pty_row_t *line,
    const ngx_pty_row_t *row)
{
    unsigned   i, at;
    uint32_t  *dc;

    at = line->len;
    memcpy(&line->cells[at], row->tail,
           row->tail_len * sizeof(ngx_pty_cell_t));

    for (i = 0; i < row->tail_len; i++) {
        if (line->cells[at + i].ncomb == 0) {
            continue;
        }

        dc = (row->tail_comb != NULL) ? ngx_pty_rline_comb(b, line) : NULL;

        if (dc == NULL) {
            line->cells[at + i].ncomb = 0;
            continue;
        }

        memcpy(&dc[(at + i) * NGX_PTY_MAX_COMB],
               &row->tail_comb[i * NGX_PTY_MAX_COMB],
               NGX_PTY_MAX_COMB * sizeof(uint32_t));
    }

    line->len += row->tail_len;
}


static void
ngx_pty_rcells_fill(ngx_pty_row_t *row, unsigned from, unsigned to,
    const ngx_pty_pen_t *pen)
{
    while (from < to) {
        ngx_pty_rcell_fill(row, from++, pen);
    }
}


/* BufferLine's insertCells() over the whole line, fill the erase pen */
void
ngx_pty_rline_insert(ngx_pty_rbuf_t *b, ngx_pty_row_t *line, unsigned pos,
    unsigned long n, const ngx_pty_pen_t *fill)
{
    unsigned  i, len;

    len = line->len;
    pos %= len;

    if (pos && ngx_pty_rcell_width(line, pos - 1) == 2) {
        ngx_pty_rcell_fill(line, pos - 1, fill);
    }

    if (n < len - pos) {
        for (i = len - pos - n; i-- > 0; /* void */) {
            ngx_pty_rcell_copy(b, line, pos + n + i, line, pos + i);
        }

        ngx_pty_rcells_fill(line, pos, pos + n, fill);

    } else {
        ngx_pty_rcells_fill(line, pos, len, fill);
    }

    if (ngx_pty_rcell_width(line, len - 1) == 2) {
        ngx_pty_rcell_fill(line, len - 1, fill);
    }
}


/* deleteCells() */
void
ngx_pty_rline_delete(ngx_pty_rbuf_t *b, ngx_pty_row_t *line, unsigned pos,
    unsigned long n, const ngx_pty_pen_t *fill)
{
    unsigned  i, len;

    len = line->len;
    pos %= len;

    if (n < len - pos) {
        for (i = 0; i < len - pos - n; i++) {
            ngx_pty_rcell_copy(b, line, pos + i, line, pos + n + i);
        }

        ngx_pty_rcells_fill(line, len - n, len, fill);

    } else {
        ngx_pty_rcells_fill(line, pos, len, fill);
    }

    if (pos && ngx_pty_rcell_width(line, pos - 1) == 2) {
        ngx_pty_rcell_fill(line, pos - 1, fill);
    }

    if (ngx_pty_rcell_width(line, pos) == 0
        && !ngx_pty_rcell_content(line, pos))
    {
        ngx_pty_rcell_fill(line, pos, fill);
    }
}


/* replaceCells() without protection (ECH) */
void
ngx_pty_rline_replace(ngx_pty_row_t *line, unsigned start, unsigned long end,
    const ngx_pty_pen_t *fill)
{
    if (start && ngx_pty_rcell_width(line, start - 1) == 2) {
        ngx_pty_rcell_fill(line, start - 1, fill);
    }

    if (end < line->len && ngx_pty_rcell_width(line, end - 1) == 2) {
        ngx_pty_rcell_fill(line, end, fill);
    }

    ngx_pty_rcells_fill(line, start, end < line->len ? end : line->len, fill);
}


/* BufferLine.resize(): new cells are null cells */
static void
ngx_pty_rlines_width(ngx_pty_rbuf_t *b, unsigned cols)
{
    unsigned        i, c;
    ngx_pty_row_t  *row;

    for (i = 0; i < b->n; i++) {
        row = b->line[i];

        for (c = row->len; c < cols; c++) {
            ngx_pty_rcell_null(b, row, c);
        }

        row->len = cols;
    }
}


static int
ngx_pty_rbuf_insert(ngx_pty_rbuf_t *b, unsigned at, ngx_pty_row_t *row)
{
    if (ngx_pty_rbuf_room(b, 1) != 0) {
        return -1;
    }

    memmove(&b->line[at + 1], &b->line[at],
            (b->n - at) * sizeof(ngx_pty_row_t *));
    b->line[at] = row;
    b->n++;

    return 0;
}


static int
ngx_pty_rbuf_push_blank(ngx_pty_rbuf_t *b, unsigned cols)
{
    ngx_pty_row_t  *row;

    row = ngx_pty_rline_new(b, cols, 0);

    if (row == NULL || ngx_pty_rbuf_insert(b, b->n, row) != 0) {
        ngx_pty_rline_free(row);
        return -1;
    }

    return 0;
}


static void
ngx_pty_rbuf_drop_stale(ngx_pty_rbuf_t *b)
{
    for ( /* void */ ; b->stale > 0; b->stale--) {
        ngx_pty_rline_free(b->line[b->n + b->stale - 1]);
        b->line[b->n + b->stale - 1] = NULL;
    }
}


/* a pop in _reflowSmaller(): the line stays readable (ngx_pty_rbuf_get()) */
static void
ngx_pty_rbuf_pop_stale(ngx_pty_rbuf_t *b)
{
    if (b->n > 0) {
        b->n--;
        b->stale++;

    } else if (b->lost > 0) {
        /* a line the model does not hold: the indices of the kept move */
        ngx_pty_rbuf_drop_stale(b);
        b->lost--;
    }
}


static void
ngx_pty_rbuf_pop(ngx_pty_rbuf_t *b)
{
    if (b->n > 0) {
        ngx_pty_rline_free(b->line[--b->n]);

    } else if (b->lost > 0) {
        b->lost--;
    }
}


/* lines off the top: those the model does not hold first */
static void
ngx_pty_rbuf_trim(ngx_pty_rbuf_t *b, unsigned k)
{
    unsigned  i, t;

    t = ngx_pty_rmin(b->lost, k);
    b->lost -= t;
    k = ngx_pty_rmin(k - t, b->n);

    for (i = 0; i < k; i++) {
        ngx_pty_rline_free(b->line[i]);
    }

    memmove(b->line, b->line + k, (b->n - k) * sizeof(ngx_pty_row_t *));
    b->n -= k;
}


/* the screen must be in the lines held: blank ones for any not held */
static int
ngx_pty_rbuf_hold(ngx_pty_rbuf_t *b)
{
    ngx_pty_row_t  *row;

    while (b->lost > b->ybase) {
        row = ngx_pty_rline_new(b, b->cols, 0);

        if (row == NULL || ngx_pty_rbuf_insert(b, 0, row) != 0) {
            ngx_pty_rline_free(row);
            return -1;
        }

        b->lost--;
    }

    return 0;
}


/* the rows of the screen: added ones from the scrollback, or blank */
static int
ngx_pty_rbuf_rows(ngx_pty_rbuf_t *b, unsigned cols, unsigned rows)
{
    unsigned  r, add;

    add = 0;

    if (b->rows < rows) {
        for (r = b->rows; r < rows; r++) {
            if (ngx_pty_rbuf_length(b) >= rows + b->ybase) {
                continue;
            }

            if (b->ybase > 0
                && ngx_pty_rbuf_length(b) <= b->ybase + b->y + add + 1)
            {
                b->ybase--;
                add++;

            } else if (ngx_pty_rbuf_push_blank(b, cols) != 0) {
                return -1;
            }
        }

    } else {
        for (r = b->rows; r > rows; r--) {
            if (ngx_pty_rbuf_length(b) <= rows + b->ybase) {
                continue;
            }

            if (ngx_pty_rbuf_length(b) > b->ybase + b->y + 1) {
                ngx_pty_rbuf_pop(b);

            } else {
                b->ybase++;
            }
        }
    }

    return (int) add;
}


/*
 * reflowLargerGetLinesToRemove(): each wrapped line not holding the cursor
 * is joined up at the new width; returns the lines emptied at its end
 */
static unsigned
ngx_pty_rjoin(ngx_pty_rbuf_t *b, ngx_pty_row_t **l, unsigned n,
    unsigned old, unsigned cols)
{
    unsigned  dl, dc, sl, sc, st, k, p;

    dl = 0;
    dc = ngx_pty_rwrapped_trimmed(l, n, 0, old);
    sl = 1;
    sc = 0;

    while (sl < n) {
        st = ngx_pty_rwrapped_trimmed(l, n, sl, old);
        k = ngx_pty_rmin(st - sc, cols - dc);

        ngx_pty_rcells_copy(b, l[dl], l[sl], sc, dc, k, 0);

        dc += k;

        if (dc == cols) {
            dl++;
            dc = 0;
        }

        sc += k;

        if (sc == st) {
            sl++;
            sc = 0;
        }

        /* a wide glyph does not end a line: it moves down */
        if (dc == 0 && dl != 0 && ngx_pty_rcell_width(l[dl - 1], cols - 1) == 2)
        {
            ngx_pty_rcells_copy(b, l[dl], l[dl - 1], cols - 1, dc++, 1, 0);
            ngx_pty_rcell_null(b, l[dl - 1], cols - 1);
        }
    }

    ngx_pty_rcells_clear(b, l[dl], dc, cols);

    p = 0;

    for (k = n - 1; k > 0; k--) {
        if (k <= dl && ngx_pty_rline_trimmed(l[k]) != 0) {
            break;
        }

        p++;
    }

    return p;
}


static int
ngx_pty_rbuf_larger(ngx_pty_rbuf_t *b, unsigned old, unsigned cols,
    unsigned rows)
{
    long             cursor;
    unsigned         o, h, p, removed, i, j;
    ngx_pty_row_t   *row;
    u_char          *drop;

    cursor = (long) b->ybase + b->y - b->lost;
    removed = 0;
    drop = calloc(b->n + 1, 1);

    if (drop == NULL) {
        return -1;
    }

    for (o = 0; o + 1 < b->n; o++) {
        if (!b->line[o + 1]->wrapped) {
            continue;
        }

        for (h = o + 1; h < b->n && b->line[h]->wrapped; h++) {
            /* void */
        }

        if (cursor >= (long) o && cursor < (long) h) {
            o = h - 1;
            continue;
        }

        p = ngx_pty_rjoin(b, &b->line[o], h - o, old, cols);

        for (i = h - p; i < h; i++) {
            drop[i] = 1;
        }

        removed += p;
        o = h - 1;
    }

    for (i = 0, j = 0; i < b->n; i++) {
        row = b->line[i];

        if (drop[i]) {
            ngx_pty_rline_free(row);

        } else {
            b->line[j++] = row;
        }
    }

    b->n = j;
    free(drop);

    /* _reflowLargerAdjustViewport() */
    for (i = 0; i < removed; i++) {
        if (b->ybase == 0) {
            if (b->y > 0) {
                b->y--;
            }

            if (ngx_pty_rbuf_length(b) < rows
                && ngx_pty_rbuf_push_blank(b, cols) != 0)
            {
                return -1;
            }

        } else {
            b->ybase--;
        }
    }

    /* only a reflow that joined lines moves it (off -1 too) */
    if (removed) {
        b->saved_y = ngx_pty_rmax(b->saved_y - (long) removed, 0);
    }

    return ngx_pty_rbuf_hold(b);
}


/* the cells a wrapped line of n lines holds */
static unsigned
ngx_pty_rneed(ngx_pty_row_t **l, unsigned n, unsigned old)
{
    unsigned  k, need;

    need = 0;

    for (k = 0; k < n; k++) {
        need += ngx_pty_rwrapped_trimmed(l, n, k, old);
    }

    return need;
}


/*
 * reflowSmallerGetNewLineLengths(): the lengths of the lines "need" cells
 * take at the new width, into len[]; each but the last is cols or cols - 1
 * long (cols > 1: see below), so there are need / (cols - 1) + 1 at most
 */
static unsigned
ngx_pty_rlengths(ngx_pty_row_t **l, unsigned n, unsigned need, unsigned old,
    unsigned cols, unsigned *len)
{
    unsigned  have, sc, sl, t, k, wide;

    sc = 0;
    sl = 0;
    have = 0;
    k = 0;

    while (have < need) {
        if (need - have < cols) {
            len[k++] = need - have;
            break;
        }

        sc += cols;
        t = ngx_pty_rwrapped_trimmed(l, n, sl, old);

        if (sc > t) {
            sc -= t;
            sl++;
        }

        /* xterm.js loops for ever on a wide glyph one column wide */
        wide = (cols > 1 && sl < n && ngx_pty_rcell_width(l[sl], sc - 1) == 2);

        if (wide) {
            sc--;
        }

        len[k] = wide ? cols - 1 : cols;
        have += len[k++];
    }

    return k;
}


/* the backwards copy of _reflowSmaller() into lines of the lengths len[] */
static void
ngx_pty_rsplit(ngx_pty_rbuf_t *b, ngx_pty_row_t **c, unsigned cn,
    unsigned add, unsigned *len, unsigned nlen, unsigned old, unsigned cols)
{
    long      g, sl;
    unsigned  dc, sc, k, t;

    if (nlen == 0) {
        return;
    }

    g = nlen - 1;
    dc = len[g];

    if (dc == 0) {
        g--;
        dc = (g >= 0) ? len[g] : 0;
    }

    sl = (long) cn - add - 1;
    sc = ngx_pty_rline_trimmed(c[sl]);

    while (sl >= 0 && g >= 0) {
        k = ngx_pty_rmin(sc, dc);

        ngx_pty_rcells_copy(b, c[g], c[sl], sc - k, dc - k, k, 1);

        dc -= k;

        if (dc == 0) {
            g--;
            dc = (g >= 0) ? len[g] : 0;
        }

        sc -= k;

        if (sc == 0) {
            sl--;
            sc = ngx_pty_rwrapped_trimmed(c, cn, sl > 0 ? sl : 0, old);
        }
    }

    /* where a wide glyph moved down, the end of the line above is null */
    for (t = 0; t < cn && t < nlen; t++) {
        if (len[t] < cols) {
            ngx_pty_rcell_null(b, c[t], len[t]);
        }
    }
}


/* the new lines of _reflowSmaller(), put in after their wrapped lines */
static int
ngx_pty_rbuf_merge(ngx_pty_rbuf_t *b, ngx_pty_rinsert_t *ins, unsigned nins,
    unsigned count, unsigned maxlen)
{
    long              i, oi, pos;
    unsigned          t, done, e, len, size;
    ngx_pty_row_t   **nl;

    len = ngx_pty_rbuf_length(b);
    nl = malloc((b->n + count) * sizeof(ngx_pty_row_t *));

    if (nl == NULL) {
        return -1;
    }

    i = (long) ngx_pty_rmin(maxlen, len + count) - 1;
    oi = (long) len - 1;
    pos = b->n + count;
    t = 0;
    done = 0;

    while (i >= 0) {
        if (t < nins && ins[t].start > oi + (long) done) {
            for (e = ins[t].count; e-- > 0 && i >= 0; i--) {
                nl[--pos] = ins[t].lines[e];
                ins[t].lines[e] = NULL;
            }

            done += ins[t].count;
            t++;
            continue;
        }

        if (oi < (long) b->lost) {
            break;
        }

        nl[--pos] = b->line[oi - b->lost];
        b->line[oi - b->lost] = NULL;
        oi--;
        i--;
    }

    /* what fell off the top of xterm.js's buffer */
    for (e = 0; e < b->n; e++) {
        ngx_pty_rline_free(b->line[e]);
    }

    for (t = 0; t < nins; t++) {
        for (e = 0; e < ins[t].count; e++) {
            ngx_pty_rline_free(ins[t].lines[e]);
        }
    }

    size = b->n + count;
    b->lost = (i >= 0) ? (unsigned) i + 1 : 0;
    b->n = size - pos;
    memmove(nl, nl + pos, b->n * sizeof(ngx_pty_row_t *));
    free(b->line);
    b->line = nl;
    b->cap = size;

    return 0;
}


/* one wrapped line of _reflowSmaller(), from line nn, cn lines long */
static int
ngx_pty_rbuf_rewrap(ngx_pty_rbuf_t *b, long nn, unsigned cn, unsigned old,
    unsigned cols, unsigned rows, ngx_pty_rinsert_t *in, unsigned *count)
{
    long              f, u, m, len, maxlen;
    size_t            most;
    unsigned          i, nlen, need, *lens;
    ngx_pty_row_t   **c, **nc;

    maxlen = rows + b->scrollback;
    len = ngx_pty_rbuf_length(b);
    f = 0;
    in->count = 0;
    in->lines = NULL;
    in->mem = NULL;
    lens = NULL;

    c = malloc(cn * sizeof(ngx_pty_row_t *));
    if (c == NULL) {
        goto failed;
    }

    for (i = 0; i < cn; i++) {
        c[i] = ngx_pty_rbuf_get(b, nn + i);
    }

    /* the new lines, counted from the cells, not from lines x width */
    need = ngx_pty_rneed(c, cn, old);
    most = (size_t) need / (cols > 1 ? cols - 1 : 1) + 2;

    nc = realloc(c, (cn + most) * sizeof(ngx_pty_row_t *));
    lens = malloc(most * sizeof(unsigned));

    if (nc == NULL || lens == NULL) {
        c = (nc != NULL) ? nc : c;
        goto failed;
    }

    c = nc;
    nlen = ngx_pty_rlengths(c, cn, need, old, cols, lens);
    f = (long) nlen - cn;

    if (b->ybase == 0 && b->y != len - 1) {
        u = ngx_pty_rmax(0, b->y - maxlen + f);

    } else {
        u = ngx_pty_rmax(0, len - maxlen + f);
    }

    if (f > 0) {
        in->lines = &c[cn];
        in->start = nn + cn + *count;

        for (i = 0; i < (unsigned) f; i++) {
            c[cn + i] = ngx_pty_rline_new(b, cols, 1);

            if (c[cn + i] == NULL) {
                in->count = i;
                goto failed;
            }
        }

        in->count = f;
        *count += f;
    }

    ngx_pty_rsplit(b, c, cn + in->count, in->count, lens, nlen, old, cols);

    for (m = f - u; m > 0; m--) {
        if (b->ybase == 0) {
            if (b->y < (int) rows - 1) {
                b->y++;
                ngx_pty_rbuf_pop_stale(b);

            } else {
                b->ybase++;
            }

        } else if ((long) b->ybase < ngx_pty_rmin(maxlen,
                                        (long) ngx_pty_rbuf_length(b) + *count)
                                     - (long) rows)
        {
            b->ybase++;
        }
    }

    b->saved_y = ngx_pty_rmin(b->saved_y + f, (long) b->ybase + rows - 1);

    free(lens);

    if (in->count == 0) {
        free(c);

    } else {
        in->mem = c;
    }

    return 0;

failed:

    free(lens);

    if (c != NULL && f > 0) {
        for (i = 0; i < in->count; i++) {
            ngx_pty_rline_free(c[cn + i]);
        }
    }

    free(c);
    in->count = 0;
    in->lines = NULL;

    return -1;
}


static int
ngx_pty_rbuf_smaller(ngx_pty_rbuf_t *b, unsigned old, unsigned cols,
    unsigned rows)
{
    int                 rc;
    long                nn, cursor;
    unsigned            cn, nins, count, i;
    ngx_pty_row_t      *h;
    ngx_pty_rinsert_t  *ins;

    ins = calloc(b->n + 1, sizeof(ngx_pty_rinsert_t));
    if (ins == NULL) {
        return -1;
    }

    nins = 0;
    count = 0;
    rc = 0;

    for (nn = (long) ngx_pty_rbuf_length(b) - 1; nn >= (long) b->lost; nn--) {
        h = ngx_pty_rbuf_get(b, nn);

        if (h == NULL || (!h->wrapped && ngx_pty_rline_trimmed(h) <= cols)) {
            continue;
        }

        for (cn = 1; h->wrapped && nn > (long) b->lost; cn++) {
            h = ngx_pty_rbuf_get(b, --nn);
        }

        cursor = (long) b->ybase + b->y;

        if (cursor >= nn && cursor < nn + (long) cn) {
            continue;
        }

        rc = ngx_pty_rbuf_rewrap(b, nn, cn, old, cols, rows, &ins[nins],
                                 &count);
        if (rc != 0) {
            break;
        }

        if (ins[nins].count) {
            nins++;
        }
    }

    ngx_pty_rbuf_drop_stale(b);

    if (rc == 0 && nins > 0) {
        rc = ngx_pty_rbuf_merge(b, ins, nins, count, rows + b->scrollback);
    }

    for (i = 0; i < nins; i++) {
        free(ins[i].mem);
    }

    free(ins);

    return rc;
}


int
ngx_pty_rbuf_resize(ngx_pty_rbuf_t *b, unsigned cols, unsigned rows)
{
    int        add;
    long       amount;
    unsigned   old, i, maxlen, newmax;

    old = b->cols;
    newmax = rows + b->scrollback;
    maxlen = b->max_length ? b->max_length : b->rows + b->scrollback;
    maxlen = ngx_pty_rmax(maxlen, newmax);

    if (old < cols) {
        ngx_pty_rlines_width(b, cols);
    }

    add = ngx_pty_rbuf_rows(b, cols, rows);
    if (add < 0) {
        return -1;
    }

    if (newmax < maxlen) {
        amount = (long) ngx_pty_rbuf_length(b) - newmax;

        if (amount > 0) {
            ngx_pty_rbuf_trim(b, amount);
            b->ybase = ngx_pty_rmax((long) b->ybase - amount, 0);
            b->saved_y = ngx_pty_rmax(b->saved_y - amount, 0);
        }
    }

    b->x = ngx_pty_rmin(b->x, (int) cols - 1);
    b->y = ngx_pty_rmin(b->y, (int) rows - 1) + add;
    b->saved_x = ngx_pty_rmin(b->saved_x, (int) cols - 1);

    if (ngx_pty_rbuf_hold(b) != 0) {
        return -1;
    }

    if (b->scrollback && old != cols) {
        if (cols > old) {
            if (ngx_pty_rbuf_larger(b, old, cols, rows) != 0) {
                return -1;
            }

        } else if (ngx_pty_rbuf_smaller(b, old, cols, rows) != 0) {
            return -1;
        }
    }

    /* the alternate buffer keeps the cells past the edge (a tail) */
    if (old > cols && b->scrollback) {
        for (i = 0; i < b->n; i++) {
            b->line[i]->len = ngx_pty_rmin(b->line[i]->len, cols);
        }
    }

    b->cols = cols;
    b->rows = rows;

    return ngx_pty_rbuf_hold(b);
}
