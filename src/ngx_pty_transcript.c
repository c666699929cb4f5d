
/*
 * The transcript tool (ngx_pty_transcript.h).  The archive is read in
 * the thread pool (ngx_pty_store.c); the answer is made on the event
 * loop when the read is back, with the frames a live session's ring
 * holds past the archive's last appended, so the range has no seam.
 */

#include "ngx_pty.h"
#include "ngx_pty_transcript.h"
#include "ngx_pty_store.h"
#include "ngx_pty_shm.h"
#include "ngx_pty_session.h"
#include "ngx_pty_ext.h"
#include "ngx_pty_auth.h"
#include "ngx_pty_util.h"


#define NGX_PTY_TRANSCRIPT_LIMIT  10000


typedef struct {
    ngx_pty_agent_call_t      *call;
    ngx_pty_store_read_t      *rd;        /* NULL once it answered */
    json_t                    *answer;    /* list: the zone's part */
    ngx_str_t                  command;   /* list: its filter */
    ngx_uint_t                 limit;
} ngx_pty_transcript_ctx_t;


static void ngx_pty_transcript_cleanup(void *data);
static void ngx_pty_transcript_list_done(ngx_pty_store_read_t *rd);
static json_t *ngx_pty_transcript_listed(ngx_pty_agent_call_t *call,
    ngx_pty_store_session_t *m, ngx_str_t *command);
static void ngx_pty_transcript_done(ngx_pty_store_read_t *rd);
static ngx_int_t ngx_pty_transcript_access(ngx_pty_agent_call_t *call,
    ngx_pty_store_read_t *rd, ngx_pty_session_sh_t **live);
static ngx_int_t ngx_pty_transcript_answer(ngx_pty_agent_call_t *call,
    ngx_pty_store_read_t *rd, ngx_pty_session_sh_t *live);
static json_t *ngx_pty_transcript_head(ngx_pty_store_read_t *rd,
    ngx_pty_session_sh_t *live);
static ngx_int_t ngx_pty_transcript_add(ngx_pty_agent_call_t *call,
    json_t *frames, ngx_pty_frame_t *f);
static uint64_t ngx_pty_transcript_ring(ngx_pty_agent_call_t *call,
    ngx_pty_session_sh_t *sh, uint64_t after, ngx_uint_t room,
    json_t *frames, uint64_t *next);
static json_t *ngx_pty_transcript_ts(uint64_t ms);


ngx_int_t
ngx_pty_transcript_tool(ngx_pty_agent_call_t *call, json_t *args)
{
    json_t                    *j;
    ngx_str_t                  key;
    ngx_uint_t                 from, limit, text;
    ngx_pool_cleanup_t        *cln;
    ngx_pty_store_read_t      *rd;
    ngx_pty_transcript_ctx_t  *ctx;

    if (!ngx_pty_store_enabled()) {
        return ngx_pty_agent_error(call, NGX_HTTP_NOT_IMPLEMENTED,
                                   "no_archive",
                                   "transcripts come from the archive, and "
                                   "pty_archive is off");
    }

    j = json_object_get(args, "id");

    if (!json_is_string(j) || json_string_length(j) == 0
        || json_string_length(j) > NGX_PTY_ID_LEN)
    {
        return ngx_pty_agent_error(call, NGX_HTTP_BAD_REQUEST, "bad_request",
                                   "\"id\" must be a session id (pty-N or "
                                   "its UUID)");
    }

    key.data = (u_char *) json_string_value(j);
    key.len = json_string_length(j);

    if (ngx_pty_agent_uint(args, "from", 1, NGX_MAX_INT_T_VALUE, 1, &from)
        != NGX_OK
        || ngx_pty_agent_uint(args, "limit", 0, NGX_PTY_TRANSCRIPT_LIMIT,
                              1000, &limit)
           != NGX_OK
        || ngx_pty_agent_bool(args, "text", &text) != NGX_OK)
    {
        return ngx_pty_agent_error(call, NGX_HTTP_BAD_REQUEST, "bad_request",
                                   "\"from\" must be a sequence number (1 "
                                   "or more), \"limit\" 0 to 10000 frames, "
                                   "\"text\" a boolean");
    }

    rd = ngx_pty_store_read_create(call->log);
    if (rd == NULL) {
        return NGX_ERROR;
    }

    rd->key = key;
    rd->from = from;
    rd->limit = limit;
    rd->text = text;

    ctx = ngx_pcalloc(call->pool, sizeof(ngx_pty_transcript_ctx_t));
    cln = ngx_pool_cleanup_add(call->pool, 0);

    if (ctx == NULL || cln == NULL) {
        ngx_free(rd);
        return NGX_ERROR;
    }

    ctx->call = call;
    ctx->rd = rd;
    rd->handler = ngx_pty_transcript_done;
    rd->data = ctx;

    if (ngx_pty_store_read_post(rd) != NGX_OK) {
        ngx_pty_store_read_free(rd);
        return ngx_pty_agent_error(call, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "archive_unavailable",
                                   "the archive's thread pool takes no more "
                                   "reads now");
    }

    cln->handler = ngx_pty_transcript_cleanup;
    cln->data = ctx;

    return NGX_AGAIN;
}


