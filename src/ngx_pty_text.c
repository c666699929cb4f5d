
/*
 * ngx_pty_module: settled text, see ngx_pty_text.h and docs/SETTLED_TEXT.md.
 *
 * A byte-at-a-time state machine (so splitting input anywhere gives the
 * same result) feeding a one-line cell model.  Every byte costs O(1)
 * except sequences that edit the line (EL 1, ECH, DCH, ICH, gap filling,
 * line completion), whose cost is bounded by the line length.
 */


#include <stdlib.h>
#include <string.h>

#include "ngx_pty_text.h"


#define NGX_PTY_TEXT_WIDE    0xffffffff    /* right half of a wide cell */
#define NGX_PTY_TEXT_BLANK   0             /* erased or never written */
#define NGX_PTY_TEXT_BAD     0xfffd
#define NGX_PTY_TEXT_MAX_UP  65535

/* one cell renders to at most 3 code points of 4 bytes */
#define NGX_PTY_TEXT_CELL_BYTES  12


enum {
    ngx_pty_st_ground = 0,
    ngx_pty_st_esc,
    ngx_pty_st_esc_inter,
    ngx_pty_st_csi,
    ngx_pty_st_string,
    ngx_pty_st_string_esc
};


typedef struct {
    uint32_t     cp;
    uint32_t     mark[2];              /* combining marks; extra dropped */
} ngx_pty_text_cell_t;


struct ngx_pty_text_s {
    unsigned               state;
    unsigned               osc;        /* string ends with BEL too */
    unsigned               csi_skip;   /* private marker or intermediate */
    size_t                 string_len;

    uint32_t               utf8_cp;
    uint32_t               utf8_min;
    unsigned               utf8_need;

    unsigned               nparams;
    unsigned               params[NGX_PTY_TEXT_MAX_PARAMS + 1];

    ngx_pty_text_cell_t   *cells;
    size_t                 cells_alloc;
    size_t                 len;        /* cells in use */
    size_t                 col;        /* cursor, may be past len */
    size_t                 up;         /* rows the cursor is above "now" */

    u_char                *out;        /* completed text not yet taken */
    size_t                 out_len;
    size_t                 out_alloc;
    size_t                 max_pending;
    size_t                 dropped;

    u_char                *sent;       /* current line as last taken */
    size_t                 sent_len;
    size_t                 sent_alloc;
};


static int ngx_pty_text_byte(ngx_pty_text_t *t, u_char c);
static int ngx_pty_text_ground(ngx_pty_text_t *t, u_char c);
static int ngx_pty_text_escape(ngx_pty_text_t *t, u_char c);
static int ngx_pty_text_csi(ngx_pty_text_t *t, u_char c);
static int ngx_pty_text_string(ngx_pty_text_t *t, u_char c);
static int ngx_pty_text_control(ngx_pty_text_t *t, u_char c);
static int ngx_pty_text_dispatch(ngx_pty_text_t *t, u_char c);
static int ngx_pty_text_edit(ngx_pty_text_t *t, u_char c, size_t n);
static int ngx_pty_text_code_point(ngx_pty_text_t *t, uint32_t cp);
static int ngx_pty_text_put(ngx_pty_text_t *t, uint32_t cp, size_t w);
static void ngx_pty_text_mark(ngx_pty_text_t *t, uint32_t cp);
static int ngx_pty_text_tab(ngx_pty_text_t *t);
static void ngx_pty_text_move(ngx_pty_text_t *t, size_t col);
static int ngx_pty_text_newline(ngx_pty_text_t *t);
static int ngx_pty_text_vertical(ngx_pty_text_t *t, int dir, size_t n);
static void ngx_pty_text_erase_line(ngx_pty_text_t *t, unsigned mode);
static void ngx_pty_text_erase_chars(ngx_pty_text_t *t, size_t n);
static void ngx_pty_text_delete_chars(ngx_pty_text_t *t, size_t n);
static int ngx_pty_text_insert_chars(ngx_pty_text_t *t, size_t n);
static void ngx_pty_text_blank(ngx_pty_text_t *t, size_t from, size_t to);
static void ngx_pty_text_split_wide(ngx_pty_text_t *t, size_t i);
static int ngx_pty_text_complete(ngx_pty_text_t *t);
static void ngx_pty_text_limit(ngx_pty_text_t *t);
static int ngx_pty_text_get(ngx_pty_text_t *t, ngx_pty_text_view_t *v,
    int take);
static size_t ngx_pty_text_render(ngx_pty_text_t *t, u_char *p);
static u_char *ngx_pty_text_utf8(u_char *p, uint32_t cp);
static int ngx_pty_text_reserve_cells(ngx_pty_text_t *t, size_t n);
static int ngx_pty_text_reserve(u_char **buf, size_t *alloc, size_t n);
static size_t ngx_pty_text_width(uint32_t cp);
static int ngx_pty_text_in(const uint32_t (*r)[2], size_t n, uint32_t cp);


