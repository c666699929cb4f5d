
/*
 * The history and transcript calls: sessions as the archive keeps them.
 */

#include "ngx_pty.h"
#include "ngx_pty_api.h"
#include "ngx_pty_auth.h"
#include "ngx_pty_ext.h"
#include "ngx_pty_text.h"
#include "ngx_pty_util.h"
#include "ngx_pty_archive.h"
#include "ngx_pty_transcript.h"


#define NGX_PTY_TRANSCRIPT_MAX  (4 * 1024 * 1024)   /* frame bytes a call */


typedef struct {
    ngx_http_request_t        *request;
    ngx_pty_archive_read_t    *read;
    ngx_uint_t                 text;       /* settled text asked */
    ngx_uint_t                 frames;     /* frames asked */
} ngx_pty_transcript_t;


static ngx_int_t ngx_pty_transcript_frames_call(ngx_http_request_t *r,
    json_t *req);
static ngx_int_t ngx_pty_transcript_history(ngx_http_request_t *r,
    json_t *req);
static ngx_int_t ngx_pty_transcript_post(ngx_http_request_t *r,
    ngx_pty_archive_read_t *rd, ngx_pty_archive_done_pt handler,
    ngx_uint_t text, ngx_uint_t frames);
static void ngx_pty_transcript_cleanup(void *data);
static void ngx_pty_transcript_finish(ngx_pty_transcript_t *tr,
    ngx_int_t rc);
static void ngx_pty_transcript_done(ngx_pty_archive_read_t *rd);
static void ngx_pty_history_done(ngx_pty_archive_read_t *rd);
static ngx_int_t ngx_pty_transcript_answer(ngx_pty_transcript_t *tr);
static json_t *ngx_pty_transcript_meta(ngx_pty_archive_meta_t *m);
static json_t *ngx_pty_transcript_frames(ngx_pty_archive_read_t *rd,
    json_t *o, ngx_pty_text_t *text);
static ngx_int_t ngx_pty_transcript_uint(json_t *req, const char *name,
    uint64_t def, uint64_t *v);


ngx_int_t
ngx_pty_transcript_find(ngx_str_t *name, ngx_int_t tool)
{
    if (name->len == 7 && ngx_strncmp(name->data, "history", 7) == 0) {
        return NGX_PTY_TRANSCRIPT_HISTORY;
    }

    if (name->len == 10 && ngx_strncmp(name->data, "transcript", 10) == 0) {
        return NGX_PTY_TRANSCRIPT_FRAMES;
    }

    return tool;
}


ngx_int_t
ngx_pty_transcript_call(ngx_http_request_t *r, ngx_int_t call, json_t *req)
{
    ngx_int_t  rc;

    rc = ngx_pty_auth_check(r, NULL, NGX_PTY_SCOPE_OBSERVE);
    if (rc != NGX_OK) {
        return ngx_pty_auth_api_refuse(r, rc);
    }

    if (!ngx_pty_archive_on()) {
        return ngx_pty_api_error(r, NGX_HTTP_NOT_FOUND, "no_archive",
                                 "no pty_archive is configured");
    }

    return (call == NGX_PTY_TRANSCRIPT_HISTORY)
           ? ngx_pty_transcript_history(r, req)
           : ngx_pty_transcript_frames_call(r, req);
}


static ngx_int_t
ngx_pty_transcript_frames_call(ngx_http_request_t *r, json_t *req)
{
    json_t                  *j;
    uint64_t                 from, to, max;
    ngx_int_t                n;
    ngx_str_t                id;
    ngx_uint_t               frames;
    ngx_pty_archive_read_t  *rd;

    j = json_object_get(req, "id");

    if (!json_is_string(j)) {
        return ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "bad_id",
                                 "\"id\" must be a session id or pty-N");
    }

    id.data = (u_char *) json_string_value(j);
    id.len = json_string_length(j);

    if (ngx_pty_transcript_uint(req, "from", 1, &from) != NGX_OK
        || ngx_pty_transcript_uint(req, "to", 0, &to) != NGX_OK
        || ngx_pty_transcript_uint(req, "max_bytes", 1024 * 1024, &max)
           != NGX_OK
        || max == 0 || max > NGX_PTY_TRANSCRIPT_MAX)
    {
        return ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "bad_range",
                                 "\"from\" and \"to\" are sequences, "
                                 "\"max_bytes\" at most 4194304");
    }

    rd = ngx_pty_archive_read_new(r->connection->log);
    if (rd == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (id.len > 4 && ngx_strncmp(id.data, "pty-", 4) == 0
        && (n = ngx_atoi(id.data + 4, id.len - 4)) > 0)
    {
        rd->name = (ngx_uint_t) n;

    } else if (ngx_pty_uuid_valid(id.data, id.len)) {
        ngx_memcpy(rd->id, id.data, NGX_PTY_ID_LEN);

    } else {
        ngx_pty_archive_read_free(rd);
        return ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "bad_id",
                                 "\"id\" must be a session id or pty-N");
    }

    frames = !json_is_false(json_object_get(req, "frames"));

    rd->op = NGX_PTY_ARCHIVE_FRAMES;
    rd->from = from;
    rd->to = to;
    rd->max = (size_t) max;

    /* frames in JSON cost more than their bytes; text alone, max_bytes */
    rd->rows = frames ? 4096 : (ngx_uint_t) max;

    return ngx_pty_transcript_post(r, rd, ngx_pty_transcript_done,
                  !json_is_false(json_object_get(req, "text")), frames);
}


