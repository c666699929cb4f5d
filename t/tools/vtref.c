
/*
 * ngx_pty_module test tools: reference terminal and comparison.
 */


#include <stdlib.h>
#include <string.h>

#include "vtref.h"


static int  vtref_erase_bg;


struct vtref_s {
    VTerm        *vt;
    VTermScreen  *screen;
    int           cols;
    int           rows;
    int           alt;
    int           visible;
    int           saved;      /* DECSC, ?1048h, ?1049h since a reset */
    int           esc;        /* xterm mode: 1 after ESC, 2 in a CSI */
    int           vis_esc;    /* the cursor's visibility at that ESC */
    unsigned      csi_arg;
    unsigned      csi_arg1;   /* the first of two */
    int           csi_argn;
    char          csi_lead;
    int           top;        /* the scroll region, as libvterm sets it */
    int           bottom;
    char          out[1024];
    size_t        outlen;
    int           guard;      /* vtref_input()'s state */
    int           seps;
};


/*
 * libvterm 0.1.4 writes past its CSI parameter array at the 16th ';' or
 * ':' of a sequence.  The module's model cancels such a sequence in
 * libvterm (CAN) and drops the rest of it, through its final byte; the
 * reference does the same, so a stream, or a snapshot that ends inside
 * one, cannot corrupt it (t/fuzz/corpus/screen/crash-vtref-long-csi).
 */
enum {
    VTREF_GROUND = 0, VTREF_ESC, VTREF_CSI, VTREF_DROP, VTREF_DROP_INTER
};


static void
vtref_input(vtref_t *r, const unsigned char *p, size_t n)
{
    size_t         i, start;
    unsigned char  c;

    for (i = 0, start = 0; i < n; i++) {
        c = p[i];

        if (c == 0x18 || c == 0x1a) {
            r->guard = VTREF_GROUND;
            continue;
        }

        if (c == 0x1b) {
            r->guard = VTREF_ESC;
            continue;
        }

        if (c < 0x20 || c == 0x7f) {
            continue;
        }

        switch (r->guard) {

        case VTREF_ESC:
            if (c >= 0x20 && c <= 0x2f) {
                /* an intermediate: libvterm still opens a CSI at '[' */
                break;
            }

            r->guard = (c == '[') ? VTREF_CSI : VTREF_GROUND;
            r->seps = 0;
            break;

        case VTREF_CSI:
            if (c == ';' || c == ':') {
                if (++r->seps >= 16) {
                    vterm_input_write(r->vt, (const char *) p + start,
                                      i - start);
                    vterm_input_write(r->vt, "\x18", 1);
                    start = i + 1;
                    r->guard = VTREF_DROP;
                }

            } else if (!(c >= '0' && c <= '9') && !(c >= 0x3c && c <= 0x3f)) {
                r->guard = VTREF_GROUND;
            }

            break;

        case VTREF_DROP:
        case VTREF_DROP_INTER:
            vterm_input_write(r->vt, (const char *) p + start, i - start);
            start = i + 1;

            if (r->guard == VTREF_DROP
                && ((c >= '0' && c <= '9') || c == ';' || c == ':'))
            {
                break;
            }

            r->guard = (c >= 0x20 && c <= 0x2f) ? VTREF_DROP_INTER
                                                : VTREF_GROUND;
            break;
        }
    }

    vterm_input_write(r->vt, (const char *) p + start, n - start);
}


static int
vtref_settermprop(VTermProp prop, VTermValue *val, void *user)
{
    vtref_t  *r = user;

    if (prop == VTERM_PROP_ALTSCREEN) {
        r->alt = val->boolean;
    } else if (prop == VTERM_PROP_CURSORVISIBLE) {
        r->visible = val->boolean;
    }

    return 1;
}


static void
vtref_output(const char *s, size_t len, void *user)
{
    vtref_t  *r = user;

    if (r->outlen + len < sizeof(r->out)) {
        memcpy(r->out + r->outlen, s, len);
        r->outlen += len;
    }
}


static const VTermScreenCallbacks  vtref_callbacks = {
    .settermprop = vtref_settermprop,
};


vtref_t *
vtref_new(int cols, int rows)
{
    vtref_t  *r;

    r = calloc(1, sizeof(vtref_t));
    if (r == NULL) {
        return NULL;
    }

    r->cols = cols;
    r->rows = rows;
    r->visible = 1;
    r->bottom = -1;
    r->vt = vterm_new(rows, cols);

    if (r->vt == NULL) {
        free(r);
        return NULL;
    }

    vterm_set_utf8(r->vt, 1);
    vterm_output_set_callback(r->vt, vtref_output, r);
    r->screen = vterm_obtain_screen(r->vt);
    vterm_screen_enable_altscreen(r->screen, 1);
    vterm_screen_set_callbacks(r->screen, &vtref_callbacks, r);
    vterm_screen_reset(r->screen, 1);

    return r;
}