ngx_pty_text_t *
ngx_pty_text_create(size_t max_pending)
{
    ngx_pty_text_t  *t;

    t = calloc(1, sizeof(ngx_pty_text_t));
    if (t == NULL) {
        return NULL;
    }

    if (max_pending == 0) {
        max_pending = NGX_PTY_TEXT_DEFAULT_PENDING;
    }

    if (max_pending < NGX_PTY_TEXT_MIN_PENDING) {
        max_pending = NGX_PTY_TEXT_MIN_PENDING;
    }

    t->max_pending = max_pending;

    return t;
}


void
ngx_pty_text_destroy(ngx_pty_text_t *t)
{
    if (t == NULL) {
        return;
    }

    free(t->cells);
    free(t->out);
    free(t->sent);
    free(t);
}


void
ngx_pty_text_reset(ngx_pty_text_t *t)
{
    ngx_pty_text_cell_t  *cells;
    u_char               *out, *sent;
    size_t                cells_alloc, out_alloc, sent_alloc, max_pending;

    /* keep the buffers, drop the contents */

    cells = t->cells;
    cells_alloc = t->cells_alloc;
    out = t->out;
    out_alloc = t->out_alloc;
    sent = t->sent;
    sent_alloc = t->sent_alloc;
    max_pending = t->max_pending;

    memset(t, 0, sizeof(ngx_pty_text_t));

    t->cells = cells;
    t->cells_alloc = cells_alloc;
    t->out = out;
    t->out_alloc = out_alloc;
    t->sent = sent;
    t->sent_alloc = sent_alloc;
    t->max_pending = max_pending;
}


int
ngx_pty_text_feed(ngx_pty_text_t *t, const u_char *data, size_t len)
{
    int     rc;
    size_t  i;

    rc = 0;

    for (i = 0; i < len; i++) {
        if (ngx_pty_text_byte(t, data[i]) != 0) {
            rc = -1;
        }
    }

    return rc;
}


int
ngx_pty_text_take(ngx_pty_text_t *t, ngx_pty_text_view_t *v)
{
    return ngx_pty_text_get(t, v, 1);
}


int
ngx_pty_text_peek(ngx_pty_text_t *t, ngx_pty_text_view_t *v)
{
    return ngx_pty_text_get(t, v, 0);
}


/* parser */


static int
ngx_pty_text_byte(ngx_pty_text_t *t, u_char c)
{
    switch (t->state) {

    case ngx_pty_st_ground:
        return ngx_pty_text_ground(t, c);

    case ngx_pty_st_esc:
    case ngx_pty_st_esc_inter:
        return ngx_pty_text_escape(t, c);

    case ngx_pty_st_csi:
        return ngx_pty_text_csi(t, c);

    default:
        return ngx_pty_text_string(t, c);
    }
}


static int
ngx_pty_text_ground(ngx_pty_text_t *t, u_char c)
{
    int  rc;

    rc = 0;

    if (t->utf8_need) {

        if ((c & 0xc0) == 0x80) {
            t->utf8_cp = (t->utf8_cp << 6) | (c & 0x3f);

            if (--t->utf8_need) {
                return 0;
            }

            if (t->utf8_cp < t->utf8_min || t->utf8_cp > 0x10ffff
                || (t->utf8_cp >= 0xd800 && t->utf8_cp <= 0xdfff))
            {
                t->utf8_cp = NGX_PTY_TEXT_BAD;
            }

            return ngx_pty_text_code_point(t, t->utf8_cp);
        }

        /* truncated sequence: one U+FFFD, then c on its own */
        t->utf8_need = 0;
        rc = ngx_pty_text_code_point(t, NGX_PTY_TEXT_BAD);
    }

    if (c < 0x20) {
        return ngx_pty_text_control(t, c) | rc;
    }

    if (c < 0x7f) {
        return ngx_pty_text_code_point(t, c) | rc;
    }

    if (c == 0x7f) {
        return rc;
    }

    if (c >= 0xc2 && c <= 0xdf) {
        t->utf8_need = 1;
        t->utf8_cp = c & 0x1f;
        t->utf8_min = 0x80;

    } else if (c >= 0xe0 && c <= 0xef) {
        t->utf8_need = 2;
        t->utf8_cp = c & 0x0f;
        t->utf8_min = 0x800;

    } else if (c >= 0xf0 && c <= 0xf4) {
        t->utf8_need = 3;
        t->utf8_cp = c & 0x07;
        t->utf8_min = 0x10000;

    } else {
        /* stray continuation byte, C0, C1, F5..FF */
        return ngx_pty_text_code_point(t, NGX_PTY_TEXT_BAD) | rc;
    }

    return rc;
}


static int
ngx_pty_text_control(ngx_pty_text_t *t, u_char c)
{
    switch (c) {

    case '\r':
        t->col = 0;
        return 0;

    case '\n':
    case '\v':
    case '\f':
        return ngx_pty_text_newline(t);

    case '\b':
        if (t->col > 0) {
            t->col--;
        }
        return 0;

    case '\t':
        return ngx_pty_text_tab(t);

    case 0x1b:
        t->state = ngx_pty_st_esc;
        return 0;

    default:
        /* BEL, NUL, SO, SI, ...: nothing visible */
        return 0;
    }
}


