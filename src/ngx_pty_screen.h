
/*
 * ngx_pty_module: terminal screen model.
 *
 * Folds the bytes a program writes to its PTY into a cols x rows grid of
 * cells (characters, combining marks, width, SGR attributes, colours),
 * plus the cursor and the terminal modes a client needs, and serialises
 * it as a "vt100-screen-state-v1" snapshot (docs/SNAPSHOT.md): escape
 * sequences that rebuild the same screen in a freshly reset terminal.
 *
 * Parsing is libvterm's (parser + state layer), but for text and the
 * common cursor, SGR and erase sequences, which the model applies itself;
 * the grid is ours, because libvterm's VTermScreen moves every cell of the
 * screen on each scrolled line.  Scrolling here rotates row pointers and
 * clears rows lazily, so every input byte costs a small constant whatever
 * the geometry.
 *
 * Depends only on libc and libvterm (so t/tools can link it without
 * nginx).  Not thread-safe; one model per PTY.
 */


#ifndef _NGX_PTY_SCREEN_H_INCLUDED_
#define _NGX_PTY_SCREEN_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef _NGX_CONFIG_H_INCLUDED_
typedef unsigned char  u_char;
#endif


/* the protocol's geometry limit, both dimensions */
#define NGX_PTY_SCREEN_MAX_COLS  1024
#define NGX_PTY_SCREEN_MAX_ROWS  1024


typedef struct ngx_pty_screen_s  ngx_pty_screen_t;

/* receives the terminal's answers to queries (DSR/CPR, DA, DECRQM...) */
typedef void (*ngx_pty_screen_reply_pt)(void *data, const u_char *buf,
    size_t len);


/* NULL on ENOMEM or a size outside 1..1024 */
ngx_pty_screen_t *ngx_pty_screen_create(unsigned cols, unsigned rows);
void ngx_pty_screen_destroy(ngx_pty_screen_t *s);

void ngx_pty_screen_set_reply(ngx_pty_screen_t *s,
    ngx_pty_screen_reply_pt handler, void *data);

void ngx_pty_screen_feed(ngx_pty_screen_t *s, const u_char *data, size_t len);

/*
 * tests and benchmarks: 0 hands wide glyphs to libvterm instead of the
 * model's own path for them, which must leave the same screen (1, the
 * default)
 */
void ngx_pty_screen_set_fast_wide(ngx_pty_screen_t *s, unsigned on);

/* 0 ok, -1 bad size or ENOMEM (the model is unchanged then) */
int ngx_pty_screen_resize(ngx_pty_screen_t *s, unsigned cols, unsigned rows);

/* vt100-screen-state-v1; malloc()ed, the caller free()s it; NULL on ENOMEM */
u_char *ngx_pty_screen_snapshot(ngx_pty_screen_t *s, size_t *len);

/*
 * the visible screen as UTF-8 text: one line per row, trailing blanks
 * trimmed, trailing empty rows dropped, '\n' separated; malloc()ed
 */
u_char *ngx_pty_screen_text(ngx_pty_screen_t *s, size_t *len);

void ngx_pty_screen_size(ngx_pty_screen_t *s, unsigned *cols, unsigned *rows);

/* the cursor: row and column from 0, and whether it is shown */
void ngx_pty_screen_cursor(ngx_pty_screen_t *s, unsigned *row, unsigned *col,
    unsigned *visible);

/* a run of cells on one row */
typedef struct {
    unsigned                   row;
    unsigned                   col;
    unsigned                   cols;
} ngx_pty_screen_span_t;

/*
 * The runs of highlighted cells (reverse video, or a background that is
 * not the default), row by row, at most max; returns how many there are.
 */
size_t ngx_pty_screen_highlights(ngx_pty_screen_t *s,
    ngx_pty_screen_span_t *spans, size_t max);

/* the UTF-8 text of a span into buf (span->cols * 24 bytes); its length */
size_t ngx_pty_screen_span_text(ngx_pty_screen_t *s,
    ngx_pty_screen_span_t *span, u_char *buf);

/* bytes held (grids, libvterm's own allocations), for the memory budget */
size_t ngx_pty_screen_memory(ngx_pty_screen_t *s);

/*
 * How often the model followed xterm.js where libvterm 0.1.4 would not
 * (EL, ED, ECH, ICH, DCH, IL, DL at a pending wrap, combining marks
 * libvterm drops or places elsewhere, SGR colours and 58 it reads another
 * way): the tests compare with libvterm where this is 0 (docs/SNAPSHOT.md)
 */
unsigned long ngx_pty_screen_diverged(ngx_pty_screen_t *s);


#endif /* _NGX_PTY_SCREEN_H_INCLUDED_ */