void
vtref_free(vtref_t *r)
{
    if (r) {
        vterm_free(r->vt);
        free(r);
    }
}




static void vtref_feed_xterm(vtref_t *r, const unsigned char *p, size_t n);
static void vtref_write(vtref_t *r, const unsigned char *p, size_t n);


void
vtref_feed(vtref_t *r, const unsigned char *p, size_t n)
{
    if (vtref_erase_bg) {
        vtref_feed_xterm(r, p, n);
        return;
    }

    vtref_write(r, p, n);
}


/* the pen's background to the default, for xterm.js's blank lines */
static void
vtref_bg_default(vtref_t *r, VTermColor *bg)
{
    VTermValue  val;

    vterm_state_get_penattr(vterm_obtain_state(r->vt),
                            VTERM_ATTR_BACKGROUND, &val);
    *bg = val.color;
    vterm_input_write(r->vt, "\x1b[49m", 5);
}


static void
vtref_bg_restore(vtref_t *r, const VTermColor *c)
{
    char  buf[48];

    if (VTERM_COLOR_IS_DEFAULT_BG(c)) {
        return;
    }

    if (VTERM_COLOR_IS_INDEXED(c)) {
        snprintf(buf, sizeof(buf), "\x1b[48;5;%um", c->indexed.idx);
    } else {
        snprintf(buf, sizeof(buf), "\x1b[48;2;%u;%u;%um", c->rgb.red,
                 c->rgb.green, c->rgb.blue);
    }

    vterm_input_write(r->vt, buf, strlen(buf));
}


static void
vtref_write(vtref_t *r, const unsigned char *p, size_t n)
{
    size_t  k;

    while (n) {
        k = n < 65536 ? n : 65536;

        /* extend to the next control byte, so no text run is split */
        while (k < n && p[k] >= 0x20 && k < 1024 * 1024) {
            k++;
        }

        vtref_input(r, p, k);
        p += k;
        n -= k;
    }
}


/*
 * libvterm with xterm.js's cursor restore: DECRC (ESC 8, ?1048l, ?1049l)
 * leaves the cursor's visibility as it was, and with nothing saved
 * restores the default pen (libvterm restores a zeroed one)
 */
static void
vtref_restored(vtref_t *r)
{
    if (r->visible != r->vis_esc) {
        vterm_input_write(r->vt, r->vis_esc ? "\x1b[?25h" : "\x1b[?25l", 6);
    }

    if (!r->saved) {
        vterm_input_write(r->vt, "\x1b[m", 3);
    }
}


/* DECSTBM as libvterm 0.1.4 takes it */
static void
vtref_margins(vtref_t *r)
{
    int  top, bottom;

    top = (r->csi_argn ? r->csi_arg1 : r->csi_arg);
    top = top ? top - 1 : 0;
    bottom = r->csi_argn && r->csi_arg ? (int) r->csi_arg : -1;
    top = top > r->rows ? r->rows : top;

    if (top == 0 && bottom == r->rows) {
        bottom = -1;
    } else if (bottom > r->rows) {
        bottom = r->rows;
    }

    if ((bottom < 0 ? r->rows : bottom) <= top) {
        top = 0;
        bottom = -1;
    }

    r->top = top;
    r->bottom = bottom;
}


/* DECSTR as xterm.js does it (libvterm 0.1.4 leaves most of it alone) */
static void
vtref_decstr(vtref_t *r)
{
    char               buf[32];
    VTermPos           pos;
    static const char  reset[] =
        "\x1b[m\x1b[?6l\x1b[?7h\x1b[4l\x1b[?1l\x1b>\x1b[?2004l\x1b[?1004l"
        "\x1b[?25h\x1b[r\x1b[?69l\x1b[s\x1b[0\"q\x1b(B\x1b)B\x1b*B\x1b+B\x0f"
        "\x1b[H\x1b" "7";

    vterm_state_get_cursorpos(vterm_obtain_state(r->vt), &pos);
    vterm_input_write(r->vt, reset, sizeof(reset) - 1);
    r->top = 0;
    r->bottom = -1;
    r->saved = 1;
    snprintf(buf, sizeof(buf), "\x1b[%d;%dH", pos.row + 1, pos.col + 1);
    vterm_input_write(r->vt, buf, strlen(buf));
}