static int
ngx_pty_text_escape(ngx_pty_text_t *t, u_char c)
{
    if (c >= 0x80) {
        /* not part of a sequence: abandon it, c is text */
        t->state = ngx_pty_st_ground;
        return ngx_pty_text_ground(t, c);
    }

    if (c == 0x18 || c == 0x1a) {
        t->state = ngx_pty_st_ground;
        return 0;
    }

    if (c < 0x20 || c == 0x7f) {
        /* controls inside a sequence act at once; ESC restarts it */
        return ngx_pty_text_control(t, c);
    }

    if (c < 0x30) {
        t->state = ngx_pty_st_esc_inter;
        return 0;
    }

    if (t->state == ngx_pty_st_esc_inter) {
        /* ESC ( B and friends: charset selection etc. */
        t->state = ngx_pty_st_ground;
        return 0;
    }

    t->state = ngx_pty_st_ground;

    switch (c) {

    case '[':
        t->state = ngx_pty_st_csi;
        t->nparams = 0;
        t->csi_skip = 0;
        memset(t->params, 0, sizeof(t->params));
        return 0;

    case ']':
    case 'P':
    case 'X':
    case '^':
    case '_':
        t->state = ngx_pty_st_string;
        t->osc = (c == ']');
        t->string_len = 0;
        return 0;

    case 'D':                                  /* IND */
    case 'E':                                  /* NEL */
        return ngx_pty_text_newline(t);

    case 'M':                                  /* RI */
        return ngx_pty_text_vertical(t, -1, 1);

    case 'c':                                  /* RIS */
        t->col = 0;
        return ngx_pty_text_vertical(t, 0, 0);

    default:
        /* ESC 7, ESC 8, ESC =, ESC >, ...: nothing for one line */
        return 0;
    }
}


static int
ngx_pty_text_csi(ngx_pty_text_t *t, u_char c)
{
    unsigned  *p;

    if (c >= '0' && c <= '9') {
        p = &t->params[t->nparams];
        *p = *p * 10 + (c - '0');

        if (*p > NGX_PTY_TEXT_MAX_PARAM) {
            *p = NGX_PTY_TEXT_MAX_PARAM;
        }

        return 0;
    }

    if (c == ';' || c == ':') {
        /* params past the cap all pile up in the spare last slot */
        if (t->nparams < NGX_PTY_TEXT_MAX_PARAMS) {
            t->nparams++;
        }

        t->params[t->nparams] = 0;
        return 0;
    }

    if (c >= 0x3c && c <= 0x3f) {
        /* "<=>?": private sequences are no business of ours */
        t->csi_skip = 1;
        return 0;
    }

    if (c >= 0x20 && c <= 0x2f) {
        t->csi_skip = 1;
        return 0;
    }

    if (c >= 0x40 && c <= 0x7e) {
        t->state = ngx_pty_st_ground;
        return t->csi_skip ? 0 : ngx_pty_text_dispatch(t, c);
    }

    /* same as inside an ESC sequence for everything else */
    return ngx_pty_text_escape(t, c);
}


static int
ngx_pty_text_string(ngx_pty_text_t *t, u_char c)
{
    if (t->state == ngx_pty_st_string_esc) {

        if (c == '\\') {
            t->state = ngx_pty_st_ground;
            return 0;
        }

        /* ESC not followed by "\": the string ends, a new sequence starts */
        t->state = ngx_pty_st_esc;
        return ngx_pty_text_escape(t, c);
    }

    if (c == 0x1b) {
        t->state = ngx_pty_st_string_esc;
        return 0;
    }

    if ((c == 0x07 && t->osc) || c == 0x18 || c == 0x1a) {
        t->state = ngx_pty_st_ground;
        return 0;
    }

    if (++t->string_len > NGX_PTY_TEXT_MAX_STRING) {
        /* never terminated: give up on it, what follows is text again */
        t->state = ngx_pty_st_ground;
        return ngx_pty_text_ground(t, c);
    }

    return 0;
}


static int
ngx_pty_text_dispatch(ngx_pty_text_t *t, u_char c)
{
    size_t  n, i;

    n = t->params[0] ? t->params[0] : 1;

    switch (c) {

    case 'A':                                  /* CUU */
    case 'F':                                  /* CPL */
        if (c == 'F') {
            t->col = 0;
        }
        return ngx_pty_text_vertical(t, -1, n);

    case 'B':                                  /* CUD */
    case 'E':                                  /* CNL */
    case 'e':                                  /* VPR */
        if (c == 'E') {
            t->col = 0;
        }
        return ngx_pty_text_vertical(t, 1, n);

    case 'H':                                  /* CUP */
    case 'f':                                  /* HVP */
        n = t->nparams && t->params[1] ? t->params[1] : 1;

        if (ngx_pty_text_vertical(t, 0, 0) != 0) {
            return -1;
        }

        ngx_pty_text_move(t, n - 1);
        return 0;

    case 'd':                                  /* VPA */
        return ngx_pty_text_vertical(t, 0, 0);

    case 'C':                                  /* CUF */
    case 'a':                                  /* HPR */
        ngx_pty_text_move(t, t->col + n);
        return 0;

    case 'D':                                  /* CUB */
        t->col = t->col > n ? t->col - n : 0;
        return 0;

    case 'G':                                  /* CHA */
    case '`':                                  /* HPA */
        ngx_pty_text_move(t, n - 1);
        return 0;

    case 'I':                                  /* CHT */
        for (i = 0; i < n && i < NGX_PTY_TEXT_MAX_JUMP / 8; i++) {
            if (ngx_pty_text_tab(t) != 0) {
                return -1;
            }
        }
        return 0;

    case 'Z':                                  /* CBT */
        for (i = 0; i < n && t->col > 0; i++) {
            t->col = (t->col - 1) / 8 * 8;
        }
        return 0;

    default:
        return ngx_pty_text_edit(t, c, n);
    }
}


