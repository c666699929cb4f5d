
/*
 * The ledger of masked spans (ngx_pty_reveal.h): records of an offset,
 * a length and the original bytes, oldest first, in one page of the
 * zone allocated with the session's first secret.
 */

#include "ngx_pty.h"
#include "ngx_pty_shm.h"
#include "ngx_pty_reveal.h"


typedef struct {
    uint64_t                   off;
    uint64_t                   len;
} ngx_pty_reveal_rec_t;


#define ngx_pty_reveal_rec_size(len)                                          \
    (sizeof(ngx_pty_reveal_rec_t) + ngx_align(len, 8))


ngx_int_t
ngx_pty_reveal_prepare(ngx_pty_session_sh_t *sh)
{
    ngx_pty_reveal_t  *rv;

    if (sh->reveal) {
        return NGX_OK;
    }

    rv = ngx_pty_shm_alloc(sh, sizeof(ngx_pty_reveal_t));
    if (rv == NULL) {
        return NGX_ERROR;
    }

    rv->first = 0;
    rv->end = 0;
    rv->used = 0;

    ngx_pty_shm_lock(sh);
    sh->reveal = rv;
    ngx_pty_shm_unlock(sh);

    return NGX_OK;
}


/* offsets only grow: the first record is the oldest, the new one last */
void
ngx_pty_reveal_keep(ngx_pty_session_sh_t *sh, uint64_t off,
    const u_char *raw, size_t len)
{
    size_t                 need, drop;
    ngx_pty_reveal_t      *rv;
    ngx_pty_reveal_rec_t  *rec;

    rv = sh->reveal;
    need = ngx_pty_reveal_rec_size(len);

    if (rv == NULL || need > NGX_PTY_REVEAL_SIZE) {
        return;                 /* stays masked for everyone */
    }

    for (drop = 0; rv->used - drop + need > NGX_PTY_REVEAL_SIZE;
         drop += ngx_pty_reveal_rec_size(rec->len))
    {
        rec = (ngx_pty_reveal_rec_t *) (rv->data + drop);
    }

    if (drop) {
        ngx_memmove(rv->data, rv->data + drop, rv->used - drop);
        rv->used -= drop;
        ngx_explicit_memzero(rv->data + rv->used, drop);
    }

    rec = (ngx_pty_reveal_rec_t *) (rv->data + rv->used);
    rec->off = off;
    rec->len = len;
    ngx_memcpy(rec + 1, raw, len);
    rv->used += need;

    rv->first = ((ngx_pty_reveal_rec_t *) rv->data)->off;
    rv->end = off + len;
}


ngx_uint_t
ngx_pty_reveal_overlay(ngx_pty_session_sh_t *sh, uint64_t off, u_char *p,
    size_t len)
{
    u_char                *q, *last;
    uint64_t               from, to;
    ngx_uint_t             put;
    ngx_pty_reveal_rec_t  *rec;

    if (!ngx_pty_reveal_touches(sh, off, len)) {
        return 0;
    }

    put = 0;
    last = sh->reveal->data + sh->reveal->used;

    for (q = sh->reveal->data; q < last;
         q += ngx_pty_reveal_rec_size(rec->len))
    {
        rec = (ngx_pty_reveal_rec_t *) q;

        if (rec->off >= off + len) {
            break;              /* the rest are later still */
        }

        from = ngx_max(rec->off, off);
        to = ngx_min(rec->off + rec->len, off + len);

        if (from < to) {
            ngx_memcpy(p + (from - off), (u_char *) (rec + 1)
                       + (from - rec->off), to - from);
            put = 1;
        }
    }

    return put;
}


void
ngx_pty_reveal_free_locked(ngx_slab_pool_t *shpool, ngx_pty_reveal_t *rv)
{
    if (rv == NULL) {
        return;
    }

    ngx_explicit_memzero(rv, sizeof(ngx_pty_reveal_t));
    ngx_slab_free_locked(shpool, rv);
}
