
/*
 * What redaction hid, kept for the consumers that may see it
 * (pty_redact's scopes, the pty:reveal scope).  The ring, the
 * scrollback, the screen model and the archive hold masked output; a
 * session's ledger in the zone keeps the original bytes of its last
 * masked spans by scrollback offset, and a consumer shown the raw
 * stream lays them over its copy of an Output frame.  The ledger is
 * small and bounded: a span it no longer holds stays masked.
 */

#ifndef _NGX_PTY_REVEAL_H_INCLUDED_
#define _NGX_PTY_REVEAL_H_INCLUDED_


#include "ngx_pty.h"
#include "ngx_pty_shm.h"


/* original bytes kept, with their 16-byte headers: the ledger is a page */
#define NGX_PTY_REVEAL_SIZE     (4096 - 3 * sizeof(uint64_t))


struct ngx_pty_reveal_s {
    uint64_t                   first;      /* the lowest offset held */
    uint64_t                   end;        /* past the highest one */
    size_t                     used;
    u_char                     data[NGX_PTY_REVEAL_SIZE];
};


/* the owner, before it keeps spans: NGX_ERROR when the zone is full */
ngx_int_t ngx_pty_reveal_prepare(ngx_pty_session_sh_t *sh);
/* the caller holds the session lock; the oldest spans make room */
void ngx_pty_reveal_keep(ngx_pty_session_sh_t *sh, uint64_t off,
    const u_char *raw, size_t len);
/* the caller holds the session lock: 1 if it put back any byte */
ngx_uint_t ngx_pty_reveal_overlay(ngx_pty_session_sh_t *sh, uint64_t off,
    u_char *p, size_t len);
/* the zone's mutex is held; the bytes are wiped (rv may be NULL) */
void ngx_pty_reveal_free_locked(ngx_slab_pool_t *shpool,
    ngx_pty_reveal_t *rv);


/* under the session lock: whether [off, off + len) may hold a span */
#define ngx_pty_reveal_touches(sh, off, len)                                  \
    ((sh)->reveal != NULL && (off) < (sh)->reveal->end                        \
     && (off) + (len) > (sh)->reveal->first)


#endif /* _NGX_PTY_REVEAL_H_INCLUDED_ */
