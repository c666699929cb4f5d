
/*
 * ngx_pty_module: settled text.
 *
 * Turns the raw bytes a program writes to its PTY into the text an agent
 * reads: escape sequences are stripped, and CR, BS, TAB and the line
 * editing sequences readline and friends use (CUF/CUB/CHA, EL, ECH,
 * DCH, ICH) are applied to the current line the way a terminal would, so
 * per-keystroke redraws settle into the final line.  Completed lines are
 * queued; the current (unfinished) line is kept as cells and reported as
 * it looks now.  The full contract, with examples, is docs/SETTLED_TEXT.md.
 *
 * Depends only on libc.  Not thread-safe; one converter per PTY.
 */


#ifndef _NGX_PTY_TEXT_H_INCLUDED_
#define _NGX_PTY_TEXT_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef _NGX_CONFIG_H_INCLUDED_
typedef unsigned char  u_char;
#endif


/* a line is force-broken (emitted with '\n') when it reaches this width */
#define NGX_PTY_TEXT_MAX_COLS         65536
/* cursor motion cannot go further than this past the end of the line */
#define NGX_PTY_TEXT_MAX_JUMP         1024
/* CSI: parameters kept, and the value each one saturates at */
#define NGX_PTY_TEXT_MAX_PARAMS       16
#define NGX_PTY_TEXT_MAX_PARAM        65535
/* an OSC/DCS/APC/PM/SOS body longer than this is abandoned */
#define NGX_PTY_TEXT_MAX_STRING       65536
/* default and minimum cap on completed text waiting for take() */
#define NGX_PTY_TEXT_DEFAULT_PENDING  (1024 * 1024)
#define NGX_PTY_TEXT_MIN_PENDING      4096


typedef struct ngx_pty_text_s  ngx_pty_text_t;


/*
 * What take() or peek() returns.  data is owned by the converter and is
 * valid until the next call of any function on it.
 */
typedef struct {
    const u_char  *data;     /* settled UTF-8 text, not NUL-terminated */
    size_t         len;
    size_t         stable;   /* data[0 .. stable) is completed-line text:
                                until the next take() later peeks only
                                append to it; the rest may change */
    size_t         dropped;  /* bytes of completed text discarded since the
                                last take() because max_pending was hit */
} ngx_pty_text_view_t;


/*
 * max_pending caps completed text not yet taken (0: the default); when it
 * is exceeded the oldest lines are discarded and counted in "dropped".
 * Returns NULL if out of memory.
 */
ngx_pty_text_t *ngx_pty_text_create(size_t max_pending);
void ngx_pty_text_destroy(ngx_pty_text_t *t);

/* forget everything: parser state, current line, pending text */
void ngx_pty_text_reset(ngx_pty_text_t *t);

/*
 * Feed raw PTY bytes, split anywhere.  Returns 0, or -1 if out of memory
 * (some text was lost; the converter stays usable).
 */
int ngx_pty_text_feed(ngx_pty_text_t *t, const u_char *data, size_t len);

/*
 * Settled text since the last take(): completed lines, each ending in
 * '\n', then the part of the current line not yet returned.  take()
 * consumes it; peek() returns exactly what take() would, consuming
 * nothing (use it for wait_for matching).  0 on success, -1 if out of
 * memory.
 */
int ngx_pty_text_take(ngx_pty_text_t *t, ngx_pty_text_view_t *v);
int ngx_pty_text_peek(ngx_pty_text_t *t, ngx_pty_text_view_t *v);

/*
 * Output was lost here: a sequence or character cut by the loss is
 * abandoned, and the current line ends as it is (with '\n' after text
 * already taken of it), so that nothing fed later joins it.  0, or -1 if
 * out of memory.
 */
int ngx_pty_text_break(ngx_pty_text_t *t);

/* a line of the reader's own (a loss marker) after a break: 0 or -1 */
int ngx_pty_text_note(ngx_pty_text_t *t, const u_char *data, size_t len);


#endif /* _NGX_PTY_TEXT_H_INCLUDED_ */