static ngx_int_t
ngx_pty_transcript_history(ngx_http_request_t *r, json_t *req)
{
    uint64_t                 limit;
    ngx_pty_archive_read_t  *rd;

    if (ngx_pty_transcript_uint(req, "limit", 100, &limit) != NGX_OK
        || limit == 0 || limit > 10000)
    {
        return ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "bad_limit",
                                 "\"limit\" is 1 to 10000");
    }

    rd = ngx_pty_archive_read_new(r->connection->log);
    if (rd == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rd->op = NGX_PTY_ARCHIVE_LIST;
    rd->to = limit;

    return ngx_pty_transcript_post(r, rd, ngx_pty_history_done, 0, 0);
}


/* the read goes to a thread; the request waits for it */
static ngx_int_t
ngx_pty_transcript_post(ngx_http_request_t *r, ngx_pty_archive_read_t *rd,
    ngx_pty_archive_done_pt handler, ngx_uint_t text, ngx_uint_t frames)
{
    ngx_pool_cleanup_t    *cln;
    ngx_pty_transcript_t  *tr;

    tr = ngx_pcalloc(r->pool, sizeof(ngx_pty_transcript_t));
    cln = ngx_pool_cleanup_add(r->pool, 0);

    if (tr == NULL || cln == NULL) {
        ngx_pty_archive_read_free(rd);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    tr->request = r;
    tr->read = rd;
    tr->text = text;
    tr->frames = frames;

    rd->handler = handler;
    rd->data = tr;

    /* the request may go first (the client closed): the read is let go */
    cln->handler = ngx_pty_transcript_cleanup;
    cln->data = tr;

    if (ngx_pty_archive_read_post(rd) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* a client that goes away ends the request; the read lets go */
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_request_empty_handler;

    /* the body's reference to the request is the read's now */
    return NGX_DONE;
}


static void
ngx_pty_transcript_cleanup(void *data)
{
    ngx_pty_transcript_t  *tr = data;

    if (tr->read) {
        ngx_pty_archive_read_free(tr->read);
        tr->read = NULL;
    }
}


static void
ngx_pty_transcript_done(ngx_pty_archive_read_t *rd)
{
    ngx_int_t              rc;
    ngx_http_request_t    *r;
    ngx_pty_transcript_t  *tr;

    tr = rd->data;
    r = tr->request;

    if (rd->rc == NGX_ERROR) {
        rc = ngx_pty_api_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                               "archive_unavailable",
                               "the archive cannot be read now");

    } else if (rd->rc == NGX_DECLINED) {
        rc = ngx_pty_api_error(r, NGX_HTTP_NOT_FOUND, "unknown_session",
                               "the archive has no such session");

    } else {
        rc = ngx_pty_auth_check_acl(r, rd->meta.id, rd->meta.name,
                                    &rd->meta.acl, NGX_PTY_SCOPE_OBSERVE);

        rc = (rc == NGX_OK) ? ngx_pty_transcript_answer(tr)
                            : ngx_pty_auth_api_refuse(r, rc);
    }

    ngx_pty_transcript_finish(tr, rc);
}


static ngx_int_t
ngx_pty_transcript_answer(ngx_pty_transcript_t *tr)
{
    json_t                  *o, *frames;
    ngx_pty_text_t          *text;
    ngx_pty_text_view_t      v;
    ngx_pty_archive_read_t  *rd;

    rd = tr->read;

    o = ngx_pty_transcript_meta(&rd->meta);
    if (o == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    text = tr->text ? ngx_pty_text_create(0) : NULL;

    frames = ngx_pty_transcript_frames(rd, o, text);

    if (frames == NULL) {
        json_decref(o);
        if (text) {
            ngx_pty_text_destroy(text);
        }
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (tr->frames) {
        json_object_set_new(o, "frames", frames);

    } else {
        json_decref(frames);
    }

    if (text) {
        if (ngx_pty_text_take(text, &v) == 0) {
            json_object_set_new(o, "text",
                                json_stringn((char *) v.data, v.len));
        }

        ngx_pty_text_destroy(text);
    }

    return ngx_pty_api_send(tr->request, NGX_HTTP_OK, o);
}


/* each frame as the WebSocket sent it; the output fed to text */
static json_t *
ngx_pty_transcript_frames(ngx_pty_archive_read_t *rd, json_t *o,
    ngx_pty_text_t *text)
{
    u_char           *buf;
    size_t            pos, size;
    json_t           *frames, *f;
    uint64_t          next;
    ngx_pty_frame_t  *fr;

    frames = json_array();
    if (frames == NULL) {
        return NULL;
    }

    pos = 0;
    next = rd->from;
    buf = NULL;
    size = 0;

    while ((fr = ngx_pty_archive_next(rd, &pos)) != NULL) {
        next = fr->seq + 1;

        /* a frame for one connection of the past is nobody's now */
        if (fr->target || fr->kind == NGX_PTY_FRAME_REVOKE) {
            continue;
        }

        if (fr->kind == NGX_PTY_FRAME_OUTPUT && text) {
            (void) ngx_pty_text_feed(text, ngx_pty_frame_data(fr), fr->len);
        }

        if (ngx_pty_ext_frame_size(fr) > size) {
            size = ngx_pty_ext_frame_size(fr);
            buf = ngx_pnalloc(rd->pool, size);
            if (buf == NULL) {
                json_decref(frames);
                return NULL;
            }
        }

        f = json_loadb((char *) buf,
                       ngx_pty_ext_frame_write(buf, fr) - buf, 0, NULL);

        if (f == NULL || json_array_append_new(frames, f) != 0) {
            json_decref(frames);
            return NULL;
        }
    }

    json_object_set_new(o, "more", json_boolean(rd->more));
    json_object_set_new(o, "next", json_integer((json_int_t) next));

    return frames;
}


static json_t *
ngx_pty_transcript_meta(ngx_pty_archive_meta_t *m)
{
    json_t  *o;
    u_char   name[32], ts[NGX_PTY_TS_LEN];

    o = json_object();
    if (o == NULL) {
        return NULL;
    }

    ngx_sprintf(name, "pty-%ui%Z", m->name);
    json_object_set_new(o, "id", json_string((char *) name));
    json_object_set_new(o, "session_id",
                        json_stringn((char *) m->id, NGX_PTY_ID_LEN));
    json_object_set_new(o, "state",
                        json_string(m->ended ? "exited" : "running"));
    json_object_set_new(o, "command", json_stringn((char *) m->command.data,
                                                   m->command.len));
    json_object_set_new(o, "principal",
                        json_stringn((char *) m->principal.data,
                                     m->principal.len));

    (void) ngx_pty_ts_format(ts, m->started);
    json_object_set_new(o, "started_at",
                        json_stringn((char *) ts, NGX_PTY_TS_LEN));

    if (m->ended) {
        (void) ngx_pty_ts_format(ts, m->ended);
        json_object_set_new(o, "ended_at",
                            json_stringn((char *) ts, NGX_PTY_TS_LEN));
        json_object_set_new(o, "reason",
                            json_stringn((char *) m->reason.data,
                                         m->reason.len));
        json_object_set_new(o, "exit_code", m->exit_code >= 0
                                ? json_integer(m->exit_code) : json_null());
    }

    json_object_set_new(o, "first_sequence",
                        json_integer((json_int_t) m->first_seq));
    json_object_set_new(o, "last_sequence",
                        json_integer((json_int_t) m->last_seq));

    return o;
}


static void
ngx_pty_history_done(ngx_pty_archive_read_t *rd)
{
    json_t                  *list, *o;
    ngx_int_t                rc;
    ngx_uint_t               i;
    ngx_pty_ident_t         *id;
    ngx_http_request_t      *r;
    ngx_pty_transcript_t    *tr;
    ngx_pty_archive_meta_t  *m;

    tr = rd->data;
    r = tr->request;
    id = ngx_pty_auth_ident(r);
    list = json_array();

    if (rd->rc != NGX_OK || id == NULL || list == NULL) {
        json_decref(list);
        rc = ngx_pty_api_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                               "archive_unavailable",
                               "the archive cannot be read now");
        goto done;
    }

    m = rd->metas->elts;

    for (i = 0; i < rd->metas->nelts; i++) {
        /* only what the principal may see: not even that it exists */
        if (ngx_pty_auth_acl_right(id, m[i].acl.data, m[i].acl.len)
            == NGX_PTY_RIGHT_NONE)
        {
            continue;
        }

        o = ngx_pty_transcript_meta(&m[i]);
        if (o) {
            json_array_append_new(list, o);
        }
    }

    rc = ngx_pty_api_send(r, NGX_HTTP_OK,
                          json_pack("{s:o}", "sessions", list));

done:

    ngx_pty_transcript_finish(tr, rc);
}


static void
ngx_pty_transcript_finish(ngx_pty_transcript_t *tr, ngx_int_t rc)
{
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = tr->request;
    c = r->connection;

    ngx_pty_transcript_cleanup(tr);
    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}


static ngx_int_t
ngx_pty_transcript_uint(json_t *req, const char *name, uint64_t def,
    uint64_t *v)
{
    json_t  *j;

    j = json_object_get(req, name);

    if (j == NULL || json_is_null(j)) {
        *v = def;
        return NGX_OK;
    }

    if (!json_is_integer(j) || json_integer_value(j) < 0) {
        return NGX_ERROR;
    }

    *v = (uint64_t) json_integer_value(j);

    return NGX_OK;
}