static int
ngx_pty_text_edit(ngx_pty_text_t *t, u_char c, size_t n)
{
    switch (c) {

    case 'K':                                  /* EL */
        ngx_pty_text_erase_line(t, t->params[0]);
        return 0;

    case 'J':                                  /* ED: its effect on us */
        ngx_pty_text_erase_line(t, t->params[0] > 2 ? 2 : t->params[0]);
        return 0;

    case 'X':                                  /* ECH */
        ngx_pty_text_erase_chars(t, n);
        return 0;

    case 'P':                                  /* DCH */
        ngx_pty_text_delete_chars(t, n);
        return 0;

    case '@':                                  /* ICH */
        return ngx_pty_text_insert_chars(t, n);

    default:
        /* SGR and everything else do not change the text */
        return 0;
    }
}


/* the line */


static int
ngx_pty_text_code_point(ngx_pty_text_t *t, uint32_t cp)
{
    size_t  w;

    if (cp >= 0x80 && cp < 0xa0) {
        /* C1 controls */
        return 0;
    }

    w = ngx_pty_text_width(cp);

    if (w == 0) {
        ngx_pty_text_mark(t, cp);
        return 0;
    }

    return ngx_pty_text_put(t, cp, w);
}


static int
ngx_pty_text_put(ngx_pty_text_t *t, uint32_t cp, size_t w)
{
    ngx_pty_text_cell_t  *cell;

    if (t->col + w > NGX_PTY_TEXT_MAX_COLS) {
        /* too long for one line: break it here */
        if (ngx_pty_text_complete(t) != 0) {
            return -1;
        }

        t->col = 0;
    }

    if (ngx_pty_text_reserve_cells(t, t->col + w) != 0) {
        return -1;
    }

    ngx_pty_text_blank(t, t->len, t->col);

    /* overwriting half of a wide character blanks its other half */
    ngx_pty_text_split_wide(t, t->col);
    ngx_pty_text_split_wide(t, t->col + w);

    cell = &t->cells[t->col];
    cell->cp = cp;
    cell->mark[0] = 0;
    cell->mark[1] = 0;

    if (w == 2) {
        cell[1].cp = NGX_PTY_TEXT_WIDE;
        cell[1].mark[0] = 0;
        cell[1].mark[1] = 0;
    }

    t->col += w;

    if (t->len < t->col) {
        t->len = t->col;
    }

    return 0;
}


static void
ngx_pty_text_mark(ngx_pty_text_t *t, uint32_t cp)
{
    size_t                i;
    ngx_pty_text_cell_t  *cell;

    /* a combining mark joins the cell left of the cursor, if any */

    if (t->col == 0 || t->col > t->len) {
        return;
    }

    i = t->col - 1;

    if (t->cells[i].cp == NGX_PTY_TEXT_WIDE) {
        i--;
    }

    cell = &t->cells[i];

    if (cell->cp == NGX_PTY_TEXT_BLANK) {
        return;
    }

    if (cell->mark[0] == 0) {
        cell->mark[0] = cp;

    } else if (cell->mark[1] == 0) {
        cell->mark[1] = cp;
    }
}


static int
ngx_pty_text_tab(ngx_pty_text_t *t)
{
    size_t  to, i;

    to = (t->col / 8 + 1) * 8;

    ngx_pty_text_move(t, to);

    if (t->col <= t->len) {
        return 0;
    }

    /* past the end of the line a tab leaves real spaces behind */

    if (ngx_pty_text_reserve_cells(t, t->col) != 0) {
        return -1;
    }

    for (i = t->len; i < t->col; i++) {
        t->cells[i].cp = ' ';
        t->cells[i].mark[0] = 0;
        t->cells[i].mark[1] = 0;
    }

    t->len = t->col;

    return 0;
}


/* cursor motion is clamped near the line end so gaps stay bounded */

static void
ngx_pty_text_move(ngx_pty_text_t *t, size_t col)
{
    size_t  max;

    max = t->len + NGX_PTY_TEXT_MAX_JUMP;

    if (max > NGX_PTY_TEXT_MAX_COLS) {
        max = NGX_PTY_TEXT_MAX_COLS;
    }

    if (col > max) {
        col = max;
    }

    t->col = col;
}


static int
ngx_pty_text_newline(ngx_pty_text_t *t)
{
    int  rc;

    rc = 0;

    if (t->up) {
        /* moving back down over rows above: only edits are news */
        t->up--;

        if (t->len) {
            rc = ngx_pty_text_complete(t);
        }

    } else {
        rc = ngx_pty_text_complete(t);
    }

    t->col = 0;

    return rc;
}


