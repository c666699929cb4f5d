
/*
 * Replay older than the ring: the archive part of a client's walk.
 */

#include "ngx_pty.h"
#include "ngx_pty_binding.h"
#include "ngx_pty_ext.h"
#include "ngx_pty_archive.h"
#include "ngx_pty_replay.h"


static void ngx_pty_replay_read(ngx_pty_archive_read_t *rd);
static ngx_int_t ngx_pty_replay_send(ngx_pty_client_t *cl,
    ngx_pty_archive_read_t *rd, ngx_uint_t *gap, ngx_uint_t *closed);
static ngx_uint_t ngx_pty_replay_seam(ngx_pty_client_t *cl, ngx_uint_t n);
static void ngx_pty_replay_end(ngx_pty_client_t *cl, ngx_uint_t lost);


ngx_uint_t
ngx_pty_replay_start(ngx_pty_client_t *cl, uint64_t from, json_t *id)
{
    if (!ngx_pty_archive_on()) {
        return 0;
    }

    cl->replaying = 1;
    cl->replay_next = from + 1;
    cl->replay_id = id ? json_incref(id) : NULL;

    return 1;
}


void
ngx_pty_replay_pull(ngx_pty_client_t *cl)
{
    ngx_pty_archive_read_t  *rd;

    rd = cl->replay;

    if (rd && rd->busy) {
        return;
    }

    if (ngx_pty_ws_full(&cl->ws)) {
        /* the next read when the socket took some */
        ngx_pty_ws_flush(&cl->ws);
        return;
    }

    if (rd == NULL) {
        rd = ngx_pty_archive_read_new(cl->ws.connection->log);
        if (rd == NULL) {
            ngx_pty_replay_end(cl, 1);
            return;
        }

        rd->op = NGX_PTY_ARCHIVE_FRAMES;
        ngx_memcpy(rd->id, cl->session->sh->id, NGX_PTY_ID_LEN);
        rd->handler = ngx_pty_replay_read;
        rd->data = cl;
        cl->replay = rd;
    }

    rd->from = cl->replay_next;
    rd->max = cl->conf->ws_send_buffer;

    if (ngx_pty_archive_read_post(rd) != NGX_OK) {
        ngx_pty_replay_end(cl, 1);
    }
}


/* a read's frames go out; the walk goes on there, or in the ring */
static void
ngx_pty_replay_read(ngx_pty_archive_read_t *rd)
{
    ngx_int_t          n;
    ngx_uint_t         gap, closed;
    ngx_pty_client_t  *cl;

    cl = rd->data;

    if (cl->ws.finished || cl->ws.close_sent) {
        return;
    }

    if (rd->rc != NGX_OK) {
        /* not archived (NGX_DECLINED), or unreadable (logged) */
        ngx_pty_replay_end(cl, 1);
        return;
    }

    gap = 0;
    closed = 0;
    n = ngx_pty_replay_send(cl, rd, &gap, &closed);

    if (closed) {
        /* its Closed was among them: the end, as in the ring */
        ngx_pty_replay_stop(cl);
        ngx_pty_binding_goodbye(cl, "session_closed", NULL);
        return;
    }

    if (n == NGX_ERROR) {
        ngx_pty_replay_stop(cl);
        ngx_pty_ws_finalize(&cl->ws);
        return;
    }

    if (gap) {
        ngx_pty_replay_end(cl, 1);
        return;
    }

    if (ngx_pty_replay_seam(cl, (ngx_uint_t) n)) {
        /* the ring has the next one: the walk goes on there */
        ngx_pty_replay_stop(cl);
        ngx_pty_binding_pull(cl);
        return;
    }

    if (n == 0 || !rd->more) {
        /* neither the archive nor the ring has the next frame */
        ngx_pty_replay_end(cl, 1);
        return;
    }

    ngx_pty_replay_pull(cl);
}


/*
 * Queues a read's frames: only those every client sees (a frame targeted
 * at a connection of the past is not this one's).  Frames must follow on
 * without a hole: the first missing one is a gap, and ends the replay.
 */
