
/*
 * ngx_pty_module: the screen model's cells, rows and grids, shared by the
 * model (ngx_pty_screen.c) and its resize and xterm.js's line operations
 * (ngx_pty_reflow.c).
 */


#ifndef _NGX_PTY_GRID_H_INCLUDED_
#define _NGX_PTY_GRID_H_INCLUDED_


#include <stdint.h>

#include <vterm.h>


#define NGX_PTY_CONT          0xffffffff  /* right half of a wide glyph */
#define NGX_PTY_MAX_CHARS     6           /* VTERM_MAX_CHARS_PER_CELL */
#define NGX_PTY_MAX_COMB      (NGX_PTY_MAX_CHARS - 1)


typedef struct {
    uint16_t              attr;
    uint8_t               xattr;
    uint8_t               pad;    /* zero */
    VTermColor            fg;     /* normalised: unused bytes zero */
    VTermColor            bg;
    VTermColor            ul;     /* underline colour (SGR 58) */
} ngx_pty_pen_t;


typedef struct {
    uint32_t              ch;     /* 0: erased, NGX_PTY_CONT */
    uint8_t               ncomb;  /* combining chars in row->comb */
    uint8_t               width;
    ngx_pty_pen_t         pen;
} ngx_pty_cell_t;


/* ngx_pty_fast_text() stores a cell as three 8-byte words */
typedef char ngx_pty_cell_is_24_bytes[sizeof(ngx_pty_cell_t) == 24 ? 1 : -1];


typedef struct {
    ngx_pty_cell_t       *cells;
    uint32_t             *comb;   /* cols * NGX_PTY_MAX_COMB, lazily */
    unsigned              len;    /* cells[len..cols) are blanks in fill */
    unsigned              wrapped:1; /* text wrapped into it (soft wrap) */
    unsigned              own:1;   /* allocated alone (scrollback) */
    ngx_pty_pen_t         fill;

    /*
     * the alternate buffer's cells past the edge: xterm.js does not cut
     * its lines when it narrows (no reflow there), and shows them again
     * when it widens
     */
    ngx_pty_cell_t       *tail;
    uint32_t             *tail_comb; /* tail_len * NGX_PTY_MAX_COMB, lazily */
    unsigned              tail_len;
} ngx_pty_row_t;


typedef struct {
    ngx_pty_row_t       **rows;   /* a window into buf; scrolling moves it */
    ngx_pty_row_t       **buf;    /* 2 * nrows row pointers */
    ngx_pty_row_t       **tmp;
    ngx_pty_row_t        *row_mem;
    ngx_pty_cell_t       *cell_mem;
    unsigned              cols;
    unsigned              nrows;

    /* the lines xterm.js keeps above the screen that a resize can bring back */
    ngx_pty_row_t       **sb;     /* a ring of sb_cap rows, oldest at sb_head */
    unsigned              sb_cap;
    unsigned              sb_head;
    unsigned              sb_len;
} ngx_pty_grid_t;


#endif /* _NGX_PTY_GRID_H_INCLUDED_ */