static void
vtref_first_column(vtref_t *r)
{
    VTermPos  pos;

    vterm_state_get_cursorpos(vterm_obtain_state(r->vt), &pos);

    if (pos.row >= r->top && pos.row < (r->bottom < 0 ? r->rows : r->bottom))
    {
        vterm_input_write(r->vt, "\r", 1);
    }
}


static void
vtref_feed_xterm(vtref_t *r, const unsigned char *p, size_t n)
{
    int            restore, save;
    size_t         i, start;
    VTermColor     bg;
    unsigned char  c;

    for (i = 0, start = 0; i < n; i++) {
        c = p[i];
        restore = 0;
        save = 0;

        if (c == 0x1b) {
            vtref_write(r, p + start, i - start);
            start = i;
            r->esc = 1;
            r->vis_esc = r->visible;
            continue;
        }

        if (r->esc == 1) {
            r->esc = 0;

            if (c == '[') {
                r->esc = 2;
                r->csi_arg = 0;
                r->csi_argn = 0;
                r->csi_lead = 0;
            }

            save = (c == '7');
            restore = (c == '8');

            if (c == 'c') {
                vtref_write(r, p + start, i + 1 - start);
                start = i + 1;
                r->saved = 0;
                r->top = 0;
                r->bottom = -1;
                        }

        } else if (r->esc == 2) {
            if (c == '?' && r->csi_arg == 0) {
                r->csi_lead = '?';

            } else if (c >= '0' && c <= '9') {
                r->csi_arg = r->csi_arg < 100000 ? r->csi_arg * 10 + c - '0'
                                                 : r->csi_arg;

            } else if (c == ';' && r->csi_argn == 0) {
                r->csi_arg1 = r->csi_arg;
                r->csi_arg = 0;
                r->csi_argn = 1;

            } else if (c >= 0x40 && c <= 0x7e) {
                r->esc = 0;

                if (r->csi_lead == 0 && c == 'r') {
                    vtref_margins(r);
                }

                if (r->csi_lead == 0 && c == 'p' && i > 0 && p[i - 1] == '!') {
                    vtref_write(r, p + start, i + 1 - start);
                    start = i + 1;
                    vtref_decstr(r);
                }

                if (r->csi_lead == 0 && (c == 'L' || c == 'M')) {
                    /* xterm.js: IL, DL in the scroll region go to column 0 */
                    vtref_write(r, p + start, i + 1 - start);
                    start = i + 1;
                    vtref_first_column(r);
                }

                if (r->csi_lead == '?'
                    && (r->csi_arg == 1048 || r->csi_arg == 1049))
                {
                    save = (c == 'h');
                    restore = (c == 'l');
                }

                if (r->csi_lead == 0 && c == 'T') {
                    /* SD: xterm.js brings in lines in the default pen */
                    vtref_bg_default(r, &bg);
                    vtref_write(r, p + start, i + 1 - start);
                    vtref_bg_restore(r, &bg);
                    start = i + 1;
                }

            } else if (c != ';' && c != ':' && (c < 0x20 || c > 0x2f)) {
                r->esc = 0;
            }
        }

        if (save || restore) {
            vtref_write(r, p + start, i + 1 - start);
            start = i + 1;

            if (restore) {
                vtref_restored(r);
            }

            r->saved |= save;
        }
    }

    vtref_write(r, p + start, n - start);
}


void
vtref_resize(vtref_t *r, int cols, int rows)
{
    VTermColor  bg;

    r->cols = cols;
    r->rows = rows;

    if (!vtref_erase_bg) {
        vterm_set_size(r->vt, rows, cols);
        return;
    }

    /* xterm.js: the cells a resize adds are blank in the default colours */
    vtref_bg_default(r, &bg);
    vterm_set_size(r->vt, rows, cols);
    vtref_bg_restore(r, &bg);
}


VTermScreen *
vtref_screen(vtref_t *r)
{
    return r->screen;
}


size_t
vtref_utf8(char *p, uint32_t c)
{
    if (c < 0x80) {
        p[0] = (char) c;
        return 1;
    }

    if (c < 0x800) {
        p[0] = (char) (0xc0 | (c >> 6));
        p[1] = (char) (0x80 | (c & 0x3f));
        return 2;
    }

    if (c < 0x10000) {
        p[0] = (char) (0xe0 | (c >> 12));
        p[1] = (char) (0x80 | ((c >> 6) & 0x3f));
        p[2] = (char) (0x80 | (c & 0x3f));
        return 3;
    }

    p[0] = (char) (0xf0 | (c >> 18));
    p[1] = (char) (0x80 | ((c >> 12) & 0x3f));
    p[2] = (char) (0x80 | ((c >> 6) & 0x3f));
    p[3] = (char) (0x80 | (c & 0x3f));
    return 4;
}


