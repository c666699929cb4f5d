
/*
 * ngx_pty_module: a resize of one buffer as xterm.js does it (see
 * docs/SNAPSHOT.md, "Resize").
 */


#ifndef _NGX_PTY_REFLOW_H_INCLUDED_
#define _NGX_PTY_REFLOW_H_INCLUDED_


#include "ngx_pty_grid.h"


/* xterm.js's scrollback option, its default: what its buffer keeps */
#define NGX_PTY_XTERM_SCROLLBACK  1000


/*
 * One buffer in xterm.js's terms: its lines from the oldest scrollback line
 * to the screen's last.  The model holds only the newest of them: the
 * first "lost" lines are not in line[], so xterm.js's line i is
 * line[i - lost].
 */
typedef struct {
    ngx_pty_row_t   **line;
    unsigned          n;
    unsigned          stale;     /* popped lines kept after line[n - 1] */
    unsigned          cap;
    unsigned          width;     /* cells allocated in each line */
    unsigned          lost;
    unsigned          ybase;     /* xterm.js's: the screen's first line */
    unsigned          scrollback; /* 0: the alternate buffer, no reflow */
    unsigned          max_length; /* xterm.js's lines.maxLength */
    unsigned          cols;
    unsigned          rows;
    int               x;
    int               y;
    long              saved_y;   /* xterm.js's savedY: a line of the buffer */
    int               saved_x;
    ngx_pty_pen_t     null_pen;  /* xterm.js's DEFAULT_ATTR_DATA */
} ngx_pty_rbuf_t;


int ngx_pty_rbuf_init(ngx_pty_rbuf_t *b, unsigned lines, unsigned width);
ngx_pty_row_t *ngx_pty_rbuf_add(ngx_pty_rbuf_t *b, const ngx_pty_row_t *row,
    const uint32_t *comb, unsigned cols);
int ngx_pty_rbuf_resize(ngx_pty_rbuf_t *b, unsigned cols, unsigned rows);
void ngx_pty_rbuf_add_tail(ngx_pty_rbuf_t *b, ngx_pty_row_t *line,
    const ngx_pty_row_t *row);
void ngx_pty_rline_insert(ngx_pty_rbuf_t *b, ngx_pty_row_t *line, unsigned pos,
    unsigned long n, const ngx_pty_pen_t *fill);
void ngx_pty_rline_delete(ngx_pty_rbuf_t *b, ngx_pty_row_t *line, unsigned pos,
    unsigned long n, const ngx_pty_pen_t *fill);
void ngx_pty_rline_replace(ngx_pty_row_t *line, unsigned start,
    unsigned long end, const ngx_pty_pen_t *fill);
ngx_pty_row_t *ngx_pty_rbuf_get(ngx_pty_rbuf_t *b, long i);
void ngx_pty_rbuf_free(ngx_pty_rbuf_t *b);


#endif /* _NGX_PTY_REFLOW_H_INCLUDED_ */
