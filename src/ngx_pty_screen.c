
/*
 * ngx_pty_module: terminal screen model (see ngx_pty_screen.h and
 * docs/SNAPSHOT.md).
 *
 * libvterm's parser and state layer interpret the byte stream and call us
 * back (putglyph, scrollrect, erase, ...); the cells live in our grid.  A
 * small scanner walks the same bytes in step with libvterm's parser to
 * learn what the state layer keeps private or ignores (DEC modes, keypad
 * mode, scroll margins, SGR 8, the saved cursor), to keep libvterm 0.1.4
 * away from inputs that crash or hang it, and to split the stream where
 * such an event must be ordered against the callbacks.
 *
 * The common case goes around libvterm: printable ASCII, CR and LF, the
 * plain forms of cursor moves, SGR, EL and ED are applied to the grid by
 * the model itself, and whole screenfuls of lines that scroll away unseen
 * are skipped.  libvterm is then behind (its cursor, pen, last glyph and
 * pending wrap) and is caught up with a few sequences of its own just
 * before it reads anything else, and at the end of each piece of input.
 *
 * Memory comes from malloc()/calloc()/free(), not from an nginx pool: the
 * model is a process-local object that lives as long as its session, is
 * resized and freed independently of any request, and must also work in
 * the standalone test tools, which do not link nginx.
 */


/* memrchr(); nginx's own build defines it too (ngx_linux_config.h) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <stdio.h>

#include <vterm.h>

#include "ngx_pty_screen.h"
#include "ngx_pty_grid.h"
#include "ngx_pty_reflow.h"


#define NGX_PTY_WRITE_MAX     4096        /* libvterm puts len*4 on stack */
#define NGX_PTY_CSI_ARGS      16          /* libvterm's CSI_ARGS_MAX */
#define NGX_PTY_TITLE_MAX     256
#define NGX_PTY_OSC_MAX       (NGX_PTY_TITLE_MAX + 8)   /* "2;" and a title */
#define NGX_PTY_FAST_MIN      8           /* bytes worth catching libvterm up */
#define NGX_PTY_FAST_ARGS     12          /* ngx_pty_fast_csi(): parameters */
#define NGX_PTY_FAST_DIGITS   5           /* and digits of one */
#define NGX_PTY_NO_ESC        ((size_t) -1)
#define NGX_PTY_PEND_MAX      64          /* an unfinished sequence kept */
#define NGX_PTY_TABS          (NGX_PTY_SCREEN_MAX_COLS / 8)
#define NGX_PTY_ANY_DIGITS    ((size_t) -1)
#define NGX_PTY_SB_MIN        48          /* scrollback lines kept at least */
#define NGX_PTY_SB_MIN_COLS   80          /* ... of this width, in cells */
#define NGX_PTY_MARK_FLOOD    ((size_t) -1)
#define NGX_PTY_SB_RAW_MAX    32768       /* skipped bytes kept for them */

/* as nginx's ngx_config.h has it: this file builds without nginx too */
#ifndef ngx_inline
#define ngx_inline            inline
#endif

/*
 * kept out of the scan's loop, whose code the compiler lays out worse with
 * a rare path inlined into it (gcc, clang)
 */
#define ngx_pty_cold          __attribute__((__noinline__, __cold__))

#define NGX_PTY_ARG_MORE      (1UL << 31)
#define NGX_PTY_ARG_MISSING   ((1UL << 31) - 1)
#define NGX_PTY_ARG(a)        ((a) & ~NGX_PTY_ARG_MORE)
#define NGX_PTY_ARG_OR(a, d)                                                  \
    (NGX_PTY_ARG(a) == NGX_PTY_ARG_MISSING ? (long) (d) : (long) NGX_PTY_ARG(a))

/* pen attribute bits */
#define NGX_PTY_A_BOLD        0x0001
#define NGX_PTY_A_UL_SHIFT    1                 /* 2 bits: 0..3 */
#define NGX_PTY_A_UL          0x0006
#define NGX_PTY_A_ITALIC      0x0008
#define NGX_PTY_A_BLINK       0x0010
#define NGX_PTY_A_REVERSE     0x0020
#define NGX_PTY_A_STRIKE      0x0040
#define NGX_PTY_A_FONT_SHIFT  7                 /* 4 bits: 0..9 */
#define NGX_PTY_A_FONT        0x0780
#define NGX_PTY_A_CONCEAL     0x0800
#define NGX_PTY_A_SGR         0x0fff            /* what SGR controls */
#define NGX_PTY_A_PROTECT     0x1000            /* DECSCA */

/* a glyph of two columns a Keyframe writes where it needs a wrap (U+4E00) */
#define NGX_PTY_WIDE_FILL     "\xe4\xb8\x80"

/* pen xattr bits: SGR that xterm.js renders and libvterm 0.1.4 ignores */
#define NGX_PTY_X_DIM         0x01
#define NGX_PTY_X_OVERLINE    0x02
#define NGX_PTY_X_UL_SHIFT    2                 /* 4:4 dotted 1, 4:5 dashed 2 */
#define NGX_PTY_X_UL          0x0c

typedef struct {
    int                           style;      /* DECSCUSR's, -1: unset */
    int                           blink12;    /* ?12 after it, -1: unset */
    int                           blink_pre;  /* ?12 before it */
} ngx_pty_cursor_props_t;


/* scanner states, mirroring libvterm's parser */
#define NGX_PTY_PS_NORMAL     0
#define NGX_PTY_PS_ESC        1
#define NGX_PTY_PS_CSI_LEADER 2
#define NGX_PTY_PS_CSI_ARGS   3
#define NGX_PTY_PS_CSI_INTER  4
#define NGX_PTY_PS_STRING     5
#define NGX_PTY_PS_ESC_STRING 6
#define NGX_PTY_PS_DROP       7   /* swallowing an over-long CSI */
#define NGX_PTY_PS_DROP_INTER 8

/* what libvterm does not know yet of what the model did (vt_dirty) */
#define NGX_PTY_VT_POS        0x01  /* the cursor is vt_cur */
#define NGX_PTY_VT_PEN        0x02  /* the pen is s->pen, libvterm's vt_pen */
#define NGX_PTY_VT_GLYPH      0x04  /* the last glyph is vt_glyph at edge_pos */
#define NGX_PTY_VT_PROTECT    0x08  /* DECSCA is s->protect */


struct ngx_pty_screen_s {
    VTerm                        *vt;
    VTermState                   *state;

    unsigned                      cols;
    unsigned                      rows;

    ngx_pty_grid_t                grid[2];  /* main, alternate (lazily) */
    ngx_pty_grid_t               *cur;
    ngx_pty_grid_t               *new_grid; /* prepared by resize() */

    ngx_pty_pen_t                 pen;
    ngx_pty_pen_t                 default_pen;

    /*
     * the underline style xterm.js keeps with the pen's colour after a
     * DECRC gave back a pen that does not underline (SGR 59 shows it)
     */
    uint16_t                      ul_hidden;      /* NGX_PTY_A_UL bits */
    uint8_t                       ul_hidden_x;    /* NGX_PTY_X_UL bits */

    /*
     * xterm.js's pen has its "extended" mark without the underline flag
     * (an SGR 59 showed a hidden style): DECSC saves no underline then,
     * and a DECRC of such a pen shows the style in use
     */
    uint8_t                       ul_flagless;

    /*
     * the pen's underline is xterm.js's flag and extended mark with no
     * style in it (a DECRC gave an underlining slot's flag to a pen with
     * none): an SGR 59 drops the mark (docs/SNAPSHOT.md)
     */
    uint8_t                       ul_styleless;

    ngx_pty_screen_reply_pt       reply;
    void                         *reply_data;

    size_t                        vt_mem;
    size_t                        comb_mem;
    size_t                        sb_mem;
    size_t                        tail_mem;
    unsigned                      tails;    /* rows with a tail */

    /* xterm.js's scrollback lines the model does not hold (the main buffer) */
    unsigned                      sb_lost;
    unsigned                      sb_stale; /* rows to push as not held */

    /*
     * the bytes of the lines a skip jumped over (their tail, the pen
     * first), made into rows only when a resize wants the scrollback;
     * they come before the ring's rows
     */
    u_char                       *sb_raw;
    size_t                        sb_raw_len;
    /*
     * the main buffer's cursor while the alternate one is in use (a
     * resize reflows the main buffer around it; norm_x is cols when a
     * wrap was pending)
     */
    int                           norm_y;
    int                           norm_x;
    /* and its scroll region (xterm.js keeps one per buffer) */
    int                           norm_top;
    int                           norm_bottom;
    /*
     * xterm.js's alternate buffer holds this many lines: the most rows
     * the terminal had since the buffer was last left; those past the
     * screen are lines above it (grid[1]'s ring), which text scrolls in
     * and a resize brings back
     */
    unsigned                      alt_max;

    /* pending wrap ("phantom" column) */
    VTermPos                      ph_pos;
    VTermPos                      edge_pos;   /* the last glyph printed */
    VTermPos                      vt_next;    /* where libvterm prints next */
    int                           combine_w;

    /* the cursor saved by DECSC / ?1048 / ?1049: per buffer, as xterm.js */
    VTermPos                      saved_pos[2];
    ngx_pty_pen_t                 saved_pen[2];
    u_char                        saved_valid[2];
    u_char                        saved_set[2]; /* the set in GL then: its
                                                   SCS final, 0: ASCII */
    u_char                        saved_protect[2]; /* DECSCA then */
    u_char                        saved_flagless[2]; /* ul_flagless then */

    /* xterm.js's way taken where libvterm 0.1.4 goes another (tests) */
    unsigned long                 diverged;

    /*
     * the cursor's style as xterm.js 5.5 keeps it (DECSTR and RIS keep
     * it, in its options), as set since the last of those (what 6.0
     * keeps), and as it was then
     */
    ngx_pty_cursor_props_t        props;
    ngx_pty_cursor_props_t        props_since;
    ngx_pty_cursor_props_t        props_reset;
    unsigned                      mouse;      /* 0, 1000, 1002, 1003 */
    unsigned                      mouse_enc;  /* 0, 1005, 1006, 1015 */
    int                           top, bottom;
    /* xterm.js's x past cols while phantom: marks of their own there */
    unsigned                      past;

    unsigned                      alt:1;
    unsigned                      no_skip:1;  /* ngx_pty_sb_raw_lines() */
    unsigned                      phantom:1;
    unsigned                      edge:1;
    /* marks the model joined to the last glyph: libvterm's copy lacks them */
    unsigned                      comb_own:1;
    unsigned                      untracked:1; /* DECALN, ngx_pty_vt_prime */
    unsigned                      align_top;   /* DECALN's first row */
    unsigned                      last_text:1;
    unsigned                      last_wide:1; /* ... and it was wide */
    unsigned                      last_join:1; /* a mark would join it */
    unsigned                      esc_glyph:1; /* a glyph before the ESC */
    unsigned                      put:1;      /* a glyph since the move */
    unsigned                      visible:1;
    unsigned                      reverse:1;
    unsigned                      keypad:1;
    unsigned                      ckm:1;
    unsigned                      paste:1;
    unsigned                      focus:1;
    unsigned                      sync:1;
    unsigned                      origin:1;
    unsigned                      autowrap:1;
    unsigned                      insert:1;
    unsigned                      newline:1;
    unsigned                      protect:1;

    /* G0-G3 not known to map ASCII to itself (SCS), and which is GL */
    u_char                        charset[4];
    u_char                        scs[4];   /* their SCS final byte, or 0 */
    u_char                        ascii;    /* G0-G3 given ASCII since reset */
    unsigned                      gl;
    /*
     * GL draws the set a DECRC gave back, not its designation (xterm.js
     * restores the set in use, not G0-G3): libvterm's copy of G<ov_g>
     * holds that set meanwhile, ov_* the designation, until a shift or
     * a designation of G<ov_g>
     */
    unsigned                      ov;
    unsigned                      ov_g;
    u_char                        ov_charset;
    u_char                        ov_scs;
    u_char                        ov_ascii;
    unsigned                      ov_shift; /* a shift inside a sequence */
    unsigned                      vt_text;  /* libvterm must decode text */
    unsigned                      vt_esc;   /* an ESC held back from it */
    unsigned                      wide;     /* a wide glyph was written */
    unsigned                      whole;    /* a blank in a whole pen was */
    unsigned                      no_lf;    /* its cursor moves: no LF */
    unsigned                      no_fast_wide; /* tests: libvterm prints */
    unsigned                      no_sb;    /* its scrolls: SU, IL, DL */

    /*
     * libvterm left behind by the model's own handling of text and CSI
     * sequences (ngx_pty_fast_text, ngx_pty_fast_csi), brought up to date
     * by ngx_pty_vt_sync() before it reads another byte
     */
    unsigned                      vt_dirty;
    unsigned                      vt_args;  /* its CSI parameters not args[] */
    VTermPos                      vt_cur;
    ngx_pty_pen_t                 vt_pen;
    uint32_t                      vt_glyph;

    /* scanner */
    unsigned                      ps;
    unsigned                      leaderlen;
    unsigned                      intermedlen;
    u_char                        leader;
    u_char                        intermed;
    int                           argi;
    unsigned long                 args[NGX_PTY_CSI_ARGS];

    /* ngx_pty_skip_lines() found nothing to skip before p + noskip_end */
    const u_char                 *noskip_p;
    size_t                        noskip_end;

    u_char                        tail[4];   /* incomplete UTF-8 */
    unsigned                      tail_len;

    /* the sequence the input stopped in, for a snapshot to end with */
    u_char                        pend[NGX_PTY_PEND_MAX];
    unsigned                      pend_len;

    /* tab stops (xterm.js's, per buffer), and whether not the default */
    u_char                        tabs[2][NGX_PTY_TABS];
    unsigned                      tabs_custom[2];

    size_t                        title_len;
    u_char                        title[NGX_PTY_TITLE_MAX];

    /* the OSC being read (its first bytes), across reads */
    unsigned                      osc;
    size_t                        osc_len;
    u_char                        osc_buf[NGX_PTY_OSC_MAX];
};


typedef struct {
    uint32_t  first;
    uint32_t  last;
} ngx_pty_interval_t;


/* libvterm 0.1.4's combining table (unicode.c, from Markus Kuhn's wcwidth) */
static const ngx_pty_interval_t  ngx_pty_combining[] = {
    { 0x0300, 0x036f }, { 0x0483, 0x0486 }, { 0x0488, 0x0489 },
    { 0x0591, 0x05bd }, { 0x05bf, 0x05bf }, { 0x05c1, 0x05c2 },
    { 0x05c4, 0x05c5 }, { 0x05c7, 0x05c7 }, { 0x0600, 0x0603 },
    { 0x0610, 0x0615 }, { 0x064b, 0x065e }, { 0x0670, 0x0670 },
    { 0x06d6, 0x06e4 }, { 0x06e7, 0x06e8 }, { 0x06ea, 0x06ed },
    { 0x070f, 0x070f }, { 0x0711, 0x0711 }, { 0x0730, 0x074a },
    { 0x07a6, 0x07b0 }, { 0x07eb, 0x07f3 }, { 0x0901, 0x0902 },
    { 0x093c, 0x093c }, { 0x0941, 0x0948 }, { 0x094d, 0x094d },
    { 0x0951, 0x0954 }, { 0x0962, 0x0963 }, { 0x0981, 0x0981 },
    { 0x09bc, 0x09bc }, { 0x09c1, 0x09c4 }, { 0x09cd, 0x09cd },
    { 0x09e2, 0x09e3 }, { 0x0a01, 0x0a02 }, { 0x0a3c, 0x0a3c },
    { 0x0a41, 0x0a42 }, { 0x0a47, 0x0a48 }, { 0x0a4b, 0x0a4d },
    { 0x0a70, 0x0a71 }, { 0x0a81, 0x0a82 }, { 0x0abc, 0x0abc },
    { 0x0ac1, 0x0ac5 }, { 0x0ac7, 0x0ac8 }, { 0x0acd, 0x0acd },
    { 0x0ae2, 0x0ae3 }, { 0x0b01, 0x0b01 }, { 0x0b3c, 0x0b3c },
    { 0x0b3f, 0x0b3f }, { 0x0b41, 0x0b43 }, { 0x0b4d, 0x0b4d },
    { 0x0b56, 0x0b56 }, { 0x0b82, 0x0b82 }, { 0x0bc0, 0x0bc0 },
    { 0x0bcd, 0x0bcd }, { 0x0c3e, 0x0c40 }, { 0x0c46, 0x0c48 },
    { 0x0c4a, 0x0c4d }, { 0x0c55, 0x0c56 }, { 0x0cbc, 0x0cbc },
    { 0x0cbf, 0x0cbf }, { 0x0cc6, 0x0cc6 }, { 0x0ccc, 0x0ccd },
    { 0x0ce2, 0x0ce3 }, { 0x0d41, 0x0d43 }, { 0x0d4d, 0x0d4d },
    { 0x0dca, 0x0dca }, { 0x0dd2, 0x0dd4 }, { 0x0dd6, 0x0dd6 },
    { 0x0e31, 0x0e31 }, { 0x0e34, 0x0e3a }, { 0x0e47, 0x0e4e },
    { 0x0eb1, 0x0eb1 }, { 0x0eb4, 0x0eb9 }, { 0x0ebb, 0x0ebc },
    { 0x0ec8, 0x0ecd }, { 0x0f18, 0x0f19 }, { 0x0f35, 0x0f35 },
    { 0x0f37, 0x0f37 }, { 0x0f39, 0x0f39 }, { 0x0f71, 0x0f7e },
    { 0x0f80, 0x0f84 }, { 0x0f86, 0x0f87 }, { 0x0f90, 0x0f97 },
    { 0x0f99, 0x0fbc }, { 0x0fc6, 0x0fc6 }, { 0x102d, 0x1030 },
    { 0x1032, 0x1032 }, { 0x1036, 0x1037 }, { 0x1039, 0x1039 },
    { 0x1058, 0x1059 }, { 0x1160, 0x11ff }, { 0x135f, 0x135f },
    { 0x1712, 0x1714 }, { 0x1732, 0x1734 }, { 0x1752, 0x1753 },
    { 0x1772, 0x1773 }, { 0x17b4, 0x17b5 }, { 0x17b7, 0x17bd },
    { 0x17c6, 0x17c6 }, { 0x17c9, 0x17d3 }, { 0x17dd, 0x17dd },
    { 0x180b, 0x180d }, { 0x18a9, 0x18a9 }, { 0x1920, 0x1922 },
    { 0x1927, 0x1928 }, { 0x1932, 0x1932 }, { 0x1939, 0x193b },
    { 0x1a17, 0x1a18 }, { 0x1b00, 0x1b03 }, { 0x1b34, 0x1b34 },
    { 0x1b36, 0x1b3a }, { 0x1b3c, 0x1b3c }, { 0x1b42, 0x1b42 },
    { 0x1b6b, 0x1b73 }, { 0x1dc0, 0x1dca }, { 0x1dfe, 0x1dff },
    { 0x200b, 0x200f }, { 0x202a, 0x202e }, { 0x2060, 0x2063 },
    { 0x206a, 0x206f }, { 0x20d0, 0x20ef }, { 0x302a, 0x302f },
    { 0x3099, 0x309a }, { 0xa806, 0xa806 }, { 0xa80b, 0xa80b },
    { 0xa825, 0xa826 }, { 0xfb1e, 0xfb1e }, { 0xfe00, 0xfe0f },
    { 0xfe20, 0xfe23 }, { 0xfeff, 0xfeff }, { 0xfff9, 0xfffb },
    { 0x10a01, 0x10a03 }, { 0x10a05, 0x10a06 }, { 0x10a0c, 0x10a0f },
    { 0x10a38, 0x10a3a }, { 0x10a3f, 0x10a3f }, { 0x1d167, 0x1d169 },
    { 0x1d173, 0x1d182 }, { 0x1d185, 0x1d18b }, { 0x1d1aa, 0x1d1ad }
};


static void ngx_pty_screen_scan(ngx_pty_screen_t *s, const u_char *p,
    size_t n);
static void ngx_pty_cell_blank(ngx_pty_screen_t *s, ngx_pty_cell_t *c,
    const ngx_pty_pen_t *pen);
static void ngx_pty_print_blank(ngx_pty_screen_t *s, ngx_pty_cell_t *c,
    unsigned protect);
static ngx_inline unsigned ngx_pty_wide_cp(uint32_t c);
static void ngx_pty_cut_wrapped(ngx_pty_screen_t *s, int r,
    unsigned protect);
static void ngx_pty_print_halves(ngx_pty_screen_t *s, ngx_pty_row_t *row,
    unsigned col, unsigned end, unsigned protect);
static void ngx_pty_vt_write(ngx_pty_screen_t *s, const u_char *p, size_t n);
static void ngx_pty_restore_set(ngx_pty_screen_t *s);
static void ngx_pty_set_back(ngx_pty_screen_t *s);
static void ngx_pty_vt_designate(ngx_pty_screen_t *s, unsigned k,
    u_char charset, u_char scs);
static void ngx_pty_shift(ngx_pty_screen_t *s, const u_char *p,
    size_t *start, size_t i, unsigned g);
static void ngx_pty_protect(ngx_pty_screen_t *s, unsigned on);
static void ngx_pty_selective_erase(ngx_pty_screen_t *s, const u_char *p,
    size_t *start, size_t i, u_char c, size_t esc);
static void ngx_pty_fast_erase(ngx_pty_screen_t *s, u_char c, unsigned long v,
    unsigned selective);
static void ngx_pty_erase_wraps(ngx_pty_screen_t *s, u_char c, unsigned long v,
    unsigned selective);
static void ngx_pty_edit_cut(ngx_pty_screen_t *s, u_char c, unsigned long n);
static void ngx_pty_cut_ends(ngx_pty_screen_t *s, ngx_pty_row_t *row,
    unsigned from, unsigned to, unsigned selective);
static void ngx_pty_erase_cut(ngx_pty_screen_t *s, VTermPos pos,
    unsigned long v, unsigned selective);
static void ngx_pty_ov_settle(ngx_pty_screen_t *s);
static void ngx_pty_row_forget(ngx_pty_screen_t *s, ngx_pty_grid_t *g,
    ngx_pty_row_t *row);
static ngx_pty_row_t *ngx_pty_sb_push(ngx_pty_screen_t *s, ngx_pty_grid_t *g,
    ngx_pty_row_t *row);
static ngx_inline ngx_pty_row_t *ngx_pty_ring_keep(ngx_pty_screen_t *s,
    ngx_pty_grid_t *g, unsigned cap, ngx_pty_row_t *row);
static void ngx_pty_ring_grow(ngx_pty_grid_t *g, unsigned cap);
static ngx_pty_row_t *ngx_pty_grid_line(ngx_pty_grid_t *g, unsigned i);
static ngx_pty_row_t *ngx_pty_alt_push(ngx_pty_screen_t *s,
    ngx_pty_grid_t *g, ngx_pty_row_t *row);
static void ngx_pty_alt_clear(ngx_pty_screen_t *s);
static int ngx_pty_xterm_col(ngx_pty_screen_t *s);
static void ngx_pty_sb_keep_raw(ngx_pty_screen_t *s, const u_char *p,
    size_t i, size_t cut);
static void ngx_pty_sb_free_raw(ngx_pty_screen_t *s);
static void ngx_pty_unwrap(ngx_pty_screen_t *s, int from, int to);
static size_t ngx_pty_tail_size(const ngx_pty_row_t *row);
static void ngx_pty_tail_drop(ngx_pty_screen_t *s, ngx_pty_row_t *row);
static void ngx_pty_tails_drop_all(ngx_pty_screen_t *s);
static int ngx_pty_tail_set(ngx_pty_screen_t *s, ngx_pty_row_t *row,
    const ngx_pty_row_t *line, unsigned cols);
static ngx_pty_row_t *ngx_pty_tail_line(ngx_pty_screen_t *s,
    ngx_pty_row_t *row, ngx_pty_rbuf_t *b);
static void ngx_pty_tail_insert(ngx_pty_screen_t *s, ngx_pty_row_t *row,
    unsigned col, unsigned n);
static void ngx_pty_tail_shift(ngx_pty_screen_t *s, ngx_pty_rbuf_t *b,
    ngx_pty_row_t *line, u_char c, long n);
static void ngx_pty_tail_erase_to(ngx_pty_screen_t *s, unsigned selective);
static void ngx_pty_tails_erase(ngx_pty_screen_t *s, unsigned long v,
    unsigned selective);
static void ngx_pty_tails_align(ngx_pty_screen_t *s);
static void ngx_pty_cells_erase(ngx_pty_cell_t *c, unsigned n,
    const ngx_pty_pen_t *pen, unsigned selective);
static void ngx_pty_rep(ngx_pty_screen_t *s, long n);
static unsigned ngx_pty_glyph_before(ngx_pty_screen_t *s, const u_char *p,
    size_t normal, size_t i);
static unsigned ngx_pty_join_state(ngx_pty_screen_t *s, const u_char *p,
    size_t normal, size_t i, unsigned *wide);
static void ngx_pty_scan_end(ngx_pty_screen_t *s, const u_char *p,
    size_t normal, size_t n);
static ngx_inline unsigned ngx_pty_glyph_at(const u_char *p, size_t j);
static size_t ngx_pty_mark_base(const u_char *p, size_t normal, size_t i,
    size_t *start);
static size_t ngx_pty_kept_end(const u_char *p, size_t normal, size_t i,
    size_t *start);


static int
ngx_pty_is_combining(uint32_t cp)
{
    size_t  lo, hi, mid;

    if (cp < ngx_pty_combining[0].first) {
        return 0;
    }

    lo = 0;
    hi = sizeof(ngx_pty_combining) / sizeof(ngx_pty_combining[0]) - 1;

    while (lo <= hi) {
        mid = (lo + hi) / 2;

        if (cp > ngx_pty_combining[mid].last) {
            lo = mid + 1;

        } else if (cp < ngx_pty_combining[mid].first) {
            if (mid == 0) {
                return 0;
            }
            hi = mid - 1;

        } else {
            return 1;
        }
    }

    return 0;
}


/* the length of the UTF-8 sequence a lead byte starts, 0 if not a lead */
static unsigned
ngx_pty_utf8_len(u_char c)
{
    if (c >= 0xc0 && c < 0xe0) {
        return 2;
    }

    if (c >= 0xe0 && c < 0xf0) {
        return 3;
    }

    if (c >= 0xf0 && c < 0xf8) {
        return 4;
    }

    return 0;
}


static size_t
ngx_pty_utf8_put(u_char *p, uint32_t c)
{
    if (c < 0x80) {
        p[0] = (u_char) c;
        return 1;
    }

    if (c < 0x800) {
        p[0] = (u_char) (0xc0 | (c >> 6));
        p[1] = (u_char) (0x80 | (c & 0x3f));
        return 2;
    }

    if (c < 0x10000) {
        p[0] = (u_char) (0xe0 | (c >> 12));
        p[1] = (u_char) (0x80 | ((c >> 6) & 0x3f));
        p[2] = (u_char) (0x80 | (c & 0x3f));
        return 3;
    }

    if (c > 0x10ffff) {
        c = 0xfffd;
        return ngx_pty_utf8_put(p, c);
    }

    p[0] = (u_char) (0xf0 | (c >> 18));
    p[1] = (u_char) (0x80 | ((c >> 12) & 0x3f));
    p[2] = (u_char) (0x80 | ((c >> 6) & 0x3f));
    p[3] = (u_char) (0x80 | (c & 0x3f));
    return 4;
}


/*
 * An indexed colour set by "5;N" is in xterm.js's 256-colour mode, which
 * it keeps apart from 30-37 and 90-97 even below 16 (bold brightens only
 * the latter): the model marks it in the byte VTermColor leaves unused.
 */
#define ngx_pty_color_p256(c)  (((uint8_t *) (c))[2])


static VTermColor
ngx_pty_color_idx(unsigned idx, unsigned p256)
{
    VTermColor  c;

    memset(&c, 0, sizeof(VTermColor));
    vterm_color_indexed(&c, (uint8_t) idx);
    ngx_pty_color_p256(&c) = (uint8_t) p256;

    return c;
}


/* a colour libvterm gave: unused bytes zero, no mark */
static VTermColor
ngx_pty_color(const VTermColor *c)
{
    VTermColor  r;

    memset(&r, 0, sizeof(VTermColor));
    r.type = c->type;

    if (VTERM_COLOR_IS_INDEXED(c)) {
        r.indexed.idx = c->indexed.idx;

    } else {
        r.rgb.red = c->rgb.red;
        r.rgb.green = c->rgb.green;
        r.rgb.blue = c->rgb.blue;
    }

    return r;
}


static int
ngx_pty_color_eq(const VTermColor *a, const VTermColor *b)
{
    return memcmp(a, b, sizeof(VTermColor)) == 0;
}


/* the snapshot compares every cell's pen: inline, the colours at once */
static ngx_inline int
ngx_pty_pen_eq(const ngx_pty_pen_t *a, const ngx_pty_pen_t *b, unsigned mask)
{
    uint64_t  x, y;
    uint32_t  u, v;

    memcpy(&x, &a->fg, 8);
    memcpy(&y, &b->fg, 8);
    memcpy(&u, &a->ul, 4);
    memcpy(&v, &b->ul, 4);

    return ((a->attr ^ b->attr) & mask) == 0 && a->xattr == b->xattr
           && x == y && u == v;
}


/* fg and bg side by side, as ngx_pty_pen_eq() reads them */
typedef char ngx_pty_pen_colors_adjacent[
    offsetof(ngx_pty_pen_t, bg) == offsetof(ngx_pty_pen_t, fg) + 4 ? 1 : -1];


/* ";" and a number, without printf: a snapshot writes many */
static char *
ngx_pty_put_arg(char *p, uint64_t v)
{
    char  tmp[20], *t;

    t = tmp + sizeof(tmp);

    do {
        *--t = (char) ('0' + v % 10);
        v /= 10;
    } while (v);

    *p++ = ';';

    while (t < tmp + sizeof(tmp)) {
        *p++ = *t++;
    }

    return p;
}


static char *
ngx_pty_put_str(char *p, const char *str)
{
    while (*str) {
        *p++ = *str++;
    }

    return p;
}


/* "CSI a ; b final" (b < 0: "CSI a final") at buf; returns its length */
static size_t
ngx_pty_put_csi(char *buf, unsigned a, int b, char final)
{
    char  *p;

    /* buf[1] gets the first ';', which becomes the '[' */
    p = ngx_pty_put_arg(buf + 1, a);

    if (b >= 0) {
        p = ngx_pty_put_arg(p, (unsigned) b);
    }

    buf[0] = '\x1b';
    buf[1] = '[';
    *p++ = final;

    return p - buf;
}


static char *
ngx_pty_sgr_color(char *p, const VTermColor *c, int fg)
{
    unsigned  base;

    if (fg ? VTERM_COLOR_IS_DEFAULT_FG(c) : VTERM_COLOR_IS_DEFAULT_BG(c)) {
        return ngx_pty_put_arg(p, fg ? 39 : 49);
    }

    base = fg ? 30 : 40;

    if (VTERM_COLOR_IS_INDEXED(c) && !ngx_pty_color_p256(c)) {
        if (c->indexed.idx < 8) {
            return ngx_pty_put_arg(p, base + c->indexed.idx);
        }

        if (c->indexed.idx < 16) {
            return ngx_pty_put_arg(p, base + 60 + c->indexed.idx - 8);
        }
    }

    if (VTERM_COLOR_IS_INDEXED(c)) {
        p = ngx_pty_put_arg(p, base + 8);
        p = ngx_pty_put_arg(p, 5);
        return ngx_pty_put_arg(p, c->indexed.idx);
    }

    p = ngx_pty_put_arg(p, base + 8);
    p = ngx_pty_put_arg(p, 2);
    p = ngx_pty_put_arg(p, c->rgb.red);
    p = ngx_pty_put_arg(p, c->rgb.green);
    return ngx_pty_put_arg(p, c->rgb.blue);
}


/* ":" and a number */
static char *
ngx_pty_put_sub(char *p, uint64_t v)
{
    char  *q;

    q = p;
    p = ngx_pty_put_arg(p, v);
    *q = ':';

    return p;
}


/* SGR 58/59, in the colon form libvterm 0.1.4 skips whole */
static char *
ngx_pty_sgr_ul_color(char *p, const VTermColor *c)
{
    if (VTERM_COLOR_IS_DEFAULT_FG(c)) {
        return ngx_pty_put_arg(p, 59);
    }

    p = ngx_pty_put_arg(p, 58);

    if (VTERM_COLOR_IS_INDEXED(c)) {
        p = ngx_pty_put_sub(p, 5);
        return ngx_pty_put_sub(p, c->indexed.idx);
    }

    p = ngx_pty_put_str(ngx_pty_put_sub(p, 2), ":");
    p = ngx_pty_put_sub(p, c->rgb.red);
    p = ngx_pty_put_sub(p, c->rgb.green);

    return ngx_pty_put_sub(p, c->rgb.blue);
}


static const char *
ngx_pty_sgr_bit(unsigned bit, unsigned on)
{
    switch (bit) {
    case NGX_PTY_A_BOLD:
        return on ? ";1" : ";22";
    case NGX_PTY_A_ITALIC:
        return on ? ";3" : ";23";
    case NGX_PTY_A_BLINK:
        return on ? ";5" : ";25";
    case NGX_PTY_A_REVERSE:
        return on ? ";7" : ";27";
    case NGX_PTY_A_STRIKE:
        return on ? ";9" : ";29";
    default: /* NGX_PTY_A_CONCEAL */
        return on ? ";8" : ";28";
    }
}


/* how many CSI parameters p[0..n) holds, each after a ';' or a ':' */
static unsigned
ngx_pty_count_args(const char *p, size_t n)
{
    unsigned  k;

    for (k = 0; n; n--, p++) {
        k += (*p == ';' || *p == ':');
    }

    return k;
}


/* bold and dim: SGR 22 ends both */
static char *
ngx_pty_sgr_intensity(char *p, const ngx_pty_pen_t *from,
    const ngx_pty_pen_t *want)
{
    unsigned  f, w;

    f = (from->attr & NGX_PTY_A_BOLD) | ((from->xattr & NGX_PTY_X_DIM) << 1);
    w = (want->attr & NGX_PTY_A_BOLD) | ((want->xattr & NGX_PTY_X_DIM) << 1);

    if (f & ~w) {
        p = ngx_pty_put_str(p, ";22");
        f = 0;
    }

    if ((w & ~f) & 1) {
        p = ngx_pty_put_str(p, ";1");
    }

    if ((w & ~f) & 2) {
        p = ngx_pty_put_str(p, ";2");
    }

    return p;
}


/*
 * SGR for what differs between two pens in the "mask" attributes and the
 * colours, written at buf (at most 120 bytes); returns its end (buf when
 * they do not differ); with "ext" also what libvterm 0.1.4 does not know
 * (dim, overline, dotted and dashed underlines, the underline colour).
 * libvterm 0.1.4 overruns its parameter array past 16 parameters, so the
 * colours then go in an SGR of their own.
 */
static char *
ngx_pty_sgr_diff(char *buf, const ngx_pty_pen_t *from,
    const ngx_pty_pen_t *want, unsigned mask, unsigned ext)
{
    char                *p, *q, colors[64];
    unsigned             i, diff, b, xdiff, x;
    static unsigned      bits[] = { NGX_PTY_A_ITALIC,
                                    NGX_PTY_A_BLINK, NGX_PTY_A_REVERSE,
                                    NGX_PTY_A_STRIKE, NGX_PTY_A_CONCEAL };
    static const char   *ul[] = { ";24", ";4", ";21", ";4:3" };
    static const char   *ulx[] = { "", ";4:4", ";4:5", ";4:5" };

    /* buf[1] gets the first ';', which becomes the '[' */
    p = buf + 1;
    b = want->attr;
    x = ext ? want->xattr : 0;
    diff = (from->attr ^ b) & mask;
    xdiff = ext ? (from->xattr ^ x) : 0;

    if (ext && ((diff & NGX_PTY_A_BOLD) || (xdiff & NGX_PTY_X_DIM))) {
        p = ngx_pty_sgr_intensity(p, from, want);

    } else if (diff & NGX_PTY_A_BOLD) {
        p = ngx_pty_put_str(p, ngx_pty_sgr_bit(NGX_PTY_A_BOLD,
                                               b & NGX_PTY_A_BOLD));
    }

    for (i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
        if (diff & bits[i]) {
            p = ngx_pty_put_str(p, ngx_pty_sgr_bit(bits[i], b & bits[i]));
        }
    }

    if ((diff & NGX_PTY_A_UL) || (xdiff & NGX_PTY_X_UL)) {
        p = ngx_pty_put_str(p, (x & NGX_PTY_X_UL)
                               ? ulx[(x & NGX_PTY_X_UL) >> NGX_PTY_X_UL_SHIFT]
                               : ul[(b & NGX_PTY_A_UL) >> NGX_PTY_A_UL_SHIFT]);
    }

    if (xdiff & NGX_PTY_X_OVERLINE) {
        p = ngx_pty_put_str(p, (x & NGX_PTY_X_OVERLINE) ? ";53" : ";55");
    }

    if (diff & NGX_PTY_A_FONT) {
        p = ngx_pty_put_arg(p, 10 + ((b & NGX_PTY_A_FONT)
                                     >> NGX_PTY_A_FONT_SHIFT));
    }

    q = colors;

    if (!ngx_pty_color_eq(&from->fg, &want->fg)) {
        q = ngx_pty_sgr_color(q, &want->fg, 1);
    }

    if (!ngx_pty_color_eq(&from->bg, &want->bg)) {
        q = ngx_pty_sgr_color(q, &want->bg, 0);
    }

    if (ext && !ngx_pty_color_eq(&from->ul, &want->ul)) {
        q = ngx_pty_sgr_ul_color(q, &want->ul);
    }

    if (p > buf + 1 && q > colors
        && ngx_pty_count_args(buf + 1, p - buf - 1)
           + ngx_pty_count_args(colors, q - colors) > NGX_PTY_CSI_ARGS)
    {
        buf[0] = '\x1b';
        buf[1] = '[';
        *p++ = 'm';
        buf = p++;
    }

    memcpy(p, colors, q - colors);
    p += q - colors;

    if (p == buf + 1) {
        return buf;
    }

    buf[0] = '\x1b';
    buf[1] = '[';
    *p++ = 'm';

    return p;
}


/*
 * The pen an erase leaves in a cell: xterm.js's, the background colour
 * only (libvterm keeps the attributes too)
 */
static ngx_pty_pen_t
ngx_pty_erase_pen(ngx_pty_screen_t *s)
{
    ngx_pty_pen_t  pen;

    pen = s->default_pen;
    pen.bg = s->pen.bg;

    return pen;
}


/*
 * What an erase can give a blank in pen: its background alone (a blank in
 * the whole pen comes only from a wide glyph's wrap, written otherwise)
 */
static ngx_pty_pen_t
ngx_pty_pen_erased(ngx_pty_screen_t *s, const ngx_pty_pen_t *pen)
{
    ngx_pty_pen_t  erased;

    erased = s->default_pen;
    erased.bg = pen->bg;

    return erased;
}


static void
ngx_pty_row_free_own(ngx_pty_row_t *row)
{
    if (row != NULL && row->own) {
        free(row->comb);
        free(row);
    }
}


static void
ngx_pty_grid_free(ngx_pty_grid_t *g)
{
    unsigned  i;

    if (g->rows == NULL) {
        return;
    }

    /* rows allocated alone are in the screen or the scrollback ring */
    for (i = 0; i < g->nrows; i++) {
        ngx_pty_row_free_own(g->rows[i]);
    }

    for (i = 0; g->sb && i < g->sb_cap; i++) {
        ngx_pty_row_free_own(g->sb[i]);
    }

    for (i = 0; i < g->nrows; i++) {
        free(g->row_mem[i].comb);
        free(g->row_mem[i].tail);
        free(g->row_mem[i].tail_comb);
    }

    free(g->sb);
    free(g->buf);
    free(g->tmp);
    free(g->row_mem);
    free(g->cell_mem);
    memset(g, 0, sizeof(ngx_pty_grid_t));
}


static int
ngx_pty_grid_alloc(ngx_pty_grid_t *g, unsigned cols, unsigned rows,
    const ngx_pty_pen_t *fill)
{
    unsigned  i;

    memset(g, 0, sizeof(ngx_pty_grid_t));

    g->buf = malloc(2 * rows * sizeof(ngx_pty_row_t *));
    g->tmp = malloc(rows * sizeof(ngx_pty_row_t *));
    g->row_mem = calloc(rows, sizeof(ngx_pty_row_t));
    g->cell_mem = malloc((size_t) rows * cols * sizeof(ngx_pty_cell_t));

    if (g->buf == NULL || g->tmp == NULL || g->row_mem == NULL
        || g->cell_mem == NULL)
    {
        free(g->buf);
        free(g->tmp);
        free(g->row_mem);
        free(g->cell_mem);
        memset(g, 0, sizeof(ngx_pty_grid_t));
        return -1;
    }

    g->rows = g->buf;
    g->cols = cols;
    g->nrows = rows;

    for (i = 0; i < rows; i++) {
        g->rows[i] = &g->row_mem[i];
        g->row_mem[i].cells = g->cell_mem + (size_t) i * cols;
        g->row_mem[i].len = 0;
        g->row_mem[i].fill = *fill;
    }

    return 0;
}


/*
 * The lines a resize can bring back from xterm.js's scrollback: two
 * screens (a shrink and the grow back), and enough for a small screen to
 * grow large again; a narrow screen as many lines as 48 rows of 80
 * columns hold in cells (its lines are short, a widening joins many);
 * at most what xterm.js keeps
 */
static unsigned
ngx_pty_sb_cap(unsigned rows, unsigned cols)
{
    unsigned  n, narrow;

    n = 2 * rows > NGX_PTY_SB_MIN ? 2 * rows : NGX_PTY_SB_MIN;
    narrow = NGX_PTY_SB_MIN * NGX_PTY_SB_MIN_COLS / (cols ? cols : 1);
    n = (narrow > n) ? narrow : n;

    return n < NGX_PTY_XTERM_SCROLLBACK ? n : NGX_PTY_XTERM_SCROLLBACK;
}


static ngx_pty_row_t *
ngx_pty_row_new(ngx_pty_screen_t *s, unsigned cols)
{
    size_t          size;
    ngx_pty_row_t  *row;

    size = sizeof(ngx_pty_row_t) + cols * sizeof(ngx_pty_cell_t);
    row = malloc(size);

    if (row == NULL) {
        return NULL;
    }

    memset(row, 0, sizeof(ngx_pty_row_t));
    row->cells = (ngx_pty_cell_t *) (row + 1);
    row->own = 1;
    row->fill = s->default_pen;
    s->sb_mem += size;

    return row;
}


/*
 * A row leaves the top of the main screen into xterm.js's scrollback: the
 * ring keeps it and gives back a row to reuse (its oldest when full), so
 * the scroll itself copies no cells.  xterm.js's saved cursor holds a line
 * of the buffer: it goes up with it until the scrollback is full.
 */
static ngx_pty_row_t *
ngx_pty_sb_push(ngx_pty_screen_t *s, ngx_pty_grid_t *g, ngx_pty_row_t *row)
{
    unsigned        xb, cap;
    ngx_pty_row_t  *spare;

    xb = g->sb_len + s->sb_lost;

    if (xb < NGX_PTY_XTERM_SCROLLBACK) {
        s->saved_pos[0].row--;
        xb++;
    }

    spare = row;

    if (s->sb_stale) {
        /* a row of the screen a skip left: not what xterm.js scrolled */
        s->sb_stale--;
        s->sb_lost = xb - g->sb_len;
        return row;
    }

    cap = ngx_pty_sb_cap(g->nrows, g->cols);

    if (g->sb_len == g->sb_cap && g->sb_len > 1
        && ngx_pty_grid_line(g, 1)->wrapped)
    {
        ngx_pty_ring_grow(g, cap);
    }

    spare = ngx_pty_ring_keep(s, g, cap, row);

    if (spare != row && g->sb_len == g->sb_cap && s->sb_raw) {
        /* older than all the ring holds */
        ngx_pty_sb_free_raw(s);
    }

    s->sb_lost = (xb > g->sb_len) ? xb - g->sb_len : 0;

    return spare;
}


/*
 * The oldest row would go while the line it starts goes on below: the
 * ring grows, up to twice its size (cap), so that a later resize reflows
 * that line from its start, as xterm.js does
 */
static void
ngx_pty_ring_grow(ngx_pty_grid_t *g, unsigned cap)
{
    unsigned         n, i, k;
    ngx_pty_row_t  **sb;

    n = g->sb_cap + cap / 4 + 1;
    n = n < 2 * cap ? n : 2 * cap;
    n = n < NGX_PTY_XTERM_SCROLLBACK ? n : NGX_PTY_XTERM_SCROLLBACK;

    if (n <= g->sb_cap) {
        return;
    }

    sb = calloc(n, sizeof(ngx_pty_row_t *));
    if (sb == NULL) {
        return;                 /* the oldest row goes, as before */
    }

    for (i = 0; i < g->sb_cap; i++) {
        k = g->sb_head + i;
        sb[i] = g->sb[k < g->sb_cap ? k : k - g->sb_cap];
    }

    free(g->sb);
    g->sb = sb;
    g->sb_head = 0;
    g->sb_cap = n;
}


/*
 * row goes into grid g's ring of cap rows (made on first use), the oldest
 * giving way when it is full; returns the row to use in its place, row
 * itself when it could not be kept (it comes back blank)
 */
static ngx_inline ngx_pty_row_t *
ngx_pty_ring_keep(ngx_pty_screen_t *s, ngx_pty_grid_t *g, unsigned cap,
    ngx_pty_row_t *row)
{
    unsigned        slot;
    ngx_pty_row_t  *spare;

    if (g->sb == NULL) {
        g->sb = calloc(cap, sizeof(ngx_pty_row_t *));
        if (g->sb == NULL) {
            return row;
        }

        g->sb_cap = cap;
        g->sb_head = 0;
        g->sb_len = 0;
    }

    slot = g->sb_head + g->sb_len;
    slot -= (slot >= g->sb_cap) ? g->sb_cap : 0;
    spare = (g->sb[slot] != NULL) ? g->sb[slot] : ngx_pty_row_new(s, g->cols);

    if (spare == NULL) {
        return row;
    }

    g->sb[slot] = row;

    if (g->sb_len == g->sb_cap) {
        g->sb_head = (g->sb_head + 1 == g->sb_cap) ? 0 : g->sb_head + 1;

    } else {
        g->sb_len++;
    }

    return spare;
}


/*
 * A row leaves the top of the alternate screen: xterm.js keeps it above
 * while its line list has room (alt_max), the oldest going when full;
 * its saved row, a line of the list, goes up with it until then.
 */
static ngx_pty_row_t *
ngx_pty_alt_push(ngx_pty_screen_t *s, ngx_pty_grid_t *g, ngx_pty_row_t *row)
{
    unsigned        len;
    ngx_pty_row_t  *spare;

    len = g->sb_len;
    spare = ngx_pty_ring_keep(s, g, s->alt_max - g->nrows, row);

    if (g->sb_len > len) {
        s->saved_pos[1].row--;
    }

    return spare;
}


/* xterm.js empties its alternate buffer (left, RIS): no lines above it */
static void
ngx_pty_alt_clear(ngx_pty_screen_t *s)
{
    unsigned         i;
    ngx_pty_row_t   *row;
    ngx_pty_grid_t  *g;

    g = &s->grid[1];
    s->alt_max = s->rows;

    for (i = 0; g->sb && i < g->sb_cap; i++) {
        row = g->sb[i];

        if (row == NULL) {
            continue;
        }

        if (row->tail) {
            ngx_pty_tail_drop(s, row);
        }

        if (row->own) {
            ngx_pty_row_forget(s, g, row);
            ngx_pty_row_free_own(row);
        }
    }

    free(g->sb);
    g->sb = NULL;
    g->sb_cap = 0;
    g->sb_head = 0;
    g->sb_len = 0;
}


/* line i of a grid in xterm.js's terms: the ring's oldest first, the screen */
static ngx_pty_row_t *
ngx_pty_grid_line(ngx_pty_grid_t *g, unsigned i)
{
    if (i >= g->sb_len) {
        return g->rows[i - g->sb_len];
    }

    i += g->sb_head;

    return g->sb[i < g->sb_cap ? i : i - g->sb_cap];
}


/*
 * Lines that scrolled into xterm.js's scrollback unseen (LF counted, not
 * VT or FF; a skipped line that wrapped counts one): the lines the ring
 * holds are older than them, so they count as not held too, and so do
 * the rows above the last the skip left behind, which the lines kept
 * scroll away (xterm.js had the skipped lines' last rows there: the raw
 * bytes kept give them back)
 */
static void
ngx_pty_sb_skip(ngx_pty_screen_t *s, long n)
{
    unsigned  xb;

    xb = s->grid[0].sb_len + s->sb_lost;
    s->sb_lost = xb;
    s->grid[0].sb_len = 0;
    s->sb_stale = s->rows - 1;

    if (n <= 0 || xb >= NGX_PTY_XTERM_SCROLLBACK) {
        return;
    }

    n = (n < NGX_PTY_XTERM_SCROLLBACK - xb) ? n : NGX_PTY_XTERM_SCROLLBACK - xb;
    s->saved_pos[0].row -= n;
    s->sb_lost += n;
}


/*
 * The skipped lines' bytes: the last ones the ring could hold of p[i..cut)
 * (at most NGX_PTY_SB_RAW_MAX bytes, from a line's start), after an SGR
 * for the pen they start in (the model's at p[i], if no SGR came between;
 * else the default one); copied, not parsed, as a skip is there to save
 * the parsing
 */
static void
ngx_pty_sb_keep_raw(ngx_pty_screen_t *s, const u_char *p, size_t i,
    size_t cut)
{
    char           sgr[160], *e;
    size_t         k;
    unsigned       n;
    const u_char  *q;

    ngx_pty_sb_free_raw(s);

    if (s->charset[s->gl]) {
        return;                 /* not ASCII: drawn another way (rare) */
    }

    /* the start of the line "cap" line feeds before the cut */
    q = p + cut - 1;

    for (n = ngx_pty_sb_cap(s->rows, s->cols); n > 0 && q > p + i; n--) {
        q = memrchr(p + i, '\n', q - (p + i));

        if (q == NULL) {
            q = p + i;
            break;
        }
    }

    k = (q > p + i) ? (size_t) (q + 1 - p) : i;

    if (cut - k > NGX_PTY_SB_RAW_MAX) {
        q = memchr(p + cut - NGX_PTY_SB_RAW_MAX, '\n', NGX_PTY_SB_RAW_MAX);
        k = (q != NULL) ? (size_t) (q + 1 - p) : cut;
    }

    if (k >= cut) {
        return;
    }

    e = sgr;

    if (memchr(p + i, 0x1b, k - i) == NULL) {
        e = ngx_pty_sgr_diff(sgr, &s->default_pen, &s->pen, NGX_PTY_A_SGR, 1);
    }

    s->sb_raw = malloc(3 + (e - sgr) + (cut - k));
    if (s->sb_raw == NULL) {
        return;
    }

    memcpy(s->sb_raw, "\x1b[m", 3);
    memcpy(s->sb_raw + 3, sgr, e - sgr);
    memcpy(s->sb_raw + 3 + (e - sgr), p + k, cut - k);
    s->sb_raw_len = 3 + (e - sgr) + (cut - k);
    s->sb_mem += s->sb_raw_len;
}


static void
ngx_pty_sb_free_raw(ngx_pty_screen_t *s)
{
    if (s->sb_raw != NULL) {
        s->sb_mem -= s->sb_raw_len;
        free(s->sb_raw);
        s->sb_raw = NULL;
        s->sb_raw_len = 0;
    }
}


/* xterm.js forgets its scrollback (RIS, ED 3): the rows stay as spares */
static void
ngx_pty_sb_clear(ngx_pty_screen_t *s)
{
    s->grid[0].sb_len = 0;
    s->grid[0].sb_head = 0;
    s->sb_lost = 0;
    s->sb_stale = 0;
    ngx_pty_sb_free_raw(s);
}


static void
ngx_pty_row_materialize(ngx_pty_row_t *row, unsigned upto)
{
    ngx_pty_cell_t  *c;

    while (row->len < upto) {
        c = &row->cells[row->len++];
        c->ch = 0;
        c->ncomb = 0;
        c->width = 1;
        c->pen = row->fill;
    }
}


/* a read-only view of a cell, blanks past row->len synthesised in *tmp */
static const ngx_pty_cell_t *
ngx_pty_row_cell(const ngx_pty_row_t *row, unsigned col, ngx_pty_cell_t *tmp)
{
    if (col < row->len) {
        return &row->cells[col];
    }

    tmp->ch = 0;
    tmp->ncomb = 0;
    tmp->width = 1;
    tmp->pen = row->fill;

    return tmp;
}


static uint32_t *
ngx_pty_row_comb(ngx_pty_screen_t *s, ngx_pty_row_t *row)
{
    size_t  size;

    if (row->comb == NULL) {
        size = (size_t) s->cols * NGX_PTY_MAX_COMB * sizeof(uint32_t);
        row->comb = malloc(size);

        if (row->comb != NULL) {
            s->comb_mem += size;
        }
    }

    return row->comb;
}


/* the left half of a wide glyph (or a glyph that claims two columns) */
static ngx_inline int
ngx_pty_wide_left(const ngx_pty_cell_t *c)
{
    return c->width == 2 && c->ch != 0 && c->ch != NGX_PTY_CONT;
}


/*
 * The East Asian wide ranges libvterm 0.1.4 knows (Markus Kuhn's) and the
 * emoji planes: a few more code points than it prints two columns wide,
 * none it prints narrow but for the emoji planes' narrow ones.  Not
 * ngx_pty_text.c's table: that is newer Unicode's (Tangut is wide there,
 * narrow in libvterm)
 */
static ngx_inline int
ngx_pty_wide_range(uint32_t cp)
{
    return (cp >= 0x1100 && cp <= 0x115f) || cp == 0x2329 || cp == 0x232a
           || (cp >= 0x2e80 && cp <= 0xa4cf) || (cp >= 0xac00 && cp <= 0xd7a3)
           || (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0xfe10 && cp <= 0xfe6f)
           || (cp >= 0xff00 && cp <= 0xff60) || (cp >= 0xffe0 && cp <= 0xffe6)
           || cp >= 0x1f000;
}


/*
 * ... of a glyph wide itself, which a glyph in the last column may cut
 * (ngx_pty_paint_cut()), also with marks of its own; a mark's join
 * (ngx_pty_paint_overwide()) is a mark, or holds a narrow glyph
 */
static ngx_inline int
ngx_pty_wide_cuttable(const ngx_pty_cell_t *c)
{
    return ngx_pty_wide_left(c)
           && (ngx_pty_wide_cp(c->ch)
               || (ngx_pty_wide_range(c->ch)
                   && !ngx_pty_is_combining(c->ch)));
}


/*
 * A cell two columns wide at col with a cell of its own in its second (a
 * reflow's move down a line, a DCH, a glyph from past the edge) that a
 * Keyframe makes anywhere (ngx_pty_paint_moved_claim()): not where the
 * cell before claims col too (the DCH that moves it would blank that),
 * nor before a wide glyph or a mark alone (written after it, they would
 * blank or join it)
 */
static int
ngx_pty_claim_movable(const ngx_pty_row_t *row, unsigned col)
{
    ngx_pty_cell_t         tmp;
    const ngx_pty_cell_t  *c;

    if (col > 0 && ngx_pty_wide_left(ngx_pty_row_cell(row, col - 1, &tmp))) {
        return 0;
    }

    c = ngx_pty_row_cell(row, col + 1, &tmp);

    return c->ch == 0
           || (c->ch != NGX_PTY_CONT && c->width == 1
               && !ngx_pty_is_combining(c->ch));
}


static void
ngx_pty_row_erase(ngx_pty_row_t *row, unsigned from, unsigned to,
    unsigned cols, const ngx_pty_pen_t *pen)
{
    unsigned         i;
    ngx_pty_cell_t  *c;

    if (to >= cols) {
        /* to the end of the row: just move the lazy boundary */
        ngx_pty_row_materialize(row, from);
        row->len = from;
        row->fill = *pen;
        return;
    }

    ngx_pty_row_materialize(row, to);

    for (i = from; i < to; i++) {
        c = &row->cells[i];
        c->ch = 0;
        c->ncomb = 0;
        c->width = 1;
        c->pen = *pen;
    }
}


/* copy n cells (with their combining chars) between rows */
static void
ngx_pty_row_copy(ngx_pty_screen_t *s, ngx_pty_row_t *dst, unsigned dcol,
    ngx_pty_row_t *src, unsigned scol, unsigned n)
{
    unsigned   i, k, back;
    uint32_t  *comb;

    ngx_pty_row_materialize(dst, dcol + n);
    ngx_pty_row_materialize(src, scol + n);

    memmove(&dst->cells[dcol], &src->cells[scol], n * sizeof(ngx_pty_cell_t));

    if (src->comb == NULL) {
        return;
    }

    comb = ngx_pty_row_comb(s, dst);

    /* within one row a shift right must walk backwards */
    back = (dst == src && dcol > scol);

    for (k = 0; k < n; k++) {
        i = back ? n - 1 - k : k;

        if (dst->cells[dcol + i].ncomb == 0) {
            continue;
        }

        if (comb == NULL) {
            dst->cells[dcol + i].ncomb = 0;
            continue;
        }

        memmove(&comb[(dcol + i) * NGX_PTY_MAX_COMB],
                &src->comb[(scol + i) * NGX_PTY_MAX_COMB],
                NGX_PTY_MAX_COMB * sizeof(uint32_t));
    }
}


/* a wide glyph the right edge cuts (what a shift right left there), or NULL */
static ngx_pty_cell_t *
ngx_pty_edge_wide(ngx_pty_screen_t *s, ngx_pty_row_t *row)
{
    ngx_pty_cell_t  *c;

    if (row->len < s->cols) {
        return NULL;
    }

    c = &row->cells[s->cols - 1];

    if (c->ch == 0 || c->ch == NGX_PTY_CONT || c->width != 2) {
        return NULL;
    }

    return c;
}


/*
 * what a print in insert mode pushed right: xterm.js clears a wide glyph
 * the edge cuts, in the whole pen it prints with
 */
static void
ngx_pty_print_edge_blank(ngx_pty_screen_t *s, ngx_pty_row_t *row)
{
    ngx_pty_cell_t  *c;

    c = ngx_pty_edge_wide(s, row);

    if (c != NULL) {
        ngx_pty_print_blank(s, c, s->protect);
    }
}


/*
 * A wide glyph that did not fit in the last column wrapped: xterm.js
 * clears that column (and the wide glyph it was the right half of) in
 * the whole pen, the glyph's; libvterm leaves what was there.  Like
 * ngx_pty_print_halves(), this makes a blank with more than a background
 * (a snapshot makes it the same way)
 */
static void
ngx_pty_wide_wrapped(ngx_pty_screen_t *s, int r, unsigned protect)
{
    unsigned         col;
    ngx_pty_row_t   *row;

    if (r < 0) {
        return;
    }

    row = s->cur->rows[r];

    ngx_pty_row_materialize(row, s->cols);
    col = s->cols - 1;

    if (col > 0
        && (row->cells[col].ch == NGX_PTY_CONT
            || ngx_pty_wide_left(&row->cells[col - 1])))
    {
        /* (a cell that claims the last column too: print() blanks it) */
        col--;
    }

    for ( /* void */ ; col < s->cols; col++) {
        ngx_pty_print_blank(s, &row->cells[col], protect);
    }
}


/*
 * A glyph wrapped from past the edge, where the last column holds a wide
 * glyph the edge cut (a resize, a scroll put it there; no glyph printed
 * leaves one): xterm.js's print() blanks the cell before its cursor when
 * it claims two columns, in the whole pen
 */
static void
ngx_pty_cut_wrapped(ngx_pty_screen_t *s, int r, unsigned protect)
{
    ngx_pty_row_t  *row;

    if (r < 0) {
        return;
    }

    row = s->cur->rows[r];

    if (s->cols - 1 < row->len
        && ngx_pty_wide_left(&row->cells[s->cols - 1]))
    {
        ngx_pty_print_blank(s, &row->cells[s->cols - 1], protect);
    }
}


/* a blank in the pen glyphs are written in, as xterm.js's print() makes */
static void
ngx_pty_print_blank(ngx_pty_screen_t *s, ngx_pty_cell_t *c, unsigned protect)
{
    c->ch = 0;
    c->ncomb = 0;
    c->width = 1;
    c->pen = s->pen;
    c->pen.attr &= ~NGX_PTY_A_PROTECT;
    c->pen.attr |= protect ? NGX_PTY_A_PROTECT : 0;
    s->whole = 1;
    s->diverged++;
}


/*
 * Glyphs written over cells col..end-1 of a row: xterm.js's print()
 * clears the halves they leave of wide glyphs, the left half before them
 * and the right half after them, in the pen it writes with; libvterm
 * keeps both, and no snapshot could write such a half back
 */
static void
ngx_pty_print_halves(ngx_pty_screen_t *s, ngx_pty_row_t *row, unsigned col,
    unsigned end, unsigned protect)
{
    ngx_pty_cell_t  *c;

    if (col > 0 && col - 1 < row->len) {
        c = &row->cells[col - 1];

        if (c->ch != 0 && c->ch != NGX_PTY_CONT && c->width == 2) {
            ngx_pty_print_blank(s, c, protect);
        }
    }

    if (end < s->cols && end < row->len
        && row->cells[end].ch == NGX_PTY_CONT)
    {
        ngx_pty_print_blank(s, &row->cells[end], protect);
    }
}


static int ngx_pty_cb_scrollrect(VTermRect rect, int down, int right,
    void *user);


/*
 * A wide glyph from the last column that libvterm wrapped (scrolling, or
 * to the next row) to the cell of the glyph printed last (not that glyph
 * printed again with a mark, after which libvterm's cursor is right
 * after it)
 */
static ngx_inline int
ngx_pty_vt_wide_wrap(ngx_pty_screen_t *s, VTermPos pos, unsigned w)
{
    return w == 2 && (unsigned) s->vt_next.col == s->cols - 1
           && (s->vt_next.row + 1 == pos.row
               || (s->vt_next.row == pos.row
                   && s->vt_next.col != pos.col + 2));
}


/*
 * The row a glyph that wrapped to pos came from: the one above, but at
 * the last row below the scroll region the line feed does not move
 * (xterm.js and libvterm alike), and the glyph wraps onto its own row
 */
static ngx_inline int
ngx_pty_wrapped_from(ngx_pty_screen_t *s, VTermPos pos)
{
    if ((unsigned) pos.row + 1 == s->rows && s->vt_next.row == pos.row
        && s->bottom >= 0 && (unsigned) s->bottom != s->rows)
    {
        return pos.row;
    }

    return pos.row > 0 ? pos.row - 1 : -1;
}


static int
ngx_pty_cb_putglyph(VTermGlyphInfo *info, VTermPos pos, void *user)
{
    ngx_pty_screen_t  *s = user;

    unsigned         n, i, w, end, moved, fresh;
    uint32_t        *comb;
    VTermRect        ins;
    ngx_pty_row_t   *row;
    ngx_pty_cell_t  *c;

    if (pos.row < (int) s->align_top || (unsigned) pos.row >= s->rows
        || pos.col < 0 || (unsigned) pos.col >= s->cols)
    {
        return 1;
    }

    for (n = 0; n < NGX_PTY_MAX_CHARS && info->chars[n]; n++) {
        /* void */
    }

    w = info->width;
    end = pos.col + (w ? w : 1);
    row = s->cur->rows[pos.row];

    if (!s->untracked
        && (pos.row != s->vt_next.row || pos.col != s->vt_next.col)
        && pos.col == 0
        && (pos.row != s->edge_pos.row || pos.col != s->edge_pos.col
            || ngx_pty_vt_wide_wrap(s, pos, w)))
    {
        /* not where the cursor was: libvterm wrapped to get here */
        row->wrapped = 1;

        if (w == 2 && !s->phantom) {
            ngx_pty_wide_wrapped(s, ngx_pty_wrapped_from(s, pos),
                                 info->protected_cell);

        } else if (s->phantom) {
            ngx_pty_cut_wrapped(s, ngx_pty_wrapped_from(s, pos),
                                info->protected_cell);
        }
    }

    /*
     * not a combining mark libvterm puts on the glyph before the cursor
     * (with autowrap off, a glyph at the edge is written where the one
     * before was)
     */
    moved = (pos.row != s->vt_next.row || pos.col >= s->vt_next.col);
    fresh = (moved || n < 2 || (unsigned) pos.col >= row->len
             || row->cells[pos.col].ch != info->chars[0]);

    if (s->insert && fresh && w == 2 && pos.col + 2 <= (int) s->cols) {
        /* libvterm 0.1.4 makes room for one column only; xterm.js two */
        ins.start_row = pos.row;
        ins.end_row = pos.row + 1;
        ins.start_col = pos.col;
        ins.end_col = s->cols;
        ngx_pty_cb_scrollrect(ins, 0, -1, s);
        s->diverged++;
    }

    if (moved) {
        s->put = 1;
    }

    s->vt_next.row = pos.row;
    s->vt_next.col = end;

    ngx_pty_row_materialize(row, end < s->cols ? end : s->cols);

    c = &row->cells[pos.col];

    if (n > 0) {
        c->ch = info->chars[0];
        c->ncomb = 0;

        if (n > 1 && (comb = ngx_pty_row_comb(s, row)) != NULL) {
            memcpy(&comb[pos.col * NGX_PTY_MAX_COMB], &info->chars[1],
                   (n - 1) * sizeof(uint32_t));
            c->ncomb = (uint8_t) (n - 1);
        }

        c->pen = s->pen;
        c->pen.attr &= ~NGX_PTY_A_PROTECT;
        c->pen.attr |= info->protected_cell ? NGX_PTY_A_PROTECT : 0;
    }

    c->width = (uint8_t) w;

    for (i = 1; i < w && pos.col + i < s->cols; i++) {
        row->cells[pos.col + i].ch = NGX_PTY_CONT;
        row->cells[pos.col + i].ncomb = 0;
        row->cells[pos.col + i].width = 1;
        row->cells[pos.col + i].pen = c->pen;
        s->wide = 1;
    }

    if (fresh && w > 0
        && ((pos.col > 0 && row->cells[pos.col - 1].width == 2)
            || (end < row->len && row->cells[end].ch == NGX_PTY_CONT))
        && !(s->phantom && !s->autowrap && !s->untracked && !s->insert
             && (unsigned) pos.col + 1 == s->cols
             && ngx_pty_wide_cuttable(&row->cells[pos.col - 1])))
    {
        /*
         * (from past the edge, autowrap off, xterm.js's print() looks
         * at the last column's cell, not the one before: a wide glyph
         * there keeps its width, cut by this glyph; in insert mode the
         * cells it inserts blank it)
         */
        ngx_pty_print_halves(s, row, pos.col, end, info->protected_cell);
    }

    if (!s->untracked) {
        /* libvterm's combine_width and at_phantom, which it keeps private */
        s->combine_w = w;
        s->edge = pos.col + w >= s->cols;
        s->edge_pos = pos;
        s->comb_own = 0;
        /* past the edge, as xterm.js has it also with autowrap off */
        s->phantom = s->edge;
        s->past = 0;
        s->diverged += (s->edge && !s->autowrap);

        if (s->phantom) {
            s->ph_pos = pos;
        }
    }

    if (s->insert) {
        ngx_pty_print_edge_blank(s, row);
    }

    return 1;
}


static int
ngx_pty_cb_movecursor(VTermPos pos, VTermPos oldpos, int visible, void *user)
{
    ngx_pty_screen_t  *s = user;

    (void) visible;

    if (pos.row == oldpos.row + 1
        && (pos.col == oldpos.col || (s->newline && pos.col == 0))
        && !s->untracked && !(s->put && s->vt_next.row == pos.row)
        && !s->no_lf && (unsigned) pos.row < s->rows)
    {
        /*
         * a line feed (no glyph since on the row it lands on, which a
         * wrap would have put there; a CR too in newline mode): xterm.js
         * starts a line there
         */
        s->cur->rows[pos.row]->wrapped = 0;
    }

    s->vt_next = pos;

    s->put = 0;

    /*
     * libvterm cancels a pending wrap whenever the cursor really moves;
     * the move that ends a run of text lands on the phantom cell itself
     */
    if (s->phantom
        && (pos.row != s->ph_pos.row || pos.col != s->ph_pos.col))
    {
        s->phantom = 0;
    }

    return 1;
}


static void
ngx_pty_erase_rect(ngx_pty_screen_t *s, VTermRect rect, int selective)
{
    int              r;
    unsigned         from, to;
    ngx_pty_pen_t    pen;
    ngx_pty_row_t   *row;

    from = rect.start_col < 0 ? 0 : rect.start_col;
    to = (unsigned) rect.end_col > s->cols ? s->cols : (unsigned) rect.end_col;

    if (from >= to) {
        return;
    }

    for (r = rect.start_row < 0 ? 0 : rect.start_row;
         r < rect.end_row && (unsigned) r < s->rows;
         r++)
    {
        pen = ngx_pty_erase_pen(s);
        row = s->cur->rows[r];

        if (!selective) {
            ngx_pty_row_erase(row, from, to, s->cols, &pen);
            continue;
        }

        ngx_pty_row_materialize(row, to);
        ngx_pty_cells_erase(&row->cells[from], to - from, &pen, 1);
    }
}


/*
 * n cells blank in pen; "selective": not those DECSCA protects (a right
 * half has its glyph's pen, as in xterm.js)
 */
static void
ngx_pty_cells_erase(ngx_pty_cell_t *c, unsigned n, const ngx_pty_pen_t *pen,
    unsigned selective)
{
    for ( /* void */ ; n; c++, n--) {
        if (selective && (c->pen.attr & NGX_PTY_A_PROTECT)) {
            continue;
        }

        c->ch = 0;
        c->ncomb = 0;
        c->width = 1;
        c->pen = *pen;
    }
}


static int
ngx_pty_cb_erase(VTermRect rect, int selective, void *user)
{
    ngx_pty_erase_rect(user, rect, selective);
    return 1;
}


/* full-width vertical scroll: rotate row pointers, clear recycled rows */
static void
ngx_pty_scroll_rows(ngx_pty_screen_t *s, ngx_pty_grid_t *g, int top, int end,
    int down)
{
    int             h, d, r, sb;
    ngx_pty_row_t  *row;

    h = end - top;
    d = down > 0 ? down : -down;
    sb = (down > 0 && top == 0 && !s->no_sb
          && (g == &s->grid[0] || s->alt_max > g->nrows));

    if (down > 0 && top == 0 && (unsigned) end == g->nrows) {
        /*
         * the whole screen up: slide the window over buf, the recycled
         * rows go past its end; recentred every nrows lines, so O(1)
         */
        if (g->rows + g->nrows + d > g->buf + 2 * g->nrows) {
            memmove(g->buf, g->rows, g->nrows * sizeof(ngx_pty_row_t *));
            g->rows = g->buf;
        }

        memcpy(g->rows + g->nrows, g->rows, d * sizeof(ngx_pty_row_t *));
        g->rows += d;
        r = end - d;

    } else if (down > 0) {
        memcpy(g->tmp, &g->rows[top], d * sizeof(ngx_pty_row_t *));
        memmove(&g->rows[top], &g->rows[top + d],
                (h - d) * sizeof(ngx_pty_row_t *));
        memcpy(&g->rows[end - d], g->tmp, d * sizeof(ngx_pty_row_t *));
        r = end - d;

    } else {
        memcpy(g->tmp, &g->rows[end - d], d * sizeof(ngx_pty_row_t *));
        memmove(&g->rows[top + d], &g->rows[top],
                (h - d) * sizeof(ngx_pty_row_t *));
        memcpy(&g->rows[top], g->tmp, d * sizeof(ngx_pty_row_t *));
        r = top;
    }

    /* into xterm.js's scrollback, the rows that left the top, in order */
    for (h = 0; sb && h < d; h++) {
        g->rows[r + h] = (g == &s->grid[0])
                         ? ngx_pty_sb_push(s, g, g->rows[r + h])
                         : ngx_pty_alt_push(s, g, g->rows[r + h]);
    }

    for (h = 0; h < d; h++, r++) {
        row = g->rows[r];
        row->len = 0;
        row->wrapped = 0;
        row->fill = ngx_pty_erase_pen(s);

        if (row->tail) {
            ngx_pty_tail_drop(s, row);
        }
    }
}


static int
ngx_pty_cb_scrollrect(VTermRect rect, int down, int right, void *user)
{
    ngx_pty_screen_t  *s = user;

    int             h, w, r;
    VTermRect       er;
    ngx_pty_grid_t *g;

    g = s->cur;
    h = rect.end_row - rect.start_row;
    w = rect.end_col - rect.start_col;

    /* the common case: lines scrolled up or down the whole width */
    if (right == 0 && rect.start_col == 0 && (unsigned) rect.end_col == s->cols
        && rect.start_row >= 0 && (unsigned) rect.end_row <= s->rows
        && down < h && -down < h && down != 0)
    {
        ngx_pty_scroll_rows(s, g, rect.start_row, rect.end_row, down);
        return 1;
    }

    if (h <= 0 || w <= 0 || rect.start_row < 0 || rect.start_col < 0
        || (unsigned) rect.end_row > s->rows
        || (unsigned) rect.end_col > s->cols)
    {
        return 1;
    }

    if (right < 0 && h == 1 && (unsigned) rect.end_col == s->cols
        && g->rows[rect.start_row]->tail && !s->untracked)
    {
        /*
         * ICH, insert mode: the cells pushed past the edge go on there
         * (not for a glyph the model prints again only for libvterm)
         */
        ngx_pty_tail_insert(s, g->rows[rect.start_row], rect.start_col,
                            -right);
    }

    if (down >= h || -down >= h || right >= w || -right >= w) {
        ngx_pty_erase_rect(s, rect, 0);

        if (right == 0 && rect.start_col == 0
            && (unsigned) rect.end_col == s->cols)
        {
            /* new lines (IL, DL, SU, SD past the region): not wrapped */
            for (r = rect.start_row; r < rect.end_row; r++) {
                g->rows[r]->wrapped = 0;

                if (g->rows[r]->tail) {
                    ngx_pty_tail_drop(s, g->rows[r]);
                }
            }
        }

        return 1;
    }

    er = rect;

    if (right == 0 && rect.start_col == 0 && (unsigned) rect.end_col == s->cols)
    {
        ngx_pty_scroll_rows(s, g, rect.start_row, rect.end_row, down);
        return 1;
    }

    if (right == 0 && down > 0) {
        for (r = rect.start_row; r < rect.end_row - down; r++) {
            ngx_pty_row_copy(s, g->rows[r], rect.start_col,
                             g->rows[r + down], rect.start_col, w);
        }

        er.start_row = rect.end_row - down;

    } else if (right == 0 && down < 0) {
        for (r = rect.end_row - 1; r >= rect.start_row - down; r--) {
            ngx_pty_row_copy(s, g->rows[r], rect.start_col,
                             g->rows[r + down], rect.start_col, w);
        }

        er.end_row = rect.start_row - down;

    } else {
        for (r = rect.start_row; r < rect.end_row; r++) {
            if (right > 0) {
                ngx_pty_row_copy(s, g->rows[r], rect.start_col,
                                 g->rows[r], rect.start_col + right, w - right);
            } else {
                ngx_pty_row_copy(s, g->rows[r], rect.start_col - right,
                                 g->rows[r], rect.start_col, w + right);
            }
        }

        if (right > 0) {
            er.start_col = rect.end_col - right;
        } else {
            er.end_col = rect.start_col - right;
        }
    }

    ngx_pty_erase_rect(s, er, 0);

    return 1;
}


/* the pen's underline as SGR gives it: none of what DECRC leaves */
static ngx_inline void
ngx_pty_ul_plain(ngx_pty_screen_t *s)
{
    s->ul_hidden = 0;
    s->ul_hidden_x = 0;
    s->ul_flagless = 0;
    s->ul_styleless = 0;
}


static int
ngx_pty_cb_initpen(void *user)
{
    ngx_pty_screen_t  *s = user;

    s->pen = s->default_pen;
    ngx_pty_ul_plain(s);

    return 1;
}


/* libvterm's colour into the model's, which keeps its 256-colour mark */
static void
ngx_pty_color_from_vt(VTermColor *mine, const VTermColor *vt)
{
    VTermColor  c;

    c = ngx_pty_color(vt);

    if (VTERM_COLOR_IS_INDEXED(mine) && VTERM_COLOR_IS_INDEXED(&c)
        && mine->indexed.idx == c.indexed.idx)
    {
        return;
    }

    *mine = c;
}


static void
ngx_pty_pen_bit(ngx_pty_pen_t *pen, unsigned bit, int on)
{
    if (on) {
        pen->attr |= bit;
    } else {
        pen->attr &= ~bit;
    }
}


static int
ngx_pty_cb_setpenattr(VTermAttr attr, VTermValue *val, void *user)
{
    ngx_pty_screen_t  *s = user;

    ngx_pty_pen_t  *pen = &s->pen;

    switch (attr) {

    case VTERM_ATTR_BOLD:
        ngx_pty_pen_bit(pen, NGX_PTY_A_BOLD, val->boolean);
        break;

    case VTERM_ATTR_UNDERLINE:
        pen->attr = (pen->attr & ~NGX_PTY_A_UL)
                    | ((val->number & 3) << NGX_PTY_A_UL_SHIFT);
        break;

    case VTERM_ATTR_ITALIC:
        ngx_pty_pen_bit(pen, NGX_PTY_A_ITALIC, val->boolean);
        break;

    case VTERM_ATTR_BLINK:
        ngx_pty_pen_bit(pen, NGX_PTY_A_BLINK, val->boolean);
        break;

    case VTERM_ATTR_REVERSE:
        ngx_pty_pen_bit(pen, NGX_PTY_A_REVERSE, val->boolean);
        break;

    case VTERM_ATTR_STRIKE:
        ngx_pty_pen_bit(pen, NGX_PTY_A_STRIKE, val->boolean);
        break;

    case VTERM_ATTR_FONT:
        pen->attr = (pen->attr & ~NGX_PTY_A_FONT)
                    | ((val->number & 0xf) << NGX_PTY_A_FONT_SHIFT);
        break;

    case VTERM_ATTR_FOREGROUND:
        ngx_pty_color_from_vt(&pen->fg, &val->color);
        break;

    case VTERM_ATTR_BACKGROUND:
        ngx_pty_color_from_vt(&pen->bg, &val->color);
        break;

    default:
        return 0;
    }

    return 1;
}


static int
ngx_pty_cb_settermprop(VTermProp prop, VTermValue *val, void *user)
{
    ngx_pty_screen_t  *s = user;

    VTermPos       pos;
    ngx_pty_pen_t  pen;

    switch (prop) {

    case VTERM_PROP_CURSORVISIBLE:
        s->visible = val->boolean ? 1 : 0;
        break;

    case VTERM_PROP_REVERSE:
        s->reverse = val->boolean ? 1 : 0;
        break;

    case VTERM_PROP_TITLE:
        /* the model reads titles itself (ngx_pty_osc_end) */
        break;

    case VTERM_PROP_ALTSCREEN:
        if (val->boolean) {
            if (s->grid[1].rows == NULL) {
                pen = ngx_pty_erase_pen(s);

                if (ngx_pty_grid_alloc(&s->grid[1], s->cols, s->rows, &pen)
                    != 0)
                {
                    return 0;   /* libvterm then stays on the main screen */
                }
            }

            ngx_pty_tails_drop_all(s);
            s->cur = &s->grid[1];
            s->alt = 1;
            vterm_state_get_cursorpos(s->state, &pos);
            s->norm_y = pos.row;
            s->norm_x = ngx_pty_xterm_col(s);
            ngx_pty_unwrap(s, 0, s->rows);

        } else {
            ngx_pty_tails_drop_all(s);

            if (s->alt) {
                /* xterm.js clears the buffer only when it leaves it */
                ngx_pty_alt_clear(s);
            }

            s->cur = &s->grid[0];
            s->alt = 0;
        }

        break;

    default:
        break;
    }

    return 1;
}


static int
ngx_pty_cb_bell(void *user)
{
    (void) user;
    return 1;
}


static void
ngx_pty_output(const char *buf, size_t len, void *user)
{
    ngx_pty_screen_t  *s = user;

    if (s->reply) {
        s->reply(s->reply_data, (const u_char *) buf, len);
    }
}


/* the cursor: the model's while libvterm is behind, else libvterm's */
static VTermPos
ngx_pty_cursor(ngx_pty_screen_t *s)
{
    VTermPos  pos;

    if (s->vt_dirty & NGX_PTY_VT_POS) {
        return s->vt_cur;
    }

    vterm_state_get_cursorpos(s->state, &pos);

    return pos;
}


/*
 * The row of a CUP to pos for libvterm: with DECOM it counts from the
 * margins (a row above them goes to the first)
 */
static ngx_inline unsigned
ngx_pty_vt_row(ngx_pty_screen_t *s, VTermPos pos)
{
    pos.row -= s->origin ? s->top : 0;

    return pos.row > 0 ? (unsigned) pos.row + 1 : 1;
}


/*
 * libvterm keeps the last glyph it printed (combine_chars, combine_pos) to
 * add the combining marks that follow it, and for REP.  When the model
 * printed it, write it again at its place (edge_pos, which only the
 * model's text and libvterm's putglyph set, and libvterm does not run
 * while it is behind), then put back the cell and the wrap state, which
 * were right already.
 */
static void
ngx_pty_vt_prime(ngx_pty_screen_t *s)
{
    char             buf[32];
    size_t           len;
    unsigned         rlen, lo, hi;
    ngx_pty_pen_t    fill;
    ngx_pty_row_t   *row;
    ngx_pty_cell_t   cells[4];

    row = s->cur->rows[s->edge_pos.row];
    rlen = row->len;
    fill = row->fill;

    /* the glyph's cells and one on each side, which its halves may touch */
    lo = s->edge_pos.col > 0 ? s->edge_pos.col - 1 : 0;
    hi = s->edge_pos.col + (s->combine_w == 2 ? 3 : 2);
    hi = hi < rlen ? hi : rlen;

    if (lo < hi) {
        memcpy(cells, &row->cells[lo], (hi - lo) * sizeof(ngx_pty_cell_t));
    }

    len = ngx_pty_put_csi(buf, ngx_pty_vt_row(s, s->edge_pos),
                          s->edge_pos.col + 1, 'H');
    len += ngx_pty_utf8_put((u_char *) buf + len, s->vt_glyph);

    s->untracked = 1;
    vterm_input_write(s->vt, buf, len);
    s->untracked = 0;

    /* in insert mode libvterm shifts the row's end first: an erase */
    row->len = rlen;
    row->fill = fill;

    if (lo < hi) {
        memcpy(&row->cells[lo], cells, (hi - lo) * sizeof(ngx_pty_cell_t));
    }
}


static VTermPos ngx_pty_ph_glyph(ngx_pty_screen_t *s);


/*
 * Autowrap back on with the cursor past the edge: libvterm, which kept it
 * on the last column, prints the glyph there again (untracked) to wait
 * for the wrap too
 */
static void
ngx_pty_vt_rephantom(ngx_pty_screen_t *s)
{
    VTermPos               ph;
    ngx_pty_cell_t         tmp;
    const ngx_pty_cell_t  *c;

    /* (the other buffer's glyph, after a switch: the one at the edge) */
    ph = ngx_pty_ph_glyph(s);
    c = ngx_pty_row_cell(s->cur->rows[ph.row], ph.col, &tmp);

    /* a space where it is no plain glyph: only the wrap state counts */
    s->vt_glyph = (c->ch > 0x20 && c->ch != NGX_PTY_CONT && c->width == 1
                   && c->ncomb == 0) ? c->ch : ' ';
    s->edge_pos = ph;
    s->comb_own = (s->vt_glyph != c->ch);

    if (s->vt_glyph == ' ') {
        /* in the last column: a wide glyph's left half is not there */
        s->edge_pos.col = s->cols - 1;
    }

    ngx_pty_vt_prime(s);

    /* the move to the last column was no move that ends the wrap */
    s->phantom = 1;
}


/*
 * libvterm 0.1.4 reads the colour of an SGR that ends in a bare 38 or 48
 * from the parameter slots past its own, which hold what earlier CSI
 * sequences left there.  args[] holds what they hold in libvterm fed
 * the stream alone; when libvterm's may differ (it did not parse the
 * sequences the model applied itself, and it parsed ngx_pty_vt_sync()'s),
 * a CSI it ignores puts them back before a sequence that may read them.
 */
static void
ngx_pty_vt_args(ngx_pty_screen_t *s)
{
    char      buf[NGX_PTY_CSI_ARGS * 21 + 4], *p;
    unsigned  k;

    if (!s->vt_args) {
        return;
    }

    s->vt_args = 0;

    /* buf[1] gets the first ';', which becomes the '[' */
    p = buf + 1;

    for (k = 0; k < NGX_PTY_CSI_ARGS; k++) {
        /* the number parsed back gives the same bits, flags included */
        p = ngx_pty_put_arg(p, s->args[k]);
    }

    buf[0] = '\x1b';
    buf[1] = '[';
    *p++ = 'y';     /* not a command libvterm 0.1.4 knows */

    vterm_input_write(s->vt, buf, p - buf);
}


/*
 * Brings libvterm up to what the model did without it: the last glyph,
 * then the cursor (CUP also cancels a pending wrap, as the moves did),
 * then the pen.  Called before libvterm reads anything else and at the
 * end of each scan, so outside the scanner libvterm is never behind.
 */
static void
ngx_pty_vt_sync(ngx_pty_screen_t *s)
{
    int       w;
    char      buf[128], *p;
    size_t    len;
    unsigned  dirty, edge;

    dirty = s->vt_dirty;

    if (dirty == 0) {
        return;
    }

    s->vt_dirty = 0;
    s->vt_args = 1;

    if (dirty & NGX_PTY_VT_GLYPH) {
        ngx_pty_vt_prime(s);

        /*
         * libvterm's cursor is past the glyph now (combine_w, its width),
         * or on it waiting to wrap if it reaches the last column: where
         * the model's may be
         */
        w = s->combine_w;
        edge = ((unsigned) (s->edge_pos.col + w) >= s->cols);

        if (s->vt_cur.row == s->edge_pos.row
            && s->vt_cur.col == s->edge_pos.col + (edge ? 0 : w)
            && s->phantom == (edge && s->autowrap))
        {
            dirty &= ~NGX_PTY_VT_POS;
        }
    }

    if (dirty & NGX_PTY_VT_POS) {
        len = ngx_pty_put_csi(buf, s->vt_cur.row + 1, s->vt_cur.col + 1, 'H');
        s->no_lf = 1;
        vterm_input_write(s->vt, buf, len);
        s->no_lf = 0;
    }

    if (dirty & NGX_PTY_VT_PROTECT) {
        vterm_input_write(s->vt, s->protect ? "\x1b[1\"q" : "\x1b[0\"q", 5);
    }

    if (dirty & NGX_PTY_VT_PEN) {
        /* libvterm does not know SGR 8; the model keeps it itself */
        p = ngx_pty_sgr_diff(buf, &s->vt_pen, &s->pen,
                             NGX_PTY_A_SGR & ~NGX_PTY_A_CONCEAL, 0);

        if (p != buf) {
            vterm_input_write(s->vt, buf, p - buf);
        }
    }
}


/* CUP for libvterm, which also cancels its pending wrap */
static void
ngx_pty_vt_cup(ngx_pty_screen_t *s, VTermPos pos)
{
    char  buf[32];

    s->no_lf = 1;
    vterm_input_write(s->vt, buf,
                      ngx_pty_put_csi(buf, ngx_pty_vt_row(s, pos),
                                      pos.col + 1, 'H'));
    s->no_lf = 0;
}


/* hands libvterm p[*start..end), after what the model did before it */
static void
ngx_pty_flush(ngx_pty_screen_t *s, const u_char *p, size_t *start, size_t end)
{
    ngx_pty_vt_sync(s);

    if (end > *start) {
        ngx_pty_vt_write(s, p + *start, end - *start);
    }

    *start = end;
}


/* feed p[i] (an escape's final byte) alone, so what follows sees its effect */
static void
ngx_pty_feed_final(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i)
{
    ngx_pty_flush(s, p, start, i);
    ngx_pty_vt_write(s, p + i, 1);
    *start = i + 1;
}


/*
 * p[i] ends a DECRC, DECSTBM or DECOM: libvterm's move to the saved cursor
 * or home is no line feed, which a move one row down to the same column
 * (or to column 0) looks like
 */
static void
ngx_pty_feed_final_no_lf(ngx_pty_screen_t *s, const u_char *p,
    size_t *start, size_t i)
{
    ngx_pty_flush(s, p, start, i);
    s->no_lf = 1;
    ngx_pty_feed_final(s, p, start, i);
    s->no_lf = 0;
}


/*
 * p[i], the final byte of SU, IL or DL, whose scroll keeps no line for
 * the scrollback; the text before it, which may scroll lines there, is
 * given to libvterm first
 */
static void
ngx_pty_feed_final_no_sb(ngx_pty_screen_t *s, const u_char *p,
    size_t *start, size_t i)
{
    ngx_pty_flush(s, p, start, i);
    s->no_sb = 1;
    ngx_pty_feed_final(s, p, start, i);
    s->no_sb = 0;
}


static int ngx_pty_shift_outside(ngx_pty_screen_t *s,
    const u_char *p, size_t *start, size_t i, size_t esc, u_char c);
static void ngx_pty_dch_ends(ngx_pty_screen_t *s);
static ngx_inline unsigned ngx_pty_past_wide(ngx_pty_screen_t *s);
static void ngx_pty_vt_to_edge(ngx_pty_screen_t *s);
static uint32_t ngx_pty_utf8_cp(const u_char *p, unsigned len);
static ngx_inline int ngx_pty_utf8_kept(uint32_t cp, unsigned len);
static void ngx_pty_dch_halves(ngx_pty_screen_t *s, const u_char *p,
    size_t *start, size_t i);
static void ngx_pty_csi_skip(ngx_pty_screen_t *s, const u_char *p,
    size_t *start, size_t i, size_t esc);
static long ngx_pty_margin_stop(ngx_pty_screen_t *s, u_char c, long row,
    long count);
static VTermPos ngx_pty_origin_move(ngx_pty_screen_t *s, u_char c,
    VTermPos from, long n);


/* xterm.js ends the pending wrap where libvterm keeps it: a CUP in place */
static void
ngx_pty_end_wrap(ngx_pty_screen_t *s)
{
    s->diverged++;
    ngx_pty_vt_cup(s, ngx_pty_cursor(s));
    s->phantom = 0;
}


/* DECSCA as xterm.js changes it besides DECSCA itself: libvterm told later */
static void
ngx_pty_protect(ngx_pty_screen_t *s, unsigned on)
{
    if (s->protect != on) {
        s->protect = on;
        s->vt_dirty |= NGX_PTY_VT_PROTECT;
        s->diverged++;
    }
}


/*
 * The set GL draws: G0-G3's as libvterm has them, but for a shift inside
 * a sequence after a DECRC gave a set back (libvterm's G<ov_g> is given
 * its designation again when the sequence has ended)
 */
static u_char
ngx_pty_set_drawn(ngx_pty_screen_t *s)
{
    if (s->ov_shift && s->gl == s->ov_g) {
        return s->ov_charset ? s->ov_scs : 0;
    }

    return s->charset[s->gl] ? s->scs[s->gl] : 0;
}


/* into the buffer in use: xterm.js keeps a saved cursor per buffer */
static void
ngx_pty_save_cursor(ngx_pty_screen_t *s)
{
    s->saved_valid[s->alt] = 1;
    vterm_state_get_cursorpos(s->state, &s->saved_pos[s->alt]);
    /* past the edge with a wrap pending: a resize wider makes it a column */
    s->saved_pos[s->alt].col = ngx_pty_xterm_col(s);
    s->saved_pen[s->alt] = s->pen;
    s->saved_flagless[s->alt] = s->ul_flagless;

    if (s->ul_flagless) {
        /* the flag word, without the underline */
        s->saved_pen[s->alt].attr &= ~NGX_PTY_A_UL;
        s->saved_pen[s->alt].xattr &= ~NGX_PTY_X_UL;
    }

    /* xterm.js saves the set in use with the cursor */
    s->saved_set[s->alt] = ngx_pty_set_drawn(s);
    s->saved_protect[s->alt] = s->protect;
}


/*
 * xterm.js saves and restores a pen's colour and flag words only: the
 * underline's colour and style (its "extended" attributes) stay as they
 * were, the style showing where the restored pen underlines (single if
 * the pen before did not)
 */
static void
ngx_pty_pen_keep_ul(ngx_pty_pen_t *pen, const ngx_pty_pen_t *cur)
{
    pen->ul = cur->ul;

    if (!(pen->attr & NGX_PTY_A_UL)) {
        return;
    }

    if (cur->attr & NGX_PTY_A_UL) {
        pen->attr = (pen->attr & ~NGX_PTY_A_UL) | (cur->attr & NGX_PTY_A_UL);
        pen->xattr = (pen->xattr & ~NGX_PTY_X_UL) | (cur->xattr & NGX_PTY_X_UL);

    } else {
        pen->attr = (pen->attr & ~NGX_PTY_A_UL) | (1 << NGX_PTY_A_UL_SHIFT);
        pen->xattr &= ~NGX_PTY_X_UL;
    }
}


/*
 * Where DECRC puts the cursor saved in buffer b: the row is a line of
 * xterm.js's buffer, so one that went into the scrollback is the top row
 * (and a reflow can leave it below the screen); a wrap pending at the
 * save left the column past the edge
 */
static VTermPos
ngx_pty_saved_at(ngx_pty_screen_t *s, unsigned b)
{
    VTermPos  pos;

    pos = s->saved_pos[b];
    pos.row = (pos.row < (int) s->rows) ? pos.row : (int) s->rows - 1;
    pos.row = (pos.row > 0) ? pos.row : 0;
    pos.col = (pos.col < (int) s->cols) ? pos.col : (int) s->cols - 1;

    return pos;
}


/*
 * After libvterm's DECRC, which restored its single slot: the buffer's own
 * (home and the default pen when it has none, as in xterm.js) instead;
 * "visible" and "cur" are the cursor's visibility and the pen before
 */
static void
ngx_pty_restore_cursor(ngx_pty_screen_t *s, unsigned visible,
    const ngx_pty_pen_t *cur)
{
    VTermPos        pos, vt;
    unsigned        flagless, styleless;
    ngx_pty_pen_t   pen, shown;

    pos.row = 0;
    pos.col = 0;
    pen = s->default_pen;

    flagless = 0;
    styleless = 0;

    if (s->saved_valid[s->alt]) {
        pos = ngx_pty_saved_at(s, s->alt);
        pen = s->saved_pen[s->alt];
        flagless = s->saved_flagless[s->alt];
    }

    if (flagless) {
        /* the style in use shows, hidden or not (none: none) */
        pen.attr |= (cur->attr & NGX_PTY_A_UL) | s->ul_hidden;
        pen.xattr |= (cur->xattr & NGX_PTY_X_UL) | s->ul_hidden_x;
        s->ul_hidden = 0;
        s->ul_hidden_x = 0;
        pen.ul = cur->ul;

    } else if (pen.attr & NGX_PTY_A_UL) {
        /* the style in use shows, a hidden one too */
        shown = *cur;
        shown.attr |= s->ul_hidden;
        shown.xattr |= s->ul_hidden_x;
        s->ul_hidden = 0;
        s->ul_hidden_x = 0;
        styleless = !(shown.attr & NGX_PTY_A_UL);
        ngx_pty_pen_keep_ul(&pen, &shown);

    } else {
        if (cur->attr & NGX_PTY_A_UL) {
            s->ul_hidden = cur->attr & NGX_PTY_A_UL;
            s->ul_hidden_x = cur->xattr & NGX_PTY_X_UL;
        }

        ngx_pty_pen_keep_ul(&pen, cur);
    }

    s->ul_flagless = flagless;
    s->ul_styleless = styleless;

    vterm_state_get_cursorpos(s->state, &vt);

    /*
     * where libvterm's cursor is: in origin mode, its ?1049l and ?1048l
     * report a move to the saved place and then stay at the region's top
     */
    s->vt_next = vt;

    if (vt.row != pos.row || vt.col != pos.col
        || !ngx_pty_pen_eq(&s->pen, &pen, NGX_PTY_A_SGR & ~NGX_PTY_A_CONCEAL))
    {
        s->diverged++;
    }

    ngx_pty_vt_cup(s, pos);
    s->phantom = 0;

    /* libvterm has the pen it restored, the model the one it should have */
    s->vt_pen = s->pen;
    s->pen = pen;
    s->vt_dirty |= NGX_PTY_VT_PEN;

    /* xterm.js keeps DECSCA with the pen's colours: saved and restored */
    ngx_pty_protect(s, s->saved_valid[s->alt] && s->saved_protect[s->alt]);

    /* and the cursor's visibility, which xterm.js leaves as it is */
    if (s->visible != visible) {
        vterm_input_write(s->vt, visible ? "\x1b[?25h" : "\x1b[?25l", 6);
    }

    ngx_pty_restore_set(s);
}


/*
 * xterm.js's DECRC gives back the set that was in GL at the save (ASCII
 * when nothing was saved), and leaves G0-G3 and the shift as they are
 */
static void
ngx_pty_restore_set(ngx_pty_screen_t *s)
{
    u_char  want;

    want = s->saved_valid[s->alt] ? s->saved_set[s->alt] : 0;

    ngx_pty_ov_settle(s);

    if (s->charset[s->gl] == (want != 0) && s->scs[s->gl] == want) {
        return;
    }

    if (!s->ov) {
        s->ov = 1;
        s->ov_shift = 0;
        s->ov_g = s->gl;
        s->ov_charset = s->charset[s->gl];
        s->ov_scs = s->scs[s->gl];
        s->ov_ascii = (s->ascii >> s->gl) & 1;
        /* an "ESC ( B" must reach libvterm, and end this */
        s->ascii &= ~(1 << s->gl);
    }

    ngx_pty_vt_designate(s, s->gl, want != 0, want);
    s->diverged++;

    if (s->ov_charset == (want != 0) && s->ov_scs == want) {
        s->ov = 0;
        s->ascii |= s->ov_ascii << s->gl;
    }
}


/* a shift inside a sequence since DECRC gave a set back: it acts now */
static void
ngx_pty_ov_settle(ngx_pty_screen_t *s)
{
    if (s->ov_shift) {                  /* implies s->ov */
        ngx_pty_set_back(s);
    }
}


/* a shift ends what DECRC gave back: G<ov_g> as designated, in libvterm too */
static void
ngx_pty_set_back(ngx_pty_screen_t *s)
{
    ngx_pty_vt_designate(s, s->ov_g, s->ov_charset, s->ov_scs);
    s->ascii |= s->ov_ascii << s->ov_g;
    s->ov = 0;
    s->ov_shift = 0;
}


/*
 * G<k> given set "scs" (0: ASCII) in libvterm, and in the model's copy;
 * "charset" as the model keeps it (a set libvterm does not know: 1, 0)
 */
static void
ngx_pty_vt_designate(ngx_pty_screen_t *s, unsigned k, u_char charset,
    u_char scs)
{
    u_char  buf[3];

    buf[0] = '\x1b';
    buf[1] = (u_char) ('(' + k);
    buf[2] = scs ? scs : 'B';
    ngx_pty_vt_write(s, buf, 3);

    s->charset[k] = charset;
    s->scs[k] = scs;
    s->vt_text = 1;
}


/* SI, SO, LS2, LS3 at p[i]: GL draws G<g>, its designation */
static void
ngx_pty_shift(ngx_pty_screen_t *s, const u_char *p, size_t *start, size_t i,
    unsigned g)
{
    if (s->ov) {
        ngx_pty_feed_final(s, p, start, i);
        ngx_pty_set_back(s);
    }

    s->gl = g;
    s->vt_text = 1;
}


/* tab stops every 8 columns, as xterm.js sets them up */
static void
ngx_pty_tabs_default(ngx_pty_screen_t *s, unsigned b)
{
    unsigned  col;

    memset(s->tabs[b], 0, NGX_PTY_TABS);

    for (col = 0; col < s->cols; col += 8) {
        s->tabs[b][col >> 3] |= 1 << (col & 7);
    }

    s->tabs_custom[b] = 0;
}


#define ngx_pty_tab(s, b, col)                                                \
    ((s)->tabs[b][(col) >> 3] & (1 << ((col) & 7)))


/* HTS (on), TBC 0 (off) at the cursor, TBC 3 (all: col < 0) */
static void
ngx_pty_tab_set(ngx_pty_screen_t *s, int col, unsigned on)
{
    unsigned  b;

    b = s->alt;
    s->tabs_custom[b] = 1;

    if (col < 0) {
        memset(s->tabs[b], 0, NGX_PTY_TABS);

    } else if (col < NGX_PTY_SCREEN_MAX_COLS) {
        if (on) {
            s->tabs[b][col >> 3] |= 1 << (col & 7);
        } else {
            s->tabs[b][col >> 3] &= ~(1 << (col & 7));
        }
    }
}


/* xterm.js on a resize: stops every 8 from the last one before the edge */
static void
ngx_pty_tabs_resize(ngx_pty_screen_t *s, unsigned cols)
{
    int       i;
    unsigned  b;

    /* stops past the edge stay: a resize wider finds them again */
    for (b = 0; b < 2; b++) {
        i = cols;

        if (cols >= NGX_PTY_SCREEN_MAX_COLS || !ngx_pty_tab(s, b, cols)) {
            while (--i > 0 && !ngx_pty_tab(s, b, i)) {
                /* void */
            }

            i = i < 0 ? 0 : i;
        }

        for ( /* void */ ; i < (int) cols; i += 8) {
            s->tabs[b][i >> 3] |= 1 << (i & 7);
        }
    }
}


/* libvterm's tab stops, which move the cursor on HT, set to the model's */
static void
ngx_pty_vt_tabs(ngx_pty_screen_t *s)
{
    char      buf[32];
    unsigned  col;

    vterm_input_write(s->vt, "\x1b[3g", 4);

    for (col = 0; col < s->cols; col++) {
        if (ngx_pty_tab(s, s->alt, col)) {
            vterm_input_write(s->vt, buf, ngx_pty_put_csi(buf, 1, col + 1,
                                                          'H'));
            vterm_input_write(s->vt, "\x1bH", 2);
        }
    }
}


/* the column xterm.js has the cursor in: past the edge when waiting */
static int
ngx_pty_xterm_col(ngx_pty_screen_t *s)
{
    return s->phantom ? (int) (s->cols + s->past) : ngx_pty_cursor(s).col;
}


/* the modes RIS and DECSTR reset alike (xterm.js's coreService.reset()) */
static void
ngx_pty_modes_reset(ngx_pty_screen_t *s)
{
    s->keypad = 0;
    s->ckm = 0;
    s->paste = 0;
    s->focus = 0;
    s->origin = 0;
    s->autowrap = 1;
    s->insert = 0;
    s->protect = 0;
    s->sync = 0;
    s->top = 0;
    s->bottom = -1;
    s->gl = 0;
    s->ov = 0;
    s->ov_shift = 0;
    s->ascii = 0;
    memset(s->charset, 0, sizeof(s->charset));
    memset(s->scs, 0, sizeof(s->scs));
}


/* xterm.js 6.0 keeps ?12 under the style, and 0 brings it back */
static void
ngx_pty_props_style(ngx_pty_cursor_props_t *p, int style)
{
    p->blink_pre = (p->blink12 >= 0) ? p->blink12 : p->blink_pre;
    p->style = style;
    p->blink12 = -1;
}


/*
 * DECSTR and RIS: xterm.js 5.5 keeps the cursor's style (in its options),
 * 6.0 drops it; the snapshot gives it both ways (ngx_pty_emit_props())
 */
static void
ngx_pty_props_reset(ngx_pty_screen_t *s)
{
    s->props_reset = s->props;
    s->props_since.style = -1;
    s->props_since.blink12 = -1;
    s->props_since.blink_pre = -1;
}


/*
 * DECSTR as xterm.js does it (libvterm 0.1.4 leaves the pen, the modes
 * and the region as they were): the modes above, the pen, the character
 * sets, the cursor shown and the saved cursor at the home position in
 * the default pen; the cursor's style as above.  libvterm is told in
 * sequences it reads, and its cursor put back; a pending wrap, which
 * that CUP cancels in libvterm, stays the model's, as xterm.js keeps it.
 */
static void
ngx_pty_decstr(ngx_pty_screen_t *s)
{
    VTermPos           pos;
    static const char  reset[] =
        "\x1b[m\x1b[?6l\x1b[?7h\x1b[4l\x1b[?1l\x1b>\x1b[?2004l\x1b[?1004l"
        "\x1b[?25h\x1b[r\x1b[?69l\x1b[s\x1b[0\"q\x1b(B\x1b)B\x1b*B\x1b+B\x0f"
        "\x1b[H\x1b" "7";

    vterm_state_get_cursorpos(s->state, &pos);
    vterm_input_write(s->vt, reset, sizeof(reset) - 1);

    ngx_pty_modes_reset(s);
    ngx_pty_props_reset(s);
    s->pen = s->default_pen;
    ngx_pty_ul_plain(s);
    ngx_pty_save_cursor(s);
    s->vt_text = 1;          /* a single shift libvterm may still hold */

    ngx_pty_vt_cup(s, pos);

    if (s->phantom) {
        s->diverged++;
    }
}


/*
 * ICH pushed a wide glyph into the last column, its right half off the
 * line: xterm.js clears it (libvterm keeps half a glyph)
 */
static void
ngx_pty_ich_edge(ngx_pty_screen_t *s)
{
    VTermPos         pos;
    ngx_pty_pen_t    pen;
    ngx_pty_cell_t  *c;

    pos = ngx_pty_cursor(s);
    c = ngx_pty_edge_wide(s, s->cur->rows[pos.row]);

    if (c != NULL) {
        pen = ngx_pty_erase_pen(s);
        ngx_pty_cell_blank(s, c, &pen);
    }
}


/*
 * ICH and DCH on a row outside the scroll region: xterm.js shifts the row
 * (only left and right margins bound them, and it has none), libvterm
 * does nothing there.  The model lifts libvterm's region around them.
 * A wrap pending past a narrow glyph ends first (past a wide one, the
 * callers' way).  1: done.
 */
static int
ngx_pty_shift_outside(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t esc, u_char c)
{
    char      buf[96], *b;
    long      end;
    unsigned  n;
    VTermPos  pos;

    end = (s->bottom < 0) ? (long) s->rows : s->bottom;

    if (ngx_pty_past_wide(s) || (s->top == 0 && end == (long) s->rows)) {
        return 0;
    }

    pos = ngx_pty_cursor(s);

    if (pos.row >= s->top && pos.row < end) {
        return 0;
    }

    n = (unsigned) NGX_PTY_ARG_OR(s->args[0], 1);
    n = (n == 0) ? 1 : (n > s->cols ? s->cols : n);

    /* libvterm does not see the sequence itself, but what it leads to */
    ngx_pty_csi_skip(s, p, start, i, esc);

    b = ngx_pty_put_str(buf, "\x1b[r");
    b += ngx_pty_put_csi(b, pos.row + 1, pos.col + 1, 'H');
    b += ngx_pty_put_csi(b, n, -1, (char) c);
    b += ngx_pty_put_csi(b, s->top + 1, end, 'r');

    s->diverged++;
    s->no_lf = 1;
    vterm_input_write(s->vt, buf, b - buf);
    s->no_lf = 0;

    /* the region set again homed the cursor; a pending wrap is ended */
    ngx_pty_vt_cup(s, pos);
    s->phantom = 0;

    if (c == 'P') {
        ngx_pty_dch_ends(s);
    }

    return 1;
}


/*
 * A wrap pending after a wide glyph in the last two columns: libvterm's
 * cursor is on the glyph's left half, xterm.js's past the edge, and what
 * puts it back on the screen (BS, CUB, HPB, ICH, DCH) puts it on the last
 * column, the right half.  libvterm's is put there too.
 */
static ngx_inline unsigned
ngx_pty_past_wide(ngx_pty_screen_t *s)
{
    return s->phantom && (unsigned) ngx_pty_cursor(s).col + 1 < s->cols;
}


static void
ngx_pty_vt_to_edge(ngx_pty_screen_t *s)
{
    VTermPos  pos;

    pos = ngx_pty_cursor(s);
    pos.col = s->cols - 1;

    s->diverged++;
    ngx_pty_vt_cup(s, pos);
    s->phantom = 0;
}


/* the CSI at p[i] kept from libvterm, which is put on the edge first */
static void
ngx_pty_csi_to_edge(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t esc)
{
    ngx_pty_csi_skip(s, p, start, i, esc);
    ngx_pty_vt_to_edge(s);
}


/* ... then read by libvterm from there: its final c, one count */
static void
ngx_pty_vt_csi_again(ngx_pty_screen_t *s, u_char c)
{
    char   buf[32];
    long   n, most;

    /* a count past the screen moves as far as the screen's size */
    most = (long) (s->cols > s->rows ? s->cols : s->rows);
    n = NGX_PTY_ARG_OR(s->args[0], 1);
    n = (n < 1) ? 1 : (n > most ? most : n);

    vterm_input_write(s->vt, buf,
                      ngx_pty_put_csi(buf, (unsigned) n, -1, (char) c));
}


/* the CSI (one count) at p[i] from there */
static void
ngx_pty_csi_from_edge(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t esc, u_char c)
{
    ngx_pty_csi_to_edge(s, p, start, i, esc);
    ngx_pty_vt_csi_again(s, c);
}


/*
 * DCH among wide glyphs, as xterm.js's deleteCells() ends: a wide glyph
 * whose right half it deleted, and a right half it brought under the
 * cursor, become blanks in the erase pen; libvterm keeps both halves.
 */
static void
ngx_pty_dch_halves(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i)
{
    ngx_pty_feed_final(s, p, start, i);
    ngx_pty_dch_ends(s);
}


static void
ngx_pty_dch_ends(ngx_pty_screen_t *s)
{
    VTermPos         pos;
    ngx_pty_row_t   *row;
    ngx_pty_pen_t    pen;
    ngx_pty_cell_t  *c;

    pos = ngx_pty_cursor(s);
    row = s->cur->rows[pos.row];
    pen = ngx_pty_erase_pen(s);

    /* (the cells from row->len on are blanks: the shift may end there) */
    if (pos.col > 0 && (unsigned) pos.col - 1 < row->len) {
        c = &row->cells[pos.col - 1];

        /* its right half was under the cursor: deleted */
        if (c->ch != 0 && c->ch != NGX_PTY_CONT && c->width == 2) {
            ngx_pty_cell_blank(s, c, &pen);
        }
    }

    if ((unsigned) pos.col >= row->len) {
        return;
    }

    c = &row->cells[pos.col];

    if (c->ch == NGX_PTY_CONT) {
        ngx_pty_cell_blank(s, c, &pen);
    }
}


static void
ngx_pty_cell_blank(ngx_pty_screen_t *s, ngx_pty_cell_t *c,
    const ngx_pty_pen_t *pen)
{
    c->ch = 0;
    c->ncomb = 0;
    c->width = 1;
    c->pen = *pen;
    c->pen.attr &= ~NGX_PTY_A_PROTECT;
    s->diverged++;
}


/* RIS, as libvterm and xterm.js reset */
static void
ngx_pty_hard_reset(ngx_pty_screen_t *s)
{
    unsigned  k, r;

    ngx_pty_modes_reset(s);
    s->norm_top = 0;
    s->norm_bottom = -1;
    ngx_pty_props_reset(s);
    s->newline = 0;
    s->mouse = 0;
    s->mouse_enc = 0;
    s->phantom = 0;
    s->saved_valid[0] = 0;  /* xterm.js's RIS forgets the saved cursors */
    s->saved_valid[1] = 0;
    memset(s->saved_pos, 0, sizeof(s->saved_pos));
    memset(s->saved_set, 0, sizeof(s->saved_set));
    memset(s->saved_protect, 0, sizeof(s->saved_protect));
    ngx_pty_sb_clear(s);
    s->vt_text = 0;

    /* libvterm resets its pen (and tells the model), but for these */
    s->pen.attr &= ~NGX_PTY_A_CONCEAL;
    s->pen.xattr = 0;
    s->pen.ul = s->default_pen.ul;

    for (k = 0; k < 2; k++) {
        for (r = 0; s->grid[k].rows && r < s->grid[k].nrows; r++) {
            s->grid[k].rows[r]->wrapped = 0;
        }
    }

    ngx_pty_tails_drop_all(s);
    ngx_pty_alt_clear(s);
    ngx_pty_tabs_default(s, 0);
    ngx_pty_tabs_default(s, 1);
}


/* CUP for libvterm that keeps a pending wrap (the model's and libvterm's) */
static void
ngx_pty_vt_cup_keep(ngx_pty_screen_t *s, VTermPos pos, unsigned phantom)
{
    ngx_pty_vt_cup(s, pos);

    if (phantom) {
        s->phantom = 1;
        ngx_pty_vt_rephantom(s);
    }
}


/*
 * libvterm switched buffers: xterm.js keeps a scroll region per buffer
 * (the alternate one's is the whole screen each time it is entered, as
 * leaving clears it); libvterm has one, set to the new buffer's here
 * (DECSTBM homes its cursor: put back)
 */
static void
ngx_pty_buffer_region(ngx_pty_screen_t *s, unsigned was_alt)
{
    int       top, bottom;
    char      buf[32];
    unsigned  phantom, custom;
    VTermPos  pos;

    if (s->alt == was_alt) {
        return;
    }

    /* xterm.js's other buffer waits to wrap too (its x is cols) */
    phantom = s->phantom;

    /* libvterm's stops are the buffer's left, custom ones too */
    custom = s->tabs_custom[0] || s->tabs_custom[1];

    if (!s->alt) {
        /* leaving the alternate buffer sets its stops up anew */
        ngx_pty_tabs_default(s, 1);
    }

    if (custom) {
        /* xterm.js keeps tab stops per buffer, libvterm one set */
        s->diverged++;
        pos = ngx_pty_cursor(s);
        ngx_pty_vt_tabs(s);
        ngx_pty_vt_cup_keep(s, pos, phantom);
    }

    top = s->top;
    bottom = s->bottom;

    if (s->alt) {
        s->norm_top = s->top;
        s->norm_bottom = s->bottom;
        s->top = 0;
        s->bottom = -1;

    } else {
        s->top = s->norm_top;
        s->bottom = s->norm_bottom;
    }

    if (s->top == top && s->bottom == bottom) {
        return;
    }

    /* libvterm would keep the region it had */
    s->diverged++;
    pos = ngx_pty_cursor(s);
    vterm_input_write(s->vt, buf,
                      ngx_pty_put_csi(buf, s->top + 1,
                                      s->bottom < 0 ? (int) s->rows
                                                    : s->bottom, 'r'));
    ngx_pty_vt_cup_keep(s, pos, phantom);
}


static void
ngx_pty_dec_mode(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t esc, unsigned val)
{
    int            k;
    unsigned       visible, was_alt;
    unsigned long  v;
    ngx_pty_pen_t  pen;

    /* libvterm 0.1.4 applies only the first parameter */
    v = NGX_PTY_ARG(s->args[0]);

    switch (v) {

    case 6:
        /* DECOM homes the cursor: to the region's top is no line feed */
        ngx_pty_flush(s, p, start, i);
        s->origin = val;
        ngx_pty_feed_final_no_lf(s, p, start, i);
        break;

    case 7:
        ngx_pty_flush(s, p, start, i);

        if (val && !s->autowrap && s->phantom && s->argi == 1) {
            /* past the edge: xterm.js wraps the next glyph now */
            s->diverged++;
            ngx_pty_feed_final(s, p, start, i);
            s->autowrap = 1;
            ngx_pty_vt_rephantom(s);
            break;
        }

        if (!val && s->autowrap && s->phantom && s->argi == 1) {
            /*
             * xterm.js writes the next glyph over the last column; libvterm
             * would still wrap to the next row: end its pending wrap
             */
            s->diverged++;
            ngx_pty_feed_final(s, p, start, i);
            s->autowrap = 0;
            ngx_pty_vt_cup(s, ngx_pty_cursor(s));
            break;
        }

        s->autowrap = val;
        break;

    case 69:
        /* DECLRMM: xterm.js has no left and right margins */
        s->diverged += val;
        ngx_pty_csi_skip(s, p, start, i, esc);
        break;

    case 47:
    case 1047:
    case 1049:
        if (val && s->alt && s->argi == 1) {
            /* xterm.js: already there, nothing cleared (?1049h saves) */
            if (v == 1049) {
                ngx_pty_flush(s, p, start, i);
                ngx_pty_save_cursor(s);
            }

            s->diverged++;
            ngx_pty_csi_skip(s, p, start, i, esc);
            break;
        }

        if (v != 1049) {
            was_alt = s->alt;
            ngx_pty_feed_final(s, p, start, i);
            ngx_pty_buffer_region(s, was_alt);
            break;
        }

        /* fall through */

    case 1048:
        ngx_pty_flush(s, p, start, i);
        visible = s->visible;
        was_alt = s->alt;

        if (val) {
            /* into the buffer in use, before ?1049h leaves it */
            ngx_pty_flush(s, p, start, i);
            ngx_pty_save_cursor(s);
            ngx_pty_feed_final(s, p, start, i);
            ngx_pty_buffer_region(s, was_alt);

        } else {
            pen = s->pen;
            ngx_pty_feed_final_no_lf(s, p, start, i);
            ngx_pty_buffer_region(s, was_alt);
            ngx_pty_restore_cursor(s, visible, &pen);
        }

        break;
    }

    /* modes only a client acts on: all parameters, as xterm does */
    for (k = 0; k < s->argi && k < NGX_PTY_CSI_ARGS; k++) {
        v = NGX_PTY_ARG(s->args[k]);

        switch (v) {

        case 1:
            s->ckm = val;
            break;

        case 1000:
        case 1002:
        case 1003:
            s->mouse = val ? v : 0;
            break;

        case 12:
            s->props.blink12 = val;
            s->props_since.blink12 = val;
            break;

        case 1004:
            s->focus = val;
            break;

        case 1005:
        case 1006:
        case 1015:
            s->mouse_enc = val ? v : 0;
            break;

        case 2004:
            s->paste = val;
            break;

        case 2026:
            s->sync = val;
            break;
        }
    }
}


static int ngx_pty_fast_sgr(ngx_pty_screen_t *s, const unsigned long *args,
    int argc);
static int ngx_pty_edge_lf(ngx_pty_screen_t *s, const u_char *p,
    size_t *start, size_t i);


/*
 * The CSI sequence ending at p[i] (begun at p[esc], or in an earlier
 * piece) is the model's alone: libvterm does not act on it, only on the
 * controls in it, which act where they are.
 */
static void
ngx_pty_csi_skip(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t esc)
{
    size_t  k;

    if (esc != NGX_PTY_NO_ESC && esc >= *start) {
        ngx_pty_flush(s, p, start, esc);

        /*
         * an ESC libvterm read last (ESC ESC [ m) would take what follows,
         * as would one held back from it
         */
        vterm_input_write(s->vt, "\x18", 1);
        s->vt_esc = 0;

        for (k = esc + 1; k < i; k++) {
            if (p[k] < 0x20) {
                ngx_pty_vt_write(s, p + k, 1);
            }
        }

    } else {
        /* begun in an earlier piece, which libvterm read: cancel it there */
        ngx_pty_flush(s, p, start, i);
        vterm_input_write(s->vt, "\x18", 1);
        s->vt_esc = 0;
    }

    *start = i + 1;
}


/*
 * An SGR sequence the fast path did not take (in origin mode, with line
 * attributes, long, or with controls in it), ending at p[i] and starting
 * at p[esc]: the model applies it as xterm.js does, libvterm does not see
 * it (its pen is caught up later), only the controls in it, which act
 * where they are.
 */
static void
ngx_pty_sgr(ngx_pty_screen_t *s, const u_char *p, size_t *start, size_t i,
    size_t esc)
{
    ngx_pty_csi_skip(s, p, start, i, esc);

    (void) ngx_pty_fast_sgr(s, s->args, s->argi < NGX_PTY_CSI_ARGS
                                        ? s->argi : NGX_PTY_CSI_ARGS);
}


/* DECSTBM and DECSLRM, bounded as libvterm bounds them */
static void
ngx_pty_margins(ngx_pty_screen_t *s, int *lo, int *hi, unsigned size,
    int vertical)
{
    long  a, b;

    a = NGX_PTY_ARG_OR(s->args[0], 1) - 1;
    b = (s->argi < 2 || NGX_PTY_ARG(s->args[1]) == NGX_PTY_ARG_MISSING)
        ? -1 : (long) NGX_PTY_ARG(s->args[1]);

    a = a < 0 ? 0 : (a > (long) size ? (long) size : a);
    b = b < -1 ? -1 : b;

    if (a == 0 && b == (long) size) {
        b = -1;
    } else if (b > (long) size) {
        b = size;
    }

    /* DECSTBM checks the effective bottom, DECSLRM only an explicit right */
    if ((vertical && (b == -1 ? (long) size : b) <= a) || (b > -1 && b <= a)) {
        a = 0;
        b = -1;
    }

    *lo = (int) a;
    *hi = (int) b;
}


/* whether DECSTBM's parameters leave no region, as xterm.js reads them */
static int
ngx_pty_region_void(ngx_pty_screen_t *s)
{
    unsigned long  top, bottom;

    top = NGX_PTY_ARG(s->args[0]);
    top = (top == NGX_PTY_ARG_MISSING || top == 0) ? 1 : top;
    bottom = (s->argi < 2) ? 0 : NGX_PTY_ARG(s->args[1]);
    bottom = (bottom == NGX_PTY_ARG_MISSING || bottom == 0 || bottom > s->rows)
             ? s->rows : bottom;

    return bottom <= top;
}


static void
ngx_pty_csi(ngx_pty_screen_t *s, const u_char *p, size_t *start, size_t i,
    u_char c, size_t esc)
{
    u_char          leader, inter;
    long            v, end;
    unsigned        again;
    VTermPos        pos, from;
    ngx_pty_row_t  *line;
    ngx_pty_rbuf_t  rb;

    leader = s->leaderlen ? s->leader : 0;
    inter = s->intermedlen ? s->intermed : 0;

    /* what libvterm's on_csi() refuses has no effect at all */
    if (s->leaderlen > 1 || s->intermedlen > 1
        || (leader && leader != '?' && leader != '>'))
    {
        return;
    }

    if (inter == '"' && c == 'q' && !leader) {
        v = NGX_PTY_ARG_OR(s->args[0], 0);

        if ((s->vt_dirty & NGX_PTY_VT_PROTECT)
            && esc != NGX_PTY_NO_ESC && esc >= *start)
        {
            /* the text before takes what an SGR 0 left, in libvterm too */
            ngx_pty_flush(s, p, start, esc);
        }

        if (v == 0 || v == 2) {
            s->protect = 0;
        } else if (v == 1) {
            s->protect = 1;
        }

        return;
    }

    if (inter == '!' && c == 'p' && !leader) {
        ngx_pty_feed_final(s, p, start, i);
        ngx_pty_decstr(s);
        return;
    }

    if (inter == ' ' && c == 'q' && !leader) {
        /* DECSCUSR: restored only when set (the embedder's style else) */
        v = NGX_PTY_ARG_OR(s->args[0], 0);

        if (v <= 6) {
            ngx_pty_props_style(&s->props, (int) v);
            ngx_pty_props_style(&s->props_since, (int) v);
        }

        return;
    }

    if (inter || leader == '>') {
        return;
    }

    if (leader == '?') {
        if (c == 'h' || c == 'l') {
            ngx_pty_dec_mode(s, p, start, i, esc, c == 'h');

        } else if (c == 'J' || c == 'K') {
            ngx_pty_selective_erase(s, p, start, i, c, esc);
        }

        return;
    }

    switch (c) {

    case 'h':
    case 'l':
        v = NGX_PTY_ARG(s->args[0]);

        if ((v == 4 || v == 20) && esc != NGX_PTY_NO_ESC && esc >= *start) {
            /* libvterm's callbacks read these: it prints what came first */
            ngx_pty_flush(s, p, start, esc);
        }

        if (v == 4) {
            s->insert = (c == 'h');
        } else if (v == 20) {
            s->newline = (c == 'h');
        }

        break;

    case 'm':
        ngx_pty_sgr(s, p, start, i, esc);
        break;

    case 'r':
        if (ngx_pty_region_void(s)) {
            /* xterm.js ignores a region it cannot set, libvterm resets it */
            s->diverged++;
            ngx_pty_csi_skip(s, p, start, i, esc);
            break;
        }

        /*
         * DECSTBM homes the cursor: one row down to column 0 is no line
         * feed (it would clear that row's wrap mark)
         */
        ngx_pty_flush(s, p, start, i);
        ngx_pty_margins(s, &s->top, &s->bottom, s->rows, 1);
        ngx_pty_feed_final_no_lf(s, p, start, i);
        break;

    case 'K':
    case 'J':
        v = NGX_PTY_ARG(s->args[0]);
        v = (v == NGX_PTY_ARG_MISSING) ? 0 : v;

        /*
         * the text before: it may have moved the cursor, or put it past
         * the edge (erase_wraps() reads both)
         */
        ngx_pty_flush(s, p, start, i);

        if (s->phantom && v <= 1) {
            /*
             * xterm.js has the cursor past the edge: nothing to erase right
             * of it (ED 0: the rows below), to it the last column too
             * (libvterm's is on a wide glyph's first column); as the fast
             * path erases (in origin mode, which it leaves to this one)
             */
            ngx_pty_csi_skip(s, p, start, i, esc);
            ngx_pty_fast_erase(s, c, v, 0);
            break;
        }

        if (c == 'J' && s->tails) {
            ngx_pty_tails_erase(s, v, 0);
        }

        if (c == 'J' && v == 3 && !s->alt) {
            /* xterm.js drops its scrollback; its saved row stays a line */
            s->saved_pos[0].row += s->grid[0].sb_len + s->sb_lost;
            ngx_pty_sb_clear(s);

        } else if (c == 'J' && v == 3) {
            /* and the alternate buffer's lines above the screen */
            s->saved_pos[1].row += s->grid[1].sb_len;
            s->grid[1].sb_len = 0;
            s->grid[1].sb_head = 0;
        }

        ngx_pty_erase_wraps(s, c, v, 0);
        /* xterm.js's ED and EL keep the cursor at most one past the edge */
        s->past = 0;
        break;

    case 'T':
        /* xterm.js fills the lines SD brings in with the default pen */
        ngx_pty_feed_final(s, p, start, i);
        v = NGX_PTY_ARG_OR(s->args[0], 1);
        end = (s->bottom < 0 ? (long) s->rows : s->bottom) - s->top;
        v = (v < 1) ? 1 : (v > end ? end : v);

        for (end = s->top; end < s->top + v; end++) {
            s->cur->rows[end]->fill.bg = s->default_pen.bg;
        }

        break;

    case 'S':
        ngx_pty_feed_final_no_sb(s, p, start, i);
        break;

    case 'L':
    case 'M':
        ngx_pty_feed_final_no_sb(s, p, start, i);

        /*
         * xterm.js: IL and DL in the scroll region go to the first column;
         * outside it they end a pending wrap all the same
         */
        pos = ngx_pty_cursor(s);
        end = (s->bottom < 0) ? (long) s->rows : s->bottom;

        if (pos.row >= s->top && pos.row < end && (pos.col || s->phantom)) {
            pos.col = 0;
            ngx_pty_vt_cup(s, pos);
            s->phantom = 0;

        } else if (s->phantom) {
            ngx_pty_vt_to_edge(s);
        }

        break;

    case 'I':
    case 'Z':
        ngx_pty_flush(s, p, start, i);

        if (s->phantom) {
            /* xterm.js moves to no tab stop from past the edge */
            s->diverged++;
            ngx_pty_csi_skip(s, p, start, i, esc);
        }

        break;

    case 'X':
    case '@':
    case 'P':
        /* the text before it first: it may have put the cursor past the edge */
        ngx_pty_flush(s, p, start, i);
        line = s->tails ? ngx_pty_tail_line(s, s->cur->rows[
                                                ngx_pty_cursor(s).row], &rb)
                        : NULL;
        v = NGX_PTY_ARG_OR(s->args[0], 1);

        if (c != 'P' && !ngx_pty_past_wide(s)) {
            ngx_pty_edit_cut(s, c, v);
        }

        if (c != 'X' && ngx_pty_shift_outside(s, p, start, i, esc, c)) {
            /* done, outside the scroll region, as xterm.js does it */

        } else if (ngx_pty_past_wide(s)) {
            /* the glyph's left half becomes a blank, as in xterm.js */
            ngx_pty_csi_from_edge(s, p, start, i, esc, c);
            ngx_pty_dch_ends(s);

        } else if (s->phantom) {
            /* xterm.js puts the cursor back on the edge first */
            ngx_pty_feed_final(s, p, start, i);
            ngx_pty_end_wrap(s);

        } else if (c == '@') {
            ngx_pty_feed_final(s, p, start, i);

        } else if (c == 'P') {
            ngx_pty_dch_halves(s, p, start, i);
        }

        if (c == '@') {
            ngx_pty_ich_edge(s);
        }

        if (line != NULL) {
            /* past the edge too (the alternate buffer after a narrowing) */
            if (*start <= i) {
                ngx_pty_feed_final(s, p, start, i);
            }

            ngx_pty_tail_shift(s, &rb, line, c, v);
        }

        break;

    case 'g':
        v = NGX_PTY_ARG(s->args[0]);

        if (v == 3) {
            ngx_pty_tab_set(s, -1, 0);

        } else if (v == 0 || v == NGX_PTY_ARG_MISSING) {
            ngx_pty_flush(s, p, start, i);
            ngx_pty_tab_set(s, ngx_pty_xterm_col(s), 0);
        }

        break;

    case 's':
    case 'u':
        if (leader) {
            break;
        }

        /*
         * SCOSC, SCORC: xterm.js has no left and right margins, so CSI s
         * saves the cursor (libvterm sets margins and homes the cursor)
         */
        ngx_pty_flush(s, p, start, i);

        if (c == 's') {
            ngx_pty_save_cursor(s);
        } else {
            ngx_pty_restore_cursor(s, s->visible, &s->pen);
        }

        s->diverged++;
        ngx_pty_csi_skip(s, p, start, i, esc);
        break;

    case 'b':
        /*
         * REP: xterm.js prints the glyph printed just before again, as
         * text (wrapping, in insert mode too); libvterm 0.1.4 repeats it
         * to the end of the row at most, also after other sequences
         */
        ngx_pty_csi_skip(s, p, start, i, esc);
        s->diverged++;

        if (s->esc_glyph && !leader && !inter) {
            ngx_pty_rep(s, NGX_PTY_ARG_OR(s->args[0], 1));
        }

        break;

    case 'A': case 'B': case 'C': case 'D': case 'E': case 'F': case 'G':
    case 'H': case '`': case 'a': case 'd': case 'e': case 'f': case 'j':
    case 'k':
        /*
         * these cancel a pending wrap even when the cursor does not move;
         * any glyph that set one is in the bytes before, so feed through
         * the final byte and clear it; a move down is no line feed, which
         * alone starts a line in xterm.js
         */
        ngx_pty_flush(s, p, start, i);

        if ((c == 'D' || c == 'j') && ngx_pty_past_wide(s)) {
            ngx_pty_csi_from_edge(s, p, start, i, esc, c);
            break;
        }

        again = (!leader && !inter && ngx_pty_past_wide(s)
                 && memchr("ABCadek", c, 7) != NULL);

        if (again) {
            /* xterm.js moves from the last column, not the glyph's left */
            ngx_pty_csi_to_edge(s, p, start, i, esc);
        }

        pos = ngx_pty_cursor(s);
        from = pos;
        s->no_lf = 1;

        if (again) {
            ngx_pty_vt_csi_again(s, c);

        } else {
            ngx_pty_flush(s, p, start, i + 1);
        }

        if (s->origin && s->top > 0 && memchr("ABCDEFG`ae", c, 10) != NULL) {
            /* xterm.js: down by the top margin too (docs/SNAPSHOT.md) */
            v = NGX_PTY_ARG_OR(s->args[0], 1);
            pos = ngx_pty_origin_move(s, c, from, v);
            s->diverged++;
            ngx_pty_vt_cup(s, pos);

        } else if (c == 'A' || c == 'B' || c == 'E' || c == 'F') {
            v = NGX_PTY_ARG_OR(s->args[0], 1);
            v = (v < 1) ? 1 : (v > (long) s->rows ? (long) s->rows : v);
            end = ngx_pty_margin_stop(s, c, pos.row, v);
            pos = ngx_pty_cursor(s);

            if (pos.row != end) {
                /* libvterm does not stop at the margins, xterm.js does */
                s->diverged++;
                pos.row = (int) end;
                ngx_pty_vt_cup(s, pos);
            }
        }

        s->no_lf = 0;
        s->phantom = 0;

        break;
    }
}


static void
ngx_pty_esc(ngx_pty_screen_t *s, const u_char *p, size_t *start, size_t i,
    size_t esc, u_char c)
{
    unsigned       k, visible;
    VTermPos       home;
    ngx_pty_pen_t  pen;

    if (s->intermedlen == 1 && s->intermed == '#' && c >= '3' && c <= '6') {
        /* DECDHL, DECSWL, DECDWL: xterm.js has no line attributes */
        s->diverged++;
        ngx_pty_csi_skip(s, p, start, i, esc);
        return;
    }

    if (s->intermedlen == 1 && s->intermed == '#' && c == '8') {
        /*
         * DECALN writes every cell (the tails too); xterm.js then homes
         * the cursor (to the region's top in origin mode), libvterm keeps
         * it where it was.  xterm.js fills as many lines as the screen
         * has from the cursor's row after it homed it, so in origin mode
         * the rows above the region stay; not on the alternate screen,
         * whose line list is as long as the screen: the lines past its
         * end it reads from its start, circular.
         */
        ngx_pty_flush(s, p, start, i);
        s->untracked = 1;
        s->align_top = (s->origin && !s->alt) ? s->top : 0;
        ngx_pty_feed_final(s, p, start, i);
        s->untracked = 0;

        if (s->tails) {
            ngx_pty_tails_align(s);
        }

        s->align_top = 0;
        home.row = s->origin ? s->top : 0;
        home.col = 0;
        s->diverged++;
        ngx_pty_vt_cup(s, home);
        s->vt_next = home;      /* no wrap got the next glyph there */
        s->phantom = 0;
        s->edge = 0;
        return;
    }

    if (s->intermedlen == 1 && s->intermed >= '(' && s->intermed <= '+') {
        /*
         * SCS: anything but ASCII may change what the text fast path
         * sees.  ASCII gives the set libvterm's US-ASCII decoder, which
         * reads ASCII as the UTF-8 one does and keeps no state: nothing
         * the fast path could skip past.
         */
        k = s->intermed - '(';
        s->charset[k] = (c != 'B');

        if (s->ov && k == s->ov_g) {
            s->ov = 0;              /* GL draws its designation again */
            s->ov_shift = 0;
        }

        /* the sets libvterm knows: DEC graphics, UK, ASCII */
        if (c == '0' || c == 'A' || c == 'B') {
            s->scs[k] = (c == 'B') ? 0 : c;
        }

        if (c == 'B') {
            s->ascii |= 1 << k;

        } else {
            s->ascii &= ~(1 << k);
            s->vt_text = 1;
        }

        return;
    }

    if (s->intermedlen) {
        return;
    }

    switch (c) {

    case 'n':
    case 'o':
        ngx_pty_shift(s, p, start, i, (c == 'n') ? 2 : 3);
        break;

    case '7':
        ngx_pty_feed_final(s, p, start, i);
        ngx_pty_save_cursor(s);
        break;

    case '8':
        /* the visibility a DECRC leaves: the one after the bytes before */
        ngx_pty_flush(s, p, start, i);
        visible = s->visible;
        pen = s->pen;
        ngx_pty_feed_final_no_lf(s, p, start, i);
        ngx_pty_restore_cursor(s, visible, &pen);
        break;

    case '=':
        s->keypad = 1;
        break;

    case '>':
        s->keypad = 0;
        break;

    case 'c':
        ngx_pty_feed_final(s, p, start, i);
        ngx_pty_hard_reset(s);
        break;
    }
}


/* drop a byte of a CSI sequence libvterm must not see */
static void
ngx_pty_drop(ngx_pty_screen_t *s, const u_char *p, size_t *start, size_t i)
{
    ngx_pty_flush(s, p, start, i);
    *start = i + 1;
}


/* libvterm's linefeed(): scroll at the region's bottom, else move down */
static void
ngx_pty_fast_lf(ngx_pty_screen_t *s, int *row)
{
    int        bottom;
    VTermRect  rect;

    bottom = s->bottom < 0 ? (int) s->rows : s->bottom;

    if (*row == bottom - 1 && bottom - s->top > 1) {
        /* what ngx_pty_cb_scrollrect() does for it, minus the checks */
        ngx_pty_scroll_rows(s, s->cur, s->top, bottom, 1);

    } else if (*row == bottom - 1) {
        rect.start_row = s->top;
        rect.end_row = bottom;
        rect.start_col = 0;
        rect.end_col = s->cols;
        ngx_pty_cb_scrollrect(rect, 1, 0, s);

    } else if (*row < (int) s->rows - 1) {
        (*row)++;
    }
}


/* the two 8-byte words of a cell of glyph c in the pen fast text writes */
typedef struct {
    uint64_t  w0;
    uint64_t  w1;
    uint64_t  w2;
    uint64_t  unit;
} ngx_pty_tmpl_t;


static void
ngx_pty_tmpl_init(ngx_pty_screen_t *s, ngx_pty_tmpl_t *t)
{
    ngx_pty_cell_t  tmpl;

    memset(&tmpl, 0, sizeof(ngx_pty_cell_t));
    tmpl.ch = 1;
    tmpl.width = 1;
    tmpl.pen = s->pen;
    tmpl.pen.attr &= ~NGX_PTY_A_PROTECT;
    tmpl.pen.attr |= s->protect ? NGX_PTY_A_PROTECT : 0;

    memcpy(&t->unit, &tmpl, 8);
    tmpl.ch = 0;
    memcpy(&t->w0, &tmpl, 8);
    memcpy(&t->w1, (u_char *) &tmpl + 8, 8);
    memcpy(&t->w2, (u_char *) &tmpl + 16, 8);
    t->unit -= t->w0;   /* what ch = 1 adds to the first word, either endian */
}


/*
 * p[j..k) into row "row" from column "col" on (they fit): three 8-byte
 * stores a cell, as gcc assembles a template struct field by field each
 * time, and the load stalls on that store
 */
static void
ngx_pty_fast_store(ngx_pty_screen_t *s, const ngx_pty_tmpl_t *t,
    const u_char *p, size_t j, size_t k, int row, int col)
{
    uint64_t         v, w0, w1, w2, unit;
    ngx_pty_row_t   *line;
    ngx_pty_cell_t  *cell;

    /* in registers: the stores below could alias *t */
    w0 = t->w0;
    w1 = t->w1;
    w2 = t->w2;
    unit = t->unit;

    /* blanks before the glyphs only: a recycled row is all past its len */
    line = s->cur->rows[row];
    ngx_pty_row_materialize(line, col);
    cell = &line->cells[col];
    col += k - j;

    for ( /* void */ ; j < k; j++, cell++) {
        v = w0 + unit * p[j];
        memcpy(cell, &v, 8);
        memcpy((u_char *) cell + 8, &w1, 8);
        memcpy((u_char *) cell + 16, &w2, 8);
    }

    if (line->len < (unsigned) col) {
        line->len = col;
    }
}


/* whether the 8 bytes at p are all printable ASCII (0x20..0x7e) */
static int
ngx_pty_printable8(const u_char *p)
{
    uint64_t  w;

    memcpy(&w, p, 8);

    /*
     * bit 7 of a byte is set in w for 0x80.., in w - 0x20 (first) for a
     * byte below 0x20, in w + 1 for 0x7f; without those, no byte borrows
     * or carries into the next
     */
    return ((w | (w - 0x2020202020202020ULL) | (w + 0x0101010101010101ULL))
            & 0x8080808080808080ULL) == 0;
}


/*
 * How far printable ASCII, CR, LF, VT and FF go from p[i]: *last is the
 * last printable byte (n if none), *ctl whether controls are among them
 */
static size_t
ngx_pty_fast_run(const u_char *p, size_t i, size_t n, size_t *last,
    unsigned *ctl)
{
    u_char    c;
    size_t    e, l;
    unsigned  k;

    /* in locals: the bytes read could alias *last and *ctl */
    l = n;
    k = 0;

    for (e = i; e < n; e++) {
        while (n - e >= 8 && ngx_pty_printable8(p + e)) {
            e += 8;
            l = e - 1;
        }

        if (e == n) {
            break;
        }

        c = p[e];

        if (c >= 0x20 && c < 0x7f) {
            l = e;

        } else if (c >= 0x0a && c <= 0x0d) {
            k = 1;

        } else {
            break;
        }
    }

    *last = l;
    *ctl = k;

    return e;
}


/*
 * libvterm decodes a text chunk with the decoder its first byte chooses,
 * and keeps a broken sequence in that one: before UTF-8, the glyphs of a
 * run since its last CR or LF stay in one piece with what follows.
 * Returns where the run p[i..) ending in the glyph at *last must end
 * then (i: nothing is left), with *last its last glyph (n if none).
 */
static size_t
ngx_pty_fast_cut(const u_char *p, size_t i, size_t n, size_t *last)
{
    size_t  e, k;

    for (e = *last; e > i && p[e - 1] >= 0x20; e--) {
        /* void */
    }

    if (e == i) {
        return i;
    }

    for (k = e; k > i && p[k - 1] < 0x20; k--) {
        /* void */
    }

    *last = (k > i) ? k - 1 : n;

    return e;
}


/* the cursor fast text moves, and its pending wrap */
typedef struct {
    int       row;
    int       col;
    unsigned  ph;
} ngx_pty_fast_pos_t;


/* CR, or LF, VT, FF: libvterm's on_control() in the plain case */
static void
ngx_pty_fast_ctl(ngx_pty_screen_t *s, u_char c, ngx_pty_fast_pos_t *pos)
{
    int  row;

    if (c == '\r') {
        /* a pending wrap ends also where the glyph began in column 0 */
        pos->col = 0;
        pos->ph = 0;
        return;
    }

    row = pos->row;
    ngx_pty_fast_lf(s, &pos->row);

    if (pos->row == row && pos->ph) {
        /* xterm.js ends a pending wrap where a line feed scrolls, libvterm not */
        s->diverged++;
    }

    pos->ph = 0;

    if (pos->row != row) {
        /* a line feed: xterm.js takes the row as a line of its own */
        s->cur->rows[pos->row]->wrapped = 0;
    }
}


/* a pending wrap, taken by the next glyph */
static void
ngx_pty_fast_wrap(ngx_pty_screen_t *s, ngx_pty_fast_pos_t *pos)
{
    if (pos->ph && s->autowrap) {
        ngx_pty_fast_lf(s, &pos->row);
        s->cur->rows[pos->row]->wrapped = 1;
        pos->col = 0;
        pos->ph = 0;
    }
}


/*
 * The glyphs and controls of p[j..end) into the grid, the glyphs up to
 * the end of a row at once (ctl: controls may cut them short)
 */
static void
ngx_pty_fast_glyphs(ngx_pty_screen_t *s, const ngx_pty_tmpl_t *t,
    const u_char *p, size_t j, size_t end, unsigned ctl,
    ngx_pty_fast_pos_t *pos)
{
    size_t    k, x;
    unsigned  wide;

    /* a local: the stores into the grid could alias the flag */
    wide = s->wide;

    for ( /* void */ ; j < end; j++) {
        if (p[j] < 0x20) {
            ngx_pty_fast_ctl(s, p[j], pos);
            continue;
        }

        ngx_pty_fast_wrap(s, pos);

        k = (end - j < s->cols - pos->col) ? end : j + (s->cols - pos->col);

        if (ctl) {
            for (x = j + 1; x < k && p[x] >= 0x20 && p[x] < 0x7f; x++) {
                /* void */
            }

            k = x;
        }

        ngx_pty_fast_store(s, t, p, j, k, pos->row, pos->col);

        if (wide) {
            ngx_pty_print_halves(s, s->cur->rows[pos->row], pos->col,
                                 pos->col + (k - j), s->protect);
        }

        pos->col += k - j;
        j = k - 1;

        if ((unsigned) pos->col >= s->cols) {
            pos->col = s->cols - 1;
            pos->ph = 1;
        }
    }
}


/*
 * The last glyph p[last], then the controls up to p[e]: the glyph is
 * what libvterm's putglyph would leave behind for combining marks, REP
 * and the wrap, which ngx_pty_vt_sync() gives libvterm later
 */
static void
ngx_pty_fast_last(ngx_pty_screen_t *s, const ngx_pty_tmpl_t *t,
    const u_char *p, size_t last, size_t e, ngx_pty_fast_pos_t *pos)
{
    size_t  j;

    ngx_pty_fast_wrap(s, pos);
    ngx_pty_fast_store(s, t, p, last, last + 1, pos->row, pos->col);

    if (s->wide) {
        ngx_pty_print_halves(s, s->cur->rows[pos->row], pos->col,
                             pos->col + 1, s->protect);
    }

    /* what ngx_pty_cb_putglyph() keeps of it */
    s->vt_glyph = p[last];
    s->edge_pos.row = pos->row;
    s->edge_pos.col = pos->col;
    s->vt_dirty |= NGX_PTY_VT_GLYPH;
    s->combine_w = 1;
    s->comb_own = 0;
    s->edge = ((unsigned) pos->col + 1 >= s->cols);
    s->ph_pos = s->edge_pos;

    if (s->edge) {
        pos->ph = 1;
    } else {
        pos->col++;
    }

    for (j = last + 1; j < e; j++) {
        ngx_pty_fast_ctl(s, p[j], pos);
    }

    s->phantom = pos->ph;
    s->past = 0;
}


/*
 * Printable ASCII, CR and LF from p[i] on, in the ground state.  libvterm
 * costs a decode, two table walks and a callback per glyph, and a state
 * update per control; here they go straight into the grid, doing what
 * libvterm's on_text() and on_control() do in the plain case (no insert,
 * origin, newline or left/right margin mode, no line attributes, GL
 * ASCII, no pending wrap on entry).  libvterm is left behind (vt_dirty):
 * ngx_pty_vt_sync() gives it the last glyph (and so a pending wrap) and
 * the cursor later.  Returns where the stretch ends.
 */
static size_t
ngx_pty_fast_text(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t n)
{
    size_t              e, last, stop;
    unsigned            ctl;
    VTermPos            cur;
    ngx_pty_tmpl_t      t;
    ngx_pty_fast_pos_t  pos;

    e = ngx_pty_fast_run(p, i, n, &last, &ctl);

    /*
     * a few bytes cost libvterm less than catching it up after them, but
     * for line feeds, which may find a wrap pending (ngx_pty_edge_lf)
     */
    if (e - i < NGX_PTY_FAST_MIN && s->vt_dirty == 0) {
        if (!ctl) {
            return e;
        }

        ngx_pty_flush(s, p, start, i);

        if (!s->phantom && ngx_pty_cursor(s).col + (e - i) < s->cols) {
            return e;
        }
    }

    stop = e;

    if (last + 1 == e && e < n && p[e] >= 0x80) {
        e = ngx_pty_fast_cut(p, i, n, &last);

        if (e == i) {
            return stop;
        }
    }

    if (*start < i) {
        /* libvterm may set these only now, on the bytes before */
        ngx_pty_flush(s, p, start, i);
    }

    if (s->phantom) {
        /* libvterm takes the pending wrap (or the line feed, above) */
        if (p[i] < 0x0a || p[i] > 0x0d || !ngx_pty_edge_lf(s, p, start, i)) {
            ngx_pty_flush(s, p, start, i + 1);
        }

        return i + 1;
    }

    cur = ngx_pty_cursor(s);
    pos.row = cur.row;
    pos.col = cur.col;
    pos.ph = 0;

    ngx_pty_tmpl_init(s, &t);
    ngx_pty_fast_glyphs(s, &t, p, i, last < e ? last : e, ctl, &pos);

    if (last < e) {
        ngx_pty_fast_last(s, &t, p, last, e, &pos);
    }

    s->vt_cur.row = pos.row;
    s->vt_cur.col = pos.col;
    s->vt_dirty |= NGX_PTY_VT_POS;
    *start = e;

    return stop;
}


/*
 * A code point of a range libvterm 0.1.4 prints two columns wide and
 * nobody combines: kana, CJK ideographs, Hangul syllables, the common
 * emoji (t/unit/screen_test.c checks each against libvterm and the model's
 * combining table)
 */
static ngx_inline unsigned
ngx_pty_wide_cp(uint32_t c)
{
    if (c < 0x10000) {
        return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xac00 && c <= 0xd7a3)
               || (c >= 0x3400 && c <= 0x4dbf)
               || (c >= 0x3041 && c <= 0x3096)
               || (c >= 0x30a1 && c <= 0x30fa);
    }

    return (c >= 0x1f600 && c <= 0x1f64f) || (c >= 0x1f300 && c <= 0x1f320)
           || (c >= 0x1f337 && c <= 0x1f37c) || (c >= 0x1f37e && c <= 0x1f393)
           || (c >= 0x1f3a0 && c <= 0x1f3ca) || (c >= 0x1f3e0 && c <= 0x1f3f0)
           || (c >= 0x1f400 && c <= 0x1f43e) || (c >= 0x1f442 && c <= 0x1f4fc)
           || (c >= 0x1f680 && c <= 0x1f6c5);
}


/* the length of such a glyph at p[i], a whole UTF-8 character; else 0 */
static ngx_inline unsigned
ngx_pty_wide_len(const u_char *p, size_t i, size_t n, uint32_t *cp)
{
    uint32_t  c;

    if (p[i] >= 0xe3 && p[i] <= 0xed) {
        if (n - i < 3 || (p[i + 1] & 0xc0) != 0x80
            || (p[i + 2] & 0xc0) != 0x80)
        {
            return 0;
        }

        c = ((uint32_t) (p[i] & 0x0f) << 12)
            | ((uint32_t) (p[i + 1] & 0x3f) << 6) | (p[i + 2] & 0x3f);
        *cp = c;

        return ngx_pty_wide_cp(c) ? 3 : 0;
    }

    if (p[i] != 0xf0 || n - i < 4 || p[i + 1] != 0x9f
        || (p[i + 2] & 0xc0) != 0x80 || (p[i + 3] & 0xc0) != 0x80)
    {
        return 0;
    }

    c = 0x1f000 | ((uint32_t) (p[i + 2] & 0x3f) << 6) | (p[i + 3] & 0x3f);
    *cp = c;

    return ngx_pty_wide_cp(c) ? 4 : 0;
}


/* a glyph of width w at the cursor, as ngx_pty_cb_putglyph() writes it */
static ngx_inline void
ngx_pty_fast_put(ngx_pty_screen_t *s, ngx_pty_row_t *row, unsigned col,
    const ngx_pty_cell_t *cell)
{
    ngx_pty_cell_t  *c;

    /* blanks before the glyph only: a recycled row is all past its len */
    ngx_pty_row_materialize(row, col);
    c = &row->cells[col];
    *c = *cell;

    if (cell->width == 1) {
        row->len += (row->len == col);
        return;
    }

    if (row->len <= col + 1) {
        row->len = col + 2;
    }

    /* the right half in the glyph's pen, as xterm.js writes it */
    c[1].ch = NGX_PTY_CONT;
    c[1].ncomb = 0;
    c[1].width = 1;
    c[1].pen = cell->pen;
    s->wide = 1;
}


/*
 * Whether p[i] starts a run of glyphs that xterm.js's parser hands its
 * print() at once: the input's first, or after an escape sequence (which
 * ended at normal) or a control (C0, DEL, C1)
 */
static ngx_inline int
ngx_pty_run_start(const u_char *p, size_t i, size_t normal)
{
    return i == 0 || i == normal || p[i - 1] < 0x20 || p[i - 1] == 0x7f
           || (i >= 2 && p[i - 2] == 0xc2 && p[i - 1] < 0xa0);
}


/*
 * A wide glyph (ngx_pty_wide_len()) at p[i] with autowrap off and the
 * cursor in the last column or past it: xterm.js drops it and leaves the
 * cursor in that column; libvterm 0.1.4 wraps it all the same (its wrap
 * looks at the width only).  One that ends in the last column is printed
 * at once.  Returns its length if it was dropped or printed, else 0.
 */
static size_t
ngx_pty_wide_dropped(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t n, size_t normal)
{
    size_t           len;
    uint32_t         cp;
    unsigned         x, col;
    VTermPos         pos;
    ngx_pty_pen_t    pen;
    ngx_pty_row_t   *row;

    len = ngx_pty_wide_len(p, i, n, &cp);

    if (len == 0) {
        return 0;
    }

    ngx_pty_flush(s, p, start, i);

    if (!s->phantom && (unsigned) ngx_pty_cursor(s).col + 1 < s->cols) {
        if ((unsigned) ngx_pty_cursor(s).col + 2 == s->cols) {
            /*
             * it ends at the edge: printed now, so that the glyph after
             * it sees the cursor past the edge (ngx_pty_edge_glyph())
             */
            ngx_pty_flush(s, p, start, i + len);
            return len;
        }

        return 0;
    }

    /*
     * the cursor in the last column, not waiting to wrap (libvterm's
     * stays on a wide glyph printed at the edge)
     */
    pos = ngx_pty_cursor(s);
    x = (unsigned) ngx_pty_xterm_col(s);

    if ((unsigned) pos.col != s->cols - 1) {
        pos.col = s->cols - 1;
        ngx_pty_vt_cup(s, pos);
    }

    s->phantom = 0;
    s->edge = 0;        /* the last glyph is the one dropped: no absorb */
    s->diverged++;
    *start = i + len;

    row = s->cur->rows[pos.row];

    if (ngx_pty_run_start(p, i, normal)) {
        /*
         * xterm.js's print() first blanks a cell two columns wide before
         * its cursor (also one a mark's join made so, no right half after
         * it), and a right half under it, in its pen
         */
        ngx_pty_print_halves(s, row, x, x, s->protect);
    }

    /*
     * a wide glyph's right half there: xterm.js's print() ends by
     * blanking the cell under the cursor in its pen, which cuts the
     * glyph: it keeps its width, a cell of its own after it
     * (ngx_pty_paint_cut())
     */
    col = s->cols - 1;

    if (col > 0 && col < row->len && row->cells[col].ch == NGX_PTY_CONT) {
        if (!ngx_pty_wide_cuttable(&row->cells[col - 1])) {
            /* a glyph no Keyframe could write cut */
            pen = row->cells[col - 1].pen;
            ngx_pty_cell_blank(s, &row->cells[col - 1], &pen);
        }

        ngx_pty_print_blank(s, &row->cells[col], s->protect);
    }

    return len;
}


/*
 * A glyph at p[i] after a wide glyph printed at the edge with autowrap
 * off: xterm.js's cursor is past the edge and the glyph goes to the last
 * column, over the right half; libvterm's stayed on the left half, and
 * would print there.  A mark joins the wide glyph in both; a wide glyph
 * is ngx_pty_wide_dropped()'s.
 */
static void
ngx_pty_edge_glyph(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t n)
{
    unsigned        len;
    uint32_t        cp;
    VTermPos        pos;
    ngx_pty_row_t  *row;

    ngx_pty_flush(s, p, start, i);

    if (!ngx_pty_past_wide(s)) {
        return;
    }

    pos = ngx_pty_cursor(s);
    row = s->cur->rows[pos.row];

    /*
     * (also where a scroll took the glyph off the row since: xterm.js's
     * cursor stays past the edge)
     */
    if ((unsigned) pos.col < row->len
        && ngx_pty_wide_left(&row->cells[pos.col])
        && !ngx_pty_wide_cuttable(&row->cells[pos.col]))
    {
        return;
    }

    if (p[i] >= 0x80) {
        len = ngx_pty_utf8_len(p[i]);

        if (len == 0 || n - i < len) {
            return;
        }

        cp = ngx_pty_utf8_cp(p + i, len);

        if (!ngx_pty_utf8_kept(cp, len) || ngx_pty_wide_cp(cp)
            || (cp >= 0x300 && ngx_pty_is_combining(cp)))
        {
            return;
        }
    }

    ngx_pty_vt_to_edge(s);

    /* still past the edge for ngx_pty_cb_putglyph(): the glyph is cut */
    s->phantom = 1;
    s->ph_pos = ngx_pty_cursor(s);
}


/*
 * A glyph libvterm may print two columns wide that the model does not
 * know (ngx_pty_wide_cp()), autowrap off: printed alone, so that a glyph
 * right after it sees the cursor past the edge when it ended there
 * (ngx_pty_edge_glyph()), as after one the model knows; one more than
 * needed costs a flush (ngx_pty_wide_range()).  Returns its length.
 */
static size_t
ngx_pty_rare_wide(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t n)
{
    unsigned  len, k;
    uint32_t  cp;

    len = ngx_pty_utf8_len(p[i]);

    if (len < 3 || n - i < len) {
        return 0;
    }

    for (k = 1; k < len; k++) {
        if ((p[i + k] & 0xc0) != 0x80) {
            return 0;       /* broken: libvterm's decoder has its own way */
        }
    }

    cp = ngx_pty_utf8_cp(p + i, len);

    if (!ngx_pty_utf8_kept(cp, len) || ngx_pty_wide_cp(cp)
        || ngx_pty_is_combining(cp) || !ngx_pty_wide_range(cp))
    {
        return 0;
    }

    ngx_pty_flush(s, p, start, i + len);

    return len;
}


/* the halves of wide glyphs a stretch of glyphs from..to left in a row */
static ngx_inline void
ngx_pty_fast_halves(ngx_pty_screen_t *s, int row, unsigned from, unsigned to)
{
    if (to > from) {
        ngx_pty_print_halves(s, s->cur->rows[row], from, to, s->protect);
    }
}


/*
 * Wide glyphs (ngx_pty_wide_len()) with printable ASCII, CR and LF among
 * them from p[i] on, in the ground state: libvterm costs a decode and a
 * callback per glyph, which here go straight into the grid as in
 * ngx_pty_fast_text().  Stops before anything else, and before a glyph
 * that would reach the last column (libvterm's path takes the wrap and
 * xterm.js's ways with it).  Returns where it stopped: i if at once.
 */
static size_t
ngx_pty_fast_wide(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t n)
{
    u_char              c;
    size_t              j, len;
    uint32_t            cp;
    unsigned            from;
    VTermPos            cur, glyph;
    ngx_pty_cell_t      cell, last;
    ngx_pty_fast_pos_t  pos;

    if (*start < i) {
        /* libvterm may set these only now, on the bytes before */
        ngx_pty_flush(s, p, start, i);
    }

    if (s->phantom) {
        return i;
    }

    cur = ngx_pty_cursor(s);
    pos.row = cur.row;
    pos.col = cur.col;
    pos.ph = 0;
    glyph.row = -1;
    glyph.col = 0;
    from = pos.col;

    memset(&cell, 0, sizeof(ngx_pty_cell_t));
    cell.pen = s->pen;
    cell.pen.attr &= ~NGX_PTY_A_PROTECT;
    cell.pen.attr |= s->protect ? NGX_PTY_A_PROTECT : 0;

    for (j = i; j < n; j += len) {
        c = p[j];

        if (c >= 0x20 && c < 0x7f) {
            cp = c;
            len = 1;

        } else if (c >= 0x0a && c <= 0x0d) {
            ngx_pty_fast_halves(s, pos.row, from, pos.col);
            ngx_pty_fast_ctl(s, c, &pos);
            from = pos.col;
            len = 1;
            continue;

        } else {
            len = ngx_pty_wide_len(p, j, n, &cp);

            if (len == 0) {
                break;
            }
        }

        cell.width = (len == 1) ? 1 : 2;

        if ((unsigned) pos.col + cell.width >= s->cols) {
            break;
        }

        cell.ch = cp;
        ngx_pty_fast_put(s, s->cur->rows[pos.row], pos.col, &cell);
        glyph.row = pos.row;
        glyph.col = pos.col;
        last = cell;
        pos.col += cell.width;
    }

    if (glyph.row < 0) {
        return i;
    }

    ngx_pty_fast_halves(s, pos.row, from, pos.col);

    /* what ngx_pty_cb_putglyph() keeps of the last glyph */
    s->vt_glyph = last.ch;
    s->combine_w = last.width;
    s->comb_own = 0;
    s->edge_pos = glyph;
    s->ph_pos = glyph;
    s->edge = 0;
    s->phantom = 0;
    s->vt_cur.row = pos.row;
    s->vt_cur.col = pos.col;
    s->vt_dirty |= NGX_PTY_VT_GLYPH | NGX_PTY_VT_POS;
    *start = j;

    return j;
}


/*
 * CSI parameters from p[j] on into args[*argi] and after, as libvterm's
 * parser reads them: digits, and ';' or ':' (the parameter before has
 * sub-parameters) between them.  Stops at any other byte, at a separator
 * that would make more than "max" parameters and at a parameter's digit
 * past "digits"; returns where, with *argi the parameter it is in.
 */
static ngx_inline size_t
ngx_pty_csi_params(unsigned long *args, int *argi, int max, size_t digits,
    const u_char *p, size_t j, size_t n)
{
    u_char         c;
    int            k;
    size_t         d;
    unsigned long  v;

    /* the parameter in a local: the bytes read could alias args[] */
    k = *argi;
    v = args[k];
    d = 0;

    for ( /* void */ ; j < n; j++) {
        c = p[j];

        if (c >= '0' && c <= '9') {
            if (++d > digits) {
                break;
            }

            v = (v == NGX_PTY_ARG_MISSING ? 0 : v) * 10 + (c - '0');
            continue;
        }

        if (c == ':') {
            v |= NGX_PTY_ARG_MORE;

        } else if (c != ';') {
            break;
        }

        if (k + 1 >= max) {
            break;
        }

        args[k++] = v;
        v = NGX_PTY_ARG_MISSING;
        d = 0;
    }

    args[k] = v;
    *argi = k;

    return j;
}


/*
 * The colour of SGR 38, 48 or 58 at args[k], as xterm.js's _extractColor()
 * reads it: "5;N", "2;R;G;B" or the same after colons (with a colour space
 * before R when there are five sub-parameters), what is missing taken as
 * 0.  Returns the index of the next parameter; *c is unchanged for a form
 * with another number than 2 or 5 after the first.
 */
static int
ngx_pty_sgr_color_arg(const unsigned long *args, int k, int argc,
    VTermColor *c)
{
    int            j, adv, cs, i;
    long           accu[6];
    unsigned long  v;

    accu[0] = 0;
    accu[1] = 0;
    accu[2] = -1;
    accu[3] = 0;
    accu[4] = 0;
    accu[5] = 0;
    cs = 0;

    for (adv = 0, j = k; /* void */ ; /* void */) {
        v = NGX_PTY_ARG(args[j]);
        accu[adv + cs] = (v == NGX_PTY_ARG_MISSING) ? 0 : (long) v;

        if (args[j] & NGX_PTY_ARG_MORE) {
            /* sub-parameters: the rest of the colour is in them */
            for (i = 0; j + 1 < argc; i++) {
                if (accu[1] == 5) {
                    cs = 1;
                }

                v = NGX_PTY_ARG(args[++j]);

                if (adv + i + 1 + cs < 6) {
                    accu[adv + i + 1 + cs] = (v == NGX_PTY_ARG_MISSING)
                                             ? -1 : (long) v;
                }

                if (!(args[j] & NGX_PTY_ARG_MORE)) {
                    break;
                }
            }

            break;
        }

        if ((accu[1] == 5 && adv + cs >= 2) || (accu[1] == 2 && adv + cs >= 5))
        {
            break;
        }

        if (accu[1]) {
            cs = 1;
        }

        if (j + 1 >= argc || ++adv + cs >= 6) {
            break;
        }

        j++;
    }

    for (i = 2; i < 6; i++) {
        accu[i] = (accu[i] == -1) ? 0 : accu[i];
    }

    if (accu[1] == 2) {
        vterm_color_rgb(c, accu[3] & 0xff, accu[4] & 0xff, accu[5] & 0xff);

    } else if (accu[1] == 5) {
        *c = ngx_pty_color_idx(accu[3] & 0xff, 1);
    }

    /* past the sub-parameters of the last parameter taken */
    while (j < argc && (args[j] & NGX_PTY_ARG_MORE)) {
        j++;
    }

    return j + 1;
}


/*
 * Whether libvterm 0.1.4 reads the colour of SGR 38 or 48 at args[k] as
 * xterm.js does: "5;N", "2;R;G;B" and "5:N", complete, each below 256
 */
static int
ngx_pty_sgr_color_same(const unsigned long *args, int k, int argc)
{
    int  j, n;

    n = (k + 1 < argc) ? (int) NGX_PTY_ARG(args[k + 1]) : 0;
    n = (n == 5) ? 1 : (n == 2 && !(args[k] & NGX_PTY_ARG_MORE)) ? 3 : 0;

    if (n == 0 || k + 1 + n >= argc) {
        return 0;
    }

    for (j = k + 2; j <= k + 1 + n; j++) {
        if (NGX_PTY_ARG(args[j]) > 255
            || ((args[j - 1] & NGX_PTY_ARG_MORE) != (args[k] & NGX_PTY_ARG_MORE)))
        {
            return 0;
        }
    }

    return !(args[k + 1 + n] & NGX_PTY_ARG_MORE);
}


/* the underline style of SGR 4 (with sub-parameter), 21 or 24 */
static void
ngx_pty_sgr_underline(ngx_pty_screen_t *s, ngx_pty_pen_t *pen,
    const unsigned long *args, int k, int argc)
{
    unsigned long  arg, ul, x;

    arg = NGX_PTY_ARG(args[k]);
    ul = (arg == 4) ? 1 : (arg == 21) ? 2 : 0;
    x = 0;

    if (arg == 4 && (args[k] & NGX_PTY_ARG_MORE) && k + 1 < argc) {
        /* 4:0 none, 4:1 single, 4:2 double, 4:3 curly, 4:4 dotted, 4:5 */
        ul = NGX_PTY_ARG(args[k + 1]);
        ul = (ul == NGX_PTY_ARG_MISSING) ? 0 : ul;

        if (ul == 4 || ul == 5) {
            x = ul - 3;
            ul = 1;

        } else if (ul > 5) {
            /* xterm.js keeps the style it had */
            s->diverged++;
            return;
        }
    }

    pen->attr = (pen->attr & ~NGX_PTY_A_UL) | (ul << NGX_PTY_A_UL_SHIFT);
    pen->xattr = (pen->xattr & ~NGX_PTY_X_UL) | (x << NGX_PTY_X_UL_SHIFT);
    ngx_pty_ul_plain(s);
}


/*
 * One SGR parameter at args[*argi] into pen, as xterm.js's
 * charAttributes() takes it (libvterm 0.1.4 differs on 2, 53, 55, 58,
 * 59, 4:4, 4:5, and on incomplete colours); *argi is then the next one
 */
static void
ngx_pty_fast_sgr_arg(ngx_pty_screen_t *s, ngx_pty_pen_t *pen,
    const unsigned long *args, int *argi, int argc)
{
    int            k;
    unsigned long  arg;
    VTermColor     c;

    k = *argi;
    arg = NGX_PTY_ARG(args[k]);

    switch (arg) {

    case NGX_PTY_ARG_MISSING:
    case 0:
        /* xterm.js's SGR 0 drops DECSCA too (libvterm's not) */
        ngx_pty_protect(s, 0);
        pen->attr &= ~NGX_PTY_A_SGR;
        pen->xattr = 0;
        ngx_pty_ul_plain(s);
        pen->fg = s->default_pen.fg;
        pen->bg = s->default_pen.bg;
        pen->ul = s->default_pen.ul;
        break;

    case 1:
        pen->attr |= NGX_PTY_A_BOLD;
        break;

    case 2:
        pen->xattr |= NGX_PTY_X_DIM;
        break;

    case 22:
        pen->attr &= ~NGX_PTY_A_BOLD;
        pen->xattr &= ~NGX_PTY_X_DIM;
        break;

    case 3: case 23:
        ngx_pty_pen_bit(pen, NGX_PTY_A_ITALIC, arg == 3);
        break;

    case 5: case 25:
        ngx_pty_pen_bit(pen, NGX_PTY_A_BLINK, arg == 5);
        break;

    case 7: case 27:
        ngx_pty_pen_bit(pen, NGX_PTY_A_REVERSE, arg == 7);
        break;

    case 8: case 28:
        ngx_pty_pen_bit(pen, NGX_PTY_A_CONCEAL, arg == 8);
        break;

    case 9: case 29:
        ngx_pty_pen_bit(pen, NGX_PTY_A_STRIKE, arg == 9);
        break;

    case 53: case 55:
        pen->xattr = (pen->xattr & ~NGX_PTY_X_OVERLINE)
                     | (arg == 53 ? NGX_PTY_X_OVERLINE : 0);
        break;

    case 4: case 21: case 24:
        ngx_pty_sgr_underline(s, pen, args, k, argc);
        break;

    case 38: case 48: case 58:
        if (arg != 58 && k + 2 < argc && NGX_PTY_ARG(args[k + 1]) == 5
            && NGX_PTY_ARG(args[k + 2]) < 256
            && !((args[k] | args[k + 1] | args[k + 2]) & NGX_PTY_ARG_MORE))
        {
            /* the common form, "5;N" */
            c = ngx_pty_color_idx(NGX_PTY_ARG(args[k + 2]), 1);
            *(arg == 38 ? &pen->fg : &pen->bg) = c;
            *argi = k + 3;
            return;
        }

        if (arg == 58 ? !(args[k] & NGX_PTY_ARG_MORE)
                      : !ngx_pty_sgr_color_same(args, k, argc))
        {
            s->diverged++;
        }

        c = (arg == 38) ? pen->fg : (arg == 48) ? pen->bg : pen->ul;
        *argi = ngx_pty_sgr_color_arg(args, k, argc, &c);

        if (arg == 38) {
            pen->fg = c;
        } else if (arg == 48) {
            pen->bg = c;
        } else {
            pen->ul = c;
        }

        return;

    case 39:
        pen->fg = s->default_pen.fg;
        break;

    case 49:
        pen->bg = s->default_pen.bg;
        break;

    case 59:
        /* xterm.js stores -1: it reads back, and draws, as RGB white */
        vterm_color_rgb(&pen->ul, 255, 255, 255);

        /* and looks at the style again: one a DECRC hid underlines */
        if (s->ul_hidden) {
            pen->attr |= s->ul_hidden;
            pen->xattr |= s->ul_hidden_x;
            s->ul_hidden = 0;
            s->ul_hidden_x = 0;
            s->ul_flagless = 1;     /* shown without the flag */
            s->diverged++;

        } else if (s->ul_flagless && !(pen->attr & NGX_PTY_A_UL)) {
            s->ul_flagless = 0;     /* no style: no extended mark */

        } else if (s->ul_styleless) {
            /*
             * the flag without the mark: its colour reads as the text's,
             * which the model has not (docs/SNAPSHOT.md); none is nearest
             */
            pen->ul = s->default_pen.ul;
            s->ul_styleless = 0;
        }

        break;

    default:
        if (arg >= 10 && arg <= 19) {
            pen->attr = (pen->attr & ~NGX_PTY_A_FONT)
                        | ((arg - 10) << NGX_PTY_A_FONT_SHIFT);

        } else if ((arg >= 30 && arg <= 37) || (arg >= 90 && arg <= 97)) {
            pen->fg = ngx_pty_color_idx(arg < 90 ? arg - 30 : arg - 90 + 8, 0);

        } else if ((arg >= 40 && arg <= 47) || (arg >= 100 && arg <= 107)) {
            pen->bg = ngx_pty_color_idx(arg < 100 ? arg - 40
                                               : arg - 100 + 8, 0);
        }

        /* anything else xterm.js ignores */
        break;
    }

    /* past any sub-parameters */
    while (k < argc && (args[k] & NGX_PTY_ARG_MORE)) {
        k++;
    }

    *argi = k + 1;
}


/* SGR, applied to the model's pen; libvterm's is caught up later */
static int
ngx_pty_fast_sgr(ngx_pty_screen_t *s, const unsigned long *args, int argc)
{
    int            argi;
    ngx_pty_pen_t  pen;

    pen = s->pen;

    for (argi = 0; argi < argc; /* void */) {
        ngx_pty_fast_sgr_arg(s, &pen, args, &argi, argc);
    }

    /* field by field: a whole copy stalls on the stores that made them */
    if (!(s->vt_dirty & NGX_PTY_VT_PEN)) {
        s->vt_pen.attr = s->pen.attr;
        s->vt_pen.fg = s->pen.fg;
        s->vt_pen.bg = s->pen.bg;
        s->vt_dirty |= NGX_PTY_VT_PEN;
    }

    s->pen.attr = pen.attr;
    s->pen.xattr = pen.xattr;
    s->pen.fg = pen.fg;
    s->pen.bg = pen.bg;
    s->pen.ul = pen.ul;

    return 1;
}


static void
ngx_pty_unwrap(ngx_pty_screen_t *s, int from, int to)
{
    for ( /* void */ ; from < to; from++) {
        if (from >= 0 && (unsigned) from < s->rows) {
            s->cur->rows[from]->wrapped = 0;
        }
    }
}


/*
 * The row after the cursor's, as ED 1 from the last column takes its wrap
 * mark in xterm.js: it counts that row from the top of its buffer, not of
 * the screen, so once lines have scrolled off it is a line of the
 * scrollback, row (screen row + 1) of all it holds
 */
static void
ngx_pty_unwrap_line(ngx_pty_screen_t *s, int row)
{
    unsigned         i, lost;
    ngx_pty_grid_t  *g;

    /* the alternate buffer holds all the lines above its screen */
    g = &s->grid[s->alt];
    lost = s->alt ? 0 : s->sb_lost;

    if ((unsigned) row < lost) {
        return;         /* a line the model does not hold */
    }

    i = (unsigned) row - lost;

    if (i < g->sb_len + s->rows) {
        ngx_pty_grid_line(g, i)->wrapped = 0;
    }
}


/*
 * ESC BEL in a string: xterm.js ended the string at the ESC and rings in
 * the escape that follows.  libvterm would ring inside the string and
 * then read an ST after it with a length of -1, past the end of its
 * input: it gets the BEL first (which ends its string), then the ESC.
 */
static void
ngx_pty_esc_bel(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i)
{
    ngx_pty_flush(s, p, start, i);

    if (s->vt_esc) {
        /* the ESC held back for what follows it */
        s->vt_esc = 0;
        vterm_input_write(s->vt, "\x07", 1);

    } else {
        vterm_input_write(s->vt, "\x18", 1);
    }

    ngx_pty_vt_write(s, (const u_char *) "\x1b", 1);
    *start = i + 1;
}


/*
 * DECSED, DECSERA (CSI ? J, CSI ? K): libvterm erases as for ED and EL,
 * but for the protected cells; xterm.js clears the same soft-wrap flags
 * and the alternate screen's cells past the edge as ED and EL do
 */
static void
ngx_pty_selective_erase(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, u_char c, size_t esc)
{
    unsigned long  v;

    v = NGX_PTY_ARG(s->args[0]);
    v = (v == NGX_PTY_ARG_MISSING) ? 0 : v;

    ngx_pty_flush(s, p, start, i);

    if (v <= 1 && s->phantom) {
        /*
         * xterm.js has the cursor past the edge, as for ED and EL (to the
         * cursor: the last column too, a wide glyph's right half)
         */
        ngx_pty_csi_skip(s, p, start, i, esc);
        ngx_pty_fast_erase(s, c, v, 1);
        return;
    }

    if (c == 'J' && s->tails) {
        ngx_pty_tails_erase(s, v, 1);
    }

    ngx_pty_erase_wraps(s, c, v, 1);
}


/*
 * A wide glyph that EL or ED (v: its parameter) cuts in two on the
 * cursor's row: xterm.js's replaceCells() blanks its half outside the
 * span too, in the erase's pen (not a protected half, in a selective
 * erase); libvterm keeps that half, so the model does it before libvterm
 * erases the span (ECH and ICH: ngx_pty_edit_cut())
 */
static void
ngx_pty_erase_cut(ngx_pty_screen_t *s, VTermPos pos, unsigned long v,
    unsigned selective)
{
    unsigned  x, from, to;

    x = s->phantom ? s->cols : (unsigned) pos.col;

    if (v == 0) {
        from = x;
        to = s->cols;

    } else if (v == 1) {
        from = 0;
        to = x + 1;

    } else if (v == 2) {
        /* the whole row: a right half past the edge, in the tail */
        from = 0;
        to = s->cols;

    } else {
        return;
    }

    ngx_pty_cut_ends(s, s->cur->rows[pos.row], from, to, selective);
}


/* the halves of wide glyphs outside from..to that xterm.js blanks */
static void
ngx_pty_cut_ends(ngx_pty_screen_t *s, ngx_pty_row_t *row, unsigned from,
    unsigned to, unsigned selective)
{
    ngx_pty_pen_t     pen;
    ngx_pty_cell_t   *h;

    if (from > 0 && from - 1 < row->len) {
        h = &row->cells[from - 1];

        if (ngx_pty_wide_left(h)
            && !(selective && (h->pen.attr & NGX_PTY_A_PROTECT)))
        {
            pen = ngx_pty_erase_pen(s);
            ngx_pty_cell_blank(s, h, &pen);
        }
    }

    if (to < s->cols && to < row->len) {
        h = &row->cells[to];

        if (ngx_pty_wide_left(&row->cells[to - 1])
            && !(selective && (h->pen.attr & NGX_PTY_A_PROTECT)))
        {
            pen = ngx_pty_erase_pen(s);
            ngx_pty_cell_blank(s, h, &pen);
        }

    } else if (to == s->cols && row->tail_len && to - 1 < row->len
               && ngx_pty_wide_left(&row->cells[to - 1])
               && !(selective && (row->tail[0].pen.attr & NGX_PTY_A_PROTECT)))
    {
        /* a glyph the narrowing cut: its right half is the tail's first */
        pen = ngx_pty_erase_pen(s);
        ngx_pty_cell_blank(s, &row->tail[0], &pen);
    }
}


/*
 * The same for ECH of n cells, and ICH (c), whose insertCells() blanks the
 * left half of a wide glyph whose right half it moves on alone; both put
 * the cursor back on the edge first in xterm.js
 */
static void
ngx_pty_edit_cut(ngx_pty_screen_t *s, u_char c, unsigned long n)
{
    unsigned  x;
    VTermPos  pos;

    if (!s->wide) {
        return;
    }

    pos = ngx_pty_cursor(s);
    x = s->phantom ? s->cols - 1 : (unsigned) pos.col;
    n = (c == '@' || n >= s->cols - x) ? s->cols - x : (n ? n : 1);

    ngx_pty_cut_ends(s, s->cur->rows[pos.row], x, x + n, 0);
}


/*
 * What EL and ED (c; v: the parameter) do in xterm.js beside the span
 * libvterm erases: the wide glyphs they cut, the soft-wrap flags they clear
 */
static void
ngx_pty_erase_wraps(ngx_pty_screen_t *s, u_char c, unsigned long v,
    unsigned selective)
{
    int       x;
    VTermPos  pos;

    pos = ngx_pty_cursor(s);
    x = s->phantom ? (int) s->cols : pos.col;

    if (s->wide) {
        ngx_pty_erase_cut(s, pos, v, selective);
    }

    if (c == 'K') {
        if (v == 2 || (v == 0 && x == 0)) {
            ngx_pty_unwrap(s, pos.row, pos.row + 1);
        }

        return;
    }

    switch (v) {

    case 0:
        ngx_pty_unwrap(s, pos.row + (x != 0), s->rows);
        break;

    case 1:
        ngx_pty_unwrap(s, 0, pos.row + 1);

        if (x + 1 >= (int) s->cols) {
            ngx_pty_unwrap_line(s, pos.row + 1);
        }

        break;

    case 2:
        ngx_pty_unwrap(s, 0, s->rows);
        break;
    }
}


/* EL, ED (v: 0, 1 or 2) at the cursor, as libvterm's on_csi() erases */
static void
ngx_pty_fast_erase(ngx_pty_screen_t *s, u_char c, unsigned long v,
    unsigned selective)
{
    unsigned   end;
    VTermPos   pos;
    VTermRect  rect;

    ngx_pty_erase_wraps(s, c, v, selective);
    pos = ngx_pty_cursor(s);

    if (c == 'J' && s->tails) {
        ngx_pty_tails_erase(s, v, selective);
    }

    rect.start_row = (c == 'J' && v != 0) ? 0 : pos.row;
    rect.end_row = (c == 'J' && v == 1) ? pos.row : pos.row + 1;
    rect.start_col = (v == 0) ? pos.col : 0;
    rect.end_col = s->cols;

    if (s->phantom && v == 0) {
        /* xterm.js has the cursor past the edge: nothing to its right */
        s->diverged++;
        rect.start_col = s->cols;
    }

    /*
     * to the cursor: past the edge in xterm.js, in libvterm on the last
     * glyph's first column (a wide one's is not the last column)
     */
    end = s->phantom ? s->cols : (unsigned) pos.col + 1;

    if (v == 1 && end > (unsigned) pos.col + 1) {
        s->diverged++;
    }

    if (c == 'K' && v == 1) {
        rect.end_col = end;
    }

    if (v == 1 && s->phantom && s->tails) {
        ngx_pty_tail_erase_to(s, selective);
    }

    if (c == 'J' && v == 2) {
        rect.end_row = s->rows;
    }

    ngx_pty_erase_rect(s, rect, selective);

    if (c == 'J' && v == 0) {
        /* the rows below */
        rect.start_row = pos.row + 1;
        rect.end_row = s->rows;
        rect.start_col = 0;
        ngx_pty_erase_rect(s, rect, selective);

    } else if (c == 'J' && v == 1) {
        rect.start_row = pos.row;
        rect.end_row = pos.row + 1;
        rect.end_col = end;
        ngx_pty_erase_rect(s, rect, selective);
    }

    /* xterm.js's ED and EL keep the cursor at most one past the edge */
    s->past = 0;
}


/*
 * The row CUU, CUD, CNL or CPL (c) moves to from row: xterm.js stops them
 * at the scroll region's margin when they start inside it; libvterm only
 * at the screen's edge (in origin mode at the margins, as xterm.js)
 */
static long
ngx_pty_margin_stop(ngx_pty_screen_t *s, u_char c, long row, long count)
{
    long  edge;

    if (c == 'A' || c == 'F') {
        edge = s->top;
        row = (row >= edge && row - count < edge) ? edge : row - count;
        return row < 0 ? 0 : row;
    }

    edge = (s->bottom < 0 ? (long) s->rows : s->bottom) - 1;
    row = (row <= edge && row + count > edge) ? edge : row + count;

    return row >= (long) s->rows ? (long) s->rows - 1 : row;
}


/*
 * Where xterm.js (5.5 and 6.0) puts the cursor for CUU, CUD, CUF, CUB,
 * CNL, CPL, CHA, HPA, HPR and VPR in origin mode: its _setCursor() adds
 * the top margin to the row, which these pass counted from the screen's
 * top, so each goes down by the margin as well (clamped to the region).
 * The model follows, as web IDEs draw it so (docs/SNAPSHOT.md).
 */
static VTermPos
ngx_pty_origin_move(ngx_pty_screen_t *s, u_char c, VTermPos from, long n)
{
    long      top, bot, row, col, d;
    VTermPos  to;

    top = s->top;
    bot = (s->bottom < 0 ? (long) s->rows : s->bottom) - 1;
    n = (n < 1) ? 1 : (n > 65535 ? 65535 : n);
    row = from.row;
    col = s->phantom ? (long) s->cols - 1 : from.col;

    /* cursorUp() and cursorDown() measure before the clamp below */
    d = 0;

    if (c == 'A' || c == 'F') {
        d = row - top;
        d = (d >= 0 && d < n) ? -d : -n;

    } else if (c == 'B' || c == 'E') {
        d = bot - row;
        d = (d >= 0 && d < n) ? d : n;

    } else if (c == 'e') {
        d = n;
    }

    /* _moveCursor() clamps first, then _setCursor() adds the margin */
    row = (row < top) ? top : (row > bot ? bot : row);

    switch (c) {
    case 'C': case 'a': col += n; break;
    case 'D': col -= n; break;
    case 'E': case 'F': col = 0; break;
    case 'G': case '`': col = n - 1; break;
    }

    row += top + d;
    to.row = (int) ((row < top) ? top : (row > bot ? bot : row));
    to.col = (int) ((col < 0) ? 0
                    : (col >= (long) s->cols ? (long) s->cols - 1 : col));

    return to;
}


/* the cursor moves, as libvterm's on_csi() does them outside origin mode */
static void
ngx_pty_fast_move(ngx_pty_screen_t *s, u_char c, const unsigned long *args,
    int argc)
{
    long      row, col, a, count;
    VTermPos  pos;

    pos = ngx_pty_cursor(s);
    row = pos.row;
    /*
     * past the edge xterm.js moves from the last column (libvterm's
     * cursor is on the left half of a wide glyph there)
     */
    col = s->phantom ? (long) s->cols - 1 : pos.col;

    a = NGX_PTY_ARG(args[0]);
    count = (a == NGX_PTY_ARG_MISSING || a == 0) ? 1 : a;
    a = (a == NGX_PTY_ARG_MISSING) ? 1 : a;

    switch (c) {
    case 'A': case 'B': row = ngx_pty_margin_stop(s, c, row, count); break;
    case 'e': row += count; break;
    case 'C': case 'a': col += count; break;
    case 'D': col -= count; break;
    case 'E': case 'F':
        row = ngx_pty_margin_stop(s, c, row, count);
        col = 0;
        break;
    case 'G': case '`': col = a - 1; break;
    case 'd': row = a - 1; break;

    default: /* CUP, HVP */
        row = a - 1;
        col = (argc < 2 || NGX_PTY_ARG(args[1]) == NGX_PTY_ARG_MISSING)
              ? 0 : (long) NGX_PTY_ARG(args[1]) - 1;
        break;
    }

    row = row < 0 ? 0 : (row >= (long) s->rows ? (long) s->rows - 1 : row);
    col = col < 0 ? 0 : (col >= (long) s->cols ? (long) s->cols - 1 : col);

    /* a move cancels a pending wrap even in place; so does the sync's CUP */
    s->vt_cur.row = (int) row;
    s->vt_cur.col = (int) col;
    s->vt_dirty |= NGX_PTY_VT_POS;
    s->phantom = 0;
}


/*
 * The CSI sequences full-screen programs repaint with (cursor moves, SGR,
 * EL, ED), whole at p[i] in the ground state, applied to the model without
 * libvterm, which is left behind (vt_dirty) until ngx_pty_vt_sync().
 * Only plain forms: no leader, intermediate or embedded control, a few
 * short parameters, no origin mode or line attributes (with either, a
 * CSI may move the cursor into the margins or the half row).  Returns
 * the sequence's length, 0 to leave it to the scanner and libvterm.
 */
static size_t
ngx_pty_fast_csi(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t n)
{
    u_char         c;
    size_t         j;
    int            argc;
    unsigned long  v, args[NGX_PTY_CSI_ARGS];

    if (s->origin || n - i < 3 || p[i + 1] != '[') {
        return 0;
    }

    argc = 0;
    args[0] = NGX_PTY_ARG_MISSING;
    j = ngx_pty_csi_params(args, &argc, NGX_PTY_FAST_ARGS,
                           NGX_PTY_FAST_DIGITS, p, i + 2, n);

    if (j == n) {
        return 0;
    }

    /* at a digit or a separator, a limit stopped the parameters */
    c = p[j];

    switch (c) {
    case 'm': case 'K': case 'J': case 'H': case 'f': case 'A': case 'B':
    case 'C': case 'D': case 'E': case 'F': case 'G': case '`': case 'a':
    case 'd': case 'e':
        break;
    default:
        return 0;
    }

    argc++;

    if (*start < i) {
        ngx_pty_flush(s, p, start, i);
    }

    if (c == 'm') {
        if (!ngx_pty_fast_sgr(s, args, argc)) {
            return 0;
        }

    } else if (c == 'K' || c == 'J') {
        v = NGX_PTY_ARG(args[0]);
        v = (v == NGX_PTY_ARG_MISSING) ? 0 : v;

        if (v > 2) {
            return 0;
        }

        ngx_pty_fast_erase(s, c, v, 0);

    } else {
        ngx_pty_fast_move(s, c, args, argc);
    }

    /* libvterm alone would have parsed them into its slots */
    memcpy(s->args, args, argc * sizeof(unsigned long));
    s->vt_args = 1;

    *start = j + 1;

    return j + 1 - i;
}


/* the length of an SGR sequence (ESC [ digits ; : m) at p[k], or 0 */
static size_t
ngx_pty_sgr_at(const u_char *p, size_t k, size_t n)
{
    size_t  j;

    if (k + 2 >= n || p[k] != 0x1b || p[k + 1] != '[') {
        return 0;
    }

    for (j = k + 2; j < n; j++) {
        if (p[j] == 'm') {
            return j + 1 - k;
        }

        if ((p[j] < '0' || p[j] > '9') && p[j] != ';' && p[j] != ':') {
            return 0;
        }
    }

    return 0;
}


/* where the SGR sequence ending at p[e - 1] starts (>= i), or e */
static size_t
ngx_pty_sgr_before(const u_char *p, size_t i, size_t e)
{
    size_t  k;

    if (e < i + 3 || p[e - 1] != 'm') {
        return e;
    }

    for (k = e - 1; k > i + 1; k--) {
        if ((p[k - 1] < '0' || p[k - 1] > '9')
            && p[k - 1] != ';' && p[k - 1] != ':')
        {
            break;
        }
    }

    return (k > i + 1 && p[k - 1] == '[' && p[k - 2] == 0x1b) ? k - 2 : e;
}


/*
 * Whether libvterm's UTF-8 decoder, clean at p[i], is clean again after the
 * text of p[i..e): the last character must be whole.  Printable ASCII ends
 * any sequence; C0 controls and SGR sequences leave the decoder as it was,
 * so look past them.
 */
static int
ngx_pty_utf8_whole(const u_char *p, size_t i, size_t e)
{
    u_char    c;
    size_t    k;
    uint64_t  w;
    unsigned  cont, len;

    for ( ;; ) {
        /* 8 control bytes at a time (b + 0x60 below 0x80 for b < 0x20) */
        while (e - i >= 8) {
            memcpy(&w, p + e - 8, 8);

            if (((w + 0x6060606060606060ULL) | w) & 0x8080808080808080ULL) {
                break;
            }

            e -= 8;
        }

        while (e > i && p[e - 1] < 0x20) {
            e--;
        }

        k = ngx_pty_sgr_before(p, i, e);

        if (k == e) {
            break;
        }

        e = k;
    }

    for (cont = 0; e > i && (p[e - 1] & 0xc0) == 0x80; e--) {
        if (++cont > 3) {
            return 0;
        }
    }

    if (e == i) {
        return cont == 0;
    }

    c = p[e - 1];

    if (c >= 0x20 && c < 0x7f) {
        /* an SGR between a lead byte and its continuation bytes */
        return cont == 0 || ngx_pty_sgr_before(p, i, e) == e;
    }

    len = ngx_pty_utf8_len(c);

    return len != 0 && cont == len - 1;
}


/* where the ground-state stretch from p[i] ends: at an ESC not of SGR */
static size_t
ngx_pty_stretch_end(const u_char *p, size_t i, size_t n, unsigned *sgr)
{
    size_t         x, len;
    const u_char  *q;

    x = i;
    *sgr = 0;

    while ((q = memchr(p + x, 0x1b, n - x)) != NULL) {
        x = q - p;
        len = ngx_pty_sgr_at(p, x, n);

        if (len == 0) {
            break;
        }

        x += len;
        *sgr = 1;
    }

    if (q == NULL) {
        x = n;
    }

    /* LS0 and LS1 change how the text after them reads */
    if ((q = memchr(p + i, 0x0e, x - i)) != NULL) {
        x = q - p;
    }

    if ((q = memchr(p + i, 0x0f, x - i)) != NULL) {
        x = q - p;
    }

    return x;
}


/*
 * The pen at p[cut] is what the SGR sequences of p[i..cut) make of it:
 * feed them from the last one that starts with a reset.
 */
static void
ngx_pty_skip_pen(ngx_pty_screen_t *s, const u_char *p, size_t i, size_t cut)
{
    size_t         k, from, len, noskip_end;
    int            argi;
    const u_char  *q, *noskip_p;

    from = i;

    for (k = cut; k > i; k--) {
        if (p[k - 1] == 0x1b
            && (p[k + 1] == 'm' || p[k + 1] == ';'
                || (p[k + 1] == '0' && (p[k + 2] == 'm' || p[k + 2] == ';'))))
        {
            from = k - 1;
            break;
        }
    }

    /* the slots the skipped ones leave (ngx_pty_vt_args), as the parser */
    for (k = i; (q = memchr(p + k, 0x1b, from - k)) != NULL; k += len) {
        k = q - p;
        len = ngx_pty_sgr_at(p, k, cut);

        if (len == 0) {
            break;
        }

        argi = 0;
        s->args[0] = NGX_PTY_ARG_MISSING;
        (void) ngx_pty_csi_params(s->args, &argi, NGX_PTY_CSI_ARGS,
                                  NGX_PTY_ANY_DIGITS, p, k + 2, k + len - 1);
    }

    /*
     * the scan of an SGR sequence looks for lines to skip in it too (on
     * a screen of 2-4 rows it is long enough), and would take the mark
     * of the stretch it is in: the next start in there would search again
     */
    noskip_p = s->noskip_p;
    noskip_end = s->noskip_end;

    while ((q = memchr(p + from, 0x1b, cut - from)) != NULL) {
        from = q - p;
        len = ngx_pty_sgr_at(p, from, cut);
        ngx_pty_screen_scan(s, q, len);
        from += len;
    }

    s->noskip_p = noskip_p;
    s->noskip_end = noskip_end;
}


/* whether a byte of the 8 in w is LF, VT or FF (bit hacks' "hasbetween") */
static ngx_inline int
ngx_pty_lf8(uint64_t w)
{
    uint64_t  low;

    low = w & 0x7f7f7f7f7f7f7f7fULL;

    /* per byte, no carries: below 13, then not 0x80.., then 10 and up */
    return ((0x8c8c8c8c8c8c8c8cULL - low) & ~w
            & (low + 0x7676767676767676ULL) & 0x8080808080808080ULL) != 0;
}


/*
 * The last LF, VT or FF in p[i..k), eight bytes at a time: its index + 1,
 * or i if there is none
 */
static size_t
ngx_pty_lf_before(const u_char *p, size_t i, size_t k)
{
    u_char    c;
    uint64_t  w;

    while (k > i) {
        while (k - i >= 8) {
            memcpy(&w, p + k - 8, 8);

            if (ngx_pty_lf8(w)) {
                break;
            }

            k -= 8;
        }

        if (k == i) {
            break;
        }

        c = p[k - 1];

        if (c >= 0x0a && c <= 0x0c) {
            return k;
        }

        k--;
    }

    return i;
}


/*
 * A ground-state stretch of text, line feeds and SGR sequences from p[i]
 * holding at least 2 * rows line feeds: with the whole screen as the
 * scroll region, the last "rows" of them scroll away everything before,
 * so only the cursor and the pen those bytes leave matter.  Cut after a
 * CR LF that has rows - 1 line feeds before it (the cursor is then on the
 * bottom row, column 0, no pending wrap) and at least rows after it;
 * libvterm is moved there with CUP and given the SGR sequences that make
 * the pen.  Text, BS, HT, BEL and the like cannot move the cursor up or
 * change what libvterm keeps; other escapes and LS0/LS1 can, so the
 * stretch ends before them.  Not on an alternate screen that keeps lines
 * above it (alt_max).  Returns where to go on from (i when nothing can
 * be skipped).
 */
static size_t
ngx_pty_skip_lines(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t n)
{
    char           buf[32];
    u_char         c;
    size_t         x, k, cut;
    unsigned       lf, sgr, skipped, need;
    const u_char  *q;
    ngx_pty_row_t *row;

    if (n - i < 4 * (size_t) s->rows || s->rows < 2 || s->vt_text
        || s->no_skip || (s->alt && s->alt_max > s->rows)
        || s->origin || s->top != 0
        || (s->bottom >= 0 && (unsigned) s->bottom != s->rows)
        || (p == s->noskip_p && i < s->noskip_end))
    {
        return i;
    }

    x = ngx_pty_stretch_end(p, i, n, &sgr);

    /* later starts in this stretch have fewer lines to skip: don't retry */
    s->noskip_p = p;
    s->noskip_end = x;

    /*
     * the last "rows" line feeds stay (parsing the skipped lines for the
     * scrollback ring too cost the plain stream 1.8 times as much: their
     * bytes are kept instead, ngx_pty_sb_keep_raw())
     */
    for (lf = 0, k = x; /* void */ ; k--) {
        k = ngx_pty_lf_before(p, i, k);

        if (k == i) {
            return i;
        }

        if (++lf == s->rows) {
            break;
        }
    }

    /* p[k - 1] is that line feed; cut after an earlier CR LF */
    for (k--; k > i + 1; k--) {
        c = p[k - 1];

        if (c >= 0x0a && c <= 0x0c && p[k - 2] == '\r'
            && ngx_pty_utf8_whole(p, i, k - 2))
        {
            break;
        }
    }

    if (k <= i + 1) {
        return i;
    }

    cut = k;

    /* with rows - 1 line feeds up to it, the cursor is on the bottom row */
    for (lf = 0, k = cut; lf < s->rows - 1; lf++, k--) {
        k = ngx_pty_lf_before(p, i, k);

        if (k == i) {
            return i;
        }
    }

    /* the lines xterm.js's scrollback takes, counted until it is full */
    skipped = 0;
    need = s->grid[0].sb_len + s->sb_lost;
    need = s->alt ? 0
           : s->rows + NGX_PTY_XTERM_SCROLLBACK
             - (need < NGX_PTY_XTERM_SCROLLBACK ? need
                                                : NGX_PTY_XTERM_SCROLLBACK);

    for (q = p + i; skipped < need; q++, skipped++) {
        q = memchr(q, '\n', p + cut - q);

        if (q == NULL) {
            break;
        }
    }

    ngx_pty_flush(s, p, start, i);

    if (!s->alt) {
        ngx_pty_sb_skip(s, ngx_pty_cursor(s).row + skipped - (s->rows - 1));
        ngx_pty_sb_keep_raw(s, p, i, cut);
    }

    if (sgr) {
        ngx_pty_skip_pen(s, p, i, cut);
    }

    vterm_input_write(s->vt, buf, ngx_pty_put_csi(buf, s->rows, 1, 'H'));
    s->vt_args = 1;
    s->phantom = 0;
    *start = cut;

    /* the new line the last skipped line feed scrolled in, as xterm.js */
    row = s->cur->rows[s->rows - 1];
    row->len = 0;
    row->wrapped = 0;
    row->fill = ngx_pty_erase_pen(s);

    return cut;
}


/*
 * The wrap of a glyph past the edge, made by libvterm as for a glyph: a
 * space in the next row's first column, which the caller writes over
 * (in insert mode, no cell inserted for it: xterm.js inserts none for
 * a glyph of no width)
 */
static void
ngx_pty_vt_wrap(ngx_pty_screen_t *s)
{
    if (s->insert) {
        vterm_input_write(s->vt, "\x1b[4l \x1b[4h", 9);
        s->vt_args = 1;
        return;
    }

    vterm_input_write(s->vt, " ", 1);
}


/*
 * A combining mark, as xterm.js places it: right after a glyph, on the
 * cell left of the cursor (the glyph's first cell for a wide one), past
 * the edge when waiting to wrap; after a control or an escape sequence,
 * a glyph of its own under the cursor, which moves on.  libvterm 0.1.4 drops
 * a mark there, adds it only to the glyph it printed last, and counts
 * U+3099, U+309A and U+302A-302F two columns wide.
 */
static ngx_pty_cold int
ngx_pty_combine(ngx_pty_screen_t *s, uint32_t cp, unsigned join,
    unsigned wide)
{
    int                    col;
    unsigned               over;
    uint32_t              *comb;
    VTermPos               pos;
    ngx_pty_row_t         *row;
    ngx_pty_cell_t        *c;

    pos = ngx_pty_cursor(s);

    if (s->phantom && s->past > 0) {
        /*
         * a column past where a lone mark took xterm.js's cursor: this
         * one, joined to nothing (the glyph before is that mark), wraps
         * as a glyph does; with autowrap off it goes to the last column.
         * There print() looks at no wide glyph's halves from out there,
         * so one it writes the right half of keeps its width: no byte
         * stream writes that from the screen, and the model blanks the
         * glyph, as a Keyframe paints it (the test gives the cell)
         */
        join = 0;
        s->diverged++;
        s->past = 0;
        s->phantom = 0;

        if (s->autowrap) {
            ngx_pty_vt_wrap(s);
            pos = ngx_pty_cursor(s);
            pos.col = 0;

        } else {
            pos.col = s->cols - 1;
        }

        ngx_pty_vt_cup(s, pos);
    }

    col = s->phantom ? (int) s->cols - 1 : pos.col - 1;
    row = s->cur->rows[pos.row];

    if (!join && s->phantom) {
        /*
         * a glyph of its own past the edge: xterm.js writes it nowhere,
         * and its cursor goes a column further (which a widening shows)
         */
        s->diverged++;
        s->past = 1;

        if (s->insert) {
            /* xterm.js inserts no cell for it, but clears as for a glyph */
            ngx_pty_print_edge_blank(s, row);
        }

        return 1;
    }

    if (col < 0 || !join) {
        /* after no glyph: a glyph of its own at the cursor, which moves */
        s->diverged++;
        s->edge = 0;            /* the last glyph is this mark, not edge_pos */
        ngx_pty_row_materialize(row, pos.col + 1);
        c = &row->cells[pos.col];
        c->ch = cp;
        c->ncomb = 0;
        c->width = 0;
        c->pen = s->pen;
        c->pen.attr &= ~NGX_PTY_A_PROTECT;
        c->pen.attr |= s->protect ? NGX_PTY_A_PROTECT : 0;
        ngx_pty_print_halves(s, row, pos.col, pos.col + 1, s->protect);

        if (s->insert) {
            /* xterm.js inserts no cell for it, but clears as for a glyph */
            ngx_pty_print_edge_blank(s, row);
        }

        if (pos.col + 1 < (int) s->cols) {
            pos.col++;
            ngx_pty_vt_cup(s, pos);

        } else {
            /* past the edge: libvterm must wrap the next glyph too */
            s->phantom = 1;
            s->past = 0;
            s->ph_pos = pos;

            if (s->autowrap) {
                ngx_pty_vt_rephantom(s);
            }
        }

        return 1;
    }

    /* the glyph's cell and the one after it (the cursor's) */
    ngx_pty_row_materialize(row, (unsigned) col + 2 < s->cols
                                 ? (unsigned) col + 2 : s->cols);
    c = &row->cells[col];

    if (!s->phantom && ngx_pty_wide_left(c) && col + 1 < (int) s->cols
        && c[1].ch == NGX_PTY_CONT)
    {
        /*
         * the cursor on the glyph's right half (a resize put it there):
         * xterm.js's print() blanks the glyph first, then the mark joins
         * a blank, which no write makes again: both cells blank in the
         * pen, the mark dropped (not a glyph cut by a cell of its own,
         * right after a wide glyph dropped at the edge: the mark joins it)
         */
        ngx_pty_print_blank(s, c, s->protect);
        ngx_pty_print_blank(s, c + 1, s->protect);
        return 1;
    }

    if (c->ch == NGX_PTY_CONT || (c->width == 0 && c->ch)) {
        if (col == 0) {
            s->diverged++;
            return 1;
        }

        c--;
        col--;
    }

    if (c->ncomb >= NGX_PTY_MAX_COMB) {
        /*
         * the model keeps five (docs/SNAPSHOT.md); libvterm, which keeps
         * as many, takes a time that grows with the run of marks for
         * each, so a flood of them would hold the worker
         */
        s->diverged++;
        return 1;
    }

    /*
     * libvterm adds a mark only right after the glyph it printed last,
     * and prints the glyph again in the current pen: the model does it
     * where they part (returns 1)
     */
    over = (wide && c->width == 1 && !s->phantom
            && (unsigned) col + 2 == s->cols);

    if (!s->phantom && !s->charset[s->gl] && c->ch != 0 && !over
        && !s->comb_own && pos.row == s->edge_pos.row
        && col == s->edge_pos.col && pos.col == col + (c->width ? c->width : 1)
        && ngx_pty_pen_eq(&c->pen, &s->pen, NGX_PTY_A_SGR))
    {
        /* the same in libvterm, which then repeats it whole (REP) */
        return 0;
    }

    s->diverged++;

    if (!wide && ngx_pty_wide_left(c) && !s->phantom
        && (pos.row != s->edge_pos.row || col != s->edge_pos.col))
    {
        /*
         * a wide glyph a resize put the cursor after, joined in the width
         * of the narrow glyph printed last (xterm.js's join state): one
         * column, its right half left alone, which no byte stream writes;
         * a blank, as a Keyframe paints one
         */
        c->ch = 0;
        c->ncomb = 0;
        c->width = 1;
        return 1;
    }

    if (wide && c->width == 1 && c->ch != 0 && !s->phantom && !over) {
        /*
         * xterm.js gives the join the dropped glyph's width here too (a
         * resize moved the cursor off the column before the last since):
         * a cell two columns wide with one of its own after it, which a
         * Keyframe makes at the edge and moves here (a glyph printed
         * after it blanks it in its pen, as in xterm.js: s->wide); where
         * no Keyframe could move it (a wide glyph before it, or after),
         * a blank, as a Keyframe paints one
         */
        if (ngx_pty_claim_movable(row, col)
            && (comb = ngx_pty_row_comb(s, row)) != NULL)
        {
            comb[col * NGX_PTY_MAX_COMB + c->ncomb++] = cp;
            c->width = 2;
            s->wide = 1;
            return 1;
        }

        c->ch = 0;
        c->ncomb = 0;
        c->width = 1;
        c->pen = s->default_pen;
        return 1;
    }

    if (c->ch == 0 && over) {
        /*
         * an empty cell before the last column, after a wide glyph
         * dropped there (a line feed since the glyph before): xterm.js
         * keeps the mark alone in it, two columns wide, in the cell's pen
         */
        c->ch = cp;
        c->ncomb = 0;
        c->width = 2;
        s->wide = 1;
        return 1;
    }

    if (c->ch == 0 && wide && ngx_pty_claim_movable(row, col)) {
        /*
         * the same further left (a resize moved the cursor since): a
         * Keyframe makes it at the edge and moves it here; a glyph
         * printed after it blanks it in its pen, as in xterm.js
         */
        c->ch = cp;
        c->ncomb = 0;
        c->width = 2;
        s->wide = 1;
        return 1;
    }

    if (c->ch == 0) {
        /*
         * an empty cell (a resize moved the cursor since the glyph):
         * xterm.js keeps the mark alone in it, which no write can make
         * again, so a snapshot paints a blank, and text shows one; kept
         * with the blank (its marks) for the reflow, where the cell has
         * content (ngx_pty_reflow.c)
         */
        if (!wide && (comb = ngx_pty_row_comb(s, row)) != NULL) {
            comb[col * NGX_PTY_MAX_COMB + c->ncomb++] = cp;
        }

        return 1;
    }

    if (c->ncomb < NGX_PTY_MAX_COMB && (comb = ngx_pty_row_comb(s, row))) {
        comb[col * NGX_PTY_MAX_COMB + c->ncomb++] = cp;
        s->comb_own = 1;
    }

    if (over) {
        /*
         * after a wide glyph dropped at the edge (autowrap off): xterm.js
         * gives the join the dropped glyph's width, so the glyph before
         * the last column claims two while the last keeps its own (the
         * text fast path blanks such a cell too: s->wide)
         */
        c->width = 2;
        s->wide = 1;
    }

    return 1;
}


/* the code point of the whole UTF-8 sequence p[0..len), or 0 */
static uint32_t
ngx_pty_utf8_cp(const u_char *p, unsigned len)
{
    unsigned  i;
    uint32_t  cp;

    cp = p[0] & (0xff >> (len + 1));

    for (i = 1; i < len; i++) {
        cp = (cp << 6) | (p[i] & 0x3f);
    }

    return ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) ? 0 : cp;
}


/* whether a complete UTF-8 character of len bytes is one xterm.js keeps */
static ngx_inline int
ngx_pty_utf8_kept(uint32_t cp, unsigned len)
{
    return !((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800)
             || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfeff
             || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)));
}


/*
 * Whether a glyph was the last thing printed before p[i] (xterm.js's join
 * state, which any control or escape sequence clears): p[normal..i) is
 * text the text paths took, where broken UTF-8 the model dropped
 * (ngx_pty_text_broken) prints nothing; an earlier piece's end is
 * last_text
 */
static unsigned
ngx_pty_glyph_before(ngx_pty_screen_t *s, const u_char *p, size_t normal,
    size_t i)
{
    size_t  j;

    i = ngx_pty_kept_end(p, normal, i, &j);

    if (i == normal) {
        return (i == 0) ? s->last_text : 0;
    }

    return ngx_pty_glyph_at(p, j);
}


/* whether the character the model keeps at p[j] is a glyph */
static ngx_inline unsigned
ngx_pty_glyph_at(const u_char *p, size_t j)
{
    if (p[j] < 0x80) {
        return p[j] >= 0x20 && p[j] < 0x7f;
    }

    /* a glyph, but for a C1 control the model dropped */
    return !(p[j] == 0xc2 && p[j + 1] < 0xa0);
}


/*
 * Whether the glyph printed last is a mark that joined nothing: the cell
 * a mark would join (ngx_pty_combine()) holds one, or it went past the
 * edge
 */
static unsigned
ngx_pty_lone_mark_last(ngx_pty_screen_t *s)
{
    int                    col;
    VTermPos               pos;
    ngx_pty_cell_t         tmp;
    const ngx_pty_cell_t  *c;

    if (s->phantom && s->past > 0) {
        return 1;
    }

    pos = ngx_pty_cursor(s);
    col = s->phantom ? (int) s->cols - 1 : pos.col - 1;

    if (col < 0) {
        return 1;
    }

    c = ngx_pty_row_cell(s->cur->rows[pos.row], col, &tmp);

    return c->ch != 0 && c->ch != NGX_PTY_CONT && c->width == 0;
}


/*
 * xterm.js's join state before p[i]: whether a mark there joins the cell
 * before (a glyph printed last, through the marks joined to it; not after
 * a mark that joined nothing, whose join state is its own, of no width,
 * also where a resize moved the cursor since), and in *wide whether that
 * glyph is two columns wide, which the mark joins with, also where
 * xterm.js dropped the glyph (autowrap off, ngx_pty_wide_dropped()).
 * Marks are looked through as many as a cell keeps (docs/SNAPSHOT.md),
 * and so are the bytes the model drops, as ngx_pty_glyph_before() does.
 * An earlier piece's end is last_join and last_wide.
 */
static unsigned
ngx_pty_join_state(ngx_pty_screen_t *s, const u_char *p, size_t normal,
    size_t i, unsigned *wide)
{
    size_t    j;
    uint32_t  cp;

    i = ngx_pty_mark_base(p, normal, i, &j);

    if (i == NGX_PTY_MARK_FLOOD) {
        /* the mark before joined as this one does: a lone one did not */
        *wide = 0;
        return !ngx_pty_lone_mark_last(s);
    }

    if (i == 0) {
        *wide = s->last_wide;
        return s->last_join;
    }

    if (i == normal) {
        *wide = 0;
        return 0;
    }

    *wide = (i - j >= 3 && j + ngx_pty_wide_len(p, j, i, &cp) == i);

    return ngx_pty_glyph_at(p, j);
}


/*
 * Where the character before the combining marks right before p[i] ends
 * (its start in *start; normal when this piece has none), the marks
 * looked through as many as a cell keeps (a flood of them would make
 * each a walk back over all: NGX_PTY_MARK_FLOOD)
 */
static size_t
ngx_pty_mark_base(const u_char *p, size_t normal, size_t i, size_t *start)
{
    unsigned  marks;
    uint32_t  cp;

    for (marks = 0; marks <= NGX_PTY_MAX_COMB; marks++) {
        i = ngx_pty_kept_end(p, normal, i, start);

        if (i == normal || i - *start < 2
            || (cp = ngx_pty_utf8_cp(p + *start, i - *start)) == 0
            || !ngx_pty_is_combining(cp))
        {
            return i;
        }

        i = *start;
    }

    return NGX_PTY_MARK_FLOOD;
}


/*
 * Where the last character the model keeps before p[i] ends (its start in
 * *start), past the broken UTF-8 it drops (ngx_pty_text_broken(), which
 * xterm.js drops too); normal when there is none from p[normal]
 */
static size_t
ngx_pty_kept_end(const u_char *p, size_t normal, size_t i, size_t *start)
{
    size_t    j;
    unsigned  len;

    while (i > normal) {
        if (p[i - 1] < 0x80) {
            *start = i - 1;
            return i;
        }

        /* the character that ends before p[i] */
        for (j = i - 1; j > normal && i - j < 4 && (p[j] & 0xc0) == 0x80; j--)
        {
            /* void */
        }

        len = ngx_pty_utf8_len(p[j]);

        if (len != 0 && len == i - j
            && ngx_pty_utf8_kept(ngx_pty_utf8_cp(p + j, len), len))
        {
            *start = j;
            return i;
        }

        /* dropped bytes: before them */
        if (p[j] < 0x80) {
            i = j + 1;                      /* stray bytes after p[j] */

        } else if ((p[j] & 0xc0) == 0x80 || (len != 0 && len < i - j)) {
            i--;                            /* a stray byte last */

        } else {
            i = j;                          /* cut short, ill-formed */
        }
    }

    return i;
}


/*
 * A broken or ill-formed UTF-8 sequence of k bytes at p[i]: a stray
 * continuation byte, a lead byte without all its continuation bytes, an
 * overlong form, a surrogate, past U+10FFFF, or U+FEFF.  xterm.js drops
 * these bytes; libvterm writes U+FFFD or not by where the sequence
 * stands in a write (its UTF-8 decoder serves only a text run that
 * starts past ASCII), which a snapshot cannot reproduce.  The model
 * drops them as xterm.js does, so libvterm never sees them.
 */
static size_t
ngx_pty_text_broken(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t k)
{
    ngx_pty_flush(s, p, start, i);
    *start = i + k;
    s->diverged++;

    return k;
}


/* the lead byte p[i] and the continuation bytes after it, len at most */
static ngx_inline unsigned
ngx_pty_utf8_have(const u_char *p, size_t i, size_t n, unsigned len)
{
    unsigned  k;

    for (k = 1; k < len && i + k < n && (p[i + k] & 0xc0) == 0x80; k++) {
        /* void */
    }

    return k;
}


/*
 * Whether p[i] is a byte xterm.js's UTF-8 decoder drops, as the text path
 * does (ngx_pty_text_utf8()): a byte no character starts with, a lead
 * byte a byte other than a continuation follows (that byte is read
 * afresh), or one of a character it does not keep (the continuation
 * bytes after it are then dropped each in turn).  A character the input
 * ends in is not known yet.
 */
static int
ngx_pty_utf8_broken(const u_char *p, size_t i, size_t n)
{
    unsigned  len, k;

    len = ngx_pty_utf8_len(p[i]);

    if (len == 0) {
        return 1;
    }

    k = ngx_pty_utf8_have(p, i, n, len);

    if (k < len) {
        return i + k < n;
    }

    return !ngx_pty_utf8_kept(ngx_pty_utf8_cp(p + i, len), len);
}


/* a UTF-8 sequence at p[i] that libvterm reads: returns its length */
static size_t
ngx_pty_text_utf8(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t n, size_t normal)
{
    unsigned  len, k, join, wide;
    uint32_t  cp;

    len = ngx_pty_utf8_len(p[i]);
    k = ngx_pty_utf8_have(p, i, n, len);

    if (len == 0 || k < len) {
        return ngx_pty_text_broken(s, p, start, i, k);
    }

    /* below U+0300, CJK, Hangul, emoji: not combining, no search */
    if ((len == 2 && p[i] < 0xcc && p[i] >= 0xc2)
        || (len == 3 && p[i] >= 0xe3 && p[i] <= 0xee
            && (p[i] != 0xe3 || p[i + 1] >= 0x84)
            && (p[i] != 0xed || p[i + 1] < 0xa0))
        || (len == 4 && p[i] == 0xf0 && p[i + 1] == 0x9f))
    {
        return k;
    }

    cp = ngx_pty_utf8_cp(p + i, len);

    if (!ngx_pty_utf8_kept(cp, len)) {
        return ngx_pty_text_broken(s, p, start, i, k);
    }

    if (cp >= 0x300 && ngx_pty_is_combining(cp)) {
        ngx_pty_flush(s, p, start, i);

        join = ngx_pty_join_state(s, p, normal, i, &wide);

        if (ngx_pty_combine(s, cp, join, join && wide)) {
            *start = i + len;
        }
    }

    return k;
}


/*
 * "ESC ( B" and the like at p[i], giving ASCII again to a set that has
 * had it since the last reset: ncurses ends every attribute change so
 * ("ESC ( B ESC [ m"), and libvterm need not see it.  Returns its
 * length, 0 if it is not one.
 */
static size_t
ngx_pty_scs_ascii(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t n)
{
    if (n - i < 3 || p[i + 1] < '(' || p[i + 1] > '+' || p[i + 2] != 'B'
        || !(s->ascii & (1 << (p[i + 1] - '('))))
    {
        return 0;
    }

    if (*start < i) {
        ngx_pty_flush(s, p, start, i);
    }

    *start = i + 3;

    return 3;
}


/*
 * LF, VT, FF or CR at p[i] with a wrap pending: xterm.js ends it also
 * where the line feed scrolls, or where a CR does not move the cursor (a
 * wide glyph across a row of two columns); libvterm ends its own only on
 * a move.  Returns whether it fed the byte.
 */
static int
ngx_pty_edge_lf(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i)
{
    unsigned  past;

    ngx_pty_flush(s, p, start, i);

    if (!s->phantom) {
        return 0;
    }

    if (p[i] != '\r' && ngx_pty_past_wide(s)) {
        /* xterm.js goes down from the last column, not the glyph's left */
        ngx_pty_vt_to_edge(s);
    }

    past = (p[i] != '\r') ? s->past : 0;

    ngx_pty_flush(s, p, start, i + 1);

    if (s->phantom) {
        ngx_pty_end_wrap(s);
    }

    if (past) {
        /* xterm.js's line feed takes one column back: still past the edge */
        s->ph_pos = ngx_pty_cursor(s);

        if (s->autowrap) {
            ngx_pty_vt_rephantom(s);

        } else {
            s->phantom = 1;
        }

        s->past = past - 1;
    }

    return 1;
}


/* y or z in DEC graphics, which libvterm draws otherwise than xterm.js */
static ngx_inline int
ngx_pty_dec_yz(ngx_pty_screen_t *s, u_char c)
{
    return (c == 'y' || c == 'z') && s->scs[s->gl] == '0';
}


/*
 * An ASCII byte at p[i] that libvterm reads: what it does to the state of
 * libvterm's decoders.  Returns how many bytes that covers.
 */
static size_t
ngx_pty_text_ascii(ngx_pty_screen_t *s, const u_char *p, size_t *start,
    size_t i, size_t n)
{
    u_char  c;

    c = p[i];

    /* LS1, LS0: which of G0-G3 the text uses */
    if (c == 0x0e || c == 0x0f) {
        ngx_pty_shift(s, p, start, i, c == 0x0e);
    }

    if (c < 0x20 && s->vt_text && i + 2 < n
        && p[i + 1] >= 0x20 && p[i + 1] < 0x7f
        && p[i + 2] >= 0x20 && p[i + 2] < 0x7f
        && !ngx_pty_dec_yz(s, p[i + 1]) && !ngx_pty_dec_yz(s, p[i + 2]))
    {
        /*
         * two ASCII glyphs starting a text run: libvterm decodes the
         * second (the first may take a single shift) with GL's decoder,
         * which is clean after it
         */
        s->vt_text = 0;
        return 3;
    }

    return 1;
}


/* ground-state bytes from p[i]: returns where the next ESC is, or n */
static size_t
ngx_pty_text(ngx_pty_screen_t *s, const u_char *p, size_t *start, size_t i,
    size_t n, size_t *normal)
{
    u_char    c;
    size_t    len;
    unsigned  move;

    if (s->ov_shift) {                  /* implies s->ov */
        ngx_pty_flush(s, p, start, i);
        ngx_pty_set_back(s);
    }

    i = ngx_pty_skip_lines(s, p, start, i, n);

    while (i < n) {
        c = p[i];

        if (c == 0x1b) {
            len = ngx_pty_fast_csi(s, p, start, i, n);
            move = (len != 0 && p[i + len - 1] != 'm');

            if (len == 0) {
                len = ngx_pty_scs_ascii(s, p, start, i, n);
            }

            if (len == 0) {
                return i;
            }

            i += len;
            *normal = i;

            /*
             * a stretch of lines to skip may start after a cursor move or
             * an erase (as "clear; cat"); hardly one without a line feed
             * in the next rows' worth of bytes (a repaint)
             */
            if (move && memchr(p + i, '\n', n - i < 4 * (size_t) s->cols
                                             ? n - i : 4 * (size_t) s->cols))
            {
                i = ngx_pty_skip_lines(s, p, start, i, n);
            }

            continue;
        }

        if (s->phantom && !s->autowrap && c >= 0x20 && c != 0x7f
            && (c < 0x80 || c >= 0xc2))
        {
            ngx_pty_edge_glyph(s, p, start, i, n);
        }

        if (((c >= 0x20 && c < 0x7f) || (c >= 0x0a && c <= 0x0d))
            && !s->vt_text && !s->insert && !s->origin
            && !s->newline && !s->charset[s->gl])
        {
            i = ngx_pty_fast_text(s, p, start, i, n);
            continue;
        }

        if (c == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] < 0xa0) {
            /*
             * U+0080..U+009F: libvterm 0.1.4 gives these C1 controls a
             * width of -1 and moves the cursor left of column 0; drop them
             */
            ngx_pty_flush(s, p, start, i);
            i += 2;
            *start = i;
            continue;
        }

        if (!s->autowrap && c >= 0xe1 && c <= 0xf4) {
            /* no set draws a wide glyph otherwise: also as libvterm decodes */
            len = (c >= 0xe3 && c <= 0xf0)
                  ? ngx_pty_wide_dropped(s, p, start, i, n, *normal) : 0;

            if (len == 0) {
                len = ngx_pty_rare_wide(s, p, start, i, n);
            }

            if (len != 0) {
                i += len;
                continue;
            }
        }

        if (c >= 0xe3 && c <= 0xf0 && !s->no_fast_wide && !s->vt_text
            && !s->insert && !s->origin && !s->newline
            && !s->charset[s->gl])
        {
            len = ngx_pty_fast_wide(s, p, start, i, n);

            if (len != i) {
                i = len;
                continue;
            }
        }

        if (c >= 0x80) {
            i += ngx_pty_text_utf8(s, p, start, i, n, *normal);
            continue;
        }

        if (c >= 0x0a && c <= 0x0d && ngx_pty_edge_lf(s, p, start, i)) {
            i++;
            continue;
        }

        if (ngx_pty_dec_yz(s, c)) {
            /* xterm.js draws y and z as U+2264 and U+2265, libvterm not */
            ngx_pty_flush(s, p, start, i);
            ngx_pty_vt_write(s, (u_char *) (c == 'y' ? "\xe2\x89\xa4"
                                                      : "\xe2\x89\xa5"), 3);
            *start = ++i;
            continue;
        }

        if (c == 0x08 && (s->phantom || *start < i)) {
            /* the text before may be what put the cursor past the edge */
            if (*start < i) {
                ngx_pty_flush(s, p, start, i);
            }

            /* libvterm backs up from where xterm.js does */
            if (ngx_pty_past_wide(s)) {
                ngx_pty_vt_to_edge(s);
            }
        }

        if (c == 0x09) {
            if (*start < i) {
                ngx_pty_flush(s, p, start, i);
            }

            if (s->phantom) {
                /* xterm.js's HT does not move from past the edge */
                s->diverged++;
                *start = ++i;
                continue;
            }
        }

        i += ngx_pty_text_ascii(s, p, start, i, n);
    }

    return n;
}


/*
 * The input stops inside a sequence: its bytes so far (from p[esc], or
 * all of p when it began in an earlier piece), without the controls,
 * which took effect already, and the first NGX_PTY_PEND_MAX only; a
 * snapshot ends with them, so that a terminal starting there reads the
 * rest of the sequence as one.
 */
static void
ngx_pty_pend(ngx_pty_screen_t *s, const u_char *p, size_t esc, size_t n)
{
    size_t  k;

    if (esc != NGX_PTY_NO_ESC) {
        s->pend_len = 0;
        p += esc;
        n -= esc;
    }

    for (k = 0; k < n && s->pend_len < NGX_PTY_PEND_MAX; k++) {
        /* (not the bytes of a string's text past ASCII: a title cut) */
        if (p[k] >= 0x20 ? p[k] < 0x7f : p[k] == 0x1b) {
            s->pend[s->pend_len++] = p[k];
        }
    }
}


/*
 * IND, NEL or RI at p[i]: they move, but start no line in xterm.js, and
 * end a pending wrap also where they scroll (libvterm keeps it there)
 */
static void
ngx_pty_index(ngx_pty_screen_t *s, const u_char *p, size_t *start, size_t i)
{
    unsigned  phantom, wide;

    phantom = s->phantom;
    wide = ngx_pty_past_wide(s) && p[i] != 'E';
    s->no_lf = 1;
    ngx_pty_flush(s, p, start, i + 1);

    if (phantom && s->phantom) {
        ngx_pty_end_wrap(s);
    }

    s->no_lf = 0;

    if (wide) {
        /* from the last column in xterm.js, not the glyph's left half */
        ngx_pty_vt_to_edge(s);
    }
}


/*
 * An OSC ended (BEL, or ESC as xterm.js reads it): 0 and 2 set the title.
 * libvterm 0.1.4 loses an OSC that comes in two writes and does not end
 * one at ESC, so the model reads the title itself.
 */
static void
ngx_pty_osc_end(ngx_pty_screen_t *s)
{
    size_t    k;
    unsigned  id;

    if (!s->osc) {
        return;
    }

    s->osc = 0;
    id = 0;

    for (k = 0; k < s->osc_len && s->osc_buf[k] != ';'; k++) {
        if (s->osc_buf[k] < '0' || s->osc_buf[k] > '9' || k > 4) {
            return;
        }

        id = id * 10 + (s->osc_buf[k] - '0');
    }

    if (k == 0 || k == s->osc_len || (id != 0 && id != 2)) {
        return;
    }

    k++;
    s->title_len = s->osc_len - k;

    if (s->title_len > NGX_PTY_TITLE_MAX) {
        s->title_len = NGX_PTY_TITLE_MAX;
    }

    memcpy(s->title, s->osc_buf + k, s->title_len);
}


/*
 * Walks the bytes in step with libvterm's parser (parser.c), hands them to
 * libvterm in segments, and acts on the few sequences we track.
 */
static void
ngx_pty_screen_scan(ngx_pty_screen_t *s, const u_char *p, size_t n)
{
    u_char  c;
    size_t  i, k, start, normal, esc;

    if (n == 0) {
        return;
    }

    start = 0;
    normal = (s->ps == NGX_PTY_PS_NORMAL) ? 0 : n;
    esc = NGX_PTY_NO_ESC;     /* where the sequence being read starts */

    if (s->ps == NGX_PTY_PS_NORMAL) {
        s->pend_len = 0;
    }

    for (i = 0; i < n; i++) {

        if (s->ps == NGX_PTY_PS_NORMAL) {
            i = ngx_pty_text(s, p, &start, i, n, &normal);
            if (i == n) {
                break;
            }
        }

        c = p[i];

        if (c == 0x00 || c == 0x7f) {
            continue;
        }

        if (c == 0x18 || c == 0x1a) {
            s->ps = NGX_PTY_PS_NORMAL;
            s->osc = 0;
            normal = i + 1;
            continue;
        }

        if (c == 0x1b) {
            if (s->ps == NGX_PTY_PS_STRING) {
                /* xterm.js ends an OSC at any ESC, as if it were ST */
                ngx_pty_osc_end(s);
            }

            /*
             * libvterm stays in the string through more ESCs (and the
             * controls between): ESC_STRING until a byte ends it there
             */
            /* for REP: xterm.js repeats only a glyph printed just before */
            s->esc_glyph = (s->ps == NGX_PTY_PS_NORMAL
                            && ngx_pty_glyph_before(s, p, normal, i));

            s->intermedlen = 0;
            s->ps = (s->ps == NGX_PTY_PS_STRING
                     || s->ps == NGX_PTY_PS_ESC_STRING)
                    ? NGX_PTY_PS_ESC_STRING : NGX_PTY_PS_ESC;
            esc = i;
            continue;
        }

        if (c < 0x20 && !(c == 0x07 && s->ps == NGX_PTY_PS_STRING)) {
            if (s->ps != NGX_PTY_PS_STRING) {
                /* xterm.js runs it: no glyph before for a REP to repeat */
                s->esc_glyph = 0;
            }

            if (s->ps == NGX_PTY_PS_STRING) {
                /* xterm.js ignores controls in a string; libvterm runs them */
                ngx_pty_flush(s, p, &start, i);
                start = i + 1;

            } else if (c == 0x07 && s->ps == NGX_PTY_PS_ESC_STRING) {
                ngx_pty_esc_bel(s, p, &start, i);

            } else if (c == 0x0e || c == 0x0f) {
                /*
                 * LS1, LS0 inside a sequence act where they are (nothing
                 * is drawn before it ends: G<ov_g> is given back then)
                 */
                s->ov_shift |= s->ov;
                s->gl = (c == 0x0e);
                s->vt_text = 1;
            }

            continue;
        }

        if (c >= 0x80 && s->ps != NGX_PTY_PS_NORMAL
            && s->ps != NGX_PTY_PS_STRING && s->ps != NGX_PTY_PS_ESC_STRING
            && ngx_pty_utf8_broken(p, i, n))
        {
            /*
             * xterm.js's decoder drops broken UTF-8 before its parser
             * sees it: the sequence goes on (libvterm's would end)
             */
            ngx_pty_drop(s, p, &start, i);
            continue;
        }

        switch (s->ps) {

        case NGX_PTY_PS_ESC_STRING:
            if (c == 0x5c) {
                s->ps = NGX_PTY_PS_NORMAL;
                normal = i + 1;
                break;
            }

            s->ps = NGX_PTY_PS_ESC;

            /* fall through */

        case NGX_PTY_PS_ESC:
            if (s->intermedlen && (c == 'P' || c == ']' || c == '[')) {
                /*
                 * after an intermediate, a final byte as any other in
                 * xterm.js (libvterm 0.1.4 opens the string or the CSI)
                 */
                s->ps = NGX_PTY_PS_NORMAL;
                normal = i + 1;
                s->diverged++;
                ngx_pty_csi_skip(s, p, &start, i, esc);

            } else if (c == 'P' || c == ']') {
                s->ps = NGX_PTY_PS_STRING;
                s->osc = (c == ']');
                s->osc_len = 0;

            } else if (c == '[') {
                s->leaderlen = 0;
                s->ps = NGX_PTY_PS_CSI_LEADER;

            } else if (c >= 0x20 && c <= 0x2f) {
                if (s->intermedlen++ == 0) {
                    s->intermed = c;
                }

            } else if (s->intermedlen == 0 && c >= 0x40 && c < 0x60) {
                s->ps = NGX_PTY_PS_NORMAL;      /* a C1 control */
                normal = i + 1;

                if (c == 'H') {
                    /* HTS */
                    ngx_pty_flush(s, p, &start, i);
                    ngx_pty_tab_set(s, ngx_pty_xterm_col(s), 1);

                    if (ngx_pty_past_wide(s)) {
                        /* not at libvterm's column, the glyph's left half */
                        ngx_pty_csi_skip(s, p, &start, i, esc);
                    }
                }

                if (c == 'D' || c == 'E' || c == 'M') {
                    /* IND, NEL, RI: no line feed; they end a pending wrap */
                    ngx_pty_flush(s, p, &start, i);
                    ngx_pty_index(s, p, &start, i);
                }

                if (c == 'N' || c == 'O') {
                    /* SS2, SS3: xterm.js ignores them, libvterm shifts */
                    ngx_pty_csi_skip(s, p, &start, i, esc);
                    s->vt_esc = 0;
                }

            } else if (c >= 0x30 && c < 0x7f) {
                s->ps = NGX_PTY_PS_NORMAL;
                normal = i + 1;
                ngx_pty_esc(s, p, &start, i, esc, c);
            }

            break;

        case NGX_PTY_PS_CSI_LEADER:
            if (c >= 0x3c && c <= 0x3f) {
                if (s->leaderlen++ == 0) {
                    s->leader = c;
                }
                break;
            }

            s->argi = 0;
            s->args[0] = NGX_PTY_ARG_MISSING;
            s->ps = NGX_PTY_PS_CSI_ARGS;

            /* fall through */

        case NGX_PTY_PS_CSI_ARGS:
            if ((c >= '0' && c <= '9') || c == ';' || c == ':') {
                k = ngx_pty_csi_params(s->args, &s->argi, NGX_PTY_CSI_ARGS,
                                       NGX_PTY_ANY_DIGITS, p, i, n);

                if (k > i) {
                    i = k - 1;
                    break;
                }

                /* libvterm 0.1.4 would write past its csi_args[] */
                ngx_pty_flush(s, p, &start, i);
                vterm_input_write(s->vt, "\x18", 1);
                start = i + 1;
                s->ps = NGX_PTY_PS_DROP;
                break;
            }

            s->argi++;
            s->intermedlen = 0;
            s->ps = NGX_PTY_PS_CSI_INTER;

            /* fall through */

        case NGX_PTY_PS_CSI_INTER:
            if (c >= 0x20 && c <= 0x2f) {
                if (s->intermedlen++ == 0) {
                    s->intermed = c;
                }
                break;
            }

            s->ps = NGX_PTY_PS_NORMAL;
            normal = i + 1;

            if (c >= 0x40 && c <= 0x7e) {
                ngx_pty_csi(s, p, &start, i, c, esc);
            }

            break;

        case NGX_PTY_PS_STRING:
            if (c == 0x07) {
                ngx_pty_osc_end(s);
                s->ps = NGX_PTY_PS_NORMAL;
                normal = i + 1;

            } else if (s->osc && s->osc_len < NGX_PTY_OSC_MAX) {
                s->osc_buf[s->osc_len++] = c;
            }

            break;

        case NGX_PTY_PS_DROP:
        case NGX_PTY_PS_DROP_INTER:
            ngx_pty_drop(s, p, &start, i);

            if (s->ps == NGX_PTY_PS_DROP
                && ((c >= '0' && c <= '9') || c == ';' || c == ':'))
            {
                break;
            }

            if (c >= 0x20 && c <= 0x2f) {
                s->ps = NGX_PTY_PS_DROP_INTER;
                break;
            }

            s->ps = NGX_PTY_PS_NORMAL;
            normal = i + 1;
            break;
        }
    }

    if (s->ps >= NGX_PTY_PS_ESC && s->ps <= NGX_PTY_PS_CSI_INTER
        && esc != NGX_PTY_NO_ESC && esc >= start)
    {
        /* libvterm reads the rest later: its slots must be right from here */
        ngx_pty_flush(s, p, &start, esc);
        ngx_pty_vt_args(s);
    }

    ngx_pty_flush(s, p, &start, n);

    if (s->ps != NGX_PTY_PS_NORMAL) {
        ngx_pty_pend(s, p, esc, n);

    } else {
        s->pend_len = 0;
    }

    ngx_pty_scan_end(s, p, normal, n);
}


/* did the input end in a glyph (which combining marks may extend)? */
static void
ngx_pty_scan_end(ngx_pty_screen_t *s, const u_char *p, size_t normal,
    size_t n)
{
    unsigned  text, join, wide;

    /* (an earlier piece's end counts: read before it is replaced) */
    text = (s->ps == NGX_PTY_PS_NORMAL
            && ngx_pty_glyph_before(s, p, normal, n));
    join = 0;
    wide = 0;

    if (text) {
        join = ngx_pty_join_state(s, p, normal, n, &wide);
    }

    s->last_text = text;
    s->last_join = join;
    s->last_wide = wide;
}


/*
 * REP as xterm.js does it: the glyph left of the cursor (with its marks)
 * is the program's text again, count times; a row's width at most, as
 * libvterm's REP, so that a few bytes cannot cost the worker more than a
 * row of glyphs (xterm.js prints them all)
 */
static void
ngx_pty_rep(ngx_pty_screen_t *s, long n)
{
    u_char                 glyph[4 * NGX_PTY_MAX_CHARS], buf[1024];
    size_t                 glen, len, noskip_end;
    unsigned               col, k;
    uint32_t              *comb;
    VTermPos               pos;
    ngx_pty_row_t         *row;
    ngx_pty_cell_t         tmp;
    const u_char          *noskip_p;
    const ngx_pty_cell_t  *c;

    pos = ngx_pty_cursor(s);
    col = (unsigned) ngx_pty_xterm_col(s);
    row = s->cur->rows[pos.row];

    if (col == 0) {
        return;
    }

    col--;
    c = ngx_pty_row_cell(row, col, &tmp);

    if (c->ch == NGX_PTY_CONT && col > 0) {
        c = ngx_pty_row_cell(row, --col, &tmp);
    }

    if (c->ch == 0 || c->ch == NGX_PTY_CONT || c->width == 0) {
        return;
    }

    glen = ngx_pty_utf8_put(glyph, c->ch);
    comb = row->comb;

    for (k = 0; comb != NULL && k < c->ncomb; k++) {
        glen += ngx_pty_utf8_put(glyph + glen,
                                 comb[col * NGX_PTY_MAX_COMB + k]);
    }

    n = (n < 1) ? 1 : (n > (long) s->cols ? (long) s->cols : n);

    /* the skip's note points into the piece being read: kept for it */
    noskip_p = s->noskip_p;
    noskip_end = s->noskip_end;

    while (n > 0) {
        for (len = 0; n > 0 && len + glen <= sizeof(buf); n--) {
            memcpy(buf + len, glyph, glen);
            len += glen;
        }

        ngx_pty_screen_scan(s, buf, len);
    }

    s->noskip_p = noskip_p;
    s->noskip_end = noskip_end;
}


/* libvterm puts a write's length times 4 on its stack: pieces of 4 KiB */
static void
ngx_pty_vt_chunks(ngx_pty_screen_t *s, const u_char *p, size_t n)
{
    size_t  k, j;

    while (n) {
        k = n;

        if (k > NGX_PTY_WRITE_MAX) {
            /* cut before ASCII, so no glyph loses its combining marks */
            k = NGX_PTY_WRITE_MAX;

            for (j = k; j > k - 256 && p[j] >= 0x80; j--) {
                /* void */
            }

            if (p[j] < 0x80) {
                k = j;

            } else {
                while (k > 1 && (p[k] & 0xc0) == 0x80) {
                    k--;
                }
            }

            /* and never right after an ESC (ngx_pty_vt_write) */
            while (k > 1 && p[k - 1] == 0x1b) {
                k--;
            }
        }

        vterm_input_write(s->vt, (const char *) p, k);
        p += k;
        n -= k;
    }
}


/*
 * libvterm 0.1.4 reads past the end of its input when the \ of a string's
 * ESC \ does not follow the ESC in the same write: across two writes, or
 * with a NUL, DEL or C0 control in between (it copies (size_t) -1 bytes of
 * the string, bounded by its buffer).  So an ESC never ends a write: it is
 * held back, controls after it go ahead of it (libvterm acts on them the
 * same either way), and it goes in one write with the byte after them.
 */
#define ngx_pty_vt_ahead(c)                                                   \
    ((c) == 0x00 || (c) == 0x7f                                               \
     || ((c) < 0x20 && (c) != 0x1b && (c) != 0x18 && (c) != 0x1a             \
         && (c) != 0x07))

static void
ngx_pty_vt_write(ngx_pty_screen_t *s, const u_char *p, size_t n)
{
    size_t  k;
    u_char  esc[2];

    for ( ;; ) {
        while (n && s->vt_esc) {
            if (p[0] == 0x1b) {
                /* ESC ESC: the first one is moot */
                p++;
                n--;
                continue;
            }

            if (ngx_pty_vt_ahead(p[0])) {
                vterm_input_write(s->vt, (const char *) p, 1);

            } else {
                esc[0] = 0x1b;
                esc[1] = p[0];
                vterm_input_write(s->vt, (const char *) esc, 2);
                s->vt_esc = 0;
            }

            p++;
            n--;
        }

        for (k = 0; k < n; k++) {
            if (p[k] == 0x1b && (k + 1 == n || p[k + 1] == 0x1b
                                 || ngx_pty_vt_ahead(p[k + 1])))
            {
                break;
            }
        }

        ngx_pty_vt_chunks(s, p, k);

        if (k == n) {
            return;
        }

        s->vt_esc = 1;
        p += k + 1;
        n -= k + 1;
    }
}


/*
 * Combining marks that arrive in a later read than their base glyph while
 * the cursor sits on that glyph at the right edge (waiting to wrap, or
 * autowrap off): libvterm would put them alone on a cell (after wrapping);
 * a terminal reading the stream in one piece would not.
 */
static size_t
ngx_pty_absorb(ngx_pty_screen_t *s, const u_char *p, size_t n)
{
    size_t           k;
    unsigned         len, i;
    uint32_t         cp, *comb;
    ngx_pty_row_t   *row;
    ngx_pty_cell_t  *c;

    if (!s->edge || !s->last_text || s->ps != NGX_PTY_PS_NORMAL
        || (s->phantom && s->past))
    {
        /* (past it: the glyph before is a lone mark written nowhere) */
        return 0;
    }

    for (k = 0; k < n; k += len) {
        len = ngx_pty_utf8_len(p[k]);

        if (len == 0 || k + len > n) {
            break;
        }

        cp = p[k] & (0xff >> (len + 1));

        for (i = 1; i < len; i++) {
            if ((p[k + i] & 0xc0) != 0x80) {
                return k;
            }

            cp = (cp << 6) | (p[k + i] & 0x3f);
        }

        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)
            || !ngx_pty_is_combining(cp))
        {
            break;
        }

        row = s->cur->rows[s->edge_pos.row];

        if ((unsigned) s->edge_pos.col >= row->len) {
            continue;
        }

        c = &row->cells[s->edge_pos.col];

        if (c->ch != 0 && c->ch != NGX_PTY_CONT
            && c->ncomb < NGX_PTY_MAX_COMB
            && (comb = ngx_pty_row_comb(s, row)) != NULL)
        {
            comb[s->edge_pos.col * NGX_PTY_MAX_COMB + c->ncomb++] = cp;
            s->comb_own = 1;
        }
    }

    return k;
}


static void
ngx_pty_screen_input(ngx_pty_screen_t *s, const u_char *p, size_t n)
{
    size_t  k;

    k = ngx_pty_absorb(s, p, n);
    ngx_pty_screen_scan(s, p + k, n - k);
}


void
ngx_pty_screen_set_fast_wide(ngx_pty_screen_t *s, unsigned on)
{
    s->no_fast_wide = !on;
}


void
ngx_pty_screen_feed(ngx_pty_screen_t *s, const u_char *data, size_t len)
{
    u_char    buf[4], c;
    size_t    hold, i;
    unsigned  need, n;

    s->noskip_p = NULL;

    if (s->tail_len) {
        need = ngx_pty_utf8_len(s->tail[0]);

        while (s->tail_len < need && len && (*data & 0xc0) == 0x80) {
            s->tail[s->tail_len++] = *data++;
            len--;
        }

        if (s->tail_len < need && len == 0) {
            return;
        }

        n = s->tail_len;
        memcpy(buf, s->tail, n);
        s->tail_len = 0;
        ngx_pty_screen_input(s, buf, n);
    }

    /* hold back an incomplete UTF-8 sequence: libvterm would mangle it */
    hold = 0;

    for (i = 1; i <= 3 && i <= len; i++) {
        c = data[len - i];

        if ((c & 0xc0) == 0x80) {
            continue;
        }

        if (ngx_pty_utf8_len(c) > i) {
            hold = i;
        }

        break;
    }

    ngx_pty_screen_input(s, data, len - hold);

    memcpy(s->tail, data + len - hold, hold);
    s->tail_len = (unsigned) hold;
}


static void
ngx_pty_grid_release(ngx_pty_screen_t *s, ngx_pty_grid_t *g)
{
    unsigned  i;

    for (i = 0; g->rows && i < g->nrows; i++) {
        ngx_pty_row_forget(s, g, &g->row_mem[i]);
        ngx_pty_row_forget(s, g, g->rows[i]->own ? g->rows[i] : NULL);
    }

    for (i = 0; g->sb && i < g->sb_cap; i++) {
        ngx_pty_row_forget(s, g, (g->sb[i] && g->sb[i]->own) ? g->sb[i] : NULL);
    }

    ngx_pty_grid_free(g);
}


/* the memory counted for a row about to be freed */
static void
ngx_pty_row_forget(ngx_pty_screen_t *s, ngx_pty_grid_t *g, ngx_pty_row_t *row)
{
    if (row == NULL) {
        return;
    }

    if (row->comb) {
        s->comb_mem -= (size_t) g->cols * NGX_PTY_MAX_COMB * sizeof(uint32_t);
    }

    if (row->tail) {
        s->tail_mem -= ngx_pty_tail_size(row);
        s->tails--;
    }

    if (row->own) {
        s->sb_mem -= sizeof(ngx_pty_row_t) + g->cols * sizeof(ngx_pty_cell_t);
    }
}


static size_t
ngx_pty_tail_size(const ngx_pty_row_t *row)
{
    return row->tail_len * (sizeof(ngx_pty_cell_t)
                            + (row->tail_comb ? NGX_PTY_MAX_COMB
                                                * sizeof(uint32_t)
                                              : 0));
}


static void
ngx_pty_tail_drop(ngx_pty_screen_t *s, ngx_pty_row_t *row)
{
    if (row->tail == NULL) {
        return;
    }

    s->tail_mem -= ngx_pty_tail_size(row);
    s->tails--;

    free(row->tail);
    free(row->tail_comb);
    row->tail = NULL;
    row->tail_comb = NULL;
    row->tail_len = 0;
}


/* xterm.js makes the alternate buffer's lines anew on entering and leaving */
static void
ngx_pty_tails_drop_all(ngx_pty_screen_t *s)
{
    unsigned  r;

    for (r = 0; s->tails && r < s->grid[1].nrows; r++) {
        ngx_pty_tail_drop(s, s->grid[1].rows[r]);
    }
}


/* the cells of an xterm.js line past cols, into the row's tail */
static int
ngx_pty_tail_set(ngx_pty_screen_t *s, ngx_pty_row_t *row,
    const ngx_pty_row_t *line, unsigned cols)
{
    unsigned  i, n, marks;

    n = line->len - cols;

    if (row->tail == NULL || row->tail_len != n) {
        ngx_pty_tail_drop(s, row);

        row->tail = malloc(n * sizeof(ngx_pty_cell_t));
        if (row->tail == NULL) {
            return -1;
        }

        row->tail_len = n;
        s->tails++;
        s->tail_mem += ngx_pty_tail_size(row);
    }

    memcpy(row->tail, &line->cells[cols], n * sizeof(ngx_pty_cell_t));

    for (marks = 0, i = 0; i < n; i++) {
        marks += (row->tail[i].ncomb != 0);
    }

    if (marks && line->comb && row->tail_comb == NULL) {
        row->tail_comb = malloc(n * NGX_PTY_MAX_COMB * sizeof(uint32_t));

        if (row->tail_comb != NULL) {
            s->tail_mem += n * NGX_PTY_MAX_COMB * sizeof(uint32_t);
        }
    }

    if (marks && line->comb && row->tail_comb) {
        memcpy(row->tail_comb, &line->comb[cols * NGX_PTY_MAX_COMB],
               n * NGX_PTY_MAX_COMB * sizeof(uint32_t));
        return 0;
    }

    for (i = 0; i < n; i++) {
        row->tail[i].ncomb = 0;
    }

    return 0;
}


/*
 * A row as xterm.js's whole line, its tail included (NULL when it has no
 * tail, or out of memory: the model then changes the screen's part only)
 */
static ngx_pty_row_t *
ngx_pty_tail_line(ngx_pty_screen_t *s, ngx_pty_row_t *row, ngx_pty_rbuf_t *b)
{
    ngx_pty_row_t  *line;

    if (row->tail == NULL
        || ngx_pty_rbuf_init(b, 1, s->cols + row->tail_len) != 0)
    {
        return NULL;
    }

    line = ngx_pty_rbuf_add(b, row, row->comb, s->cols);

    if (line == NULL) {
        ngx_pty_rbuf_free(b);
        return NULL;
    }

    ngx_pty_rbuf_add_tail(b, line, row);

    return line;
}


/* text in insert mode: xterm.js shifts the whole line, the tail too */
static void
ngx_pty_tail_insert(ngx_pty_screen_t *s, ngx_pty_row_t *row, unsigned col,
    unsigned n)
{
    ngx_pty_pen_t    pen;
    ngx_pty_row_t   *line;
    ngx_pty_rbuf_t   b;

    line = ngx_pty_tail_line(s, row, &b);
    if (line == NULL) {
        return;
    }

    pen = ngx_pty_erase_pen(s);
    ngx_pty_rline_insert(&b, line, col, n, &pen);

    if (ngx_pty_tail_set(s, row, line, s->cols) != 0) {
        ngx_pty_tail_drop(s, row);
    }

    ngx_pty_rbuf_free(&b);
}


/*
 * ICH, DCH or ECH (c, count n) as xterm.js does it to the whole line, put
 * back over what the model did to the screen's part
 */
static void
ngx_pty_tail_shift(ngx_pty_screen_t *s, ngx_pty_rbuf_t *b,
    ngx_pty_row_t *line, u_char c, long n)
{
    unsigned         x;
    VTermPos         pos;
    ngx_pty_pen_t    pen;
    ngx_pty_row_t   *row;
    ngx_pty_cell_t  *cell;

    pos = ngx_pty_cursor(s);
    row = s->cur->rows[pos.row];
    x = (unsigned) pos.col < s->cols ? (unsigned) pos.col : s->cols - 1;
    pen = ngx_pty_erase_pen(s);
    n = (n < 1) ? 1 : (n > (long) line->len ? (long) line->len : n);

    if (c == '@') {
        ngx_pty_rline_insert(b, line, x, n, &pen);

    } else if (c == 'P') {
        ngx_pty_rline_delete(b, line, x, n, &pen);

    } else {
        ngx_pty_rline_replace(line, x, x + n, &pen);
    }

    ngx_pty_row_copy(s, row, 0, line, 0, s->cols);

    /* a glyph whose right half is past the edge: no stream writes it */
    cell = &row->cells[s->cols - 1];

    if (cell->ch != 0 && cell->ch != NGX_PTY_CONT && cell->width == 2) {
        ngx_pty_cell_blank(s, cell, &pen);
    }

    if (ngx_pty_tail_set(s, row, line, s->cols) != 0) {
        ngx_pty_tail_drop(s, row);
    }

    s->diverged++;
    ngx_pty_rbuf_free(b);
}


/* ED: xterm.js's fill() of the whole lines it erases, tails too */
static void
ngx_pty_tails_erase(ngx_pty_screen_t *s, unsigned long v, unsigned selective)
{
    int              r, from, to;
    VTermPos         pos;
    ngx_pty_pen_t    pen;
    ngx_pty_row_t   *row;

    pos = ngx_pty_cursor(s);

    switch (v) {
    case 0:
        from = pos.row + 1;
        to = s->rows;
        break;
    case 1:
        from = 0;
        to = pos.row;
        break;
    case 2:
        from = 0;
        to = s->rows;
        break;
    default:
        return;
    }

    pen = ngx_pty_erase_pen(s);

    for (r = from; r < to; r++) {
        row = s->cur->rows[r];
        ngx_pty_cells_erase(row->tail, row->tail_len, &pen, selective);
    }
}


/*
 * EL 1 and ED 1 past the edge: xterm.js erases its line up to the cursor
 * and one more, so a tail's cells to there too
 */
static void
ngx_pty_tail_erase_to(ngx_pty_screen_t *s, unsigned selective)
{
    unsigned        n;
    ngx_pty_pen_t   pen;
    ngx_pty_row_t  *row;

    row = s->cur->rows[ngx_pty_cursor(s).row];
    n = s->past + 1;

    if (row->tail != NULL) {
        pen = ngx_pty_erase_pen(s);
        ngx_pty_cells_erase(row->tail, n < row->tail_len ? n : row->tail_len,
                            &pen, selective);
    }
}


/* DECALN: xterm.js's fill() of every line with the E it draws */
static void
ngx_pty_tails_align(ngx_pty_screen_t *s)
{
    unsigned         r, i;
    ngx_pty_cell_t   tmp;
    ngx_pty_row_t   *row;
    const ngx_pty_cell_t  *e;

    for (r = s->align_top; r < s->rows; r++) {
        row = s->cur->rows[r];

        if (row->tail == NULL) {
            continue;
        }

        e = ngx_pty_row_cell(row, 0, &tmp);

        for (i = 0; i < row->tail_len; i++) {
            row->tail[i] = *e;
            row->tail[i].ncomb = 0;
        }
    }
}


/*
 * The lines a skip jumped over, made into rows (at most max, the newest)
 * by a model of their own that skips nothing; returns how many
 */
static long
ngx_pty_sb_raw_lines(ngx_pty_screen_t *s, ngx_pty_rbuf_t *b, unsigned cols,
    unsigned max)
{
    long               n, i, from;
    VTermPos           cur;
    ngx_pty_grid_t    *g;
    ngx_pty_row_t     *row;
    ngx_pty_screen_t  *t;

    t = ngx_pty_screen_create(cols, s->rows);
    if (t == NULL) {
        return -1;
    }

    t->no_skip = 1;
    ngx_pty_screen_feed(t, s->sb_raw, s->sb_raw_len);

    /* the bytes end with a line feed: whole lines above the cursor */
    g = &t->grid[0];
    cur = ngx_pty_cursor(t);
    n = g->sb_len + cur.row;
    from = (n > (long) max) ? n - max : 0;

    for (i = from; i < n; i++) {
        row = ngx_pty_grid_line(g, i);

        if (ngx_pty_rbuf_add(b, row, row->comb, cols) == NULL) {
            ngx_pty_screen_destroy(t);
            return -1;
        }
    }

    ngx_pty_screen_destroy(t);

    return n - from;
}


/* a buffer of the model in xterm.js's terms, for ngx_pty_rbuf_resize() */
static int
ngx_pty_rbuf_from_grid(ngx_pty_screen_t *s, ngx_pty_rbuf_t *b,
    ngx_pty_grid_t *g, unsigned cols, VTermPos cursor, unsigned k)
{
    long            raw;
    unsigned        i, n, width;
    ngx_pty_row_t  *row, *line;

    n = g->sb_len + g->nrows;
    raw = 0;
    width = g->cols;

    for (i = 0; s->tails && i < g->nrows; i++) {
        if (g->cols + g->rows[i]->tail_len > width) {
            width = g->cols + g->rows[i]->tail_len;
        }
    }

    if (ngx_pty_rbuf_init(b, n, cols > width ? cols : width) != 0) {
        return -1;
    }

    if (k == 0 && s->sb_raw != NULL) {
        raw = ngx_pty_sb_raw_lines(s, b, g->cols, s->sb_lost);

        if (raw < 0) {
            ngx_pty_rbuf_free(b);
            return -1;
        }
    }

    for (i = 0; i < n; i++) {
        row = ngx_pty_grid_line(g, i);
        line = ngx_pty_rbuf_add(b, row, row->comb, g->cols);

        if (line == NULL) {
            ngx_pty_rbuf_free(b);
            return -1;
        }

        if (row->tail) {
            ngx_pty_rbuf_add_tail(b, line, row);
        }
    }

    b->lost = (k == 0) ? s->sb_lost - raw : 0;
    b->ybase = b->lost + raw + g->sb_len;
    b->scrollback = (k == 0) ? NGX_PTY_XTERM_SCROLLBACK : 0;
    b->max_length = (k == 0) ? 0 : s->alt_max;
    b->cols = g->cols;
    b->rows = g->nrows;
    b->x = cursor.col;
    b->y = cursor.row;
    /*
     * xterm.js's saved row is a line of the buffer: never saved, its first;
     * its reflow can leave it at -1, which the next reflow moves on from
     */
    b->saved_y = s->saved_valid[k] ? (long) b->ybase + s->saved_pos[k].row
                                   : 0;
    b->saved_x = s->saved_pos[k].col;
    b->null_pen = s->default_pen;

    return 0;
}


/* a line of the resized buffer into a row of the new grid */
static int
ngx_pty_row_from_line(ngx_pty_screen_t *s, ngx_pty_row_t *row,
    ngx_pty_row_t *line, unsigned cols)
{
    size_t            size;
    unsigned          i, n;
    ngx_pty_cell_t   *c;

    row->len = 0;
    row->wrapped = 0;
    row->fill = s->default_pen;

    if (line == NULL) {
        return 0;
    }

    row->wrapped = line->wrapped;
    n = line->len < cols ? line->len : cols;
    for (i = 0; i < n; i++) {
        c = &line->cells[i];

        if (ngx_pty_wide_left(c)
            && (i + 1 >= line->len || line->cells[i + 1].ch != NGX_PTY_CONT))
        {
            /*
             * a glyph the edge cut, or with a cell of its own in its
             * second column (as xterm.js's reflow leaves one it moved
             * down a line, or a narrowing cut, overlapped by the next):
             * kept as xterm.js keeps it, for a later widening's reflow
             * counts it, and the next glyph printed blanks it.  A
             * snapshot makes one before the last column and moves it
             * (ngx_pty_paint_moved_claim()); others it paints, and the
             * text shows, as blanks (ngx_pty_cell_space())
             */
            s->wide = 1;
        }
    }

    /* trailing null cells in the default pen stay lazy */
    while (n > 0) {
        c = &line->cells[n - 1];

        if (c->ch != 0 || !ngx_pty_pen_eq(&c->pen, &s->default_pen, 0xffff)) {
            break;
        }

        n--;
    }

    memcpy(row->cells, line->cells, n * sizeof(ngx_pty_cell_t));
    row->len = n;

    if (line->len > cols && ngx_pty_tail_set(s, row, line, cols) != 0) {
        return -1;
    }

    for (i = 0; i < n && row->cells[i].ncomb == 0; i++) {
        /* void */
    }

    if (i == n || line->comb == NULL) {
        for (i = 0; i < n; i++) {
            row->cells[i].ncomb = 0;
        }

        return 0;
    }

    size = (size_t) cols * NGX_PTY_MAX_COMB * sizeof(uint32_t);
    row->comb = malloc(size);

    if (row->comb == NULL) {
        return -1;
    }

    s->comb_mem += size;
    memcpy(row->comb, line->comb, (size_t) n * NGX_PTY_MAX_COMB
                                  * sizeof(uint32_t));

    return 0;
}


/*
 * The new grid from a resized buffer: its screen, and for the main buffer
 * the newest scrollback lines in a ring; older ones count as lost
 */
static int
ngx_pty_grid_from_rbuf(ngx_pty_screen_t *s, ngx_pty_grid_t *g,
    ngx_pty_rbuf_t *b, unsigned *lost)
{
    unsigned         r, n, cap;
    ngx_pty_row_t   *row;

    for (r = 0; r < g->nrows; r++) {
        if (ngx_pty_row_from_line(s, g->rows[r],
                                  ngx_pty_rbuf_get(b, (long) b->ybase + r),
                                  g->cols)
            != 0)
        {
            return -1;
        }
    }

    *lost = 0;

    if (b->scrollback == 0) {
        return 0;
    }

    cap = ngx_pty_sb_cap(g->nrows, g->cols);
    n = b->ybase - b->lost;
    n = n < cap ? n : cap;

    /*
     * the line the oldest row kept belongs to is kept whole, up to twice
     * the ring: the next resize reflows it from its start, as xterm.js
     */
    while (n < b->ybase - b->lost && n < 2 * cap
           && n < NGX_PTY_XTERM_SCROLLBACK)
    {
        row = ngx_pty_rbuf_get(b, (long) b->ybase - n);

        if (row == NULL || !row->wrapped) {
            break;
        }

        n++;
    }

    cap = n > cap ? n : cap;
    *lost = b->ybase - n;

    if (n == 0) {
        return 0;
    }

    g->sb = calloc(cap, sizeof(ngx_pty_row_t *));
    if (g->sb == NULL) {
        return -1;
    }

    g->sb_cap = cap;

    for (r = 0; r < n; r++) {
        row = ngx_pty_row_new(s, g->cols);
        if (row == NULL) {
            return -1;
        }

        g->sb[r] = row;
        g->sb_len = r + 1;

        if (ngx_pty_row_from_line(s, row,
                                  ngx_pty_rbuf_get(b, (long) b->ybase - n + r),
                                  g->cols)
            != 0)
        {
            return -1;
        }
    }

    return 0;
}


/*
 * buffer k resized as xterm.js resizes it, into the new grid ng; "moved"
 * is whether the saved row is another line than the buffer's first now
 */
static int
ngx_pty_resize_buffer(ngx_pty_screen_t *s, unsigned k, unsigned cols,
    unsigned rows, ngx_pty_grid_t *ng, VTermPos *cursor, VTermPos *saved,
    unsigned *moved, unsigned *lost)
{
    int             rc;
    ngx_pty_rbuf_t  b;

    if (ngx_pty_rbuf_from_grid(s, &b, &s->grid[k], cols, *cursor, k) != 0) {
        return -1;
    }

    rc = ngx_pty_rbuf_resize(&b, cols, rows);

    if (rc == 0) {
        rc = ngx_pty_grid_from_rbuf(s, ng, &b, lost);
    }

    cursor->row = b.y;
    cursor->col = b.x;
    saved->row = (int) (b.saved_y - (long) b.ybase);
    saved->col = b.saved_x;
    *moved = (b.saved_y != 0);

    ngx_pty_rbuf_free(&b);

    return rc;
}


static int
ngx_pty_cb_resize(int rows, int cols, VTermPos *delta, void *user)
{
    ngx_pty_screen_t  *s = user;

    ngx_pty_grid_t  *ng;

    ng = s->new_grid;

    if (ng == NULL) {
        return 1;
    }

    /* the grids were made by ngx_pty_screen_resize(); it puts the cursor */
    ngx_pty_grid_release(s, &s->grid[0]);
    s->grid[0] = ng[0];

    ngx_pty_grid_release(s, &s->grid[1]);
    s->grid[1] = ng[1];

    s->new_grid = NULL;
    s->cur = s->alt ? &s->grid[1] : &s->grid[0];
    s->cols = cols;
    s->rows = rows;
    delta->row = 0;
    delta->col = 0;

    return 1;
}


/*
 * A resize as xterm.js does it to both its buffers: reflow, rows from and
 * into the scrollback, the cursor and the saved cursors moved with them,
 * the scroll region reset; everything that can fail comes first, so a
 * failed resize leaves the model as it was.
 */
int
ngx_pty_screen_resize(ngx_pty_screen_t *s, unsigned cols, unsigned rows)
{
    unsigned        k, held, lost, alt_lost, moved[2];
    VTermPos        cur[2], saved[2];
    ngx_pty_grid_t  ng[2];

    if (cols == 0 || rows == 0 || cols > NGX_PTY_SCREEN_MAX_COLS
        || rows > NGX_PTY_SCREEN_MAX_ROWS)
    {
        return -1;
    }

    if (cols == s->cols && rows == s->rows) {
        return 0;
    }

    memset(ng, 0, sizeof(ng));

    cur[1] = ngx_pty_cursor(s);
    cur[1].col = ngx_pty_xterm_col(s);
    cur[0] = cur[1];

    if (s->alt) {
        /* xterm.js's main buffer keeps the cursor it had when left */
        cur[0].row = s->norm_y;
        cur[0].col = s->norm_x;
    }

    if (ngx_pty_grid_alloc(&ng[0], cols, rows, &s->default_pen) != 0) {
        return -1;
    }

    if (ngx_pty_resize_buffer(s, 0, cols, rows, &ng[0], &cur[0], &saved[0],
                              &moved[0], &lost)
        != 0)
    {
        goto failed;
    }

    saved[1] = s->saved_pos[1];
    moved[1] = 0;

    /* the alternate buffer not in use is empty in xterm.js: made anew */
    if (s->alt
        && (ngx_pty_grid_alloc(&ng[1], cols, rows, &s->default_pen) != 0
            || ngx_pty_resize_buffer(s, 1, cols, rows, &ng[1], &cur[1],
                                     &saved[1], &moved[1], &alt_lost)
               != 0))
    {
        goto failed;
    }

    s->new_grid = ng;
    vterm_set_size(s->vt, rows, cols);

    if (s->new_grid) {
        /* libvterm did not call back (cannot happen) */
        s->new_grid = NULL;
        goto failed;
    }

    s->diverged++;
    s->sb_lost = lost;
    s->sb_stale = 0;
    ngx_pty_sb_free_raw(s);     /* its lines are in the new ring */
    s->saved_pos[0] = saved[0];
    s->saved_pos[1] = saved[1];

    for (k = 0; k < 2; k++) {
        /*
         * a reflow moves xterm.js's saved row even if nothing was saved
         * (into the scrollback too: a Keyframe saves it there)
         */
        if (!s->saved_valid[k] && moved[k]) {
            s->saved_valid[k] = 1;
            s->saved_pen[k] = s->default_pen;
            s->saved_set[k] = 0;
            s->saved_protect[k] = 0;
            s->saved_flagless[k] = 0;
        }
    }

    if (s->alt) {
        s->norm_y = cur[0].row;
        s->norm_x = cur[0].col;
        /* in use, the list was cut to the rows (ng[1] has none above) */
        s->alt_max = rows;

    } else {
        cur[1] = cur[0];
        /* empty, it only grows */
        s->alt_max = (rows > s->alt_max) ? rows : s->alt_max;
    }

    /*
     * libvterm may be inside a sequence this read cut: it is taken out
     * (CAN) for what follows, and put back in with the sequence's bytes
     * (not when the model is dropping an over-long CSI: libvterm, which
     * would overrun its parameters, was taken out of it then)
     */
    held = (s->pend_len > 0 && !s->vt_esc && s->ps != NGX_PTY_PS_DROP
            && s->ps != NGX_PTY_PS_DROP_INTER);

    if (held) {
        vterm_input_write(s->vt, "\x18", 1);
    }

    /* xterm.js resets the scroll regions; libvterm's DECSTBM homes it */
    s->top = 0;
    s->bottom = -1;
    s->norm_top = 0;
    s->norm_bottom = -1;
    vterm_input_write(s->vt, "\x1b[r", 3);

    ngx_pty_tabs_resize(s, cols);
    ngx_pty_vt_tabs(s);

    ngx_pty_vt_cup(s, cur[1]);
    s->phantom = 0;

    if (held) {
        vterm_input_write(s->vt, (char *) s->pend, s->pend_len);
    }

    /*
     * the last glyph may have moved or gone: marks find it by the cursor,
     * not where libvterm printed it
     */
    s->edge = 0;
    s->comb_own = 1;

    return 0;

failed:

    ngx_pty_grid_release(s, &ng[0]);
    ngx_pty_grid_release(s, &ng[1]);

    return -1;
}


/* libvterm's allocations, counted for ngx_pty_screen_memory() */

static void *
ngx_pty_vt_malloc(size_t size, void *data)
{
    ngx_pty_screen_t  *s = data;

    size_t  *p;

    p = calloc(1, size + sizeof(size_t) * 2);   /* libvterm wants zeroes */
    if (p == NULL) {
        return NULL;
    }

    p[0] = size;
    s->vt_mem += size;

    return p + 2;
}


static void
ngx_pty_vt_free(void *ptr, void *data)
{
    ngx_pty_screen_t  *s = data;

    size_t  *p;

    if (ptr == NULL) {
        return;
    }

    p = (size_t *) ptr - 2;
    s->vt_mem -= p[0];
    free(p);
}


static VTermAllocatorFunctions  ngx_pty_vt_allocator = {
    ngx_pty_vt_malloc,
    ngx_pty_vt_free
};


static const VTermStateCallbacks  ngx_pty_state_callbacks = {
    ngx_pty_cb_putglyph,
    ngx_pty_cb_movecursor,
    ngx_pty_cb_scrollrect,
    NULL,                       /* moverect: scrollrect does it all */
    ngx_pty_cb_erase,
    ngx_pty_cb_initpen,
    ngx_pty_cb_setpenattr,
    ngx_pty_cb_settermprop,
    ngx_pty_cb_bell,
    ngx_pty_cb_resize,
    NULL                        /* setlineinfo: line attributes ignored */
};


ngx_pty_screen_t *
ngx_pty_screen_create(unsigned cols, unsigned rows)
{
    VTermColor         fg, bg;
    ngx_pty_screen_t  *s;

    if (cols == 0 || rows == 0 || cols > NGX_PTY_SCREEN_MAX_COLS
        || rows > NGX_PTY_SCREEN_MAX_ROWS)
    {
        return NULL;
    }

    s = calloc(1, sizeof(ngx_pty_screen_t));
    if (s == NULL) {
        return NULL;
    }

    s->cols = cols;
    s->rows = rows;
    s->alt_max = rows;

    s->vt = vterm_new_with_allocator(rows, cols, &ngx_pty_vt_allocator, s);
    if (s->vt == NULL) {
        free(s);
        return NULL;
    }

    vterm_set_utf8(s->vt, 1);
    vterm_output_set_callback(s->vt, ngx_pty_output, s);

    s->state = vterm_obtain_state(s->vt);

    vterm_state_get_default_colors(s->state, &fg, &bg);
    s->default_pen.attr = 0;
    s->default_pen.fg = ngx_pty_color(&fg);
    s->default_pen.bg = ngx_pty_color(&bg);
    s->default_pen.ul = s->default_pen.fg;
    s->pen = s->default_pen;

    if (ngx_pty_grid_alloc(&s->grid[0], cols, rows, &s->default_pen) != 0) {
        vterm_free(s->vt);
        free(s);
        return NULL;
    }

    s->cur = &s->grid[0];
    s->visible = 1;
    s->props.style = -1;
    s->props.blink12 = -1;
    s->props.blink_pre = -1;
    ngx_pty_hard_reset(s);

    vterm_state_set_callbacks(s->state, &ngx_pty_state_callbacks, s);
    vterm_state_reset(s->state, 1);

    return s;
}


void
ngx_pty_screen_destroy(ngx_pty_screen_t *s)
{
    if (s == NULL) {
        return;
    }

    vterm_free(s->vt);
    ngx_pty_grid_free(&s->grid[0]);
    ngx_pty_grid_free(&s->grid[1]);
    free(s->sb_raw);
    free(s);
}


void
ngx_pty_screen_set_reply(ngx_pty_screen_t *s, ngx_pty_screen_reply_pt handler,
    void *data)
{
    s->reply = handler;
    s->reply_data = data;
}


void
ngx_pty_screen_size(ngx_pty_screen_t *s, unsigned *cols, unsigned *rows)
{
    *cols = s->cols;
    *rows = s->rows;
}


size_t
ngx_pty_screen_memory(ngx_pty_screen_t *s)
{
    size_t  size, grid;

    grid = (size_t) s->rows * (3 * sizeof(ngx_pty_row_t *)
                               + sizeof(ngx_pty_row_t)
                               + (size_t) s->cols * sizeof(ngx_pty_cell_t));

    size = sizeof(ngx_pty_screen_t) + grid + s->comb_mem + s->vt_mem
           + s->sb_mem + s->tail_mem;

    if (s->grid[1].rows) {
        size += grid;
    }

    return size;
}


/* snapshot writer: tracks what the receiving terminal holds */

typedef struct {
    u_char         *buf;
    size_t          len;
    size_t          cap;
    int             failed;
    int             row;        /* -1: unknown (e.g. a pending wrap) */
    int             col;
    int             shift;      /* lines scrolled away: row is row - shift */
    unsigned        visible:1;
    unsigned        saved_main:1;   /* main buffer's DECSC already sent */
    ngx_pty_pen_t   pen;
    u_char          protect;    /* DECSCA: 0, 1, NGX_PTY_PROTECT_UNKNOWN */
    size_t          glyph_end;  /* after a pending wrap's glyph, 0: none */
    unsigned        pending;    /* ngx_pty_emit_end() left a pending wrap */
    unsigned        keep_ul;    /* SGR keeps xterm.js's extended mark */
    u_char          gl_set;     /* the SCS final GL draws after the tail */
    ngx_pty_row_t   edge;       /* blanks, a moved cell in its last two */
} ngx_pty_emit_t;


/* after an SGR 0 (xterm.js drops DECSCA there, libvterm not), a DECRC */
#define NGX_PTY_PROTECT_UNKNOWN  2


static void ngx_pty_emit_end(ngx_pty_emit_t *e, ngx_pty_screen_t *s);
static void ngx_pty_paint_cut(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col);
static void ngx_pty_paint_claim(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col, const ngx_pty_cell_t *c);
static unsigned ngx_pty_paint_wrap_cells(ngx_pty_emit_t *e,
    ngx_pty_screen_t *s, ngx_pty_grid_t *g, int r);
static int ngx_pty_cuts_wide(const ngx_pty_row_t *row, unsigned col);
static void ngx_pty_emit_sgr0(ngx_pty_emit_t *e, const ngx_pty_pen_t *def);


/* room for n more bytes; 0, or -1 when out of memory */
static int
ngx_pty_emit_reserve(ngx_pty_emit_t *e, size_t n)
{
    size_t   cap;
    u_char  *p;

    if (e->failed) {
        return -1;
    }

    if (e->len + n > e->cap) {
        cap = (e->cap + n) * 2;
        p = realloc(e->buf, cap);

        if (p == NULL) {
            e->failed = 1;
            return -1;
        }

        e->buf = p;
        e->cap = cap;
    }

    return 0;
}


static void
ngx_pty_emit(ngx_pty_emit_t *e, const void *data, size_t n)
{
    if (ngx_pty_emit_reserve(e, n) == 0) {
        memcpy(e->buf + e->len, data, n);
        e->len += n;
    }
}


static void
ngx_pty_emitf(ngx_pty_emit_t *e, const char *fmt, int a, int b)
{
    int   n;
    char  tmp[64];

    n = snprintf(tmp, sizeof(tmp), fmt, a, b);

    if (n > 0) {
        ngx_pty_emit(e, tmp, (size_t) n < sizeof(tmp) ? (size_t) n
                                                       : sizeof(tmp) - 1);
    }
}


static void
ngx_pty_emit_csi(ngx_pty_emit_t *e, int a, int b, char final)
{
    char  buf[32];

    ngx_pty_emit(e, buf, ngx_pty_put_csi(buf, (unsigned) a, b, final));
}


static void
ngx_pty_emit_move(ngx_pty_emit_t *e, int row, int col)
{
    if (e->row == row && e->col == col) {
        return;
    }

    if (e->row == row && e->col >= 0 && col > e->col) {
        if (col - e->col == 1) {
            ngx_pty_emit(e, "\x1b[C", 3);
        } else {
            ngx_pty_emit_csi(e, col - e->col, -1, 'C');
        }

    } else if (col == 0) {
        if (row == e->shift) {
            ngx_pty_emit(e, "\x1b[H", 3);
        } else {
            ngx_pty_emit_csi(e, row - e->shift + 1, -1, 'H');
        }

    } else {
        ngx_pty_emit_csi(e, row - e->shift + 1, col + 1, 'H');
    }

    e->row = row;
    e->col = col;
}


/* the pen by the attributes that differ alone: no SGR 0 (it keeps a style) */
static void
ngx_pty_emit_sgr_diff(ngx_pty_emit_t *e, const ngx_pty_pen_t *want)
{
    char  buf[160], *p;

    p = ngx_pty_sgr_diff(buf, &e->pen, want, NGX_PTY_A_SGR, 1);
    ngx_pty_emit(e, buf, p - buf);

    e->pen = *want;
}


/* SGR for what differs between the terminal's pen and "want" */
static void
ngx_pty_emit_sgr(ngx_pty_emit_t *e, const ngx_pty_pen_t *want,
    const ngx_pty_pen_t *def)
{
    ngx_pty_pen_t  kept;

    if (ngx_pty_pen_eq(&e->pen, want, NGX_PTY_A_SGR)) {
        return;
    }

    if (e->keep_ul) {
        /*
         * the underline and its colour as the terminal has them: SGR 0,
         * an underline's or its colour's would drop the extended mark
         * xterm.js's pen has without a style (ngx_pty_emit_mark_pen())
         */
        kept = *want;
        kept.attr = (kept.attr & ~NGX_PTY_A_UL) | (e->pen.attr & NGX_PTY_A_UL);
        kept.xattr = (kept.xattr & ~NGX_PTY_X_UL)
                     | (e->pen.xattr & NGX_PTY_X_UL);
        kept.ul = e->pen.ul;
        want = &kept;

    } else if (ngx_pty_pen_eq(want, def, NGX_PTY_A_SGR)) {
        ngx_pty_emit_sgr0(e, def);
        return;

    } else if (ngx_pty_color_eq(&want->ul, &def->ul)
               && !ngx_pty_color_eq(&e->pen.ul, &def->ul))
    {
        /* only SGR 0 gives xterm.js its default underline colour back */
        ngx_pty_emit_sgr0(e, def);
    }

    ngx_pty_emit_sgr_diff(e, want);
}


/*
 * xterm.js's SGR 0 drops DECSCA's protection too, libvterm's not: which
 * one the terminal has is not known until DECSCA is said again
 */
static void
ngx_pty_emit_sgr0(ngx_pty_emit_t *e, const ngx_pty_pen_t *def)
{
    ngx_pty_emit(e, "\x1b[m", 3);
    e->pen = *def;
    if (e->protect) {
        e->protect = NGX_PTY_PROTECT_UNKNOWN;
    }
}


static void
ngx_pty_emit_protect(ngx_pty_emit_t *e, unsigned on)
{
    if (e->protect != on) {
        ngx_pty_emit(e, on ? "\x1b[1\"q" : "\x1b[0\"q", 5);
        e->protect = on;
    }
}


/* a cell's pen and its DECSCA, in that order: an SGR 0 may drop DECSCA */
static void
ngx_pty_emit_pen(ngx_pty_emit_t *e, const ngx_pty_pen_t *pen,
    const ngx_pty_pen_t *def)
{
    ngx_pty_emit_sgr(e, pen, def);
    ngx_pty_emit_protect(e, (pen->attr & NGX_PTY_A_PROTECT) ? 1 : 0);
}


/* the cursor's style only as the program set it */
static void
ngx_pty_emit_style(ngx_pty_emit_t *e, const ngx_pty_cursor_props_t *p)
{
    if (p->style >= 0 && p->blink_pre >= 0) {
        ngx_pty_emit(e, p->blink_pre ? "\x1b[?12h" : "\x1b[?12l", 6);
    }

    if (p->style >= 0) {
        ngx_pty_emitf(e, "\x1b[%d q", p->style, 0);
    }

    if (p->blink12 >= 0) {
        ngx_pty_emit(e, p->blink12 ? "\x1b[?12h" : "\x1b[?12l", 6);
    }
}


/*
 * First: the style as it was at the last DECSTR or RIS, then a DECSTR,
 * which xterm.js 5.5 keeps it through and 6.0 not (on a reset terminal
 * it changes nothing else); the style set since comes last
 */
static void
ngx_pty_emit_reset_style(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    const ngx_pty_cursor_props_t  *p;

    p = &s->props_reset;

    if (p->style < 0 && p->blink12 < 0) {
        return;
    }

    ngx_pty_emit_style(e, p);
    ngx_pty_emit(e, "\x1b[!p", 4);
}


/* the cursor's visibility, and its style only as the program set it */
static void
ngx_pty_emit_props(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    if (e->visible != s->visible) {
        ngx_pty_emit(e, s->visible ? "\x1b[?25h" : "\x1b[?25l", 6);
        e->visible = s->visible;
    }

    ngx_pty_emit_style(e, &s->props_since);
}


static void
ngx_pty_emit_chars(ngx_pty_emit_t *e, const ngx_pty_row_t *row,
    unsigned col, const ngx_pty_cell_t *c)
{
    u_char    buf[4 * NGX_PTY_MAX_CHARS];
    size_t    n;
    unsigned  i;

    /* (never a blank: the marks of one are xterm.js's join to nothing) */
    n = ngx_pty_utf8_put(buf, c->ch);

    for (i = 0; i < c->ncomb && row->comb; i++) {
        n += ngx_pty_utf8_put(buf + n, row->comb[col * NGX_PTY_MAX_COMB + i]);
    }

    ngx_pty_emit(e, buf, n);
}


static int
ngx_pty_cell_default(ngx_pty_screen_t *s, const ngx_pty_cell_t *c)
{
    /* (a protected blank is not: DECSED keeps it) */
    return c->ch == 0 && !(c->pen.attr & NGX_PTY_A_PROTECT)
           && ngx_pty_pen_eq(&c->pen, &s->default_pen, NGX_PTY_A_SGR);
}


/*
 * The glyph of column col, with its combining marks, painted at column at;
 * the terminal's cursor is then left unknown.
 */
static void
ngx_pty_emit_glyph_at(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned at, unsigned col,
    const ngx_pty_cell_t *c)
{
    ngx_pty_emit_move(e, r, at);
    ngx_pty_emit_pen(e, &c->pen, &s->default_pen);

    if (c->width == 0 && at == 0) {
        /* a lone mark in the first column: xterm.js gives it the cell */
        ngx_pty_emit_chars(e, row, col, c);
        e->col = (s->cols > 1) ? 1 : -1;
        return;
    }

    if (c->width == 0) {
        /* a lone mark: put a space first so it cannot combine leftwards */
        ngx_pty_emit(e, " ", 1);
        e->col = -1;
        ngx_pty_emit_move(e, r, at);
    }

    ngx_pty_emit_chars(e, row, col, c);
    e->col = -1;
}


/* one glyph at (row, col) */
static void
ngx_pty_emit_glyph(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col, const ngx_pty_cell_t *c)
{
    ngx_pty_emit_glyph_at(e, s, row, r, col, col, c);
}


static int ngx_pty_blank_whole(ngx_pty_screen_t *s, const ngx_pty_cell_t *c);
static void ngx_pty_paint_blank_whole(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    int r, unsigned col, const ngx_pty_cell_t *c);
static void ngx_pty_paint_orphan(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col, unsigned depth);


/* repaint a cell a trick below has clobbered */
static void
ngx_pty_repaint(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col, unsigned depth)
{
    ngx_pty_pen_t          pen;
    ngx_pty_cell_t         tmp, tmp2;
    const ngx_pty_cell_t  *c, *h;

    c = ngx_pty_row_cell(row, col, &tmp);

    if (c->ch == NGX_PTY_CONT) {
        h = col ? ngx_pty_row_cell(row, col - 1, &tmp) : NULL;

        if (h && h->ch && h->ch != NGX_PTY_CONT && h->width == 2) {
            ngx_pty_emit_glyph(e, s, row, r, col - 1, h);

        } else if (depth < 8) {
            ngx_pty_paint_orphan(e, s, row, r, col, depth + 1);
        }

        return;
    }

    if (c->width == 2) {
        return;
    }

    if (c->ch) {
        ngx_pty_emit_glyph(e, s, row, r, col, c);
        return;
    }

    h = (col + 1 < s->cols) ? ngx_pty_row_cell(row, col + 1, &tmp2) : NULL;

    if (s->whole && h && h->ch != NGX_PTY_CONT && depth < 8
        && ngx_pty_blank_whole(s, c))
    {
        /* the trick clobbers the next cell: painted again (whole, if wide) */
        ngx_pty_paint_blank_whole(e, s, r, col, c);

        if (h->ch && h->width == 2) {
            ngx_pty_emit_glyph(e, s, row, r, col + 1, h);

        } else {
            ngx_pty_repaint(e, s, row, r, col + 1, depth + 1);
        }

        return;
    }

    pen = ngx_pty_pen_erased(s, &c->pen);
    ngx_pty_emit_move(e, r, col);
    ngx_pty_emit_sgr(e, &pen, &s->default_pen);
    ngx_pty_emit(e, "\x1b[X", 3);
}


/*
 * A blank in more than a background before the last column (what
 * xterm.js's print() leaves of a wide glyph it wrote over in part): a wide
 * placeholder in the blank's pen, then a space in its right half, which
 * clears the left half in that pen.  The next cell is painted after.
 */
static void
ngx_pty_paint_blank_whole(ngx_pty_emit_t *e, ngx_pty_screen_t *s, int r,
    unsigned col, const ngx_pty_cell_t *c)
{
    ngx_pty_emit_move(e, r, col);
    ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
    ngx_pty_emit(e, NGX_PTY_WIDE_FILL, sizeof(NGX_PTY_WIDE_FILL) - 1);
    e->col = -1;

    ngx_pty_emit_move(e, r, col + 1);
    ngx_pty_emit(e, " ", 1);
    e->col = (col + 2 < s->cols) ? (int) col + 2 : -1;
}


/*
 * A wide glyph's right half without its left half: xterm.js holds one
 * only where ICH on a right half moved it on, after the blanks ICH made.
 * Built with a placeholder and ICH there.
 */
static void
ngx_pty_paint_orphan(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col, unsigned depth)
{
    ngx_pty_pen_t          ep;
    ngx_pty_cell_t         tmp, tmp2;
    const ngx_pty_cell_t  *b, *h;

    /* the placeholder in the half's pen: xterm.js keeps a lone one's */
    h = ngx_pty_row_cell(row, col, &tmp2);
    b = (col >= 2 && depth == 0) ? ngx_pty_row_cell(row, col - 1, &tmp)
                                 : NULL;

    if (b && b->ch == 0 && !ngx_pty_blank_whole(s, b)) {
        /*
         * the one lone right half xterm.js holds (an ECH on the
         * placeholder's left half blanks both there): ICH on a right half
         * blanks the left one and moves it on, after an erased blank.
         * The cells right of it are not painted yet.
         */
        ngx_pty_emit_move(e, r, col - 2);
        ngx_pty_emit_pen(e, &h->pen, &s->default_pen);
        ngx_pty_emit(e, "\xe3\x80\x80", 3);      /* U+3000, wide */
        e->col = -1;

        ep = ngx_pty_pen_erased(s, &b->pen);
        ngx_pty_emit_move(e, r, col - 1);
        ngx_pty_emit_sgr(e, &ep, &s->default_pen);
        ngx_pty_emit(e, "\x1b[@", 3);

        ngx_pty_repaint(e, s, row, r, col - 2, depth);
        return;
    }

    /*
     * elsewhere xterm.js holds none (its ECH, DCH and print() blank a
     * half they leave): a blank in the half's background
     */
    ep = ngx_pty_pen_erased(s, &h->pen);
    ngx_pty_emit_move(e, r, col);
    ngx_pty_emit_sgr(e, &ep, &s->default_pen);
    ngx_pty_emit_protect(e, 0);
    ngx_pty_emit(e, "\x1b[X", 3);
}


/*
 * A glyph before the last column that claims two columns while the last
 * keeps its own: xterm.js's join of marks to it right after a wide glyph
 * it dropped at the edge (autowrap off).  Made the same way, after the
 * last cell: the glyph, a wide one dropped, then the marks.
 */
static void
ngx_pty_paint_overwide(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col, const ngx_pty_cell_t *c)
{
    u_char         buf[4 * (NGX_PTY_MAX_CHARS + 1)];
    size_t         n;
    unsigned       i, lone;
    ngx_pty_pen_t  ep;

    ngx_pty_repaint(e, s, row, r, col + 1, 0);

    lone = ngx_pty_is_combining(c->ch);

    if (lone) {
        /* a mark alone: joined to the cell erased in its pen */
        ep = ngx_pty_pen_erased(s, &c->pen);
        ngx_pty_emit_move(e, r, col);
        ngx_pty_emit_sgr(e, &ep, &s->default_pen);
        ngx_pty_emit_protect(e, 0);
        ngx_pty_emit(e, "\x1b[X", 3);
        ngx_pty_emit(e, "\x1b[?7l", 5);
        ngx_pty_emit_move(e, r, col + 1);
        n = 0;

    } else {
        ngx_pty_emit(e, "\x1b[?7l", 5);
        ngx_pty_emit_move(e, r, col);
        ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
        n = ngx_pty_utf8_put(buf, c->ch);
    }

    n += ngx_pty_utf8_put(buf + n, 0x4e00);             /* dropped */

    if (lone) {
        n += ngx_pty_utf8_put(buf + n, c->ch);
    }

    for (i = 0; i < c->ncomb && row->comb; i++) {
        n += ngx_pty_utf8_put(buf + n, row->comb[col * NGX_PTY_MAX_COMB + i]);
    }

    ngx_pty_emit(e, buf, n);
    ngx_pty_emit(e, "\x1b[?7h", 5);
    e->row = r;
    e->col = col + 1;
}


/*
 * The snapshot's row of blanks that ngx_pty_paint_moved_claim() puts two
 * cells in: made once a snapshot (a row of such cells would otherwise
 * cost a row's worth each), freed with it
 */
static ngx_pty_row_t *
ngx_pty_emit_edge_row(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    size_t           size;
    unsigned         i;
    ngx_pty_cell_t  *cells;

    if (e->edge.cells != NULL) {
        return &e->edge;
    }

    size = (size_t) s->cols
           * (sizeof(ngx_pty_cell_t) + NGX_PTY_MAX_COMB * sizeof(uint32_t));

    cells = malloc(size);
    if (cells == NULL) {
        return NULL;
    }

    for (i = 0; i < s->cols; i++) {
        cells[i].ch = 0;
        cells[i].ncomb = 0;
        cells[i].width = 1;
        cells[i].pen = s->default_pen;
    }

    e->edge.cells = cells;
    e->edge.comb = (uint32_t *) (cells + s->cols);
    e->edge.len = s->cols;
    e->edge.fill = s->default_pen;

    return &e->edge;
}


/*
 * A cell two columns wide with a cell of its own in its second, further
 * left (ngx_pty_claim_movable()): made before the last column, as there
 * (ngx_pty_paint_claim()), then moved to its column by DCH, which
 * xterm.js does cell by cell; the columns it empties at the end are
 * blanks in the default pen, painted after.  Returns -1 where it cannot.
 */
static int
ngx_pty_paint_moved_claim(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col, const ngx_pty_cell_t *c)
{
    unsigned         w;
    ngx_pty_row_t   *edge;
    ngx_pty_cell_t   tmp;

    w = s->cols;

    if (col + 2 >= w || !ngx_pty_claim_movable(row, col)) {
        return -1;
    }

    /* the two cells in a row of their own, at the edge */
    edge = ngx_pty_emit_edge_row(e, s);
    if (edge == NULL) {
        return -1;
    }

    edge->cells[w - 2] = *c;
    edge->cells[w - 1] = *ngx_pty_row_cell(row, col + 1, &tmp);

    if (row->comb) {
        memcpy(&edge->comb[(w - 2) * NGX_PTY_MAX_COMB],
               &row->comb[col * NGX_PTY_MAX_COMB],
               2 * NGX_PTY_MAX_COMB * sizeof(uint32_t));

    } else {
        edge->cells[w - 2].ncomb = 0;
        edge->cells[w - 1].ncomb = 0;
    }

    ngx_pty_paint_claim(e, s, edge, r, w - 2, &edge->cells[w - 2]);

    ngx_pty_emit_move(e, r, col);
    ngx_pty_emit_sgr(e, &s->default_pen, &s->default_pen);
    ngx_pty_emit_csi(e, w - 2 - col, -1, 'P');
    e->row = r;
    e->col = col;

    return 0;
}


/*
 * A cell two columns wide before the last column with a cell of its own
 * in the last: a wide glyph cut (ngx_pty_paint_cut()) or a mark's join
 * (ngx_pty_paint_overwide()), both written with autowrap off
 */
static void
ngx_pty_paint_claim(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col, const ngx_pty_cell_t *c)
{
    if (ngx_pty_wide_cuttable(c)) {
        ngx_pty_paint_cut(e, s, row, r, col);

    } else {
        ngx_pty_paint_overwide(e, s, row, r, col, c);
    }
}


/*
 * A wide glyph before the last column cut by the cell after it: xterm.js
 * keeps it whole where, autowrap off, a glyph went to the last column
 * from past the edge, or a wide glyph dropped there blanked the right
 * half.  Made the same way (autowrap off): the glyph from its column,
 * then the last cell's glyph, or a wide glyph dropped in pen (the
 * blank's).  Returns whether it ended so, with a glyph dropped.
 */
static unsigned
ngx_pty_emit_cut(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col, const ngx_pty_pen_t *pen)
{
    unsigned               dropped;
    ngx_pty_cell_t         tmp, tmp2;
    const ngx_pty_cell_t  *c, *l;

    c = ngx_pty_row_cell(row, col, &tmp);
    l = ngx_pty_row_cell(row, col + 1, &tmp2);

    ngx_pty_emit_move(e, r, col);
    ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
    ngx_pty_emit_chars(e, row, col, c);
    ngx_pty_emit_pen(e, pen, &s->default_pen);

    dropped = !(l->ch != 0 && l->width == 1);

    if (!dropped) {
        ngx_pty_emit_chars(e, row, col + 1, l);

    } else {
        ngx_pty_emit(e, NGX_PTY_WIDE_FILL, sizeof(NGX_PTY_WIDE_FILL) - 1);
    }

    e->row = -1;
    e->col = -1;

    return dropped;
}


/* the same in a row painted: then, past the edge, a pending wrap */
static void
ngx_pty_paint_cut(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r, unsigned col)
{
    ngx_pty_cell_t  tmp;

    ngx_pty_emit(e, "\x1b[?7l", 5);
    ngx_pty_emit_cut(e, s, row, r, col,
                     &ngx_pty_row_cell(row, col + 1, &tmp)->pen);
    ngx_pty_emit(e, "\x1b[?7h", 5);
}


/* whether the cell at col (the last column) cuts a wide glyph before it */
static int
ngx_pty_cuts_wide(const ngx_pty_row_t *row, unsigned col)
{
    ngx_pty_cell_t  tmp;

    return col > 0 && ngx_pty_row_cell(row, col, &tmp)->ch != NGX_PTY_CONT
           && ngx_pty_wide_cuttable(ngx_pty_row_cell(row, col - 1, &tmp));
}


/*
 * A wide glyph in the last column: no byte stream puts one there in
 * xterm.js (it wraps it, ICH clears it), and the model clears those it
 * meets (resize, ICH, insert mode, REP); should one remain, the late
 * joiner gets a blank.  So does a cell two columns wide with a cell of
 * its own in its second.
 */
static void
ngx_pty_paint_wide_edge(ngx_pty_emit_t *e, ngx_pty_screen_t *s, int r,
    unsigned col)
{
    ngx_pty_emit_move(e, r, col);
    ngx_pty_emit_sgr(e, &s->default_pen, &s->default_pen);
    ngx_pty_emit_protect(e, 0);
    ngx_pty_emit(e, "\x1b[X", 3);
}


/*
 * Glyphs that follow the terminal's cursor in its pen, one column each,
 * without combining marks: their bytes only, straight into the buffer.
 * The last column stays with ngx_pty_emit_glyph() (a pending wrap).
 * Returns the column after the run.
 */
static unsigned
ngx_pty_paint_run(ngx_pty_emit_t *e, const ngx_pty_row_t *row, unsigned col,
    unsigned end)
{
    u_char                *p;
    unsigned               protect;
    const ngx_pty_cell_t  *c;

    if (ngx_pty_emit_reserve(e, (size_t) (end - col) * 4) != 0) {
        return col;
    }

    p = e->buf + e->len;
    /* not known: no cell matches, DECSCA is said first */
    protect = (e->protect == NGX_PTY_PROTECT_UNKNOWN) ? ~0U
              : e->protect ? NGX_PTY_A_PROTECT : 0;

    for ( /* void */ ; col < end; col++) {
        c = &row->cells[col];

        if (c->ch == 0 || c->ch == NGX_PTY_CONT || c->width != 1 || c->ncomb
            || (c->pen.attr & NGX_PTY_A_PROTECT) != protect
            || !ngx_pty_pen_eq(&c->pen, &e->pen, NGX_PTY_A_SGR))
        {
            break;
        }

        if (c->ch < 0x80) {
            *p++ = (u_char) c->ch;

        } else {
            p += ngx_pty_utf8_put(p, c->ch);
        }
    }

    e->len = p - e->buf;
    e->col = col;

    return col;
}


static void
ngx_pty_paint_row(ngx_pty_emit_t *e, ngx_pty_screen_t *s, ngx_pty_grid_t *g,
    int r, unsigned from)
{
    int                    last, force, covered;
    unsigned               w, col, end;
    ngx_pty_pen_t          ep;
    ngx_pty_row_t         *row;
    ngx_pty_cell_t         tmp, tmp2;
    const ngx_pty_cell_t  *c, *d;

    row = g->rows[r];
    w = s->cols;

    /* the last cell that differs from a reset terminal's */
    last = -1;

    if (row->len < w
        && !ngx_pty_pen_eq(&row->fill, &s->default_pen, NGX_PTY_A_SGR))
    {
        last = w - 1;

    } else {
        for (col = row->len < w ? row->len : w; col-- > 0; /* void */) {
            if (!ngx_pty_cell_default(s, &row->cells[col])) {
                last = col;
                break;
            }
        }
    }

    force = -1;
    covered = -1;

    for (col = from; (int) col <= last || (int) col == force; col++) {
        c = ngx_pty_row_cell(row, col, &tmp);

        if (c->ch == NGX_PTY_CONT) {
            if ((int) col != covered) {
                ngx_pty_paint_orphan(e, s, row, r, col, 0);
            }
            continue;
        }

        if (c->ch == 0 && s->whole && col + 1 < w
            && ngx_pty_blank_whole(s, c)
            && ngx_pty_row_cell(row, col + 1, &tmp2)->ch != NGX_PTY_CONT)
        {
            ngx_pty_paint_blank_whole(e, s, r, col, c);
            force = col + 1;
            continue;
        }

        if (c->ch == 0) {
            ep = ngx_pty_pen_erased(s, &c->pen);

            if ((int) col != force
                && ngx_pty_pen_eq(&ep, &s->default_pen, NGX_PTY_A_SGR))
            {
                continue;
            }

            /* a run of blanks in one pen: ECH, or EL if it reaches the edge */
            for (end = col + 1; end < w; end++) {
                d = ngx_pty_row_cell(row, end, &tmp2);

                if (d->ch != 0
                    || !ngx_pty_color_eq(&d->pen.bg, &ep.bg)
                    || (s->whole && end + 1 < w
                        && ngx_pty_blank_whole(s, d)))
                {
                    break;
                }
            }

            ngx_pty_emit_move(e, r, col);
            ngx_pty_emit_sgr(e, &ep, &s->default_pen);

            if (end >= w && (col != 0 || !row->wrapped)) {
                /* (EL from the first column clears a soft wrap) */
                ngx_pty_emit(e, "\x1b[K", 3);
            } else if (end - col == 1) {
                ngx_pty_emit(e, "\x1b[X", 3);
            } else {
                ngx_pty_emit_csi(e, end - col, -1, 'X');
            }

            col = end - 1;
            continue;
        }

        if (c->width == 2
            && (col + 1 >= w
                || ngx_pty_row_cell(row, col + 1, &tmp2)->ch != NGX_PTY_CONT))
        {
            /* two columns wide, a cell of its own in the second, if any */
            if (col + 2 == w) {
                ngx_pty_paint_claim(e, s, row, r, col, c);
                col++;
                continue;
            }

            if (col + 1 < w
                && ngx_pty_paint_moved_claim(e, s, row, r, col, c) == 0)
            {
                col++;
                continue;
            }

            /* in the last column, or one that cannot be moved: a blank */
            ngx_pty_paint_wide_edge(e, s, r, col);
            continue;
        }

        if (e->row == r && e->col == (int) col && (int) col < last) {
            /* not "last" itself: a run never ends a row's output */
            end = (unsigned) last < row->len ? (unsigned) last : row->len;
            end = ngx_pty_paint_run(e, row, col, end < w - 1 ? end : w - 1);

            if (end > col) {
                col = end - 1;
                continue;
            }
        }

        ngx_pty_emit_glyph(e, s, row, r, col, c);

        if (c->width == 0) {
            /*
             * a lone mark, written after a move, moves xterm.js's cursor
             * on, not libvterm's: where it is, is not known
             */
            e->col = -1;

        } else if (col + c->width < w) {
            e->col = col + c->width;    /* else a pending wrap: unknown */
        }

        if (c->width == 2) {
            covered = col + 1;
            d = ngx_pty_row_cell(row, col + 1, &tmp2);

            if (d->ch != NGX_PTY_CONT) {
                force = col + 1;
            }
        }
    }
}


/*
 * A wide glyph that wrapped into row r, which leaves the last column of
 * row r - 1 blank in the pen it was written in: written there again
 * (in the blank's pen, then in its own if that differs).  Returns the
 * column row r is to be painted from.
 */
static unsigned
ngx_pty_paint_wide_wrap(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r,
    const ngx_pty_cell_t *blank, const ngx_pty_cell_t *glyph)
{
    ngx_pty_emit_move(e, r - 1, s->cols - 1);
    ngx_pty_emit_pen(e, &blank->pen, &s->default_pen);
    ngx_pty_emit_chars(e, row, 0, glyph);

    e->row = r;
    e->col = 2;

    if (!ngx_pty_pen_eq(&glyph->pen, &blank->pen,
                        NGX_PTY_A_SGR | NGX_PTY_A_PROTECT))
    {
        ngx_pty_emit_glyph(e, s, row, r, 0, glyph);
    }

    return 2;
}


/*
 * a blank whose pen an erase cannot give (only a wide glyph's wrap, and
 * a glyph over half of a wide one): more than a background, or DECSCA's
 */
static int
ngx_pty_blank_whole(ngx_pty_screen_t *s, const ngx_pty_cell_t *c)
{
    ngx_pty_pen_t  erased;

    erased = ngx_pty_pen_erased(s, &c->pen);

    return !ngx_pty_pen_eq(&c->pen, &erased, NGX_PTY_A_SGR)
           || (c->pen.attr & NGX_PTY_A_PROTECT);
}


/* a blank or a glyph of one column */
static int
ngx_pty_narrow(const ngx_pty_cell_t *c)
{
    return c->ch == 0 || (c->ch != NGX_PTY_CONT && c->width == 1);
}


/* ... or a mark alone, of no width */
static int
ngx_pty_narrow_or_mark(const ngx_pty_cell_t *c)
{
    return ngx_pty_narrow(c) || (c->ch != NGX_PTY_CONT && c->width == 0);
}


/*
 * A soft wrap into row r (xterm.js marks the row, copy and paste and
 * reflow join it to the one above): the last cell of row r - 1, then the
 * first of row r, written so that the terminal wraps between them;
 * placeholders where the cells are blank, erased again after.  Returns
 * the column row r is to be painted from.
 */
static unsigned
ngx_pty_paint_wrap(ngx_pty_emit_t *e, ngx_pty_screen_t *s, ngx_pty_grid_t *g,
    int r)
{
    unsigned  from;

    from = ngx_pty_paint_wrap_cells(e, s, g, r);

    if (ngx_pty_cuts_wide(g->rows[r - 1], s->cols - 1)) {
        /*
         * the last cell written from its column blanked the wide glyph
         * it cuts: the pair again, autowrap off, which leaves the wrap
         * mark of row r as it is
         */
        ngx_pty_paint_cut(e, s, g->rows[r - 1], r - 1, s->cols - 2);
    }

    return from;
}


static unsigned
ngx_pty_paint_wrap_cells(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    ngx_pty_grid_t *g, int r)
{
    unsigned               w, from, ph, cut, wide;
    ngx_pty_row_t         *prev, *row;
    ngx_pty_cell_t         tmp, tmp2, tmp3, tmp4;
    const ngx_pty_cell_t  *c, *h;

    prev = g->rows[r - 1];
    row = g->rows[r];
    w = s->cols;
    ph = 0;

    c = ngx_pty_row_cell(prev, w - 1, &tmp);
    h = ngx_pty_row_cell(row, 0, &tmp2);

    if (c->ch == 0 && h->ch != 0 && h->ch != NGX_PTY_CONT && h->width == 2
        && w >= 2 && ngx_pty_row_cell(row, 1, &tmp3)->ch == NGX_PTY_CONT
        && (w == 2 || ngx_pty_row_cell(row, 2, &tmp3)->ch != NGX_PTY_CONT))
    {
        /* (a whole glyph: remnants of overlapping ones are rebuilt below) */
        return ngx_pty_paint_wide_wrap(e, s, row, r, c, h);
    }

    h = (w >= 3) ? ngx_pty_row_cell(row, 1, &tmp3) : NULL;
    wide = (h && ngx_pty_wide_left(h)
            && ngx_pty_row_cell(row, 2, &tmp4)->ch == NGX_PTY_CONT);

    h = ngx_pty_row_cell(row, 0, &tmp2);

    if (c->ch == 0 && w >= 2 && ngx_pty_blank_whole(s, c)
        && (ngx_pty_narrow(h) || (h->ch != NGX_PTY_CONT && h->width == 0))
        && (wide || ngx_pty_narrow_or_mark(ngx_pty_row_cell(row, 1, &tmp3))))
    {
        /*
         * A blank in more than a background (the content below it erased
         * since, or written over by a mark alone): a wide glyph's wrap
         * leaves it so, and its own two cells are painted again (a wide
         * glyph from the second one whole)
         */
        ngx_pty_emit_move(e, r - 1, w - 1);
        ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
        ngx_pty_emit(e, NGX_PTY_WIDE_FILL, sizeof(NGX_PTY_WIDE_FILL) - 1);
        e->row = r;
        e->col = 2;
        ngx_pty_repaint(e, s, row, r, 0, 0);

        if (!wide) {
            ngx_pty_repaint(e, s, row, r, 1, 0);
            return 2;
        }

        ngx_pty_emit_glyph(e, s, row, r, 1, ngx_pty_row_cell(row, 1, &tmp3));
        e->col = (w > 3) ? 3 : -1;

        return 3;
    }

    h = (w >= 2) ? ngx_pty_row_cell(prev, w - 2, &tmp2) : NULL;
    cut = (c->ch && c->ch != NGX_PTY_CONT && c->width == 2);

    if (c->ch == NGX_PTY_CONT && h && h->ch && h->ch != NGX_PTY_CONT
        && h->width == 2)
    {
        ngx_pty_emit_glyph(e, s, prev, r - 1, w - 2, h);

    } else if (c->ch == 0 || c->ch == NGX_PTY_CONT || c->width != 1) {
        ngx_pty_emit_move(e, r - 1, w - 1);
        ngx_pty_emit_sgr(e, &s->default_pen, &s->default_pen);
        ngx_pty_emit_protect(e, 0);
        ngx_pty_emit(e, " ", 1);
        ph = 1;

    } else {
        ngx_pty_emit_glyph(e, s, prev, r - 1, w - 1, c);
    }

    /* waiting to wrap: the next glyph goes to row r, column 0 */
    c = ngx_pty_row_cell(row, 0, &tmp);

    if (c->ch != 0 && c->ch != NGX_PTY_CONT && c->width == 1) {
        ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
        ngx_pty_emit_chars(e, row, 0, c);
        from = 1;

    } else {
        ngx_pty_emit_sgr(e, &s->default_pen, &s->default_pen);
        ngx_pty_emit_protect(e, 0);
        ngx_pty_emit(e, " ", 1);
        from = 0;
    }

    e->row = r;
    e->col = 1;

    if (cut) {
        ngx_pty_paint_wide_edge(e, s, r - 1, w - 1);

    } else if (h && h->width == 2 && h->ch != 0 && h->ch != NGX_PTY_CONT
               && ngx_pty_row_cell(prev, w - 1, &tmp3)->ch != NGX_PTY_CONT)
    {
        /*
         * what the wrap wrote in the last column blanked the cell two
         * columns wide before it (xterm.js's print() and ECH do): again
         */
        ngx_pty_paint_claim(e, s, prev, r - 1, w - 2, h);

    } else if (ph) {
        ngx_pty_repaint(e, s, prev, r - 1, w - 1, 0);
    }

    if (from == 0 && (c->ch == 0 || c->width != 1)) {
        /* blank: erased again (ECH keeps the wrap mark); else painted */
        if (c->ch == 0) {
            ngx_pty_repaint(e, s, row, r, 0, 0);
            from = 1;
        }
    }

    return from;
}


/*
 * Row 0 soft-wrapped (from a line scrolled away): a wrap into row 1, which
 * DL then moves up with its mark (a scroll would put a line into the
 * terminal's scrollback that the clients that watched do not have), the
 * placeholder it took erased
 */
static void
ngx_pty_paint_top_wrap(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    ngx_pty_emit_move(e, 0, s->cols - 1);
    ngx_pty_emit_sgr(e, &s->default_pen, &s->default_pen);
    ngx_pty_emit_protect(e, 0);
    ngx_pty_emit(e, " x", 2);

    if (s->rows > 1) {
        ngx_pty_emit(e, "\x1b[H\x1b[M\x1b[X", 9);

    } else {
        ngx_pty_emit(e, "\x1b[H\x1b[X", 6);
    }

    e->row = 0;
    e->col = 0;
}


static void ngx_pty_paint_edge_blank(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    ngx_pty_grid_t *g, unsigned r);
static void ngx_pty_unwrap_line(ngx_pty_screen_t *s, int row);
static void ngx_pty_esc_bel(ngx_pty_screen_t *s, const u_char *p,
    size_t *start, size_t i);
static void ngx_pty_emit_decsc(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    unsigned b);
static void ngx_pty_emit_saved_row(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r);


/* line feeds at the bottom row until line r of a tall paint is on screen */
static void
ngx_pty_paint_scroll_to(ngx_pty_emit_t *e, ngx_pty_screen_t *s, int r)
{
    int  n;

    n = r - e->shift - ((int) s->rows - 1);

    if (n <= 0) {
        return;
    }

    /* the default pen: xterm.js fills a scrolled-in line with its colour */
    ngx_pty_emit_move(e, e->shift + s->rows - 1, 0);
    ngx_pty_emit_sgr(e, &s->default_pen, &s->default_pen);

    e->shift += n;
    e->row += n;

    while (n--) {
        ngx_pty_emit(e, "\n", 1);
    }
}


/*
 * The last cell of row r - 1, not wrapped into row r, blank in more than
 * a background: a wide glyph's wrap leaves it so, and row r is erased
 * after (EL 2 also takes the wrap mark away)
 */
static void
ngx_pty_paint_edge_blank(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    ngx_pty_grid_t *g, unsigned r)
{
    ngx_pty_cell_t         tmp;
    const ngx_pty_cell_t  *c;

    c = ngx_pty_row_cell(g->rows[r - 1], s->cols - 1, &tmp);

    if (c->ch != 0 || s->cols < 2 || !ngx_pty_blank_whole(s, c)
        || ngx_pty_cuts_wide(g->rows[r - 1], s->cols - 1))
    {
        return;         /* (a cut glyph's blank: ngx_pty_paint_cut()) */
    }

    ngx_pty_emit_move(e, r - 1, s->cols - 1);
    ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
    ngx_pty_emit(e, NGX_PTY_WIDE_FILL, sizeof(NGX_PTY_WIDE_FILL) - 1);
    e->row = r;
    e->col = 2;

    ngx_pty_emit_sgr(e, &s->default_pen, &s->default_pen);
    ngx_pty_emit_protect(e, 0);
    ngx_pty_emit(e, "\x1b[2K", 4);
}


/*
 * The last cell of the last line, blank in more than a background (or
 * protected), where no line below gives it a wrap to leave it
 * (ngx_pty_paint_edge_blank()): a glyph over a wide placeholder's left
 * half blanks the right half in the glyph's pen, as xterm.js's print()
 * does; the cell the glyph took is painted again
 */
static void
ngx_pty_paint_last_blank(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    ngx_pty_grid_t *g, unsigned r)
{
    ngx_pty_cell_t         tmp, tmp2;
    const ngx_pty_cell_t  *c, *h;

    c = ngx_pty_row_cell(g->rows[r], s->cols - 1, &tmp);

    if (c->ch != 0 || s->cols < 2 || !s->whole || !ngx_pty_blank_whole(s, c))
    {
        return;
    }

    h = ngx_pty_row_cell(g->rows[r], s->cols - 2, &tmp2);

    if (ngx_pty_wide_left(h)) {
        return;         /* a glyph claims the cell (ngx_pty_paint_cut()) */
    }

    if (h->ch == 0 && h->width == 1 && ngx_pty_blank_whole(s, h)) {
        /*
         * the cell before too (the trick would clobber each with the
         * other): a wide glyph, then one dropped after it (autowrap off),
         * whose print() blanks the last cell in c's pen; then one dropped
         * alone, whose print() blanks the first in h's
         */
        ngx_pty_emit(e, "\x1b[?7l", 5);
        ngx_pty_emit_move(e, r, s->cols - 2);
        ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
        ngx_pty_emit(e, NGX_PTY_WIDE_FILL NGX_PTY_WIDE_FILL,
                     2 * (sizeof(NGX_PTY_WIDE_FILL) - 1));
        e->col = -1;

        ngx_pty_emit_move(e, r, s->cols - 1);
        ngx_pty_emit_pen(e, &h->pen, &s->default_pen);
        ngx_pty_emit(e, NGX_PTY_WIDE_FILL, sizeof(NGX_PTY_WIDE_FILL) - 1);
        ngx_pty_emit(e, "\x1b[?7h", 5);
        e->col = -1;
        return;
    }

    ngx_pty_emit_move(e, r, s->cols - 2);
    ngx_pty_emit(e, "\xe3\x80\x80", 3);        /* U+3000, wide */
    e->col = -1;

    ngx_pty_emit_move(e, r, s->cols - 2);
    ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
    ngx_pty_emit(e, " ", 1);
    e->col = s->cols - 1;

    ngx_pty_repaint(e, s, g->rows[r], r, s->cols - 2, 0);
}


/*
 * The lines of g from its first in "rows" (its scrollback ring's, then
 * the screen's), painted as one tall screen: each line below the bottom
 * row scrolls the ones above it into the terminal's scrollback, so that a
 * resize there pulls back what it pulls back in the clients that watched
 */
static void
ngx_pty_paint_lines(ngx_pty_emit_t *e, ngx_pty_screen_t *s, ngx_pty_grid_t *g,
    unsigned lines, int saved)
{
    unsigned  r, from;

    if (g->rows[0]->wrapped) {
        ngx_pty_paint_top_wrap(e, s);
    }

    for (r = 0; r < lines; r++) {
        from = 0;

        /*
         * room made first, in the default pen, also for a wrap into the
         * row: a wrap that scrolls fills the new line with the glyph's
         * background
         */
        ngx_pty_paint_scroll_to(e, s, r);

        if (r > 0 && g->rows[r]->wrapped) {
            from = ngx_pty_paint_wrap(e, s, g, r);

        } else if (r > 0) {
            ngx_pty_paint_edge_blank(e, s, g, r);
        }

        ngx_pty_paint_row(e, s, g, r, from);

        if ((int) r == saved) {
            /* xterm.js saves a line of its buffer: save while it shows */
            ngx_pty_emit_saved_row(e, s, g->rows[r], r);
        }
    }

    ngx_pty_paint_scroll_to(e, s, lines - 1);
    ngx_pty_paint_last_blank(e, s, g, lines - 1);

    e->row = (e->row >= 0) ? e->row - e->shift : -1;
    e->shift = 0;
}


/*
 * The line of a tall paint with "above" lines over the screen that the
 * main buffer's saved cursor is on when it went up into the scrollback
 * (the oldest line painted if older); -1 when it is on the screen, or none
 */
static int
ngx_pty_saved_line(ngx_pty_screen_t *s, unsigned above)
{
    int  row;

    if (!s->saved_valid[0] || s->saved_pos[0].row >= 0 || above == 0) {
        return -1;
    }

    row = (int) above + s->saved_pos[0].row;

    return row > 0 ? row : 0;
}


/*
 * The lines a skip jumped over that xterm.js keeps above the ring's
 * (ngx_pty_sb_raw_lines() does the same for a resize): a model of their
 * own, which the caller destroys; *from and *n say which of its lines
 */
static ngx_pty_screen_t *
ngx_pty_sb_raw_model(ngx_pty_screen_t *s, unsigned *from, unsigned *n)
{
    unsigned           all;
    VTermPos           cur;
    ngx_pty_screen_t  *t;

    *n = 0;

    if (s->sb_raw == NULL || s->sb_lost == 0) {
        return NULL;
    }

    t = ngx_pty_screen_create(s->cols, s->rows);
    if (t == NULL) {
        return NULL;
    }

    t->no_skip = 1;
    ngx_pty_screen_feed(t, s->sb_raw, s->sb_raw_len);

    cur = ngx_pty_cursor(t);
    all = t->grid[0].sb_len + cur.row;
    *n = all < s->sb_lost ? all : s->sb_lost;
    *from = all - *n;

    return t;
}


/*
 * The main buffer with the lines above its screen that the model holds
 * (the skipped ones kept as bytes, then the ring's), painted as one tall
 * screen; the saved cursor goes with its line
 */
static void
ngx_pty_paint_main(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    unsigned           i, lines, raw, from;
    ngx_pty_grid_t    *g, tall;
    ngx_pty_row_t    **rows;
    ngx_pty_screen_t  *t;

    g = &s->grid[0];
    t = NULL;
    raw = 0;
    from = 0;

    if (s->rows < 2 || s->cols < 2) {
        /* no room to wrap into a row below one that stays: none kept */
        ngx_pty_paint_lines(e, s, g, s->rows, -1);
        return;
    }

    t = ngx_pty_sb_raw_model(s, &from, &raw);

    if (g->sb_len == 0 && raw == 0) {
        ngx_pty_paint_lines(e, s, g, s->rows, -1);
        goto done;
    }

    lines = raw + g->sb_len + s->rows;
    rows = malloc(lines * sizeof(ngx_pty_row_t *));

    if (rows == NULL) {
        e->failed = 1;
        goto done;
    }

    for (i = 0; i < raw; i++) {
        rows[i] = ngx_pty_grid_line(&t->grid[0], from + i);
    }

    for (i = raw; i < lines; i++) {
        rows[i] = ngx_pty_grid_line(g, i - raw);
    }

    tall = *g;
    tall.rows = rows;

    ngx_pty_paint_lines(e, s, &tall, lines,
                        ngx_pty_saved_line(s, raw + g->sb_len));

    free(rows);

done:

    if (t != NULL) {
        ngx_pty_screen_destroy(t);
    }
}


static void
ngx_pty_emit_title(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    size_t    i;
    u_char    c;
    uint32_t  u;
    unsigned  n, k;

    ngx_pty_emit(e, "\x1b]2;", 4);

    for (i = 0; i < s->title_len; i += n) {
        c = s->title[i];
        n = 1;

        if (c < 0x80) {
            if (c >= 0x20 && c != 0x7f) {
                ngx_pty_emit(e, &c, 1);
            }
            continue;
        }

        /*
         * only whole, well-formed UTF-8 sequences pass: no overlong form,
         * surrogate or code point past U+10FFFF (a client decoding the
         * Keyframe strictly would fail on it)
         */
        n = ngx_pty_utf8_len(c);
        u = c & (0x7f >> n);

        for (k = 1; n && k < n; k++) {
            if (i + k >= s->title_len || (s->title[i + k] & 0xc0) != 0x80) {
                n = 0;
                break;
            }

            u = (u << 6) | (s->title[i + k] & 0x3f);
        }

        if (n == 0
            || u < (n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000)
            || u > 0x10ffff
            || (u >= 0xd800 && u <= 0xdfff))
        {
            n = 1;
            continue;
        }

        ngx_pty_emit(e, &s->title[i], n);
    }

    ngx_pty_emit(e, "\x07", 1);
}


/* whether a row is inside the scroll region (CUP reaches it in origin mode) */
static int
ngx_pty_in_region(ngx_pty_screen_t *s, int row)
{
    int  bottom;

    bottom = s->bottom == -1 ? (int) s->rows : s->bottom;

    return row >= s->top && row < bottom;
}


/*
 * The cursor at an absolute position.  Call before origin mode is set: a
 * cursor outside the margins then cannot be reached by CUP, but DECRC
 * puts it back anywhere (if the program's saved slot is free to use).
 */
static void
ngx_pty_emit_cursor(ngx_pty_emit_t *e, ngx_pty_screen_t *s, VTermPos pos)
{
    int  row, col, outside;

    outside = !ngx_pty_in_region(s, pos.row);

    if (s->origin && outside && !s->saved_valid[s->alt]) {
        ngx_pty_emitf(e, "\x1b[%d;%dH", pos.row + 1, pos.col + 1);
        ngx_pty_emit(e, "\x1b" "7\x1b[?6h\x1b" "8", 9);

    } else {
        if (s->origin) {
            ngx_pty_emit(e, "\x1b[?6h", 5);
        }

        row = pos.row;
        col = pos.col;

        if (s->origin) {
            row -= s->top;
            row = row < 0 ? 0 : row;
        }

        ngx_pty_emitf(e, "\x1b[%d;%dH", row + 1, col + 1);
    }

    if (s->origin) {
        /* the moves after it count from the region's top */
        e->shift = s->top;
    }

    e->row = pos.row;
    e->col = pos.col;
}


/* DECSTBM, when not the whole screen; it homes the cursor */
static void
ngx_pty_emit_region(ngx_pty_emit_t *e, ngx_pty_screen_t *s, int top,
    int bottom)
{
    if (top == 0 && bottom == -1) {
        return;
    }

    ngx_pty_emitf(e, "\x1b[%d;%dr", top + 1,
                  bottom == -1 ? (int) s->rows : bottom);
    e->row = 0;
    e->col = 0;
}


static const ngx_pty_cell_t *ngx_pty_emit_past_edge(ngx_pty_emit_t *e,
    ngx_pty_screen_t *s, unsigned b, const ngx_pty_row_t *row, int r,
    ngx_pty_cell_t *tmp);
static void ngx_pty_emit_decsc_at(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    unsigned b, const ngx_pty_row_t *row, int r, int col);
static void ngx_pty_emit_decrc_done(ngx_pty_emit_t *e, ngx_pty_screen_t *s);
static void ngx_pty_emit_past_mark(ngx_pty_emit_t *e, ngx_pty_screen_t *s);
static unsigned ngx_pty_ul_hidden_wanted(ngx_pty_screen_t *s);
static unsigned ngx_pty_ul_flagless_shown(ngx_pty_screen_t *s);
static unsigned ngx_pty_ul_styleless_shown(ngx_pty_screen_t *s);
static unsigned ngx_pty_ul_hidden_glyph(ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int col, const ngx_pty_cell_t *c);
static unsigned ngx_pty_ul_mark_only(ngx_pty_screen_t *s);
static void ngx_pty_emit_ul_hidden_pen(ngx_pty_emit_t *e,
    ngx_pty_screen_t *s);
static void ngx_pty_emit_ul_hidden_done(ngx_pty_emit_t *e,
    ngx_pty_screen_t *s);
static unsigned ngx_pty_emit_mark_pen(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_cell_t *last);


/* DECSC of what the program saved in buffer b, in that buffer */
static void
ngx_pty_emit_saved(ngx_pty_emit_t *e, ngx_pty_screen_t *s, unsigned b)
{
    VTermPos  pos;

    if (!s->saved_valid[b] || (b == 0 && e->saved_main)) {
        return;     /* none, or saved in the scrollback's paint */
    }

    pos = ngx_pty_saved_at(s, b);
    ngx_pty_emit_decsc_at(e, s, b,
                          s->grid[b].rows ? s->grid[b].rows[pos.row] : NULL,
                          pos.row, pos.col);
}


/*
 * DECSC of buffer b's saved cursor at row r (painted as the given row,
 * NULL when it has none) and column col, past the edge where it was
 * saved there
 */
static void
ngx_pty_emit_decsc_at(ngx_pty_emit_t *e, ngx_pty_screen_t *s, unsigned b,
    const ngx_pty_row_t *row, int r, int col)
{
    unsigned               mark;
    ngx_pty_cell_t         cell, tmp;
    const ngx_pty_cell_t  *edge, *last;

    last = (row != NULL) ? ngx_pty_row_cell(row, s->cols - 1, &tmp) : NULL;
    mark = s->saved_flagless[b] && ngx_pty_emit_mark_pen(e, s, last);

    edge = (row != NULL) ? ngx_pty_emit_past_edge(e, s, b, row, r, &cell)
                         : NULL;

    if (edge == NULL) {
        ngx_pty_emit_move(e, r, col);

    } else if (s->saved_pos[b].col > (int) s->cols) {
        /* a lone mark took the cursor a column further when it was saved */
        ngx_pty_emit_past_mark(e, s);
    }

    ngx_pty_emit_sgr(e, &s->saved_pen[b], &s->default_pen);
    ngx_pty_emit_protect(e, s->saved_protect[b]);
    ngx_pty_emit_decsc(e, s, b);

    if (mark) {
        e->keep_ul = 0;
        ngx_pty_emit_sgr0(e, &s->default_pen);
    }

    if (edge != NULL && edge->ch == 0) {
        /* the space that put the cursor there, erased again */
        ngx_pty_emit_move(e, r, s->cols - 1);
        ngx_pty_emit_sgr(e, &edge->pen, &s->default_pen);
        ngx_pty_emit(e, "\x1b[X", 3);
    }
}


/*
 * A pen with xterm.js's extended mark and no underline flag (ul_flagless)
 * for a DECSC, which only DECRC gives: a slot with the mark first (a
 * style, DECRC from the slot as a reset terminal has it, SGR 59, DECSC),
 * then DECRC from it; with the style of the glyph in the last column
 * (which a saved pending wrap writes again), or SGR 24 before the DECRC
 * where it has none (it drops the mark, which the DECRC gives back).
 * The colour is -1, which reads as white where the style shows and as
 * none where none does, as after the program's SGR 59; the SGRs then
 * keep the mark (e->keep_ul).  Returns 0 where a glyph in the last
 * column has an underline colour and no style.
 */
static unsigned
ngx_pty_emit_mark_pen(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_cell_t *last)
{
    char           buf[160], *p;
    unsigned       ul;
    VTermColor     white;
    ngx_pty_pen_t  pen;

    /* as the model's SGR 59 has it (ngx_pty_fast_sgr_arg()) */
    pen = s->default_pen;
    vterm_color_rgb(&pen.ul, 255, 255, 255);
    white = pen.ul;

    ul = (last != NULL) ? (last->pen.attr & NGX_PTY_A_UL) : 0;

    if (last != NULL && !ul
        && !ngx_pty_color_eq(&last->pen.ul, &s->default_pen.ul))
    {
        return 0;
    }

    pen = s->default_pen;
    pen.attr |= ul ? ul : (1 << NGX_PTY_A_UL_SHIFT);
    pen.xattr |= ul ? (last->pen.xattr & NGX_PTY_X_UL) : 0;

    p = ngx_pty_sgr_diff(buf, &s->default_pen, &pen, NGX_PTY_A_UL, 1);
    ngx_pty_emit(e, buf, p - buf);
    ngx_pty_emit(e, "\x1b" "8\x1b[59m\x1b" "7", 9);

    if (!ul) {
        ngx_pty_emit(e, "\x1b[24m", 5);
        pen = s->default_pen;
    }

    ngx_pty_emit(e, "\x1b" "8", 2);
    ngx_pty_emit_decrc_done(e, s);

    pen.ul = white;
    e->pen = pen;

    if (ul) {
        /* the glyph's underline colour (SGR 58 leaves the mark) */
        pen.ul = last->pen.ul;
        ngx_pty_emit_sgr_diff(e, &pen);
    }

    e->keep_ul = 1;

    return 1;
}


/*
 * A cursor saved with a wrap pending: xterm.js saves the column past
 * the edge, which a widening keeps (and DECRC gives the pending wrap
 * back).  The glyph in the last column is written again, as painted,
 * to put the cursor there; a space where the cell was erased in a
 * background only (ngx_pty_emit_saved() erases it again after DECSC).
 * Returns the cell (a copy in *tmp), NULL when it did neither.
 */
static const ngx_pty_cell_t *
ngx_pty_emit_past_edge(ngx_pty_emit_t *e, ngx_pty_screen_t *s, unsigned b,
    const ngx_pty_row_t *row, int r, ngx_pty_cell_t *tmp)
{
    VTermPos               pos;
    ngx_pty_pen_t          bg;
    ngx_pty_cell_t         cell;
    const ngx_pty_cell_t  *c, *h;

    if (s->saved_pos[b].col < (int) s->cols) {
        return NULL;
    }

    pos.row = r;
    pos.col = s->cols - 1;
    c = ngx_pty_row_cell(row, pos.col, tmp);

    if (ngx_pty_cuts_wide(row, pos.col)) {
        if (c->ch == 0 || c->width != 1) {
            return NULL;    /* a wide glyph dropped cut it: no way past */
        }

        /* written from its column, the glyph would blank the one it cuts */
        ngx_pty_paint_cut(e, s, row, pos.row, pos.col - 1);

        return c;
    }

    h = (pos.col > 0) ? ngx_pty_row_cell(row, pos.col - 1, &cell) : NULL;

    if (h != NULL && h->width == 2 && h->ch != 0 && h->ch != NGX_PTY_CONT
        && c->ch != NGX_PTY_CONT)
    {
        /*
         * a mark's join claims two columns before it (_overwide()): the
         * glyph written from its column would blank it, and from past
         * the edge it could not be written: no way past
         */
        return NULL;
    }

    if (c->ch == 0) {
        bg = s->default_pen;
        bg.bg = c->pen.bg;

        if (!ngx_pty_pen_eq(&c->pen, &bg, NGX_PTY_A_SGR)) {
            return NULL;
        }

        ngx_pty_emit_move(e, pos.row, pos.col);
        ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
        ngx_pty_emit(e, " ", 1);
        e->col = -1;

        return c;
    }

    if (c->ch != 0 && c->ch != NGX_PTY_CONT && c->width == 0
        && !(c->pen.attr & NGX_PTY_A_PROTECT))
    {
        /* a lone mark: after a space and a move, as it was written */
        ngx_pty_emit_move(e, pos.row, pos.col);
        ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
        ngx_pty_emit(e, " ", 1);
        e->col = -1;
        ngx_pty_emit_move(e, pos.row, pos.col);
        ngx_pty_emit_chars(e, row, pos.col, c);
        e->col = -1;

        return c;
    }

    if (c->ch == NGX_PTY_CONT && pos.col > 0) {
        c = ngx_pty_row_cell(row, --pos.col, tmp);
    }

    if (c->ch == 0 || c->ch == NGX_PTY_CONT || c->width == 0
        || pos.col + (c->width ? c->width : 1) != (int) s->cols
        || (c->pen.attr & NGX_PTY_A_PROTECT))
    {
        return NULL;
    }

    ngx_pty_emit_move(e, pos.row, pos.col);
    ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
    ngx_pty_emit_chars(e, row, pos.col, c);
    e->col = -1;

    return c;
}


/*
 * DECSC with the set that was in GL at the save (the paint's G0 is ASCII,
 * and is again after it; the sets in use come last)
 */
static void
ngx_pty_emit_decsc(ngx_pty_emit_t *e, ngx_pty_screen_t *s, unsigned b)
{
    u_char  buf[3];

    if (s->saved_set[b]) {
        buf[0] = '\x1b';
        buf[1] = '(';
        buf[2] = s->saved_set[b];
        ngx_pty_emit(e, buf, 3);
    }

    ngx_pty_emit(e, "\x1b" "7", 2);

    if (s->saved_set[b]) {
        ngx_pty_emit(e, "\x1b(B", 3);
    }
}


/* the main buffer's saved cursor on line r of a tall paint (row) */
static void
ngx_pty_emit_saved_row(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_row_t *row, int r)
{
    ngx_pty_emit_decsc_at(e, s, 0, row, r, ngx_pty_saved_at(s, 0).col);
    e->saved_main = 1;
}


/* modes that neither move the cursor nor disturb rewriting a glyph */
static void
ngx_pty_emit_modes(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    if (s->sync) {
        ngx_pty_emit(e, "\x1b[?2026h", 8);
    }

    if (s->newline) {
        ngx_pty_emit(e, "\x1b[20h", 5);
    }

    if (s->ckm) {
        ngx_pty_emit(e, "\x1b[?1h", 5);
    }

    if (s->keypad) {
        ngx_pty_emit(e, "\x1b=", 2);
    }

    if (s->paste) {
        ngx_pty_emit(e, "\x1b[?2004h", 8);
    }

    if (s->mouse) {
        ngx_pty_emitf(e, "\x1b[?%dh", (int) s->mouse, 0);
    }

    if (s->mouse_enc) {
        ngx_pty_emitf(e, "\x1b[?%dh", (int) s->mouse_enc, 0);
    }

    if (s->focus) {
        ngx_pty_emit(e, "\x1b[?1004h", 8);
    }

    if (s->reverse) {
        ngx_pty_emit(e, "\x1b[?5h", 5);
    }

    ngx_pty_emit_props(e, s);
}


/* the tab stops of buffer b, when the program changed them */
static void
ngx_pty_emit_tabs(ngx_pty_emit_t *e, ngx_pty_screen_t *s, unsigned b)
{
    unsigned  col, custom;

    if (!s->tabs_custom[b]) {
        return;
    }

    for (col = 0, custom = 0; col < s->cols && !custom; col++) {
        custom = !ngx_pty_tab(s, b, col) != ((col & 7) != 0);
    }

    if (!custom) {
        return;
    }

    ngx_pty_emit(e, "\x1b[3g", 4);

    for (col = 0; col < s->cols; col++) {
        if (ngx_pty_tab(s, b, col)) {
            ngx_pty_emit_move(e, e->row < 0 ? 0 : e->row, col);
            ngx_pty_emit(e, "\x1bH", 2);
        }
    }
}


/*
 * whether set "scs" draws ASCII ch otherwise (DEC graphics, UK; a set
 * libvterm does not know: 1)
 */
static int
ngx_pty_scs_maps(u_char scs, uint32_t ch)
{
    switch (scs) {
    case '0':
        return ch >= 0x5f && ch <= 0x7e;
    case 'A':
        return ch == '#';
    default:
        return 1;
    }
}


/*
 * whether printing cell c again, in the pen in use and the set the tail
 * left in GL (not the one the model draws with: a DECRC's set is given
 * back to the late joiner only in some cases), gives c
 */
static int
ngx_pty_glyph_again(ngx_pty_emit_t *e, ngx_pty_screen_t *s,
    const ngx_pty_cell_t *c)
{
    return c->ch != 0 && c->ch != NGX_PTY_CONT && c->width != 0
           && !(c->pen.attr & NGX_PTY_A_PROTECT) == !s->protect
           && ngx_pty_pen_eq(&c->pen, &s->pen, NGX_PTY_A_SGR)
           && !(c->ch < 0x80 && e->gl_set
                && ngx_pty_scs_maps(e->gl_set, c->ch));
}


/*
 * Where the glyph a pending wrap follows is, for a Keyframe to write it
 * again: the one printed last (ph_pos), unless a scroll or an edit has
 * put another line under the cursor since; then what ends in the last
 * column of the cursor's row
 */
static VTermPos
ngx_pty_ph_glyph(ngx_pty_screen_t *s)
{
    VTermPos               pos;
    ngx_pty_cell_t         tmp;
    const ngx_pty_row_t   *row;
    const ngx_pty_cell_t  *c;

    pos = s->ph_pos;
    row = s->cur->rows[pos.row];
    c = ngx_pty_row_cell(row, pos.col, &tmp);

    if (c->ch == NGX_PTY_CONT
        || (unsigned) pos.col + (c->width ? c->width : 1) == s->cols)
    {
        return pos;
    }

    pos.col = s->cols - 1;
    c = ngx_pty_row_cell(row, pos.col, &tmp);

    if (c->ch == NGX_PTY_CONT && pos.col > 0
        && ngx_pty_wide_left(ngx_pty_row_cell(row, pos.col - 1, &tmp)))
    {
        pos.col--;
    }

    return pos;
}


/*
 * The same at a pending wrap: ngx_pty_emit_end() wrote the glyph again,
 * but what the tail wrote after it (a designation, a shift) ends the
 * join in xterm.js: once more from its cell, where nothing else differs
 */
static void
ngx_pty_emit_join_edge(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    VTermPos               ph;
    ngx_pty_cell_t         tmp;
    const ngx_pty_row_t   *row;
    const ngx_pty_cell_t  *c;

    if (e->glyph_end == 0 || e->glyph_end == e->len) {
        return;
    }

    ph = ngx_pty_ph_glyph(s);
    row = s->cur->rows[ph.row];
    c = ngx_pty_row_cell(row, ph.col, &tmp);

    if (!ngx_pty_glyph_again(e, s, c)) {
        return;
    }

    if (ngx_pty_cuts_wide(row, ph.col)) {
        /*
         * from its column the glyph would blank the wide glyph it cuts:
         * both again (autowrap off; on, the pair cannot end in a glyph)
         */
        if (!s->autowrap) {
            ngx_pty_emit_cut(e, s, row, ph.row, ph.col - 1,
                             &c->pen);
        }

        return;
    }

    ngx_pty_emit_cursor(e, s, ph);
    ngx_pty_emit_chars(e, row, ph.col, c);
}


/*
 * The input ended in text: a combining mark that comes next (or the
 * UTF-8 character it stopped in) joins the glyph left of the cursor in
 * xterm.js only if a glyph was the last thing printed (and REP repeats
 * it, also when the input stopped inside the REP), and the
 * snapshot's last act was a move.  That glyph is printed again, from one
 * or two columns back, when that gives the same cell (its pen is the
 * pen, the plain cases); in insert mode after a DCH of its width.
 */
static void
ngx_pty_emit_join(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    unsigned               col, w;
    VTermPos               pos;
    ngx_pty_pen_t          pen;
    ngx_pty_cell_t         tmp;
    const ngx_pty_row_t   *row;
    const ngx_pty_cell_t  *c;

    /* in a sequence: a REP it may be repeats that glyph (esc_glyph) */
    if (!(s->pend_len ? s->esc_glyph : s->last_text)) {
        return;
    }

    pos = ngx_pty_cursor(s);

    c = (pos.col > 0) ? ngx_pty_row_cell(s->cur->rows[pos.row],
                                         pos.col - 1, &tmp)
                      : NULL;

    if (!s->pend_len && s->last_wide && !s->phantom && !s->autowrap
        && (unsigned) pos.col + 1 == s->cols && c)
    {
        /*
         * after a wide glyph dropped at the edge: one dropped again, so
         * that a mark joins with its width (ngx_pty_paint_overwide(); a
         * wide glyph's right half there: the mark joins the glyph, in any
         * pen).  Not once a mark made the glyph before the cursor claim
         * two columns: xterm.js's print() blanks such a glyph first, even
         * for a glyph it then drops.
         */
        if (c->width == 1 || c->ch == NGX_PTY_CONT) {
            ngx_pty_emit(e, NGX_PTY_WIDE_FILL,
                         sizeof(NGX_PTY_WIDE_FILL) - 1);

        } else if (ngx_pty_cuts_wide(s->cur->rows[pos.row], pos.col)) {
            /* the cut glyph again, the last act a wide glyph dropped */
            pen = s->pen;
            pen.attr &= ~NGX_PTY_A_PROTECT;
            pen.attr |= s->protect ? NGX_PTY_A_PROTECT : 0;
            if (!ngx_pty_emit_cut(e, s, s->cur->rows[pos.row], pos.row,
                                  pos.col - 1, &pen))
            {
                /* its last column written, not a dropped glyph: drop one */
                ngx_pty_emit(e, NGX_PTY_WIDE_FILL,
                             sizeof(NGX_PTY_WIDE_FILL) - 1);
            }
        }

        return;
    }

    if (s->phantom) {
        ngx_pty_emit_join_edge(e, s);
        return;
    }

    if (pos.col == 0) {
        return;
    }

    row = s->cur->rows[pos.row];
    col = pos.col - 1;
    c = ngx_pty_row_cell(row, col, &tmp);

    if (c->ch == NGX_PTY_CONT && col > 0) {
        c = ngx_pty_row_cell(row, --col, &tmp);
    }

    w = c->width ? c->width : 1;

    if (!ngx_pty_glyph_again(e, s, c) || col + w != (unsigned) pos.col) {
        return;
    }

    if (s->origin) {
        /*
         * xterm.js adds the margin's top to the row of every relative
         * move in origin mode (CUB too): the glyph's cell, absolutely
         */
        if (!ngx_pty_in_region(s, pos.row)) {
            return;
        }

        ngx_pty_emitf(e, "\x1b[%d;%dH", pos.row - s->top + 1, col + 1);

    } else {
        ngx_pty_emit(e, w == 2 ? "\x1b[2D" : "\x1b[D", w == 2 ? 4 : 3);
    }

    if (s->insert) {
        /*
         * the glyph is inserted: taken out first, the cells after it
         * come back to their places, the blanks DCH brought in drop off
         */
        ngx_pty_emit(e, w == 2 ? "\x1b[2P" : "\x1b[P", w == 2 ? 4 : 3);
    }

    ngx_pty_emit_chars(e, row, col, c);
}


/*
 * After a DECRC of the Keyframe's own: the cursor is the slot's, and so
 * are DECSCA and, in a libvterm client, the visibility, which is said
 * again
 */
static void
ngx_pty_emit_decrc_done(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    ngx_pty_emit(e, s->visible ? "\x1b[?25h" : "\x1b[?25l", 6);
    e->visible = s->visible;
    e->protect = NGX_PTY_PROTECT_UNKNOWN;
    e->row = -1;
    e->col = -1;
}


/*
 * GL draws the set a DECRC gave back: a DECRC gives it to the late
 * joiner too, from the slot the Keyframe filled (the alternate buffer's,
 * entered and left, when that one holds it and the main buffer is in
 * use: a DECRC there, then a switch back), and the cursor is put back
 * after it.  Not when neither slot holds that set, nor when the glyph a
 * pending wrap follows is one that set draws otherwise.
 */
static int
ngx_pty_emit_restored_set(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    u_char                 drawn, want, other, hidden;
    VTermPos               ph;
    ngx_pty_cell_t         tmp;
    const ngx_pty_cell_t  *c;

    if (s->ov_shift || s->ov_g != s->gl
        || (s->charset[s->gl] && s->scs[s->gl] == 0))
    {
        return 0;
    }

    drawn = s->scs[s->gl];

    if (drawn == s->ov_scs) {
        return 0;   /* a set libvterm does not know designated: ASCII */
    }

    want = s->saved_valid[s->alt] ? s->saved_set[s->alt] : 0;
    other = s->saved_valid[1] ? s->saved_set[1] : 0;

    if (drawn != want && (s->alt || drawn != other)) {
        return 0;
    }

    if (s->phantom && drawn) {
        ph = ngx_pty_ph_glyph(s);
        c = ngx_pty_row_cell(s->cur->rows[ph.row], ph.col, &tmp);

        if (c->ch && c->ch < 0x80 && ngx_pty_scs_maps(drawn, c->ch)) {
            return 0;
        }
    }

    hidden = 0;

    if (drawn != want) {
        ngx_pty_emit(e, "\x1b[?1047h\x1b" "8\x1b[?1047l", 18);

    } else if (ngx_pty_ul_hidden_wanted(s)) {
        /* the same DECRC hides the pen's underline style, as it did */
        ngx_pty_emit_ul_hidden_pen(e, s);
        ngx_pty_emit(e, "\x1b" "8", 2);
        ngx_pty_emit_ul_hidden_done(e, s);
        hidden = 1;

    } else {
        ngx_pty_emit(e, "\x1b" "8", 2);
    }

    if (!hidden) {
        /* DECRC sets the saved pen's colours (and DECSCA): SGR 0 then */
        ngx_pty_emit_decrc_done(e, s);
        ngx_pty_emit_sgr0(e, &s->default_pen);
    }

    ngx_pty_emit_end(e, s);

    return 1;
}


/*
 * A lone mark took xterm.js's cursor a column past the edge, written
 * nowhere: one again, after a sequence (the pen again, from SGR 0) so
 * that it joins nothing.  A mark that comes next then wraps, as in the
 * stream.
 */
static void
ngx_pty_emit_past_mark(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    ngx_pty_emit_sgr0(e, &s->default_pen);
    ngx_pty_emit_sgr(e, &s->pen, &s->default_pen);
    ngx_pty_emit_protect(e, s->protect);
    ngx_pty_emit(e, "\xcc\x81", 2);      /* U+0301 */
}


/*
 * Last: the character sets (the cells are painted in code points, so not
 * before), then what the input stopped in the middle of: an escape
 * sequence, a UTF-8 character.
 */
static void
ngx_pty_emit_tail(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    int          restored;
    unsigned     k;
    u_char       buf[3];
    static char  gl[][3] = { "\x0f", "\x0e", "\x1bn", "\x1bo" };

    for (k = 0; k < 4; k++) {
        /* as designated, also where GL draws what a DECRC gave back */
        buf[2] = (s->ov && k == s->ov_g) ? s->ov_scs : s->scs[k];

        if (buf[2]) {
            buf[0] = '\x1b';
            buf[1] = (u_char) ('(' + k);
            ngx_pty_emit(e, buf, 3);
        }
    }

    if (s->gl) {
        ngx_pty_emit(e, gl[s->gl], s->gl == 1 ? 1 : 2);
    }

    restored = s->ov ? ngx_pty_emit_restored_set(e, s) : 0;

    /* what GL draws now in the late joiner: as designated, or restored */
    e->gl_set = (s->ov && s->ov_g == s->gl && !restored) ? s->ov_scs
                                                          : s->scs[s->gl];

    if (s->phantom && s->past && e->pending) {
        ngx_pty_emit_past_mark(e, s);

    } else {
        /* the glyph again (for marks to come), if that set keeps it */
        ngx_pty_emit_join(e, s);
    }

    ngx_pty_emit(e, s->pend, s->pend_len);
    ngx_pty_emit(e, s->tail, s->tail_len);
}


/* autowrap off would stop rewriting the glyph of a pending wrap */
static void
ngx_pty_emit_write_modes(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    if (!s->autowrap) {
        ngx_pty_emit(e, "\x1b[?7l", 5);
    }

    /* nor would insert mode push a cut glyph's cell of its own out */
    if (s->insert) {
        ngx_pty_emit(e, "\x1b[4h", 4);
    }
}


/*
 * Whether every cell of row is erased in pen's background (1), or that
 * or protected (2: a selective erase keeps the protected ones); not a
 * blank in more than a background (a wide glyph's wrap leaves one),
 * which an erase would not give back
 */
static int
ngx_pty_row_erased(ngx_pty_screen_t *s, const ngx_pty_row_t *row,
    const ngx_pty_pen_t *pen)
{
    int                    how;
    unsigned               col;
    ngx_pty_pen_t          ep;
    ngx_pty_cell_t         tmp;
    const ngx_pty_cell_t  *c;

    how = 1;
    ep = ngx_pty_pen_erased(s, pen);

    for (col = 0; col < s->cols; col++) {
        c = ngx_pty_row_cell(row, col, &tmp);

        if (c->pen.attr & NGX_PTY_A_PROTECT) {
            how = 2;

        } else if (c->ch != 0
                   || !ngx_pty_pen_eq(&c->pen, &ep, NGX_PTY_A_SGR))
        {
            return 0;
        }
    }

    return how;
}


/*
 * Down (dir 1): SD, the glyph, SU; up (-1): SU, the glyph, SD.  The
 * glyph is the last one of the row next to r on the side the rows came
 * from (r - 1 down, r + 1 up), which the scroll put in row r and the
 * scroll back takes home (a space erased again by EL 1 where that row
 * is blank), or a space in the blank row the first scroll brought in,
 * which the second drops.  The region's row the first scroll drops
 * (its last down, its first up) must be the blank the second brings
 * in: erased in one background, not a soft wrap.  Returns 0 where that
 * cannot be done.
 */
static int
ngx_pty_emit_scroll_wrap_by(ngx_pty_emit_t *e, ngx_pty_screen_t *s, int r,
    int dir)
{
    int                    bottom, edge, from, erased;
    unsigned               col;
    VTermPos               pos;
    ngx_pty_cell_t         tmp;
    const ngx_pty_row_t   *dropped, *next;
    const ngx_pty_cell_t  *blank, *c;

    bottom = (s->bottom == -1 ? (int) s->rows : s->bottom) - 1;
    edge = (dir > 0) ? bottom : s->top;
    from = (dir > 0) ? s->top : bottom;

    if (!ngx_pty_in_region(s, r) || r == edge) {
        return 0;
    }

    dropped = s->cur->rows[edge];
    blank = ngx_pty_row_cell(dropped, 0, &tmp);

    if (dropped->wrapped
        || ngx_pty_row_erased(s, dropped, &blank->pen) != 1)
    {
        return 0;
    }

    col = s->cols - 1;
    c = NULL;
    next = NULL;
    erased = 0;

    if (r != from) {
        next = s->cur->rows[r - dir];
        c = ngx_pty_row_cell(next, col, &tmp);

        if (c->ch == NGX_PTY_CONT) {
            c = ngx_pty_row_cell(next, --col, &tmp);

            if (c->width != 2) {
                return 0;
            }

        } else if (c->width != 1 || ngx_pty_cuts_wide(next, col)) {
            return 0;
        }

        if (c->ch == NGX_PTY_CONT) {
            return 0;
        }

        if (c->ch == 0) {
            /* a blank row: a space, then erased with it (EL 1) */
            erased = ngx_pty_row_erased(s, next, &c->pen);

            if (erased == 0) {
                return 0;
            }
        }
    }

    ngx_pty_emit(e, (dir > 0) ? "\x1b[T" : "\x1b[S", 3);

    pos.row = r;
    pos.col = col;

    if (c == NULL) {
        ngx_pty_emit_cursor(e, s, pos);
        ngx_pty_emit(e, " ", 1);

    } else if (erased) {
        ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
        ngx_pty_emit_cursor(e, s, pos);
        ngx_pty_emit(e, erased == 1 ? " \x1b[1K" : " \x1b[?1K",
                     erased == 1 ? 5 : 6);

    } else {
        ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
        ngx_pty_emit_cursor(e, s, pos);
        ngx_pty_emit_chars(e, next, col, c);
    }

    /* the blank row the scroll back brings in takes the pen's background */
    ngx_pty_emit_sgr(e, &blank->pen, &s->default_pen);
    ngx_pty_emit(e, (dir > 0) ? "\x1b[S" : "\x1b[T", 3);

    e->row = r;
    e->col = -1;

    return 1;
}


/*
 * A pending wrap over an empty last column in row r (an SU or SD in the
 * stream scrolled the glyph away; xterm.js keeps the column past the
 * edge through both): the rows of the region moved one way, a glyph
 * written at the edge of row r, then moved back over it.
 */
static int
ngx_pty_emit_scroll_wrap(ngx_pty_emit_t *e, ngx_pty_screen_t *s, int r)
{
    return ngx_pty_emit_scroll_wrap_by(e, s, r, 1)
           || ngx_pty_emit_scroll_wrap_by(e, s, r, -1);
}


/*
 * A DECRC left xterm.js's pen an underline style it does not show (an
 * SGR 59 shows it): the same by an SGR with that style, then DECRC, then
 * the pen's other attributes without SGR 0 or an underline's, which would
 * drop it.  The set the DECRC gave GL goes back to ASCII, where the sets
 * in use start from (ngx_pty_emit_tail()); where GL draws a set a DECRC
 * gave back, that DECRC makes the style (ngx_pty_emit_restored_set()).
 */
static void
ngx_pty_emit_ul_hidden(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    if (s->ov || !ngx_pty_ul_hidden_wanted(s)) {
        return;
    }

    ngx_pty_emit_ul_hidden_pen(e, s);
    ngx_pty_emit(e, "\x1b" "8", 2);

    if (s->saved_valid[s->alt] && s->saved_set[s->alt]) {
        ngx_pty_emit(e, "\x1b(B", 3);
    }

    ngx_pty_emit_ul_hidden_done(e, s);
}


/*
 * whether the pen has such a style, or the flag-less mark, that a DECRC of
 * the buffer's slot can hide (not where the slot has the mark or an
 * underline: it would show the style, and the pen comes without it, which
 * shows the same)
 */
static unsigned
ngx_pty_ul_hidden_wanted(ngx_pty_screen_t *s)
{
    unsigned  b;

    b = s->alt;

    if (s->ul_hidden) {
        return !(s->saved_valid[b]
                 && (s->saved_flagless[b]
                     || (s->saved_pen[b].attr & NGX_PTY_A_UL)));
    }

    return ngx_pty_ul_flagless_shown(s) || ngx_pty_ul_mark_only(s)
           || ngx_pty_ul_styleless_shown(s);
}


/* the flag and the mark, no style: DECRC of an underlining slot, again */
static unsigned
ngx_pty_ul_styleless_shown(ngx_pty_screen_t *s)
{
    unsigned  b;

    b = s->alt;

    return s->ul_styleless && (s->pen.attr & NGX_PTY_A_UL)
           && s->saved_valid[b] && !s->saved_flagless[b]
           && (s->saved_pen[b].attr & NGX_PTY_A_UL);
}


/* shown without the flag: hidden the same way, then SGR 59 */
static unsigned
ngx_pty_ul_flagless_shown(ngx_pty_screen_t *s)
{
    unsigned  b;

    b = s->alt;

    return s->ul_flagless && (s->pen.attr & NGX_PTY_A_UL)
           && !(s->saved_valid[b] && (s->saved_pen[b].attr & NGX_PTY_A_UL));
}


/*
 * A pending wrap's glyph written after such a DECRC: a plain glyph whose
 * underline is the pen's, so that SGRs without SGR 0 or an underline's
 * give its pen (the hidden style, or none, is not the cell's)
 */
static unsigned
ngx_pty_ul_hidden_glyph(ngx_pty_screen_t *s, const ngx_pty_row_t *row,
    int col, const ngx_pty_cell_t *c)
{
    if (s->ov || !ngx_pty_ul_hidden_wanted(s)
        || !(s->ul_hidden || ngx_pty_ul_styleless_shown(s)))
    {
        return 0;
    }

    return c->ch != 0 && c->width != 0
           && !(c->pen.attr & NGX_PTY_A_PROTECT)
           && ((c->pen.attr ^ s->pen.attr) & NGX_PTY_A_UL) == 0
           && ((c->pen.xattr ^ s->pen.xattr) & NGX_PTY_X_UL) == 0
           && ngx_pty_color_eq(&c->pen.ul, &s->pen.ul)
           && !ngx_pty_cuts_wide(row, col)
           && !((unsigned) col + 1 < s->cols
                && ngx_pty_cuts_wide(row, col + 1));
}


/* the mark with no style (its colour shows): DECRC of a slot with it */
static unsigned
ngx_pty_ul_mark_only(ngx_pty_screen_t *s)
{
    return s->ul_flagless && !(s->pen.attr & NGX_PTY_A_UL)
           && s->saved_valid[s->alt] && s->saved_flagless[s->alt];
}


/* the pen before that DECRC: with the style it is to hide */
static void
ngx_pty_emit_ul_hidden_pen(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    unsigned       sgr24;
    ngx_pty_pen_t  pen;

    pen = s->pen;
    pen.attr |= s->ul_hidden;
    pen.xattr |= s->ul_hidden_x;
    sgr24 = ngx_pty_ul_mark_only(s);

    if (ngx_pty_ul_styleless_shown(s)) {
        /* no style: SGR 24, unless the SGR below says it (an underline) */
        sgr24 = !(e->pen.attr & NGX_PTY_A_UL);
        pen.attr &= ~NGX_PTY_A_UL;
        pen.xattr &= ~NGX_PTY_X_UL;
    }

    ngx_pty_emit_sgr(e, &pen, &s->default_pen);

    if (sgr24) {
        ngx_pty_emit(e, "\x1b[24m", 5);
    }
}


/* after that DECRC: the pen's other attributes, the style kept */
static void
ngx_pty_emit_ul_hidden_done(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    unsigned  b;

    b = s->alt;

    ngx_pty_emit_decrc_done(e, s);

    e->pen = s->saved_valid[b] ? s->saved_pen[b] : s->default_pen;
    e->pen.attr &= ~NGX_PTY_A_UL;
    e->pen.xattr &= ~NGX_PTY_X_UL;
    e->pen.ul = s->pen.ul;

    /* and black for colours it never saved: both said again */
    e->pen.fg = ngx_pty_color_eq(&s->pen.fg, &s->default_pen.fg)
                ? ngx_pty_color_idx(0, 1) : s->default_pen.fg;
    e->pen.bg = ngx_pty_color_eq(&s->pen.bg, &s->default_pen.bg)
                ? ngx_pty_color_idx(0, 1) : s->default_pen.bg;

    if (ngx_pty_ul_flagless_shown(s)) {
        /* xterm.js stores -1 for the colour, which reads as white */
        ngx_pty_emit(e, "\x1b[59m", 5);
        e->pen.attr |= s->pen.attr & NGX_PTY_A_UL;
        e->pen.xattr |= s->pen.xattr & NGX_PTY_X_UL;
        vterm_color_rgb(&e->pen.ul, 255, 255, 255);
    }

    if (ngx_pty_ul_styleless_shown(s)) {
        /* the slot's flag, shown as the model's single underline */
        e->pen.attr |= s->pen.attr & NGX_PTY_A_UL;
        e->pen.xattr |= s->pen.xattr & NGX_PTY_X_UL;
    }

    ngx_pty_emit_sgr_diff(e, &s->pen);
}


/*
 * The cursor, its pen and the modes that write (step 6): a pending wrap
 * by writing again the glyph it follows
 */
static void
ngx_pty_emit_end(ngx_pty_emit_t *e, ngx_pty_screen_t *s)
{
    int                    erased;
    unsigned               hidden;
    size_t                 glyph_end;
    VTermPos               pos, ph;
    ngx_pty_cell_t         tmp;
    const ngx_pty_row_t   *row;
    const ngx_pty_cell_t  *c;

    vterm_state_get_cursorpos(s->state, &pos);
    c = NULL;
    hidden = 0;
    e->glyph_end = 0;
    e->pending = 0;

    if (s->phantom) {
        ph = ngx_pty_ph_glyph(s);
        row = s->cur->rows[ph.row];
        c = ngx_pty_row_cell(row, ph.col, &tmp);

        if (c->ch == NGX_PTY_CONT) {
            c = NULL;
        }
    }

    if (c == NULL) {
        ngx_pty_emit_ul_hidden(e, s);
        ngx_pty_emit_write_modes(e, s);
        ngx_pty_emit_sgr(e, &s->pen, &s->default_pen);
        ngx_pty_emit_protect(e, s->protect);
        ngx_pty_emit_cursor(e, s, pos);

    } else {
        /* a pending wrap: rewrite the glyph it follows */
        e->pending = 1;
        hidden = ngx_pty_ul_hidden_glyph(s, row, ph.col, c);

        if (hidden) {
            /* after the DECRC that hides the pen's style, kept */
            ngx_pty_emit_ul_hidden(e, s);
            ngx_pty_emit_protect(e, 0);
            ngx_pty_emit_sgr_diff(e, &c->pen);

        } else {
            ngx_pty_emit_pen(e, &c->pen, &s->default_pen);
        }

        ngx_pty_emit_cursor(e, s, ph);

        if (c->ch && c->width == 0) {
            /* a lone mark: after a space and a move, as it was written */
            ngx_pty_emit(e, " ", 1);
            e->col = -1;
            ngx_pty_emit_cursor(e, s, ph);
            ngx_pty_emit_chars(e, row, ph.col, c);

        } else if (c->ch && ngx_pty_cuts_wide(row, ph.col)) {
            /* moved to its column, xterm.js's print() would blank it */
            ngx_pty_paint_cut(e, s, row, ph.row, ph.col - 1);
            e->glyph_end = e->len;

        } else if (c->ch && (unsigned) ph.col + 1 < s->cols
                   && ngx_pty_cuts_wide(row, ph.col + 1))
        {
            /* a cut glyph: written again, it would take the cell after */
            ngx_pty_paint_cut(e, s, row, ph.row, ph.col);
            e->glyph_end = e->len;

        } else if (c->ch) {
            ngx_pty_emit_chars(e, row, ph.col, c);
            e->glyph_end = e->len;

        } else {
            /*
             * erased since: a blank glyph, then EL 1 if the whole row is
             * blank in that pen (xterm.js keeps the wrap through EL 1,
             * not through ECH); else on the alternate buffer, whose
             * cursor the main one takes when it is left (which clears
             * it): the cell stays as it is
             */
            pos = ph;
            pos.col = s->cols - 1;
            erased = ngx_pty_row_erased(s, row, &c->pen);

            if (erased == 0 && !s->alt
                && (!s->origin || ngx_pty_in_region(s, pos.row)))
            {
                if (s->origin) {
                    /* before: DECOM homes the cursor */
                    ngx_pty_emit(e, "\x1b[?6h", 5);
                }

                /* that buffer's region is the whole screen: row, as is */
                ngx_pty_emit(e, "\x1b[?1047h", 8);
                ngx_pty_emitf(e, "\x1b[%d;%dH", pos.row + 1, pos.col + 1);
                ngx_pty_emit(e, " \x1b[?1047l", 9);
                e->row = pos.row;
                e->col = -1;

            } else if (erased
                       || !ngx_pty_emit_scroll_wrap(e, s, pos.row))
            {
                ngx_pty_emit_cursor(e, s, pos);
                ngx_pty_emit(e, " ", 1);

                if (erased) {
                    ngx_pty_emit(e, erased == 1 ? "\x1b[1K" : "\x1b[?1K",
                                 erased == 1 ? 4 : 5);
                }
            }
        }

        glyph_end = e->len;
        ngx_pty_emit_write_modes(e, s);

        if (hidden) {
            ngx_pty_emit_sgr_diff(e, &s->pen);

        } else {
            ngx_pty_emit_sgr(e, &s->pen, &s->default_pen);
        }

        ngx_pty_emit_protect(e, s->protect);

        if (e->len == glyph_end
            && !(s->pend_len ? s->esc_glyph : s->last_text))
        {
            /*
             * the glyph written again must not be the last thing printed
             * (a REP would repeat it): the pen again, from SGR 0 (not
             * where a DECRC gave it: the visibility again)
             */
            if (hidden) {
                ngx_pty_emit(e, s->visible ? "\x1b[?25h" : "\x1b[?25l", 6);

            } else {
                ngx_pty_emit_sgr0(e, &s->default_pen);
                ngx_pty_emit_sgr(e, &s->pen, &s->default_pen);
                ngx_pty_emit_protect(e, s->protect);
            }
        }
    }
}


u_char *
ngx_pty_screen_snapshot(ngx_pty_screen_t *s, size_t *len)
{
    ngx_pty_emit_t  e;

    memset(&e, 0, sizeof(ngx_pty_emit_t));
    e.cap = (size_t) s->cols * s->rows * 2 + 256;
    e.buf = malloc(e.cap);

    if (e.buf == NULL) {
        return NULL;
    }

    /* the state a reset terminal is in */
    e.pen = s->default_pen;
    e.visible = 1;

    ngx_pty_emit_reset_style(&e, s);

    if (s->title_len) {
        ngx_pty_emit_title(&e, s);
    }

    ngx_pty_paint_main(&e, s);
    ngx_pty_emit_tabs(&e, s, 0);

    ngx_pty_emit_saved(&e, s, 0);

    if (s->alt) {
        /* the main buffer's own region, and its cursor: a reflow's anchor */
        ngx_pty_emit_region(&e, s, s->norm_top, s->norm_bottom);
        ngx_pty_emit_move(&e, s->norm_y, s->norm_x < (int) s->cols
                                         ? s->norm_x : (int) s->cols - 1);
    }

    if (s->alt || s->saved_valid[1]) {
        ngx_pty_emit(&e, "\x1b[?1047h", 8);
        ngx_pty_emit_sgr(&e, &s->default_pen, &s->default_pen);
        ngx_pty_emit(&e, "\x1b[2J", 4);

        if (s->alt) {
            ngx_pty_paint_lines(&e, s, &s->grid[1], s->rows, -1);
            ngx_pty_emit_tabs(&e, s, 1);
        }

        ngx_pty_emit_saved(&e, s, 1);

        if (!s->alt) {
            ngx_pty_emit(&e, "\x1b[?1047l", 8);
        }
    }

    ngx_pty_emit_region(&e, s, s->top, s->bottom);

    /*
     * Modes first, cursor last: in origin mode every CSI clamps the cursor
     * into the margins, and the program's cursor may be outside them.
     */
    ngx_pty_emit_modes(&e, s);

    ngx_pty_emit_end(&e, s);
    ngx_pty_emit_tail(&e, s);

    free(e.edge.cells);

    if (e.failed) {
        free(e.buf);
        return NULL;
    }

    *len = e.len;

    return e.buf;
}


/* a cell's text: its glyph and combining marks, a blank as a space */
static u_char *
ngx_pty_cell_utf8(u_char *p, const ngx_pty_row_t *row, unsigned col,
    const ngx_pty_cell_t *c)
{
    unsigned  i;

    if (c->ch == 0) {
        *p++ = ' ';
        return p;
    }

    p += ngx_pty_utf8_put(p, c->ch);

    for (i = 0; i < c->ncomb && row->comb; i++) {
        p += ngx_pty_utf8_put(p, row->comb[col * NGX_PTY_MAX_COMB + i]);
    }

    return p;
}


/*
 * A right half without its wide glyph (ICH on a right half moves one on
 * alone): a column of its own, which xterm.js's text shows as a space
 */
static ngx_inline int
ngx_pty_lone_half(const ngx_pty_row_t *row, unsigned col)
{
    const ngx_pty_cell_t  *h;

    if (col == 0 || col - 1 >= row->len) {
        return 1;
    }

    h = &row->cells[col - 1];

    return !ngx_pty_wide_left(h);
}


/*
 * whether cell col of a row reads as a space: a lone right half, a wide
 * glyph the edge cut (the alternate buffer keeps one, and a Keyframe
 * paints a blank there), or one a cell of its own overlaps that no
 * Keyframe could make (a reflow's)
 */
static ngx_inline int
ngx_pty_cell_space(ngx_pty_screen_t *s, const ngx_pty_row_t *row,
    unsigned col, const ngx_pty_cell_t *c)
{
    ngx_pty_cell_t  tmp;

    if (c->ch == NGX_PTY_CONT) {
        return ngx_pty_lone_half(row, col);
    }

    if (!ngx_pty_wide_left(c)) {
        return 0;
    }

    if (col + 1 >= s->cols) {
        return 1;
    }

    /* a cell of its own after it, where no Keyframe could move it */
    return ngx_pty_row_cell(row, col + 1, &tmp)->ch != NGX_PTY_CONT
           && col + 2 < s->cols && !ngx_pty_claim_movable(row, col);
}


u_char *
ngx_pty_screen_text(ngx_pty_screen_t *s, size_t *len)
{
    u_char                *buf, *p, *start, *line_end, *text_end;
    unsigned               r, col;
    const ngx_pty_row_t   *row;
    const ngx_pty_cell_t  *c;

    /* a cell is at most 6 code points of 4 bytes */
    buf = malloc((size_t) s->rows * (s->cols * 4 * NGX_PTY_MAX_CHARS + 1) + 1);
    if (buf == NULL) {
        return NULL;
    }

    p = buf;
    text_end = buf;

    for (r = 0; r < s->rows; r++) {
        row = s->cur->rows[r];
        start = p;
        line_end = p;

        /* cells past row->len are blanks, trimmed anyway */
        for (col = 0; col < row->len; col++) {
            c = &row->cells[col];

            if (ngx_pty_cell_space(s, row, col, c)) {
                *p++ = ' ';
                continue;
            }

            if (c->ch == NGX_PTY_CONT) {
                continue;
            }

            p = ngx_pty_cell_utf8(p, row, col, c);

            if (c->ch != 0 && (c->ch != ' ' || c->ncomb)) {
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


void
ngx_pty_screen_cursor(ngx_pty_screen_t *s, unsigned *row, unsigned *col,
    unsigned *visible)
{
    VTermPos  pos;

    pos = ngx_pty_cursor(s);

    *row = (unsigned) pos.row;
    *col = (unsigned) pos.col;
    *visible = s->visible;
}


static int
ngx_pty_cell_highlighted(ngx_pty_screen_t *s, const ngx_pty_cell_t *c)
{
    return (c->pen.attr & NGX_PTY_A_REVERSE)
           || !ngx_pty_color_eq(&c->pen.bg, &s->default_pen.bg);
}


size_t
ngx_pty_screen_highlights(ngx_pty_screen_t *s, ngx_pty_screen_span_t *spans,
    size_t max)
{
    size_t                 n;
    unsigned               r, col, from;
    ngx_pty_cell_t         tmp;
    const ngx_pty_row_t   *row;
    const ngx_pty_cell_t  *c;

    n = 0;

    for (r = 0; r < s->rows; r++) {
        row = s->cur->rows[r];
        from = s->cols;

        for (col = 0; col <= s->cols; col++) {
            c = (col < s->cols) ? ngx_pty_row_cell(row, col, &tmp) : NULL;

            if (c && ngx_pty_cell_highlighted(s, c)) {
                if (from == s->cols) {
                    from = col;
                }

                continue;
            }

            if (from < s->cols) {
                if (n < max) {
                    spans[n].row = r;
                    spans[n].col = from;
                    spans[n].cols = col - from;
                }

                n++;
                from = s->cols;
            }
        }
    }

    return n;
}


size_t
ngx_pty_screen_span_text(ngx_pty_screen_t *s, ngx_pty_screen_span_t *span,
    u_char *buf)
{
    u_char                *p;
    unsigned               col;
    ngx_pty_cell_t         tmp;
    const ngx_pty_row_t   *row;
    const ngx_pty_cell_t  *c;

    p = buf;

    if (span->row >= s->rows) {
        return 0;
    }

    row = s->cur->rows[span->row];

    for (col = span->col; col < span->col + span->cols && col < s->cols;
         col++)
    {
        c = ngx_pty_row_cell(row, col, &tmp);

        if (ngx_pty_cell_space(s, row, col, c)) {
            *p++ = ' ';

        } else if (c->ch != NGX_PTY_CONT) {
            p = ngx_pty_cell_utf8(p, row, col, c);
        }
    }

    return p - buf;
}


unsigned long
ngx_pty_screen_diverged(ngx_pty_screen_t *s)
{
    return s->diverged;
}