/*
 * dir < 0: n rows up; dir > 0: n rows down; 0: to some absolute row.
 * We have one line, so leaving it completes it if it has text; "up"
 * counts how far above the newest row we are, so that the newlines a
 * program sends to get back down (Python 3.13's REPL does "ESC[1A\n"
 * before each prompt) do not invent empty lines.
 */

static int
ngx_pty_text_vertical(ngx_pty_text_t *t, int dir, size_t n)
{
    if (t->len && ngx_pty_text_complete(t) != 0) {
        return -1;
    }

    if (dir < 0) {
        t->up += n;

        if (t->up > NGX_PTY_TEXT_MAX_UP) {
            t->up = NGX_PTY_TEXT_MAX_UP;
        }

    } else if (dir > 0) {
        t->up = t->up > n ? t->up - n : 0;

    } else {
        t->up = 0;
    }

    return 0;
}


static void
ngx_pty_text_erase_line(ngx_pty_text_t *t, unsigned mode)
{
    switch (mode) {

    case 0:
        if (t->col < t->len) {
            ngx_pty_text_split_wide(t, t->col);
            t->len = t->col;
        }
        break;

    case 1:
        if (t->col + 1 >= t->len) {
            t->len = 0;
            break;
        }

        ngx_pty_text_split_wide(t, t->col + 1);
        ngx_pty_text_blank(t, 0, t->col + 1);
        break;

    case 2:
        t->len = 0;
        break;
    }
}


static void
ngx_pty_text_erase_chars(ngx_pty_text_t *t, size_t n)
{
    size_t  end;

    if (t->col >= t->len) {
        return;
    }

    end = n < t->len - t->col ? t->col + n : t->len;

    ngx_pty_text_split_wide(t, t->col);
    ngx_pty_text_split_wide(t, end);
    ngx_pty_text_blank(t, t->col, end);
}


static void
ngx_pty_text_delete_chars(ngx_pty_text_t *t, size_t n)
{
    if (t->col >= t->len) {
        return;
    }

    ngx_pty_text_split_wide(t, t->col);

    if (n >= t->len - t->col) {
        t->len = t->col;
        return;
    }

    ngx_pty_text_split_wide(t, t->col + n);

    memmove(&t->cells[t->col], &t->cells[t->col + n],
            (t->len - t->col - n) * sizeof(ngx_pty_text_cell_t));

    t->len -= n;
}


static int
ngx_pty_text_insert_chars(ngx_pty_text_t *t, size_t n)
{
    size_t  len, keep;

    if (t->col >= t->len) {
        return 0;
    }

    if (n > NGX_PTY_TEXT_MAX_JUMP) {
        n = NGX_PTY_TEXT_MAX_JUMP;
    }

    len = t->len + n;

    if (len > NGX_PTY_TEXT_MAX_COLS) {
        len = NGX_PTY_TEXT_MAX_COLS;
    }

    if (ngx_pty_text_reserve_cells(t, len) != 0) {
        return -1;
    }

    ngx_pty_text_split_wide(t, t->col);

    if (t->col + n < len) {
        keep = len - t->col - n;

        memmove(&t->cells[t->col + n], &t->cells[t->col],
                keep * sizeof(ngx_pty_text_cell_t));

    } else {
        n = len - t->col;
    }

    ngx_pty_text_blank(t, t->col, t->col + n);

    /* a wide character pushed half off the end is lost */
    if (t->cells[len - 1].cp != NGX_PTY_TEXT_WIDE
        && t->cells[len - 1].cp != NGX_PTY_TEXT_BLANK
        && ngx_pty_text_width(t->cells[len - 1].cp) == 2)
    {
        ngx_pty_text_blank(t, len - 1, len);
    }

    t->len = len;

    return 0;
}


static void
ngx_pty_text_blank(ngx_pty_text_t *t, size_t from, size_t to)
{
    size_t  i;

    for (i = from; i < to; i++) {
        t->cells[i].cp = NGX_PTY_TEXT_BLANK;
        t->cells[i].mark[0] = 0;
        t->cells[i].mark[1] = 0;
    }
}


/* a cell boundary at i must not cut a wide character in two */

static void
ngx_pty_text_split_wide(ngx_pty_text_t *t, size_t i)
{
    if (i > 0 && i < t->len && t->cells[i].cp == NGX_PTY_TEXT_WIDE) {
        ngx_pty_text_blank(t, i - 1, i + 1);
    }
}


/*
 * The current line is done: queue it, trailing blanks trimmed, minus the
 * part an earlier take() already returned (see docs/SETTLED_TEXT.md).
 */