/* the caller went away: the read still ends, answering nobody */
static void
ngx_pty_transcript_cleanup(void *data)
{
    ngx_pty_transcript_ctx_t  *ctx = data;

    if (ctx->rd) {
        ctx->rd->cancelled = 1;
        ctx->rd = NULL;
    }

    if (ctx->answer) {
        json_decref(ctx->answer);
        ctx->answer = NULL;
    }
}


/*
 * list with "archived": the zone's sessions (answer, made by the list
 * tool) and then the ended sessions only the archive knows, those of an
 * earlier nginx run among them, newest first.
 */
ngx_int_t
ngx_pty_transcript_list(ngx_pty_agent_call_t *call, json_t *answer,
    ngx_uint_t limit, ngx_str_t *command)
{
    ngx_pool_cleanup_t        *cln;
    ngx_pty_store_read_t      *rd;
    ngx_pty_transcript_ctx_t  *ctx;

    ctx = ngx_pcalloc(call->pool, sizeof(ngx_pty_transcript_ctx_t));
    cln = ngx_pool_cleanup_add(call->pool, 0);
    rd = ngx_pty_store_read_create(call->log);

    if (ctx == NULL || cln == NULL || rd == NULL) {
        if (rd) {
            ngx_free(rd);
        }

        json_decref(answer);
        return NGX_ERROR;
    }

    ctx->call = call;
    ctx->rd = rd;
    ctx->answer = answer;
    ctx->limit = limit;

    /* the arguments are gone by the time the archive answers */
    ctx->command.len = command->len;
    ctx->command.data = ngx_pstrdup(call->pool, command);

    if (command->len && ctx->command.data == NULL) {
        ngx_free(rd);
        json_decref(answer);
        return NGX_ERROR;
    }

    rd->list = ngx_min(limit, 1000);
    rd->handler = ngx_pty_transcript_list_done;
    rd->data = ctx;

    cln->handler = ngx_pty_transcript_cleanup;
    cln->data = ctx;

    if (ngx_pty_store_read_post(rd) != NGX_OK) {
        ctx->rd = NULL;
        ngx_pty_store_read_free(rd);
        return ngx_pty_agent_error(call, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "archive_unavailable",
                                   "the archive's thread pool takes no more "
                                   "reads now");
    }

    return NGX_AGAIN;
}


static void
ngx_pty_transcript_list_done(ngx_pty_store_read_t *rd)
{
    ngx_pty_transcript_ctx_t  *ctx = rd->data;

    json_t                *list, *o;
    ngx_str_t              key;
    ngx_uint_t             i, total;
    ngx_pty_agent_call_t  *call;
    ngx_pty_session_sh_t  *sh;

    call = ctx->call;
    ctx->rd = NULL;

    if (rd->rc != NGX_OK) {
        ngx_log_error(NGX_LOG_INFO, call->log, 0,
                      "pty: list: archive: %s", rd->err);
        (void) ngx_pty_agent_error(call, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "archive_unavailable", (char *) rd->err);
        call->done(call);
        return;
    }

    list = json_object_get(ctx->answer, "sessions");
    total = json_integer_value(json_object_get(ctx->answer, "total"));

    for (i = 0; i < rd->nsessions; i++) {
        key.data = rd->sessions[i].id;
        key.len = NGX_PTY_ID_LEN;

        sh = ngx_pty_shm_session_find(&key);

        if (sh) {
            /* listed from the zone already */
            ngx_pty_shm_session_release(sh);
            continue;
        }

        o = ngx_pty_transcript_listed(call, &rd->sessions[i], &ctx->command);

        if (o && total++ < ctx->limit) {
            json_array_append_new(list, o);

        } else if (o) {
            json_decref(o);
        }
    }

    json_object_set_new(ctx->answer, "total", json_integer(total));
    json_object_set_new(ctx->answer, "more", json_boolean(total > ctx->limit));

    call->status = NGX_HTTP_OK;
    call->answer = ctx->answer;
    ctx->answer = NULL;

    call->done(call);
}