char *
vtref_text(vtref_t *r, size_t *len)
{
    int              row, col, i;
    char            *buf, *p, *start, *line_end, *text_end;
    VTermPos         pos;
    VTermScreenCell  cell;

    buf = malloc((size_t) r->rows * (r->cols * 24 + 1) + 1);
    if (buf == NULL) {
        return NULL;
    }

    p = buf;
    text_end = buf;

    for (row = 0; row < r->rows; row++) {
        start = p;
        line_end = p;

        for (col = 0; col < r->cols; col++) {
            pos.row = row;
            pos.col = col;
            vterm_screen_get_cell(r->screen, pos, &cell);

            if (cell.chars[0] == (uint32_t) -1) {
                continue;
            }

            if (cell.chars[0] == 0) {
                *p++ = ' ';
                continue;
            }

            for (i = 0; i < VTERM_MAX_CHARS_PER_CELL && cell.chars[i]; i++) {
                p += vtref_utf8(p, cell.chars[i]);
            }

            if (cell.chars[0] != ' ' || cell.chars[1]) {
                line_end = p;
            }
        }

        p = line_end;

        if (line_end > start) {
            text_end = line_end;
        }

        *p++ = '\n';
    }

    *len = text_end - buf;

    return buf;
}


static void
vtref_color(char *buf, size_t size, const VTermColor *c)
{
    if (VTERM_COLOR_IS_DEFAULT_FG(c) || VTERM_COLOR_IS_DEFAULT_BG(c)) {
        snprintf(buf, size, "default");
    } else if (VTERM_COLOR_IS_INDEXED(c)) {
        snprintf(buf, size, "idx%d", c->indexed.idx);
    } else {
        snprintf(buf, size, "rgb(%d,%d,%d)", c->rgb.red, c->rgb.green,
                 c->rgb.blue);
    }
}


static int
vtref_color_eq(const VTermColor *a, const VTermColor *b)
{
    if (a->type != b->type) {
        return 0;
    }

    if (VTERM_COLOR_IS_INDEXED(a)) {
        return a->indexed.idx == b->indexed.idx;
    }

    return a->rgb.red == b->rgb.red && a->rgb.green == b->rgb.green
           && a->rgb.blue == b->rgb.blue;
}


static void
vtref_describe(char *buf, size_t size, const VTermScreenCell *c)
{
    int     i, n;
    char    fg[32], bg[32];

    n = snprintf(buf, size, "'");

    if (c->chars[0] == (uint32_t) -1) {
        n += snprintf(buf + n, size - n, "<wide-right-half>");
    } else if (c->chars[0] == 0) {
        n += snprintf(buf + n, size - n, "<blank>");
    } else {
        for (i = 0; i < VTERM_MAX_CHARS_PER_CELL && c->chars[i]; i++) {
            n += snprintf(buf + n, size - n, "%sU+%04X", i ? " " : "",
                          c->chars[i]);
        }
    }

    vtref_color(fg, sizeof(fg), &c->fg);
    vtref_color(bg, sizeof(bg), &c->bg);

    snprintf(buf + n, size - n,
             "' w%d%s%s%s%s%s%s ul%d font%d dwl%d dhl%d fg=%s bg=%s",
             c->width, c->attrs.bold ? " bold" : "",
             c->attrs.italic ? " italic" : "",
             c->attrs.blink ? " blink" : "",
             c->attrs.reverse ? " reverse" : "",
             c->attrs.strike ? " strike" : "", "",
             c->attrs.underline, c->attrs.font, c->attrs.dwl, c->attrs.dhl,
             fg, bg);
}


void
vtref_xterm_erase(int on)
{
    vtref_erase_bg = on;
}


static int
vtref_cell_eq(const VTermScreenCell *a, const VTermScreenCell *b)
{
    int  i;

    if (a->chars[0] == (uint32_t) -1 || b->chars[0] == (uint32_t) -1) {
        return a->chars[0] == b->chars[0];
    }

    if (vtref_erase_bg && a->chars[0] == 0 && b->chars[0] == 0) {
        /* xterm.js erases with the background colour alone */
        return a->width == b->width && vtref_color_eq(&a->bg, &b->bg);
    }

    for (i = 0; i < VTERM_MAX_CHARS_PER_CELL; i++) {
        if (a->chars[i] != b->chars[i]) {
            return 0;
        }

        if (a->chars[i] == 0) {
            break;
        }
    }

    return a->width == b->width
           && a->attrs.bold == b->attrs.bold
           && a->attrs.underline == b->attrs.underline
           && a->attrs.italic == b->attrs.italic
           && a->attrs.blink == b->attrs.blink
           && a->attrs.reverse == b->attrs.reverse
           && a->attrs.strike == b->attrs.strike
           && a->attrs.font == b->attrs.font
           && a->attrs.dwl == b->attrs.dwl
           && a->attrs.dhl == b->attrs.dhl
           && vtref_color_eq(&a->fg, &b->fg)
           && vtref_color_eq(&a->bg, &b->bg);
}


