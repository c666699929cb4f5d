
/*
 * The agent reader of a session: settled text (docs/SETTLED_TEXT.md) of
 * the raw scrollback in the zone, from sh->api_cursor on, delivered in
 * pages.  Any worker serves any call: the reader's position, counters and
 * undelivered text are in the zone, one call uses them at a time
 * (sh->api_busy), and a worker whose converter is not the one used last
 * rebuilds it from the start of the unfinished line.
 *
 * Output the scrollback lost before it was read comes from the archive
 * when there is one (ngx_pty_reader_refill); what neither has never joins
 * the text around it: the reader ends the line it was in, skips to the next line
 * feed, and writes a marker line saying how many bytes were lost there
 * (NGX_PTY_READER_GAP).
 */

#ifndef _NGX_PTY_READER_H_INCLUDED_
#define _NGX_PTY_READER_H_INCLUDED_


#include <jansson.h>

#include "ngx_pty.h"
#include "ngx_pty_text.h"


#define NGX_PTY_READER_GAP  "[pty: %uL bytes of output missed]"


typedef void (*ngx_pty_reader_refilled_pt)(void *data);


/* a worker's converter for a session, in its local view */
typedef struct {
    ngx_pty_text_t            *text;
    ngx_atomic_uint_t          epoch;      /* sh->api_epoch it matches */
    void                      *busy;       /* the wait using it here */

    /* output the zone lost, as the archive has it (pty_archive) */
    u_char                    *arch;
    size_t                     arch_len;
    uint64_t                   arch_off;   /* its scrollback offset */
    void                      *fetch;      /* a read on its way */
    ngx_pty_reader_refilled_pt refilled;
    void                      *refilled_data;
} ngx_pty_reader_t;


ngx_pty_reader_t *ngx_pty_reader_get(ngx_pty_session_t *s);

/* NGX_OK, or NGX_BUSY: another call (in any worker) holds the reader */
ngx_int_t ngx_pty_reader_claim(ngx_pty_reader_t *rd,
    ngx_pty_session_sh_t *sh);
void ngx_pty_reader_unclaim(ngx_pty_session_sh_t *sh);

/*
 * Feeds raw output into the converter until a page of text waits (with
 * what an earlier call left), the ring has no more, or, limit not 0,
 * the raw offset limit is reached.
 */
void ngx_pty_reader_pull(ngx_pty_reader_t *rd, ngx_pty_session_sh_t *sh,
    size_t page, uint64_t limit);

/*
 * With pty_archive, output the scrollback lost before it was read comes
 * from the archive instead: NGX_AGAIN when a read of it is on its way
 * (refilled(data) runs when it is done, whatever it found); NGX_DECLINED
 * when nothing is lost, the copy is here, or there is no archive.
 */
ngx_int_t ngx_pty_reader_refill(ngx_pty_reader_t *rd,
    ngx_pty_session_sh_t *sh, ngx_log_t *log,
    ngx_pty_reader_refilled_pt refilled, void *data);
void ngx_pty_reader_refill_cancel(ngx_pty_reader_t *rd);

/* the text the next delivery starts with, after what an earlier left */
ngx_int_t ngx_pty_reader_peek(ngx_pty_reader_t *rd, ngx_pty_text_view_t *v);

/* text waiting: what an earlier call left, and raw output not yet fed */
ngx_uint_t ngx_pty_reader_waiting(ngx_pty_session_sh_t *sh);
size_t ngx_pty_reader_left(ngx_pty_session_sh_t *sh);
size_t ngx_pty_reader_after_gap(const u_char *text, size_t from,
    size_t len);

/*
 * The next page as o[key], with "missed", "more" and "offset".  A page
 * is full unless the text ran out; it ends on a character boundary, and
 * the rest waits in the zone for the next call.
 */
ngx_int_t ngx_pty_reader_deliver(ngx_pty_reader_t *rd,
    ngx_pty_session_sh_t *sh, size_t page, ngx_pool_t *pool,
    const char *key, json_t *o);


#endif /* _NGX_PTY_READER_H_INCLUDED_ */