/*
 * An ended session's record as the access checks read it (id, name,
 * access list), for one only the archive still knows.
 */
/* an archived session as list shows it, if the caller may see it */
static json_t *
ngx_pty_transcript_listed(ngx_pty_agent_call_t *call,
    ngx_pty_store_session_t *m, ngx_str_t *command)
{
    u_char                *last;
    json_t                *o;
    ngx_pty_ident_t       *id;
    ngx_pty_session_sh_t   archived;

    id = ngx_pty_auth_ident(call->request);

    ngx_pty_store_as_record(&archived, m);

    last = m->command.data + m->command.len;

    if (id == NULL
        || ngx_pty_auth_right(id, &archived) == NGX_PTY_RIGHT_NONE
        || (command->len
            && (command->len > m->command.len
                || ngx_strlcasestrn(m->command.data, last, command->data,
                                    command->len - 1)
                   == NULL)))
    {
        return NULL;
    }

    o = json_object();
    if (o == NULL) {
        return NULL;
    }

    json_object_set_new(o, "id", json_sprintf("pty-%u", (unsigned) m->name));
    json_object_set_new(o, "session_id",
                        json_stringn((char *) m->id, NGX_PTY_ID_LEN));
    json_object_set_new(o, "command",
                        json_stringn((char *) m->command.data,
                                     m->command.len));
    json_object_set_new(o, "state", json_string("exited"));
    json_object_set_new(o, "running", json_false());
    json_object_set_new(o, "exit_code", m->exit_code >= 0
                                        ? json_integer(m->exit_code)
                                        : json_null());
    json_object_set_new(o, "reason",
                        json_string(ngx_pty_closed_reasons[
                                        ngx_min(m->reason,
                                                NGX_PTY_CLOSED_ERROR)]));
    json_object_set_new(o, "started", ngx_pty_transcript_ts(m->started));
    json_object_set_new(o, "ended", ngx_pty_transcript_ts(m->ended));
    json_object_set_new(o, "archived", json_true());

    return o;
}


static void
ngx_pty_transcript_done(ngx_pty_store_read_t *rd)
{
    ngx_pty_transcript_ctx_t  *ctx = rd->data;

    ngx_int_t              rc;
    ngx_pty_agent_call_t  *call;
    ngx_pty_session_sh_t  *live;

    call = ctx->call;
    ctx->rd = NULL;
    live = NULL;

    if (rd->rc == NGX_ERROR) {
        ngx_log_error(NGX_LOG_INFO, call->log, 0,
                      "pty: transcript: archive: %s", rd->err);

        rc = ngx_pty_agent_error(call, NGX_HTTP_SERVICE_UNAVAILABLE,
                                 "archive_unavailable", (char *) rd->err);

    } else {
        rc = ngx_pty_transcript_access(call, rd, &live);

        if (rc == NGX_DECLINED) {
            rc = ngx_pty_transcript_answer(call, rd, live);
        }

        if (live) {
            ngx_pty_shm_session_release(live);
        }
    }

    if (rc == NGX_ERROR) {
        call->answer = NULL;
        (void) ngx_pty_agent_error(call, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                   "internal", "out of memory");
    }

    call->done(call);
}


/*
 * Who may read it: for a session in the zone, its record's access list;
 * for one only the archive knows, the list it had.  NGX_DECLINED: go on.
 */