static void
vtref_query(vtref_t *r, int mode, char *buf, size_t size)
{
    char  q[32];
    int   n;

    r->outlen = 0;
    n = snprintf(q, sizeof(q), "\x18\x1b[?%d$p", mode);
    vterm_input_write(r->vt, q, n);
    snprintf(buf, size, "%.*s", (int) r->outlen, r->out);
}


int
vtref_compare(vtref_t *want, vtref_t *got, FILE *out, int max_diffs,
    int strict_modes)
{
    int                   diffs, row, col, width, i;
    char                  a[256], b[256];
    VTermPos              pos, wp, gp;
    VTermScreenCell       wc, gc;
    const VTermLineInfo  *wl, *gl;
    static const int      modes[] = { 6, 7, 25, 69, 1, 1000, 1002, 1003,
                                      1004, 1005, 1006, 1015, 2004 };

#define VTREF_DIFF(...)                                                      \
    do {                                                                      \
        if (out && diffs < max_diffs) {                                       \
            fprintf(out, __VA_ARGS__);                                        \
        }                                                                     \
        diffs++;                                                              \
    } while (0)

    diffs = 0;

    if (want->cols != got->cols || want->rows != got->rows) {
        VTREF_DIFF("size: expected %dx%d got %dx%d\n", want->cols, want->rows,
                   got->cols, got->rows);
        return diffs;
    }

    for (row = 0; row < want->rows; row++) {
        wl = vterm_state_get_lineinfo(vterm_obtain_state(want->vt), row);
        gl = vterm_state_get_lineinfo(vterm_obtain_state(got->vt), row);

        if (wl->doublewidth != gl->doublewidth
            || wl->doubleheight != gl->doubleheight)
        {
            VTREF_DIFF("row %d: expected line dwl%d dhl%d got dwl%d dhl%d\n",
                       row, wl->doublewidth, wl->doubleheight,
                       gl->doublewidth, gl->doubleheight);
        }

        /* the right half of a double-width line is not displayed */
        width = wl->doublewidth ? want->cols / 2 : want->cols;

        for (col = 0; col < width; col++) {
            pos.row = row;
            pos.col = col;
            memset(&wc, 0, sizeof(wc));
            memset(&gc, 0, sizeof(gc));
            vterm_screen_get_cell(want->screen, pos, &wc);
            vterm_screen_get_cell(got->screen, pos, &gc);

            if (!vtref_cell_eq(&wc, &gc)) {
                vtref_describe(a, sizeof(a), &wc);
                vtref_describe(b, sizeof(b), &gc);
                VTREF_DIFF("row %d col %d: expected %s\n"
                           "              got      %s\n", row, col, a, b);
            }
        }
    }

    vterm_state_get_cursorpos(vterm_obtain_state(want->vt), &wp);
    vterm_state_get_cursorpos(vterm_obtain_state(got->vt), &gp);

    if (wp.row != gp.row || wp.col != gp.col) {
        VTREF_DIFF("cursor: expected row %d col %d got row %d col %d\n",
                   wp.row, wp.col, gp.row, gp.col);
    }

    if (want->visible != got->visible) {
        VTREF_DIFF("cursor visible: expected %d got %d\n", want->visible,
                   got->visible);
    }

    if (want->alt != got->alt) {
        VTREF_DIFF("alternate screen: expected %d got %d\n", want->alt,
                   got->alt);
    }

    for (i = 0; i < (int) (sizeof(modes) / sizeof(modes[0])); i++) {
        if (i >= 4 && !strict_modes) {
            break;
        }

        vtref_query(want, modes[i], a, sizeof(a));
        vtref_query(got, modes[i], b, sizeof(b));

        if (strcmp(a, b) != 0) {
            VTREF_DIFF("mode ?%d: expected \"ESC%s\" got \"ESC%s\"\n",
                       modes[i], a[0] ? a + 1 : a, b[0] ? b + 1 : b);
        }
    }

    return diffs;
}
