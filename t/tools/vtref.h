
/*
 * ngx_pty_module test tools: a reference terminal (libvterm's own
 * VTermScreen, independent of our grid) and a cell-by-cell comparison,
 * shared by vtcompare and t/unit/screen_test.
 */


#ifndef _VTREF_H_INCLUDED_
#define _VTREF_H_INCLUDED_


#include <stdio.h>
#include <stddef.h>

#include <vterm.h>


typedef struct vtref_s  vtref_t;


vtref_t *vtref_new(int cols, int rows);
void vtref_free(vtref_t *r);

/* in pieces cut before control bytes: libvterm puts a whole write on stack */
void vtref_feed(vtref_t *r, const unsigned char *p, size_t n);
void vtref_resize(vtref_t *r, int cols, int rows);

VTermScreen *vtref_screen(vtref_t *r);

/* the visible screen as text, same rules as ngx_pty_screen_text() */
char *vtref_text(vtref_t *r, size_t *len);

/* code point c as UTF-8 at p (up to 4 bytes): returns its length */
size_t vtref_utf8(char *p, uint32_t c);

/*
 * Compares cells (chars incl. combining, width, attributes, colours),
 * cursor position and visibility, the alternate screen flag, and, through
 * DECRQM queries (which it feeds to both terminals), the DEC modes 6, 7,
 * 25 and 69; with strict_modes also 1, 1000-1006, 1015 and 2004 (which
 * libvterm, unlike xterm and the model, sets from the first parameter
 * only).  Writes at most max_diffs readable differences to out (may be
 * NULL).  Returns the number of differences, 0 when identical.
 */
/*
 * With "on", vtref_compare() takes two erased cells as equal when their
 * background colours are: libvterm erases with the whole pen (attributes
 * and foreground too), xterm.js, which the model follows, with the
 * background colour alone (docs/SNAPSHOT.md).
 */
void vtref_xterm_erase(int on);

int vtref_compare(vtref_t *want, vtref_t *got, FILE *out, int max_diffs,
    int strict_modes);


#endif /* _VTREF_H_INCLUDED_ */