static ngx_int_t
ngx_pty_transcript_access(ngx_pty_agent_call_t *call,
    ngx_pty_store_read_t *rd, ngx_pty_session_sh_t **live)
{
    ngx_int_t              status;
    ngx_str_t              key;
    ngx_pty_session_sh_t  *sh, archived;

    key = rd->key;

    if (rd->rc == NGX_OK) {
        key.data = rd->session.id;
        key.len = NGX_PTY_ID_LEN;
    }

    sh = ngx_pty_shm_session_find(&key);

    if (sh == NULL && rd->rc == NGX_DECLINED) {
        return ngx_pty_agent_refuse(call, NGX_HTTP_NOT_FOUND);
    }

    if (sh == NULL) {
        ngx_pty_store_as_record(&archived, &rd->session);

        status = ngx_pty_auth_check(call->request, &archived,
                                    NGX_PTY_SCOPE_OBSERVE);

    } else {
        status = ngx_pty_auth_check(call->request, sh, NGX_PTY_SCOPE_OBSERVE);
    }

    if (status != NGX_OK) {
        if (sh) {
            ngx_pty_shm_session_release(sh);
        }

        return ngx_pty_agent_refuse(call, status);
    }

    *live = sh;

    return NGX_DECLINED;
}


static ngx_int_t
ngx_pty_transcript_answer(ngx_pty_agent_call_t *call,
    ngx_pty_store_read_t *rd, ngx_pty_session_sh_t *live)
{
    u_char                   *p, *end;
    json_t                   *o, *frames;
    uint64_t                  last, next, first;
    ngx_uint_t                n;
    ngx_pty_frame_t          *f;
    ngx_pty_store_session_t  *m;

    m = &rd->session;

    frames = json_array();
    if (frames == NULL) {
        return NGX_ERROR;
    }

    n = 0;
    last = rd->from - 1;
    next = rd->next;
    first = m->first_seq;

    p = rd->frames;
    end = rd->frames + rd->frames_len;

    for ( /* void */ ; p < end; p += ngx_pty_ring_need(f->len)) {
        f = (ngx_pty_frame_t *) p;
        last = f->seq;
        n++;

        if (ngx_pty_transcript_add(call, frames, f) != NGX_OK) {
            json_decref(frames);
            return NGX_ERROR;
        }
    }

    if (live && next == 0 && n < rd->limit) {
        /* the archive's oldest, or while it has none, the ring's */
        first = ngx_pty_transcript_ring(call, live, last, rd->limit - n,
                                        frames, &next);

        if (rd->rc == NGX_OK && m->first_seq) {
            first = m->first_seq;
        }
    }

    if (json_array_size(frames) == 0 && next == 0 && rd->rc == NGX_DECLINED
        && live == NULL)
    {
        json_decref(frames);
        return ngx_pty_agent_refuse(call, NGX_HTTP_NOT_FOUND);
    }

    o = ngx_pty_transcript_head(rd, live);
    if (o == NULL) {
        json_decref(frames);
        return NGX_ERROR;
    }

    json_object_set_new(o, "first_sequence", first ? json_integer(first)
                                                   : json_null());
    json_object_set_new(o, "gaps", json_integer(m->gaps));
    json_object_set_new(o, "frames", frames);
    json_object_set_new(o, "next", next ? json_integer(next) : json_null());

    if (rd->text) {
        /* what the archive has stored: it follows live output by a batch */
        json_object_set_new(o, "text",
                            json_stringn(rd->settled.data
                                         ? (char *) rd->settled.data : "",
                                         rd->settled.len));
    }

    call->status = NGX_HTTP_OK;
    call->answer = o;

    return NGX_OK;
}


