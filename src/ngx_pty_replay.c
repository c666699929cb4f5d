
/*
 * Replay from the archive (ngx_pty_replay.h).  The client's ring walk is
 * held while pages of frames come from the store; each page is sent as
 * the ring's frames are (one serialization per frame, targeted frames
 * left out), and the walk takes over at the seam: the middle of what the
 * ring holds when a page reaches it, or, when the archive has nothing
 * newer (its last batch is still being written), the frame after the
 * last one sent.  A ring that has already dropped that frame too is a
 * lag, handled as every lag is (PTY_OUTPUT_LAGGED and a Keyframe).
 */

#include "ngx_pty.h"
#include "ngx_pty_replay.h"
#include "ngx_pty_store.h"
#include "ngx_pty_session.h"
#include "ngx_pty_ws.h"


#define NGX_PTY_REPLAY_PAGE  512        /* frames per archive read */


struct ngx_pty_replay_s {
    ngx_pty_client_t          *cl;
    ngx_pty_store_read_t      *rd;        /* in flight */
    json_t                    *id;        /* of the join, for its Error */
    uint64_t                   next;      /* the next sequence to send */
    ngx_uint_t                 started;   /* a page came */
    ngx_uint_t                 lost;      /* the archive has a gap here */
};


static void ngx_pty_replay_page(ngx_pty_store_read_t *rd);
static ngx_uint_t ngx_pty_replay_send(ngx_pty_replay_t *r,
    ngx_pty_store_read_t *rd);
static ngx_uint_t ngx_pty_replay_behind(ngx_pty_replay_t *r,
    ngx_pty_store_read_t *rd);
static void ngx_pty_replay_seam(ngx_pty_replay_t *r);
static void ngx_pty_replay_out_of_range(ngx_pty_replay_t *r,
    const char *why);
static void ngx_pty_replay_free(ngx_pty_replay_t *r);


ngx_uint_t
ngx_pty_replay_possible(void)
{
    return ngx_pty_store_enabled();
}


ngx_int_t
ngx_pty_replay_start(ngx_pty_client_t *cl, json_t *id, uint64_t from)
{
    ngx_pty_replay_t  *r;

    r = ngx_calloc(sizeof(ngx_pty_replay_t), cl->ws.connection->log);
    if (r == NULL) {
        return NGX_ERROR;
    }

    r->cl = cl;
    r->next = from + 1;
    r->id = id ? json_incref(id) : NULL;

    cl->replay = r;

    return NGX_OK;
}


ngx_uint_t
ngx_pty_replay_pull(ngx_pty_client_t *cl)
{
    ngx_pty_replay_t      *r;
    ngx_pty_store_read_t  *rd;

    r = cl->replay;

    if (r == NULL) {
        return 0;
    }

    if (r->rd || ngx_pty_ws_full(&cl->ws)) {
        /* a page is on its way, or the client has enough to send */
        return 1;
    }

    rd = ngx_pty_store_read_create(cl->ws.connection->log);
    if (rd == NULL) {
        ngx_pty_ws_finalize(&cl->ws);
        return 1;
    }

    rd->key.data = cl->session->sh->id;
    rd->key.len = NGX_PTY_ID_LEN;
    rd->from = r->next;
    rd->limit = NGX_PTY_REPLAY_PAGE;
    rd->handler = ngx_pty_replay_page;
    rd->data = r;

    if (ngx_pty_store_read_post(rd) != NGX_OK) {
        ngx_pty_store_read_free(rd);

        if (r->started) {
            /* the ring goes on from here, or it is a lag */
            ngx_pty_replay_seam(r);

        } else {
            ngx_pty_replay_out_of_range(r, "the archive cannot be read "
                                        "now; a keyframe follows");
        }

        /* both walked the ring already */
        return 1;
    }

    r->rd = rd;

    return 1;
}


static void
ngx_pty_replay_page(ngx_pty_store_read_t *rd)
{
    ngx_pty_replay_t  *r = rd->data;

    ngx_pty_client_t  *cl;

    r->rd = NULL;
    cl = r->cl;

    if (rd->rc != NGX_OK) {
        /* the writer logs the file's fault, once: this is per join */
        ngx_log_error(NGX_LOG_INFO, cl->ws.connection->log, 0,
                      "pty: replay from the archive: %s",
                      rd->rc == NGX_DECLINED ? (u_char *) "not stored yet"
                                             : rd->err);
    }

    if (!r->started
        && (rd->rc != NGX_OK || rd->session.first_seq == 0
            || rd->session.first_seq > r->next))
    {
        /* pruned, or never stored: the archive has it no longer */
        if (rd->rc == NGX_OK || rd->rc == NGX_DECLINED) {
            ngx_pty_replay_out_of_range(r, "replay_from is older than the "
                                        "archive keeps; a keyframe "
                                        "follows");

        } else {
            ngx_pty_replay_out_of_range(r, "the archive cannot be read "
                                        "now; a keyframe follows");
        }

        return;
    }

    r->started = 1;

    if (rd->rc != NGX_OK || ngx_pty_replay_send(r, rd)
        || (rd->next == 0 && !ngx_pty_replay_behind(r, rd)))
    {
        ngx_pty_replay_seam(r);
        return;
    }

    ngx_pty_binding_pull(cl);
}