static int
ngx_pty_text_complete(ngx_pty_text_t *t)
{
    u_char  *p;
    size_t   n, trimmed;

    if (ngx_pty_text_reserve(&t->out, &t->out_alloc,
                             t->out_len + 2
                             + t->len * NGX_PTY_TEXT_CELL_BYTES)
        != 0)
    {
        t->len = 0;
        t->sent_len = 0;
        return -1;
    }

    p = t->out + t->out_len + 1;
    n = ngx_pty_text_render(t, p);

    for (trimmed = n; trimmed && p[trimmed - 1] == ' '; trimmed--) {
        /* void */
    }

    if (t->sent_len == 0) {
        memmove(p - 1, p, trimmed);
        t->out_len += trimmed;

    } else if (t->sent_len <= n && memcmp(t->sent, p, t->sent_len) == 0) {

        if (trimmed > t->sent_len) {
            memmove(p - 1, p + t->sent_len, trimmed - t->sent_len);
            t->out_len += trimmed - t->sent_len;
        }

    } else {
        /* the returned part was rewritten: the new version on its own */
        p[-1] = '\n';
        t->out_len += 1 + trimmed;
    }

    t->out[t->out_len++] = '\n';

    t->len = 0;
    t->sent_len = 0;

    ngx_pty_text_limit(t);

    return 0;
}


int
ngx_pty_text_break(ngx_pty_text_t *t)
{
    t->state = ngx_pty_st_ground;
    t->utf8_need = 0;
    t->string_len = 0;
    t->up = 0;

    t->col = 0;

    if (t->len) {
        return ngx_pty_text_complete(t);
    }

    if (t->sent_len) {
        /* what was taken of the line ended without its line feed */
        if (ngx_pty_text_reserve(&t->out, &t->out_alloc, t->out_len + 1)
            != 0)
        {
            return -1;
        }

        t->out[t->out_len++] = '\n';
        t->sent_len = 0;
    }

    return 0;
}


int
ngx_pty_text_note(ngx_pty_text_t *t, const u_char *data, size_t len)
{
    if (ngx_pty_text_break(t) != 0
        || ngx_pty_text_reserve(&t->out, &t->out_alloc, t->out_len + len + 1)
           != 0)
    {
        return -1;
    }

    memcpy(t->out + t->out_len, data, len);
    t->out_len += len;
    t->out[t->out_len++] = '\n';

    return 0;
}


/* over max_pending: drop the oldest half, at a line boundary */

static void
ngx_pty_text_limit(ngx_pty_text_t *t)
{
    u_char  *nl;
    size_t   cut;

    if (t->out_len <= t->max_pending) {
        return;
    }

    cut = t->out_len - t->max_pending / 2;

    nl = memchr(t->out + cut - 1, '\n', t->out_len - cut + 1);
    if (nl != NULL) {
        cut = (size_t) (nl - t->out) + 1;
    }

    memmove(t->out, t->out + cut, t->out_len - cut);
    t->out_len -= cut;
    t->dropped += cut;
}


static int
ngx_pty_text_get(ngx_pty_text_t *t, ngx_pty_text_view_t *v, int take)
{
    u_char  *p;
    size_t   n, d, sent;
    int      prefix;

    if (ngx_pty_text_reserve(&t->out, &t->out_alloc,
                             t->out_len + 2
                             + t->len * NGX_PTY_TEXT_CELL_BYTES)
        != 0)
    {
        return -1;
    }

    p = t->out + t->out_len + 1;
    n = ngx_pty_text_render(t, p);
    d = 0;
    sent = t->sent_len;
    prefix = (sent == 0 || (sent <= n && memcmp(t->sent, p, sent) == 0));

    if (n && take) {
        if (ngx_pty_text_reserve(&t->sent, &t->sent_alloc, n) != 0) {
            return -1;
        }

        memcpy(t->sent, p, n);
        t->sent_len = n;
    }

    if (n && prefix) {
        d = n - sent;
        memmove(p - 1, p + sent, d);

    } else if (n) {
        p[-1] = '\n';
        d = 1 + n;
    }

    v->data = t->out;
    v->len = t->out_len + d;
    v->stable = t->out_len;
    v->dropped = t->dropped;

    if (take) {
        t->out_len = 0;
        t->dropped = 0;
    }

    return 0;
}


/* UTF-8 of the line without its trailing blank cells */

static size_t
ngx_pty_text_render(ngx_pty_text_t *t, u_char *p)
{
    u_char               *start;
    size_t                i, end;
    ngx_pty_text_cell_t  *cell;

    end = t->len;

    while (end && t->cells[end - 1].cp == NGX_PTY_TEXT_BLANK) {
        end--;
    }

    start = p;

    for (i = 0; i < end; i++) {
        cell = &t->cells[i];

        if (cell->cp == NGX_PTY_TEXT_WIDE) {
            continue;
        }

        if (cell->cp == NGX_PTY_TEXT_BLANK) {
            *p++ = ' ';
            continue;
        }

        p = ngx_pty_text_utf8(p, cell->cp);

        if (cell->mark[0]) {
            p = ngx_pty_text_utf8(p, cell->mark[0]);
        }

        if (cell->mark[1]) {
            p = ngx_pty_text_utf8(p, cell->mark[1]);
        }
    }

    return (size_t) (p - start);
}