/* what the session is: from the zone while it is there, else the archive */
static json_t *
ngx_pty_transcript_head(ngx_pty_store_read_t *rd, ngx_pty_session_sh_t *live)
{
    json_t                   *o;
    ngx_int_t                 exit_code;
    ngx_uint_t                reason, ended;
    ngx_pty_store_session_t  *m;

    m = &rd->session;

    o = json_object();
    if (o == NULL) {
        return NULL;
    }

    if (live) {
        ngx_pty_shm_lock(live);
        ended = (live->state >= NGX_PTY_STATE_CLOSED);
        exit_code = live->exit_code;
        reason = live->closed_reason;
        json_object_set_new(o, "id",
                            json_stringn((char *) live->id, NGX_PTY_ID_LEN));
        json_object_set_new(o, "name", json_sprintf("pty-%u",
                                                    (unsigned) live->name));
        json_object_set_new(o, "command",
                            json_stringn((char *) live->command,
                                         live->command_len));
        json_object_set_new(o, "started",
                            ngx_pty_transcript_ts((uint64_t) live->created
                                                  * 1000));
        json_object_set_new(o, "ended", ended
                            ? ngx_pty_transcript_ts(live->closed_at)
                            : json_null());
        json_object_set_new(o, "last_sequence", json_integer(live->seq));
        ngx_pty_shm_unlock(live);

    } else {
        ended = 1;
        exit_code = m->exit_code;
        reason = m->reason;
        json_object_set_new(o, "id", json_stringn((char *) m->id,
                                                  NGX_PTY_ID_LEN));
        json_object_set_new(o, "name", json_sprintf("pty-%u",
                                                    (unsigned) m->name));
        json_object_set_new(o, "command",
                            json_stringn((char *) m->command.data,
                                         m->command.len));
        json_object_set_new(o, "started",
                            ngx_pty_transcript_ts(m->started));
        json_object_set_new(o, "ended", ngx_pty_transcript_ts(m->ended));
        json_object_set_new(o, "last_sequence", json_integer(m->last_seq));
    }

    json_object_set_new(o, "state", json_string(ended ? "exited"
                                                      : "running"));
    json_object_set_new(o, "exit_code", (ended && exit_code >= 0)
                                        ? json_integer(exit_code)
                                        : json_null());
    json_object_set_new(o, "reason", ended
                        ? json_string(ngx_pty_closed_reasons[
                                          ngx_min(reason,
                                                  NGX_PTY_CLOSED_ERROR)])
                        : json_null());

    return o;
}


/* a frame as the binding sends it; frames for one client are not shown */
static ngx_int_t
ngx_pty_transcript_add(ngx_pty_agent_call_t *call, json_t *frames,
    ngx_pty_frame_t *f)
{
    u_char        *buf, *p;
    json_t        *j;
    json_error_t   err;

    if (f->target || f->kind == NGX_PTY_FRAME_PAD
        || f->kind == NGX_PTY_FRAME_REVOKE)
    {
        return NGX_OK;
    }

    buf = ngx_alloc(ngx_pty_ext_frame_size(f), call->log);
    if (buf == NULL) {
        return NGX_ERROR;
    }

    p = ngx_pty_ext_frame_write(buf, f);

    j = json_loadb((char *) buf, p - buf, 0, &err);
    ngx_free(buf);

    if (j == NULL) {
        ngx_log_error(NGX_LOG_ALERT, call->log, 0,
                      "pty: transcript: frame %uL is not JSON: %s",
                      f->seq, err.text);
        return NGX_OK;
    }

    return json_array_append_new(frames, j) == 0 ? NGX_OK : NGX_ERROR;
}


/*
 * The frames a live session's ring holds after sequence after, room at
 * most; returns the first sequence the ring holds (0: none).
 */
static uint64_t
ngx_pty_transcript_ring(ngx_pty_agent_call_t *call, ngx_pty_session_sh_t *sh,
    uint64_t after, ngx_uint_t room, json_t *frames, uint64_t *next)
{
    u_char           *copy;
    size_t            need;
    uint64_t          off, first;
    ngx_int_t         rc;
    ngx_pty_frame_t  *f;

    for ( ;; ) {
        ngx_pty_shm_lock(sh);

        first = ngx_pty_ring_first_seq(sh->ring);
        off = ngx_pty_ring_find(sh->ring, after);
        f = ngx_pty_ring_read(sh->ring, &off);

        if (f == NULL || room == 0) {
            if (f) {
                *next = f->seq;
            }

            ngx_pty_shm_unlock(sh);
            return first;
        }

        need = sizeof(ngx_pty_frame_t) + f->len;
        copy = ngx_alloc(need, call->log);

        if (copy) {
            ngx_memcpy(copy, f, need);
        }

        ngx_pty_shm_unlock(sh);

        if (copy == NULL) {
            return first;
        }

        f = (ngx_pty_frame_t *) copy;
        after = f->seq;
        rc = ngx_pty_transcript_add(call, frames, f);
        ngx_free(copy);

        if (rc != NGX_OK) {
            return first;
        }

        room--;
    }
}


static json_t *
ngx_pty_transcript_ts(uint64_t ms)
{
    u_char  ts[NGX_PTY_TS_LEN];

    return json_stringn((char *) ts, ngx_pty_ts_format(ts, ms) - ts);
}