/*
 * The archive had nothing after this page when it was read, but the ring
 * no longer holds the next frame either: the archive follows the ring by
 * a batch, so it is read again while that gives frames; only when it
 * gives none is the rest a loss.
 */
static ngx_uint_t
ngx_pty_replay_behind(ngx_pty_replay_t *r, ngx_pty_store_read_t *rd)
{
    uint64_t               first;
    ngx_pty_session_sh_t  *sh;

    if (rd->nframes == 0) {
        return 0;
    }

    sh = r->cl->session->sh;

    ngx_pty_shm_lock(sh);
    first = ngx_pty_ring_first_seq(sh->ring);
    ngx_pty_shm_unlock(sh);

    return first > r->next;
}


/*
 * Sends the page's frames up to the middle of what the ring holds; 1: the
 * seam is here.  Not at the ring's oldest frame: the client has just been
 * given a page and reads the ring only once it has sent it, and the ring
 * drops its oldest frames meanwhile (a lag the archive had no need of).
 */
static ngx_uint_t
ngx_pty_replay_send(ngx_pty_replay_t *r, ngx_pty_store_read_t *rd)
{
    u_char                *p, *end;
    uint64_t               first;
    ngx_pty_frame_t       *f;
    ngx_pty_client_t      *cl;
    ngx_pty_session_sh_t  *sh;

    cl = r->cl;
    sh = cl->session->sh;

    ngx_pty_shm_lock(sh);
    first = ngx_pty_ring_first_seq(sh->ring);

    if (first && sh->seq > first) {
        first += (sh->seq - first) / 2;
    }

    ngx_pty_shm_unlock(sh);

    p = rd->frames;
    end = rd->frames + rd->frames_len;

    for ( /* void */ ; p < end; p += ngx_pty_ring_need(f->len)) {
        f = (ngx_pty_frame_t *) p;

        if (first && f->seq >= first) {
            return 1;
        }

        if (f->seq != r->next) {
            /* a gap the archive recorded: crossed as a lag is */
            r->lost = 1;
            return 1;
        }

        r->next = f->seq + 1;

        if (f->target || f->kind == NGX_PTY_FRAME_REVOKE) {
            continue;
        }

        if (ngx_pty_binding_send_frame(cl, f) != NGX_OK) {
            ngx_pty_ws_finalize(&cl->ws);
            return 1;
        }
    }

    ngx_pty_ws_flush(&cl->ws);

    return 0;
}


/* the ring walk goes on from the frame after the last one sent */
static void
ngx_pty_replay_seam(ngx_pty_replay_t *r)
{
    ngx_pty_client_t      *cl;
    ngx_pty_session_sh_t  *sh;

    cl = r->cl;
    sh = cl->session->sh;

    ngx_pty_shm_lock(sh);

    if (r->lost || r->next < ngx_pty_ring_first_seq(sh->ring)) {
        /* lost to the archive, and the ring has dropped it too: a lag,
         * told as every lag is */
        cl->cursor = 0;

    } else {
        cl->cursor = ngx_pty_ring_find(sh->ring, r->next - 1);
    }

    ngx_pty_shm_unlock(sh);

    ngx_pty_replay_free(r);

    ngx_pty_binding_pull(cl);
}


static void
ngx_pty_replay_out_of_range(ngx_pty_replay_t *r, const char *why)
{
    ngx_pty_client_t      *cl;
    ngx_pty_session_sh_t  *sh;

    cl = r->cl;
    sh = cl->session->sh;

    ngx_pty_binding_error(cl, r->id, NGX_PTY_ERR_REPLAY_OUT_OF_RANGE, why);

    /* as for any replay out of range: the Keyframe first, then live */
    ngx_pty_shm_lock(sh);
    cl->cursor = ngx_pty_ring_find(sh->ring, cl->sent_seq);
    ngx_pty_shm_unlock(sh);

    ngx_pty_binding_hold(cl, cl->sent_seq, 0);

    ngx_pty_replay_free(r);

    ngx_pty_binding_pull(cl);
}


void
ngx_pty_replay_stop(ngx_pty_client_t *cl)
{
    ngx_pty_replay_t  *r;

    r = cl->replay;

    if (r == NULL) {
        return;
    }

    if (r->rd) {
        r->rd->cancelled = 1;
    }

    ngx_pty_replay_free(r);
}


static void
ngx_pty_replay_free(ngx_pty_replay_t *r)
{
    r->cl->replay = NULL;

    if (r->id) {
        json_decref(r->id);
    }

    ngx_free(r);
}