static u_char *
ngx_pty_text_utf8(u_char *p, uint32_t cp)
{
    if (cp < 0x80) {
        *p++ = (u_char) cp;

    } else if (cp < 0x800) {
        *p++ = (u_char) (0xc0 | (cp >> 6));
        *p++ = (u_char) (0x80 | (cp & 0x3f));

    } else if (cp < 0x10000) {
        *p++ = (u_char) (0xe0 | (cp >> 12));
        *p++ = (u_char) (0x80 | ((cp >> 6) & 0x3f));
        *p++ = (u_char) (0x80 | (cp & 0x3f));

    } else {
        *p++ = (u_char) (0xf0 | (cp >> 18));
        *p++ = (u_char) (0x80 | ((cp >> 12) & 0x3f));
        *p++ = (u_char) (0x80 | ((cp >> 6) & 0x3f));
        *p++ = (u_char) (0x80 | (cp & 0x3f));
    }

    return p;
}


static int
ngx_pty_text_reserve_cells(ngx_pty_text_t *t, size_t n)
{
    size_t                size;
    ngx_pty_text_cell_t  *cells;

    if (n <= t->cells_alloc) {
        return 0;
    }

    for (size = t->cells_alloc ? t->cells_alloc * 2 : 128; size < n;
         size *= 2)
    {
        /* void */
    }

    cells = realloc(t->cells, size * sizeof(ngx_pty_text_cell_t));
    if (cells == NULL) {
        return -1;
    }

    t->cells = cells;
    t->cells_alloc = size;

    return 0;
}


static int
ngx_pty_text_reserve(u_char **buf, size_t *alloc, size_t n)
{
    size_t   size;
    u_char  *p;

    if (n <= *alloc) {
        return 0;
    }

    for (size = *alloc ? *alloc * 2 : 1024; size < n; size *= 2) {
        /* void */
    }

    p = realloc(*buf, size);
    if (p == NULL) {
        return -1;
    }

    *buf = p;
    *alloc = size;

    return 0;
}


/*
 * Column width of a code point: 0 for combining marks and other
 * zero-width characters, 2 for East Asian Wide/Fullwidth and emoji, 1
 * otherwise.  An approximation of wcwidth() that does not depend on the
 * locale; see docs/SETTLED_TEXT.md.
 */

static const uint32_t  ngx_pty_text_zero[][2] = {
    { 0x0300, 0x036f }, { 0x0483, 0x0489 }, { 0x0591, 0x05bd },
    { 0x05bf, 0x05bf }, { 0x05c1, 0x05c2 }, { 0x05c4, 0x05c5 },
    { 0x05c7, 0x05c7 }, { 0x0610, 0x061a }, { 0x064b, 0x065f },
    { 0x0670, 0x0670 }, { 0x06d6, 0x06dc }, { 0x06df, 0x06e4 },
    { 0x06e7, 0x06e8 }, { 0x06ea, 0x06ed }, { 0x0711, 0x0711 },
    { 0x0730, 0x074a }, { 0x07a6, 0x07b0 }, { 0x07eb, 0x07f3 },
    { 0x0816, 0x082d }, { 0x0859, 0x085b }, { 0x08d3, 0x0902 },
    { 0x093a, 0x093a }, { 0x093c, 0x093c }, { 0x0941, 0x0948 },
    { 0x094d, 0x094d }, { 0x0951, 0x0957 }, { 0x0962, 0x0963 },
    { 0x0981, 0x0981 }, { 0x09bc, 0x09bc }, { 0x09c1, 0x09c4 },
    { 0x09cd, 0x09cd }, { 0x09e2, 0x09e3 }, { 0x0a01, 0x0a02 },
    { 0x0a3c, 0x0a3c }, { 0x0a41, 0x0a51 }, { 0x0a70, 0x0a71 },
    { 0x0a81, 0x0a82 }, { 0x0abc, 0x0abc }, { 0x0ac1, 0x0ac8 },
    { 0x0acd, 0x0acd }, { 0x0b01, 0x0b01 }, { 0x0b3c, 0x0b3c },
    { 0x0b41, 0x0b44 }, { 0x0b4d, 0x0b4d }, { 0x0bc0, 0x0bc0 },
    { 0x0bcd, 0x0bcd }, { 0x0c3e, 0x0c40 }, { 0x0c46, 0x0c56 },
    { 0x0cbc, 0x0cbc }, { 0x0ccc, 0x0ccd }, { 0x0d41, 0x0d44 },
    { 0x0d4d, 0x0d4d }, { 0x0dca, 0x0dca }, { 0x0dd2, 0x0dd6 },
    { 0x0e31, 0x0e31 }, { 0x0e34, 0x0e3a }, { 0x0e47, 0x0e4e },
    { 0x0eb1, 0x0eb1 }, { 0x0eb4, 0x0ebc }, { 0x0ec8, 0x0ecd },
    { 0x0f18, 0x0f19 }, { 0x0f35, 0x0f39 }, { 0x0f71, 0x0f84 },
    { 0x102d, 0x1037 }, { 0x1039, 0x103a }, { 0x1160, 0x11ff },
    { 0x135d, 0x135f }, { 0x1712, 0x1714 }, { 0x17b4, 0x17d3 },
    { 0x180b, 0x180f }, { 0x1ab0, 0x1aff }, { 0x1dc0, 0x1dff },
    { 0x200b, 0x200f }, { 0x202a, 0x202e }, { 0x2060, 0x2064 },
    { 0x20d0, 0x20f0 }, { 0x302a, 0x302d }, { 0x3099, 0x309a },
    { 0xfe00, 0xfe0f }, { 0xfe20, 0xfe2f }, { 0xfeff, 0xfeff },
    { 0x1f3fb, 0x1f3ff }, { 0xe0000, 0xe0fff }
};