static ngx_int_t
ngx_pty_replay_send(ngx_pty_client_t *cl, ngx_pty_archive_read_t *rd,
    ngx_uint_t *gap, ngx_uint_t *closed)
{
    size_t                pos;
    ngx_int_t             rc, n;
    ngx_pty_frame_t      *f;
    ngx_pty_ws_shared_t  *sf;

    pos = 0;
    n = 0;

    while ((f = ngx_pty_archive_next(rd, &pos)) != NULL) {

        if (f->seq != cl->replay_next) {
            *gap = 1;
            break;
        }

        cl->replay_next = f->seq + 1;
        cl->replay_sent = 1;
        n++;

        if (f->target || f->seq == cl->sent_seq
            || f->kind == NGX_PTY_FRAME_REVOKE)
        {
            continue;
        }

        sf = ngx_pty_binding_serialize(cl, f);
        if (sf == NULL) {
            return NGX_ERROR;
        }

        rc = ngx_pty_ws_queue_shared(&cl->ws, sf);
        ngx_pty_ws_shared_release(sf);

        if (rc != NGX_OK) {
            return NGX_ERROR;
        }

        if (f->kind == NGX_PTY_FRAME_CLOSED) {
            *closed = 1;
            break;
        }
    }

    ngx_pty_ws_flush(&cl->ws);

    return n;
}


/*
 * Where the ring takes over: it holds the next frame (everything older is
 * in the archive, or in a recorded gap), or it is empty and the archive
 * had nothing more (the session was stored whole).
 */
static ngx_uint_t
ngx_pty_replay_seam(ngx_pty_client_t *cl, ngx_uint_t n)
{
    uint64_t               first;
    ngx_uint_t             seam;
    ngx_pty_session_sh_t  *sh;

    sh = cl->session->sh;

    ngx_pty_shm_lock(sh);

    first = ngx_pty_ring_first_seq(sh->ring);
    seam = (first != 0 && first <= cl->replay_next)
           || (first == 0 && n == 0 && sh->seq < cl->replay_next);

    if (seam) {
        cl->cursor = ngx_pty_ring_find(sh->ring, cl->replay_next - 1);
    }

    ngx_pty_shm_unlock(sh);

    return seam;
}


/*
 * The archive does not have what comes next.  Nothing sent yet: the
 * replay was out of range, as without an archive (REPLAY_OUT_OF_RANGE;
 * the joiner's Keyframe is in the ring already).  Some sent: the client
 * lost frames in between and is told so, as one that lagged.
 */
static void
ngx_pty_replay_end(ngx_pty_client_t *cl, ngx_uint_t lost)
{
    ngx_uint_t             closed;
    ngx_pty_session_sh_t  *sh;

    sh = cl->session->sh;

    if (!cl->replay_sent) {
        ngx_pty_binding_error(cl, cl->replay_id,
                              NGX_PTY_ERR_REPLAY_OUT_OF_RANGE,
                              "replay_from is outside the retained window; "
                              "a keyframe follows");
        ngx_pty_replay_stop(cl);

        /* as a join out of range: no Output ahead of its Keyframe */
        ngx_pty_binding_hold(cl, cl->sent_seq, 0);

        ngx_pty_shm_lock(sh);
        cl->cursor = ngx_pty_ring_find(sh->ring, cl->sent_seq);
        closed = (sh->state >= NGX_PTY_STATE_CLOSED)
                 && !ngx_pty_ext_closed_ahead(sh->ring, cl->cursor);
        ngx_pty_shm_unlock(sh);

        if (closed && ngx_pty_binding_closed_copy(cl) != NGX_OK) {
            ngx_pty_ws_finalize(&cl->ws);
            return;
        }

        ngx_pty_binding_pull(cl);
        return;
    }

    ngx_pty_replay_stop(cl);

    if (lost && ngx_pty_binding_lagged(cl) != NGX_OK) {
        return;
    }

    ngx_pty_binding_pull(cl);
}


void
ngx_pty_replay_stop(ngx_pty_client_t *cl)
{
    cl->replaying = 0;

    if (cl->replay) {
        ngx_pty_archive_read_free(cl->replay);
        cl->replay = NULL;
    }

    if (cl->replay_id) {
        json_decref(cl->replay_id);
        cl->replay_id = NULL;
    }
}
