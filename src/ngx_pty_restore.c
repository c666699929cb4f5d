
/*
 * Bringing an ended session back from the archive (ngx_pty_restore.h).
 * The request waits for one read in the thread pool: the session's record
 * and its tail.  Who may see it is decided on the archive's access list
 * before anything goes into the zone, and again by the handler on the
 * record it gets, as for any session.
 */

#include "ngx_pty.h"
#include "ngx_pty_restore.h"
#include "ngx_pty_store.h"
#include "ngx_pty_session.h"
#include "ngx_pty_auth.h"
#include "ngx_pty_api.h"
#include "ngx_pty_util.h"


/* frames from the last Keyframe to Closed: a Keyframe every 100 Output */
#define NGX_PTY_RESTORE_TAIL  1024


typedef struct {
    ngx_http_request_t        *request;
    ngx_pty_store_read_t      *rd;        /* in flight */
    ngx_pty_restore_pt         handler;
} ngx_pty_restore_ctx_t;


static void ngx_pty_restore_cleanup(void *data);
static void ngx_pty_restore_read(ngx_pty_store_read_t *rd);
static ngx_int_t ngx_pty_restore_answer(ngx_pty_restore_ctx_t *ctx,
    ngx_pty_store_read_t *rd);
static ngx_pty_session_sh_t *ngx_pty_restore_session(ngx_http_request_t *r,
    ngx_pty_store_session_t *m, ngx_pty_store_read_t *rd);


ngx_int_t
ngx_pty_restore_attach(ngx_http_request_t *r, ngx_str_t *id,
    ngx_pty_restore_pt handler)
{
    ngx_pool_cleanup_t     *cln;
    ngx_pty_store_read_t   *rd;
    ngx_pty_restore_ctx_t  *ctx;

    /* the attach path names sessions by UUID: nothing else is looked up */
    if (!ngx_pty_store_enabled() || !ngx_pty_uuid_valid(id->data, id->len)) {
        return NGX_DECLINED;
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_pty_restore_ctx_t));
    cln = ngx_pool_cleanup_add(r->pool, 0);
    rd = ngx_pty_store_read_create(ngx_cycle->log);

    if (ctx == NULL || cln == NULL || rd == NULL) {
        if (rd) {
            ngx_pty_store_read_free(rd);
        }

        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rd->key = *id;
    rd->tail = 1;
    rd->limit = NGX_PTY_RESTORE_TAIL;
    rd->handler = ngx_pty_restore_read;
    rd->data = ctx;

    if (ngx_pty_store_read_post(rd) != NGX_OK) {
        ngx_pty_store_read_free(rd);
        return ngx_pty_api_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                 "archive_unavailable",
                                 "the archive cannot be read now");
    }

    ctx->request = r;
    ctx->rd = rd;
    ctx->handler = handler;

    /* a client gone before the read answers: the read answers nobody */
    cln->handler = ngx_pty_restore_cleanup;
    cln->data = ctx;

    r->main->count++;

    return NGX_DONE;
}


static void
ngx_pty_restore_cleanup(void *data)
{
    ngx_pty_restore_ctx_t  *ctx = data;

    if (ctx->rd) {
        ctx->rd->cancelled = 1;
        ctx->rd = NULL;
    }
}


static void
ngx_pty_restore_read(ngx_pty_store_read_t *rd)
{
    ngx_pty_restore_ctx_t  *ctx = rd->data;

    ngx_int_t            rc;
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    ctx->rd = NULL;
    r = ctx->request;
    c = r->connection;

    rc = ngx_pty_restore_answer(ctx, rd);

    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}


static ngx_int_t
ngx_pty_restore_answer(ngx_pty_restore_ctx_t *ctx, ngx_pty_store_read_t *rd)
{
    ngx_int_t               rc;
    ngx_http_request_t     *r;
    ngx_pty_loc_conf_t     *plcf;
    ngx_pty_session_sh_t   *sh, archived;

    r = ctx->request;
    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    if (rd->rc == NGX_ERROR) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "pty: attach from the archive: %s", rd->err);

        return ngx_pty_api_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                 "archive_unavailable",
                                 "the archive cannot be read now");
    }

    /* not known, or still running somewhere the zone does not show */
    if (rd->rc != NGX_OK || rd->session.ended == 0) {
        return ngx_pty_auth_refuse(r, NGX_PTY_REFUSE_NOT_FOUND,
                                   plcf->close_codes);
    }

    /* what the archive says of who may see it, before the zone holds it */
    ngx_pty_store_as_record(&archived, &rd->session);

    rc = ngx_pty_auth_check(r, &archived, NGX_PTY_SCOPE_OBSERVE);
    if (rc != NGX_OK) {
        return ngx_pty_auth_refuse(r, ngx_pty_auth_refusal(rc),
                                   plcf->close_codes);
    }

    if (rd->next) {
        /* no Keyframe for every client in its last frames */
        return ngx_pty_api_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                 "archive_unavailable",
                                 "the session's last screen is not in the "
                                 "archive; its transcript is");
    }

    sh = ngx_pty_restore_session(r, &rd->session, rd);
    if (sh == NULL) {
        return ngx_pty_api_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                 "zone_full",
                                 "the shared zone has no room for the "
                                 "session now");
    }

    return ctx->handler(r, sh);
}


/* into the zone, owned here, unless another worker was first */
static ngx_pty_session_sh_t *
ngx_pty_restore_session(ngx_http_request_t *r, ngx_pty_store_session_t *m,
    ngx_pty_store_read_t *rd)
{
    ngx_uint_t              found;
    ngx_pty_loc_conf_t     *plcf;
    ngx_pty_session_sh_t   *sh;
    ngx_pty_shm_restore_t   rs;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    ngx_memzero(&rs, sizeof(ngx_pty_shm_restore_t));

    rs.id = m->id;
    rs.name = m->name;
    rs.command = m->command;
    rs.acl = m->acl;
    rs.cols = m->cols;
    rs.rows = m->rows;
    rs.created = (time_t) (m->started / 1000);
    rs.closed_at = m->ended;
    rs.exit_code = m->exit_code;
    rs.reason = m->reason;
    rs.frames = rd->frames;
    rs.frames_len = rd->frames_len;
    rs.min_frames = plcf->params.replay_buffer_frames;
    rs.ring_size = plcf->ring_size;
    rs.ring_max_size = plcf->ring_max_size;
    rs.params = &plcf->params;
    rs.closed_linger = plcf->closed_linger;

    sh = ngx_pty_shm_session_restore(r->connection->log, &rs,
                                     plcf->scroll_size, &found);
    if (sh == NULL || found) {
        return sh;
    }

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "pty: session pty-%ui brought back from the archive, "
                  "%ui frames from sequence %uL", sh->name, rd->nframes,
                  rd->from);

    /* the view takes the record's reference; the handler gets its own */
    ngx_pty_shm_session_retain(sh);

    if (ngx_pty_session_restored(sh, ngx_cycle->log) != NGX_OK) {
        ngx_pty_shm_session_unlink(sh);
        ngx_pty_shm_session_release(sh);
        ngx_pty_shm_session_release(sh);
        return NULL;
    }

    return sh;
}