static const uint32_t  ngx_pty_text_wide[][2] = {
    { 0x1100, 0x115f }, { 0x231a, 0x231b }, { 0x2329, 0x232a },
    { 0x23e9, 0x23ec }, { 0x23f0, 0x23f0 }, { 0x23f3, 0x23f3 },
    { 0x25fd, 0x25fe }, { 0x2614, 0x2615 }, { 0x2648, 0x2653 },
    { 0x267f, 0x267f }, { 0x2693, 0x2693 }, { 0x26a1, 0x26a1 },
    { 0x26aa, 0x26ab }, { 0x26bd, 0x26be }, { 0x26c4, 0x26c5 },
    { 0x26ce, 0x26ce }, { 0x26d4, 0x26d4 }, { 0x26ea, 0x26ea },
    { 0x26f2, 0x26f3 }, { 0x26f5, 0x26f5 }, { 0x26fa, 0x26fa },
    { 0x26fd, 0x26fd }, { 0x2705, 0x2705 }, { 0x270a, 0x270b },
    { 0x2728, 0x2728 }, { 0x274c, 0x274c }, { 0x274e, 0x274e },
    { 0x2753, 0x2755 }, { 0x2757, 0x2757 }, { 0x2795, 0x2797 },
    { 0x27b0, 0x27b0 }, { 0x27bf, 0x27bf }, { 0x2b1b, 0x2b1c },
    { 0x2b50, 0x2b50 }, { 0x2b55, 0x2b55 }, { 0x2e80, 0x3029 },
    { 0x302e, 0x303e }, { 0x3041, 0x3098 }, { 0x309b, 0x33ff },
    { 0x3400, 0x4dbf }, { 0x4e00, 0x9fff }, { 0xa000, 0xa4cf },
    { 0xa960, 0xa97f }, { 0xac00, 0xd7a3 }, { 0xf900, 0xfaff },
    { 0xfe10, 0xfe19 }, { 0xfe30, 0xfe6f }, { 0xff00, 0xff60 },
    { 0xffe0, 0xffe6 }, { 0x16fe0, 0x16fe4 }, { 0x17000, 0x18cff },
    { 0x1b000, 0x1b2ff }, { 0x1f004, 0x1f004 }, { 0x1f0cf, 0x1f0cf },
    { 0x1f18e, 0x1f18e }, { 0x1f191, 0x1f19a }, { 0x1f200, 0x1f2ff },
    { 0x1f300, 0x1f320 }, { 0x1f32d, 0x1f335 }, { 0x1f337, 0x1f37c },
    { 0x1f37e, 0x1f393 }, { 0x1f3a0, 0x1f3ca }, { 0x1f3cf, 0x1f3d3 },
    { 0x1f3e0, 0x1f3f0 }, { 0x1f3f4, 0x1f3f4 }, { 0x1f3f8, 0x1f3fa },
    { 0x1f400, 0x1f43e }, { 0x1f440, 0x1f440 }, { 0x1f442, 0x1f4fc },
    { 0x1f4ff, 0x1f53d }, { 0x1f54b, 0x1f54e }, { 0x1f550, 0x1f567 },
    { 0x1f57a, 0x1f57a }, { 0x1f595, 0x1f596 }, { 0x1f5a4, 0x1f5a4 },
    { 0x1f5fb, 0x1f64f }, { 0x1f680, 0x1f6c5 }, { 0x1f6cc, 0x1f6cc },
    { 0x1f6d0, 0x1f6d2 }, { 0x1f6d5, 0x1f6d7 }, { 0x1f6dc, 0x1f6df },
    { 0x1f6eb, 0x1f6ec }, { 0x1f6f4, 0x1f6fc }, { 0x1f7e0, 0x1f7eb },
    { 0x1f7f0, 0x1f7f0 }, { 0x1f90c, 0x1f93a }, { 0x1f93c, 0x1f945 },
    { 0x1f947, 0x1f9ff }, { 0x1fa70, 0x1faff }, { 0x20000, 0x2fffd },
    { 0x30000, 0x3fffd }
};


static size_t
ngx_pty_text_width(uint32_t cp)
{
    if (cp < 0x300) {
        return 1;
    }

    if (ngx_pty_text_in(ngx_pty_text_zero,
                        sizeof(ngx_pty_text_zero) / sizeof(ngx_pty_text_zero[0]),
                        cp))
    {
        return 0;
    }

    if (cp >= 0x1100
        && ngx_pty_text_in(ngx_pty_text_wide,
                           sizeof(ngx_pty_text_wide)
                           / sizeof(ngx_pty_text_wide[0]),
                           cp))
    {
        return 2;
    }

    return 1;
}


/* binary search in sorted, disjoint [first, last] ranges */

static int
ngx_pty_text_in(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
    size_t  lo, hi, mid;

    lo = 0;
    hi = n;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;

        if (cp < r[mid][0]) {
            hi = mid;

        } else if (cp > r[mid][1]) {
            lo = mid + 1;

        } else {
            return 1;
        }
    }

    return 0;
}
