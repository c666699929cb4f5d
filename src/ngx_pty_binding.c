
/*
 * pty-ws/v1: envelope, dispatch, binding frames, the client's ring walk.
 */

#include "ngx_pty.h"
#include "ngx_pty_binding.h"
#include "ngx_pty_ext.h"
#include "ngx_pty_replay.h"
#include "ngx_pty_a2a.h"
#include "ngx_pty_util.h"
#include "ngx_pty_auth.h"
#include "ngx_pty_redact.h"
#include "ngx_pty_reveal.h"


typedef struct {
    const char                *code;
    const char                *a2a_name;
    ngx_int_t                  a2a_code;     /* 0: A2A fixes no number */
    ngx_uint_t                 retryable;
} ngx_pty_error_def_t;


/*
 * One serialization per frame per worker: the session's clients on this
 * worker share the WebSocket frames built for recent sequences (slot =
 * sequence % size).  Clients read the ring at different positions, as
 * far apart as their socket buffers let them drift, hence many slots; a
 * frame leaves its slot once every client here has queued it, so caught
 * up clients hold nothing.
 */
#define NGX_PTY_FRAME_CACHE  256

typedef struct {
    ngx_pty_ws_shared_t       *frame;
    ngx_uint_t                 served;       /* clients that queued it */
} ngx_pty_frame_slot_t;

typedef struct {
    ngx_uint_t                 clients;      /* WebSocket clients here */
    ngx_pty_frame_slot_t      *slots;        /* with two clients or more */
} ngx_pty_frame_cache_t;


static ngx_pty_error_def_t  ngx_pty_errors[] = {
    { "TASK_NOT_FOUND", "TaskNotFoundError", -32001, 0 },
    { "TASK_NOT_CANCELABLE", "TaskNotCancelableError", -32002, 0 },
    { "INVALID_REQUEST", "InvalidRequestError", -32600, 0 },
    { "UNSUPPORTED_OPERATION", "UnsupportedOperationError", -32004, 0 },
    { "UNAUTHENTICATED", "UnauthenticatedError", 0, 0 },
    { "PERMISSION_DENIED", "PermissionDeniedError", 0, 0 },
    { "RATE_LIMITED", "RateLimitedError", 0, 1 },
    { "INTERNAL", "InternalError", -32603, 1 },
    { "REPLAY_OUT_OF_RANGE", "ReplayOutOfRangeError", 0, 0 }
};


static const char  *ngx_pty_core_ops[] = {
    "SendMessage", "SendStreamingMessage", "GetTask", "ListTasks",
    "CancelTask", "SubscribeToTask", NULL
};


static void ngx_pty_binding_message(ngx_pty_ws_t *ws, u_char *data,
    size_t len);
static void ngx_pty_binding_writable(ngx_pty_ws_t *ws);
static void ngx_pty_binding_closed(ngx_pty_ws_t *ws);
static void ngx_pty_binding_notify(ngx_pty_listener_t *l);
static void ngx_pty_binding_shutdown(ngx_pty_listener_t *l);
static void ngx_pty_binding_quit(ngx_pty_listener_t *l);
static ngx_int_t ngx_pty_binding_envelope(ngx_pty_client_t *cl, json_t *msg,
    json_t **id);
static const char *ngx_pty_binding_envelope_keys(json_t *msg);
static const char *ngx_pty_binding_envelope_types(json_t *msg, json_t *id);
static void ngx_pty_binding_first_frame(ngx_pty_client_t *cl, json_t *msg);
static void ngx_pty_binding_hello(ngx_pty_client_t *cl);
static void ngx_pty_binding_pong(ngx_pty_client_t *cl, json_t *msg,
    json_t *id);
static u_char *ngx_pty_binding_head(u_char *p, const char *op, json_t *id);
static ngx_int_t ngx_pty_binding_lagged(ngx_pty_client_t *cl);
static ngx_pty_frame_t *ngx_pty_binding_find_closed(
    ngx_pty_session_sh_t *sh);
static ngx_uint_t ngx_pty_binding_held(ngx_pty_client_t *cl,
    ngx_pty_frame_t *f);
static ngx_int_t ngx_pty_binding_held_closed(ngx_pty_client_t *cl);
static ngx_uint_t ngx_pty_binding_more(ngx_pty_client_t *cl);
static ngx_int_t ngx_pty_binding_cache_join(ngx_pty_client_t *cl);
static void ngx_pty_binding_cache_leave(ngx_pty_client_t *cl);
static ngx_uint_t ngx_pty_binding_unmasked(ngx_pty_client_t *cl,
    ngx_pty_frame_t *f);
static ngx_pty_ws_shared_t *ngx_pty_binding_cached(ngx_pty_client_t *cl,
    ngx_pty_frame_t *f);
static ngx_pty_frame_t *ngx_pty_binding_copy(ngx_pty_client_t *cl,
    ngx_pty_frame_t *f);
static ngx_pty_ws_shared_t *ngx_pty_binding_serialize(ngx_pty_client_t *cl,
    ngx_pty_frame_t *f, ngx_uint_t shared);


/* a frame copied out of the ring, serialized outside the session lock */
static u_char  *ngx_pty_binding_scratch;
static size_t   ngx_pty_binding_scratch_size;


ngx_int_t
ngx_pty_binding_attach(ngx_http_request_t *r, ngx_pty_session_sh_t *sh)
{
    ngx_int_t            rc;
    ngx_pty_client_t    *cl;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    cl = ngx_pcalloc(r->pool, sizeof(ngx_pty_client_t));
    if (cl == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cl->conf = plcf;
    cl->first_frame = 1;

    /* the principal is fixed here for the connection's life */
    cl->ident = ngx_pty_auth_ident(r);
    if (cl->ident == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cl->ws.data = cl;
    cl->ws.on_message = ngx_pty_binding_message;
    cl->ws.on_writable = ngx_pty_binding_writable;
    cl->ws.on_closed = ngx_pty_binding_closed;
    cl->ws.max_message = plcf->ws_max_message;
    cl->ws.send_limit = plcf->ws_send_buffer;
    cl->ws.send_frames = plcf->ws_send_frames;
    cl->ws.ping_interval = plcf->ws_ping_interval;
    cl->ws.pong_timeout = plcf->ws_pong_timeout;

    ngx_pty_bucket_init(&cl->input, &plcf->input_rate);

    /* activation by header, as on A2A's other bindings */
    cl->ext_active = ngx_pty_ext_requested(r);

    ngx_http_set_ctx(r, cl, ngx_pty_module);

    rc = ngx_pty_ws_handshake(r, &cl->ws);
    if (rc != NGX_OK) {
        ngx_http_set_ctx(r, NULL, ngx_pty_module);
        return rc;
    }

    cl->session = ngx_pty_session_get(sh);
    if (cl->session == NULL) {
        return NGX_ERROR;
    }

    if (ngx_pty_binding_cache_join(cl) != NGX_OK) {
        ngx_pty_session_put(cl->session);
        cl->session = NULL;
        return NGX_ERROR;
    }

    cl->listener.notify = ngx_pty_binding_notify;
    cl->listener.shutdown = ngx_pty_binding_shutdown;
    cl->listener.quit = ngx_pty_binding_quit;
    cl->listener.data = cl;
    ngx_pty_session_listen(cl->session, &cl->listener);

    cl->client_id = ngx_pty_shm_next_client_id();
    cl->ident->client_id = cl->client_id;
    cl->keyframe_ev.log = r->connection->log;
    cl->keyframe_ev.data = cl;
    cl->keyframe_ev.cancelable = 1;

    ngx_pty_binding_hello(cl);
    ngx_pty_ws_start(&cl->ws);

    if (ngx_exiting && !cl->ws.finished) {
        /*
         * Accepted before this worker was told to quit, upgraded after its
         * listeners were told: sent on at once.  Joined here, nothing
         * would keep the worker for it, and its exit would close the
         * connection under the client's first input.
         */
        ngx_pty_binding_quit(&cl->listener);
    }

    if (!cl->ws.finished) {
        ngx_pty_ws_flush(&cl->ws);
    }

    return NGX_DONE;
}


static void
ngx_pty_binding_message(ngx_pty_ws_t *ws, u_char *data, size_t len)
{
    json_t            *msg, *id;
    const char        *op;
    json_error_t       err;
    ngx_pty_client_t  *cl;

    cl = ws->data;

    msg = json_loadb((char *) data, len, JSON_REJECT_DUPLICATES, &err);

    if (msg == NULL) {
        ngx_pty_binding_error(cl, NULL, NGX_PTY_ERR_INVALID_REQUEST,
                              "malformed JSON");
        goto done;
    }

    if (ngx_pty_binding_envelope(cl, msg, &id) != NGX_OK) {
        goto done;
    }

    op = json_string_value(json_object_get(msg, "op"));

    if (cl->ws.close_sent) {
        /* a quitting worker's goodbye is out: only input is still taken */
        if (ngx_strcmp(op, "pty.session_input") == 0) {
            ngx_pty_ext_dispatch(cl, msg, op, id);
        }

    } else if (ngx_strncmp(op, "pty.", 4) == 0) {
        ngx_pty_ext_dispatch(cl, msg, op, id);

    } else if (ngx_strcmp(op, "ping") == 0) {
        ngx_pty_binding_pong(cl, msg, id);

    } else if (ngx_pty_a2a_dispatch(cl, msg, op, id) == NGX_DECLINED) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_UNSUPPORTED_OPERATION,
                              "operation not supported");
    }

done:

    if (msg) {
        json_decref(msg);
    }

    if (!cl->ws.finished) {
        ngx_pty_ws_flush(&cl->ws);
    }
}


/* the envelope's shape; errors are answered here */
static ngx_int_t
ngx_pty_binding_envelope(ngx_pty_client_t *cl, json_t *msg, json_t **id)
{
    json_t      *v;
    const char  *why;

    *id = NULL;

    if (!json_is_object(msg)) {
        why = "a frame is one JSON object";
        goto invalid;
    }

    v = json_object_get(msg, "id");
    if (json_is_string(v) && json_string_length(v) > 0
        && json_string_length(v) <= 256)
    {
        *id = v;
    }

    why = ngx_pty_binding_envelope_keys(msg);

    if (why == NULL) {
        why = ngx_pty_binding_envelope_types(msg, *id);
    }

    if (why) {
        goto invalid;
    }

    if (cl->first_frame) {
        cl->first_frame = 0;
        ngx_pty_binding_first_frame(cl, msg);
    }

    return NGX_OK;

invalid:

    ngx_pty_binding_error(cl, *id, NGX_PTY_ERR_INVALID_REQUEST, why);

    return NGX_ERROR;
}


/* NULL, or why the envelope has a member it must not have */
static const char *
ngx_pty_binding_envelope_keys(json_t *msg)
{
    json_t      *v;
    const char  *key;

    json_object_foreach(msg, key, v) {
        if (ngx_strcmp(key, "op") && ngx_strcmp(key, "id")
            && ngx_strcmp(key, "ts") && ngx_strcmp(key, "payload")
            && ngx_strcmp(key, "replay_from")
            && ngx_strcmp(key, "service_parameters")
            && ngx_strcmp(key, "extensions"))
        {
            return (ngx_strcmp(key, "sequence") == 0)
                   ? "clients must not set \"sequence\""
                   : "unknown envelope member";
        }
    }

    return NULL;
}


/* NULL, or why a member of the envelope is not of its type */
static const char *
ngx_pty_binding_envelope_types(json_t *msg, json_t *id)
{
    json_t  *v;

    v = json_object_get(msg, "op");
    if (!json_is_string(v) || json_string_length(v) == 0) {
        return "\"op\" must be a non-empty string";
    }

    if (id == NULL) {
        return "\"id\" must be a non-empty string";
    }

    v = json_object_get(msg, "ts");
    if (v && !json_is_string(v)) {
        return "\"ts\" must be an RFC 3339 string";
    }

    v = json_object_get(msg, "payload");
    if (v && !json_is_object(v) && !json_is_null(v)) {
        return "\"payload\" must be an object";
    }

    v = json_object_get(msg, "replay_from");
    if (v && !json_is_null(v)
        && !(json_is_integer(v) && json_integer_value(v) >= 0))
    {
        return "\"replay_from\" must be a non-negative integer";
    }

    v = json_object_get(msg, "service_parameters");
    if (v && !json_is_object(v)) {
        return "\"service_parameters\" must be an object";
    }

    v = json_object_get(msg, "extensions");
    if (v && !json_is_array(v)) {
        return "\"extensions\" must be an array of URIs";
    }

    return NULL;
}


/* only the first frame activates extensions and sets service parameters */
static void
ngx_pty_binding_first_frame(ngx_pty_client_t *cl, json_t *msg)
{
    size_t   i;
    json_t  *v, *sp, *ext;

    sp = json_object_get(msg, "service_parameters");
    ext = json_object_get(msg, "extensions");

    json_array_foreach(ext, i, v) {
        if (json_is_string(v)
            && ngx_strcmp(json_string_value(v), NGX_PTY_EXT_URI) == 0)
        {
            cl->ext_active = 1;
        }
    }

    if (sp) {
        cl->service_parameters = json_incref(sp);

        v = json_object_get(sp, "trace_id");
        if (json_is_string(v)) {
            ngx_pty_auth_trace(cl->ident, json_string_value(v),
                               json_string_length(v));
        }
    }
}


/* writes {"op":"..","id":"..","ts":".." ; ids up to 256 bytes escaped */
static u_char *
ngx_pty_binding_head(u_char *p, const char *op, json_t *id)
{
    p = ngx_sprintf(p, "{\"op\":\"%s\",\"id\":\"", op);

    if (id) {
        p = ngx_pty_json_escape(p, (u_char *) json_string_value(id),
                                json_string_length(id));

    } else {
        p = ngx_pty_uuid7_text(p);
    }

    p = ngx_pty_cpylit(p, "\",\"ts\":\"");
    p = ngx_pty_ts_format(p, ngx_pty_now_ms());
    *p++ = '"';

    return p;
}


#define NGX_PTY_HEAD_MAX   (64 + 256 * 6 + NGX_PTY_TS_LEN)
#define NGX_PTY_ERROR_MSG  512
#define NGX_PTY_REPLY_MAX  (NGX_PTY_HEAD_MAX + 256 + 2 * 6 * NGX_PTY_ERROR_MSG)


/* replies are built here, then queued at their size (ngx_pty_ws_reply) */
static u_char  ngx_pty_binding_reply_buf[NGX_PTY_REPLY_MAX];


static void
ngx_pty_binding_reply(ngx_pty_client_t *cl, u_char *end)
{
    if (ngx_pty_ws_reply(&cl->ws, ngx_pty_binding_reply_buf,
                         end - ngx_pty_binding_reply_buf)
        != NGX_OK)
    {
        ngx_pty_ws_finalize(&cl->ws);
    }
}


void
ngx_pty_binding_error(ngx_pty_client_t *cl, json_t *id, ngx_uint_t code,
    const char *message)
{
    ngx_pty_binding_reply(cl, ngx_pty_binding_error_json(
                                  ngx_pty_binding_reply_buf, id, code,
                                  message));
}


u_char *
ngx_pty_binding_error_json(u_char *p, json_t *id, ngx_uint_t code,
    const char *message)
{
    size_t                mlen;
    ngx_pty_error_def_t  *e;

    e = &ngx_pty_errors[code];
    mlen = ngx_min(ngx_strlen(message), NGX_PTY_ERROR_MSG);

    p = ngx_pty_binding_head(p, "Error", id);
    p = ngx_sprintf(p, ",\"payload\":{\"code\":\"%s\",\"message\":\"",
                    e->code);
    p = ngx_pty_json_escape(p, (u_char *) message, mlen);
    p = ngx_sprintf(p, "\",\"a2a_error\":{");

    if (e->a2a_code) {
        p = ngx_sprintf(p, "\"code\":%i,", e->a2a_code);
    }

    p = ngx_sprintf(p, "\"name\":\"%s\",\"message\":\"", e->a2a_name);
    p = ngx_pty_json_escape(p, (u_char *) message, mlen);
    p = ngx_sprintf(p, "\"},\"retryable\":%s}}",
                    e->retryable ? "true" : "false");

    return p;
}


static void
ngx_pty_binding_hello(ngx_pty_client_t *cl)
{
    u_char              *p, *start;
    ngx_uint_t           i;
    ngx_pty_ws_block_t  *b;

    start = ngx_pty_ws_reserve(&cl->ws, 1024, &b);
    if (start == NULL) {
        ngx_pty_ws_finalize(&cl->ws);
        return;
    }

    p = ngx_pty_binding_head(start, "binding_hello", NULL);
    p = ngx_sprintf(p, ",\"payload\":{\"binding_uri\":\"" NGX_PTY_BINDING_URI
                    "\",\"binding_version\":\"" NGX_PTY_BINDING_VER
                    "\",\"supported_operations\":[");

    for (i = 0; ngx_pty_core_ops[i]; i++) {
        p = ngx_sprintf(p, "%s\"%s\"", i ? "," : "", ngx_pty_core_ops[i]);
    }

    p = ngx_sprintf(p, "],\"activated_extensions\":[%s],"
                    "\"session\":{\"session_id\":\"%*s\","
                    "\"current_sequence\":%uL}}}",
                    cl->ext_active ? "\"" NGX_PTY_EXT_URI "\"" : "",
                    (size_t) NGX_PTY_ID_LEN, cl->session->sh->id,
                    cl->session->sh->seq);

    ngx_pty_ws_commit(&cl->ws, b, p);
}


void
ngx_pty_binding_goodbye(ngx_pty_client_t *cl, const char *reason,
    const char *detail)
{
    u_char              *p, *start;
    ngx_pty_ws_block_t  *b;

    if (cl->done) {
        return;
    }

    cl->done = 1;

    start = ngx_pty_ws_reserve(&cl->ws, NGX_PTY_HEAD_MAX + 512, &b);
    if (start == NULL) {
        ngx_pty_ws_finalize(&cl->ws);
        return;
    }

    p = ngx_pty_binding_head(start, "binding_goodbye", NULL);
    p = ngx_sprintf(p, ",\"payload\":{\"reason\":\"%s\"", reason);

    if (detail) {
        p = ngx_sprintf(p, ",\"detail\":\"");
        p = ngx_pty_json_escape(p, (u_char *) detail,
                                ngx_min(ngx_strlen(detail), 256));
        *p++ = '"';
    }

    *p++ = '}';
    *p++ = '}';

    ngx_pty_ws_commit(&cl->ws, b, p);
    ngx_pty_ws_close(&cl->ws, NGX_PTY_WS_CLOSE_NORMAL, "");
}


/* the shape of an RFC 3339 date-time: the pong echoes it, so it must be */
static ngx_uint_t
ngx_pty_binding_rfc3339(u_char *p, size_t len)
{
    u_char      *last;
    ngx_uint_t   i;
    static const char  shape[] = "dddd-dd-ddTdd:dd:dd";

    if (len < sizeof(shape)) {
        return 0;
    }

    for (i = 0; i < sizeof(shape) - 1; i++) {
        if (shape[i] == 'd' ? (p[i] < '0' || p[i] > '9')
                            : (ngx_toupper(p[i]) != (u_char) shape[i]))
        {
            return 0;
        }
    }

    last = p + len;
    p += sizeof(shape) - 1;

    if (*p == '.') {
        for (p++; p < last && *p >= '0' && *p <= '9'; p++) { /* void */ }
    }

    if (p < last && (*p == 'Z' || *p == 'z')) {
        return p + 1 == last;
    }

    return last - p == 6 && (*p == '+' || *p == '-') && p[3] == ':';
}


static void
ngx_pty_binding_pong(ngx_pty_client_t *cl, json_t *msg, json_t *id)
{
    u_char  *p;
    size_t   len;
    json_t  *ts;

    ts = json_object_get(json_object_get(msg, "payload"), "client_ts");

    if (!json_is_string(ts) || json_string_length(ts) > 64
        || !ngx_pty_binding_rfc3339((u_char *) json_string_value(ts),
                                    json_string_length(ts)))
    {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "ping needs payload.client_ts, an RFC 3339 "
                              "date-time");
        return;
    }

    len = json_string_length(ts);

    p = ngx_pty_binding_head(ngx_pty_binding_reply_buf, "pong", id);
    p = ngx_pty_cpylit(p, ",\"payload\":{\"client_ts\":\"");
    p = ngx_pty_json_escape(p, (u_char *) json_string_value(ts), len);
    p = ngx_pty_cpylit(p, "\",\"server_ts\":\"");
    p = ngx_pty_ts_format(p, ngx_pty_now_ms());
    *p++ = '"';
    *p++ = '}';
    *p++ = '}';

    ngx_pty_binding_reply(cl, p);
}


/* one ring frame to this client */
ngx_int_t
ngx_pty_binding_send_frame(ngx_pty_client_t *cl, ngx_pty_frame_t *f)
{
    u_char              *p;
    ngx_pty_ws_block_t  *b;

    p = ngx_pty_ws_reserve(&cl->ws, ngx_pty_ext_frame_size(f), &b);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_pty_ws_commit(&cl->ws, b, ngx_pty_ext_frame_write(p, f));

    return NGX_OK;
}


/*
 * Moves frames from the ring to the send queue until the queue is full
 * or the client is level with the ring.  A client that fell out of the
 * ring is told so and gets a Keyframe next.
 */
void
ngx_pty_binding_pull(ngx_pty_client_t *cl)
{
    uint64_t               seq;
    ngx_int_t              rc;
    ngx_uint_t             kind, unmasked;
    ngx_pty_frame_t       *f, *copy;
    ngx_pty_ws_shared_t   *sf;
    ngx_pty_session_sh_t  *sh;

    if ((!cl->joined && !cl->a2a_watch) || cl->done || cl->ws.finished
        || cl->ws.close_sent)
    {
        return;
    }

    if (ngx_pty_auth_revoked(cl->ident)) {
        /* its revoke frame went by unread: it fell behind, or no room */
        ngx_pty_binding_goodbye(cl, "principal_revoked", NULL);
        return;
    }

    if (ngx_pty_replay_pull(cl)) {
        return;
    }

    sh = cl->session->sh;

again:

    while (!ngx_pty_ws_full(&cl->ws)) {

        ngx_pty_shm_lock(sh);

        if (cl->cursor < sh->ring->tail && !cl->joined) {
            /* a task follower has no screen to catch up with */
            cl->cursor = sh->ring->tail;
        }

        if (cl->cursor < sh->ring->tail) {
            ngx_pty_shm_unlock(sh);

            if (ngx_pty_binding_lagged(cl) != NGX_OK) {
                break;
            }

            continue;
        }

        f = ngx_pty_ring_read(sh->ring, &cl->cursor);

        if (f == NULL) {
            ngx_pty_shm_unlock(sh);

            if (sh->state >= NGX_PTY_STATE_CLOSED && cl->joined) {
                /* joined after the end: its Closed frame is behind us */
                ngx_pty_binding_goodbye(cl, "session_closed", NULL);
                return;
            }

            break;
        }

        if ((f->target && f->target != cl->client_id)
            || f->seq == cl->sent_seq
            || (!cl->joined && !ngx_pty_a2a_wants(cl, f)))
        {
            ngx_pty_shm_unlock(sh);
            continue;
        }

        if (f->kind == NGX_PTY_FRAME_REVOKE) {
            /* its principal was revoked (ngx_pty_auth_revoke) */
            ngx_pty_shm_unlock(sh);
            ngx_pty_binding_goodbye(cl, "principal_revoked", NULL);
            return;
        }

        if (cl->holding && f->seq > cl->hold_seq
            && ngx_pty_binding_held(cl, f))
        {
            ngx_pty_shm_unlock(sh);

            if (f->kind == NGX_PTY_FRAME_CLOSED
                && ngx_pty_binding_held_closed(cl) != NGX_OK)
            {
                ngx_pty_ws_finalize(&cl->ws);
                return;
            }

            continue;
        }

        kind = f->kind;
        seq = f->seq;

        unmasked = ngx_pty_binding_unmasked(cl, f);

        /* another client here built it, or copy it out and build it */
        sf = unmasked ? NULL : ngx_pty_binding_cached(cl, f);
        copy = (sf == NULL) ? ngx_pty_binding_copy(cl, f) : NULL;

        if (unmasked && copy != NULL) {
            /* its own, with what redaction hid put back */
            (void) ngx_pty_reveal_overlay(sh, copy->anchor,
                                          ngx_pty_frame_data(copy),
                                          copy->len);
        }

        ngx_pty_shm_unlock(sh);

        if (sf == NULL && copy != NULL) {
            sf = ngx_pty_binding_serialize(cl, copy, !unmasked);
        }

        if (sf == NULL) {
            ngx_pty_ws_finalize(&cl->ws);
            return;
        }

        rc = ngx_pty_ws_queue_shared(&cl->ws, sf);
        ngx_pty_ws_shared_release(sf);

        if (rc != NGX_OK) {
            ngx_pty_ws_finalize(&cl->ws);
            return;
        }

        if (kind == NGX_PTY_FRAME_CLOSED) {
            ngx_pty_binding_goodbye(cl, "session_closed", NULL);
            return;
        }

        if (cl->leaving && seq >= cl->leave_seq) {
            ngx_pty_binding_goodbye(cl, "other", "left the session");
            return;
        }
    }

    ngx_pty_ws_flush(&cl->ws);

    /*
     * Stopped on a full queue that the socket took at once: no write
     * event will come (edge-triggered), so carry on from here.
     */
    if (ngx_pty_ws_full(&cl->ws)) {
        return;
    }

    if (!cl->ws.finished && !cl->ws.close_sent && ngx_pty_binding_more(cl)) {
        goto again;
    }
}


/* counts this worker's clients of the session: the cache lives with them */
static ngx_int_t
ngx_pty_binding_cache_join(ngx_pty_client_t *cl)
{
    ngx_pty_frame_cache_t  *fc;

    fc = cl->session->frames;

    if (fc == NULL) {
        fc = ngx_calloc(sizeof(ngx_pty_frame_cache_t), cl->ws.connection->log);
        if (fc == NULL) {
            return NGX_ERROR;
        }

        cl->session->frames = fc;
    }

    fc->clients++;

    return NGX_OK;
}


static void
ngx_pty_binding_cache_leave(ngx_pty_client_t *cl)
{
    ngx_uint_t              i;
    ngx_pty_frame_cache_t  *fc;

    fc = cl->session->frames;

    if (--fc->clients > 1) {
        return;
    }

    /* a lone client has nobody to share with: keep nothing for it */
    if (fc->slots) {
        for (i = 0; i < NGX_PTY_FRAME_CACHE; i++) {
            if (fc->slots[i].frame) {
                ngx_pty_ws_shared_release(fc->slots[i].frame);
            }
        }

        ngx_free(fc->slots);
        fc->slots = NULL;
    }

    if (fc->clients == 0) {
        ngx_free(fc);
        cl->session->frames = NULL;
    }
}


/*
 * Under the session lock: whether this client is shown an Output frame
 * with what redaction masked in it (pty_redact's list, pty:reveal).
 */
static ngx_uint_t
ngx_pty_binding_unmasked(ngx_pty_client_t *cl, ngx_pty_frame_t *f)
{
    ngx_uint_t             who;
    ngx_pty_session_sh_t  *sh;

    sh = cl->session->sh;

    if (f->kind != NGX_PTY_FRAME_OUTPUT
        || !ngx_pty_reveal_touches(sh, f->anchor, f->len))
    {
        return 0;
    }

    if (cl->ident && (cl->ident->scopes & NGX_PTY_SCOPE_REVEAL)) {
        return 1;
    }

    if (f->seq < cl->live_seq) {
        who = NGX_PTY_REDACT_REPLAY;

    } else if (cl->role == NGX_PTY_ROLE_CONTROLLER) {
        who = NGX_PTY_REDACT_CONTROLLER;

    } else {
        who = NGX_PTY_REDACT_OBSERVERS;
    }

    return !(sh->redact & who);
}


/* under the session lock: the frame as built here before, referenced */
static ngx_pty_ws_shared_t *
ngx_pty_binding_cached(ngx_pty_client_t *cl, ngx_pty_frame_t *f)
{
    ngx_pty_ws_shared_t    *sf;
    ngx_pty_frame_slot_t   *slot;
    ngx_pty_frame_cache_t  *fc;

    fc = cl->session->frames;

    if (fc->slots == NULL || f->target) {
        return NULL;
    }

    slot = &fc->slots[f->seq % NGX_PTY_FRAME_CACHE];
    sf = slot->frame;

    if (sf == NULL || sf->key != f->seq) {
        return NULL;
    }

    if (++slot->served >= fc->clients) {
        /* the last client here to need it takes the slot's reference */
        slot->frame = NULL;
        return sf;
    }

    sf->refs++;

    return sf;
}


/* under the session lock: the record out of the ring, to build unlocked */
static ngx_pty_frame_t *
ngx_pty_binding_copy(ngx_pty_client_t *cl, ngx_pty_frame_t *f)
{
    u_char  *p;
    size_t   size;

    size = sizeof(ngx_pty_frame_t) + f->len;

    if (size > ngx_pty_binding_scratch_size) {
        size = ngx_max(size, 64 * 1024);

        p = ngx_alloc(size, cl->ws.connection->log);
        if (p == NULL) {
            return NULL;
        }

        if (ngx_pty_binding_scratch) {
            ngx_free(ngx_pty_binding_scratch);
        }

        ngx_pty_binding_scratch = p;
        ngx_pty_binding_scratch_size = size;
    }

    ngx_memcpy(ngx_pty_binding_scratch, f, sizeof(ngx_pty_frame_t) + f->len);

    return (ngx_pty_frame_t *) ngx_pty_binding_scratch;
}


/*
 * builds the WebSocket frame once; kept if other clients here need it
 * and it is the one every client gets (shared)
 */
static ngx_pty_ws_shared_t *
ngx_pty_binding_serialize(ngx_pty_client_t *cl, ngx_pty_frame_t *f,
    ngx_uint_t shared)
{
    ngx_pty_ws_shared_t    *sf;
    ngx_pty_frame_slot_t   *slot;
    ngx_pty_frame_cache_t  *fc;

    sf = ngx_pty_ws_shared_alloc(ngx_pty_ext_frame_size(f),
                                 cl->ws.connection->log);
    if (sf == NULL) {
        return NULL;
    }

    ngx_pty_ws_shared_commit(sf,
                   ngx_pty_ext_frame_write(ngx_pty_ws_shared_payload(sf), f));

    fc = cl->session->frames;

    if (!shared || f->target || fc->clients < 2) {
        return sf;
    }

    if (fc->slots == NULL) {
        fc->slots = ngx_calloc(NGX_PTY_FRAME_CACHE
                               * sizeof(ngx_pty_frame_slot_t),
                               cl->ws.connection->log);
        if (fc->slots == NULL) {
            return sf;          /* unshared, but sent */
        }
    }

    slot = &fc->slots[f->seq % NGX_PTY_FRAME_CACHE];

    if (slot->frame) {
        if (slot->frame->key > f->seq) {
            /* a client far behind must not evict what the others need */
            return sf;
        }

        ngx_pty_ws_shared_release(slot->frame);
    }

    sf->key = f->seq;
    sf->refs++;
    slot->frame = sf;
    slot->served = 1;

    return sf;
}


/* frames left in the ring for this client */
static ngx_uint_t
ngx_pty_binding_more(ngx_pty_client_t *cl)
{
    ngx_uint_t  more;

    ngx_pty_shm_lock(cl->session->sh);
    more = (cl->cursor < cl->session->sh->ring->head);
    ngx_pty_shm_unlock(cl->session->sh);

    return more;
}


static ngx_int_t
ngx_pty_binding_lagged(ngx_pty_client_t *cl)
{
    ngx_uint_t        closed, gone;
    ngx_pty_frame_t  *f;

    if (ngx_pty_binding_log(cl, NGX_PTY_LOG_LAGGED, NGX_LOG_INFO)) {
        ngx_log_error(NGX_LOG_INFO, cl->ws.connection->log, 0,
                      "pty: client c-%uD fell behind session pty-%ui",
                      cl->client_id, cl->session->sh->name);
    }

    /* a lagged client has not had the Closed yet: it is among the skipped */
    ngx_pty_shm_lock(cl->session->sh);
    closed = (cl->session->sh->state >= NGX_PTY_STATE_CLOSED);

    if (cl->holding) {
        /*
         * Behind again before its Keyframe came (the frames ahead of it
         * filled its queue): it was told already (a second LAGGED would
         * not be followed by a Keyframe), and one more Keyframe is asked
         * for in case the first went by.  A Closed still in the ring is
         * met on the walk (ngx_pty_binding_held_closed); one that went
         * by is copied.
         */
        cl->cursor = cl->session->sh->ring->tail;
        gone = closed && ngx_pty_binding_find_closed(cl->session->sh) == NULL;
        ngx_pty_shm_unlock(cl->session->sh);

        if (ngx_pty_session_request_keyframe(cl->session, cl->client_id)
            != NGX_OK)
        {
            cl->holding = 0;
        }

        if (gone && ngx_pty_binding_closed_copy(cl) != NGX_OK) {
            ngx_pty_ws_finalize(&cl->ws);
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    ngx_pty_shm_unlock(cl->session->sh);

    /* PTY_OUTPUT_LAGGED, then a Keyframe: the client starts over there */
    f = ngx_pty_ext_error_frame(cl, "PTY_OUTPUT_LAGGED",
                                "output was dropped; a keyframe follows");
    if (f == NULL) {
        ngx_pty_ws_finalize(&cl->ws);
        return NGX_ERROR;
    }

    ngx_pty_shm_lock(cl->session->sh);
    cl->cursor = ngx_pty_ring_find(cl->session->sh->ring, f->seq - 1);
    ngx_pty_shm_unlock(cl->session->sh);

    if (ngx_pty_session_request_keyframe(cl->session, cl->client_id)
        == NGX_OK)
    {
        /* the spec: the frame after PTY_OUTPUT_LAGGED is the Keyframe */
        ngx_pty_binding_hold(cl, f->seq, 1);

    } else if (cl->logs[NGX_PTY_LOG_LAGGED].suppressed == 0) {
        /* in the lag's episode: logged with its first line, or counted */
        ngx_log_error(NGX_LOG_INFO, cl->ws.connection->log, 0,
                      "pty: no keyframe for lagged client c-%uD",
                      cl->client_id);
    }

    if (closed && ngx_pty_binding_closed_copy(cl) != NGX_OK) {
        ngx_pty_ws_finalize(&cl->ws);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * A Keyframe asked of the owner worker comes through the ring after what
 * the owner appended meanwhile; until it does, frames after "after" that
 * it covers are not sent: Output (folded into it) and, with "all" (a
 * lag, which drops frames anyway), Resize and MembershipChanged too.
 */
void
ngx_pty_binding_hold(ngx_pty_client_t *cl, uint64_t after, ngx_uint_t all)
{
    cl->holding = 1;
    cl->hold_all = all;
    cl->hold_seq = after;
}


/*
 * Under the session lock, for a frame after the hold's start: 1 to skip
 * it.  The client's own Keyframe, a broadcast one (it covers as much) or
 * a targeted Error (KEYFRAME_UNAVAILABLE from the owner) ends the hold.
 */
static ngx_uint_t
ngx_pty_binding_held(ngx_pty_client_t *cl, ngx_pty_frame_t *f)
{
    switch (f->kind) {

    case NGX_PTY_FRAME_OUTPUT:
        return 1;

    case NGX_PTY_FRAME_RESIZE:
    case NGX_PTY_FRAME_MEMBERSHIP:
        return cl->hold_all;

    case NGX_PTY_FRAME_CLOSED:
        /* the session ended before the owner made the Keyframe */
        return f->target == 0;

    case NGX_PTY_FRAME_KEYFRAME:
    case NGX_PTY_FRAME_ERROR:
        cl->holding = 0;
        return 0;

    default:
        return 0;
    }
}


/*
 * The broadcast Closed came while a client waited for its Keyframe: the
 * owner may no longer make it, so one is rebuilt here from the ring (the
 * session has ended), then the Closed follows as a copy targeted at it.
 */
static ngx_int_t
ngx_pty_binding_held_closed(ngx_pty_client_t *cl)
{
    if (ngx_pty_session_request_keyframe(cl->session, cl->client_id)
        != NGX_OK)
    {
        cl->holding = 0;
    }

    return ngx_pty_binding_closed_copy(cl);
}


/* under the session lock: the broadcast Closed if the ring still has it */
static ngx_pty_frame_t *
ngx_pty_binding_find_closed(ngx_pty_session_sh_t *sh)
{
    uint64_t          off;
    ngx_pty_frame_t  *f;

    off = sh->ring->tail;

    while ((f = ngx_pty_ring_read(sh->ring, &off)) != NULL) {
        if (f->kind == NGX_PTY_FRAME_CLOSED && f->target == 0) {
            return f;
        }
    }

    return NULL;
}


/*
 * The session's Closed was among the frames a lagged client skipped, or
 * before where a late joiner's walk starts: a copy targeted at it follows
 * its Keyframe, so that it too gets exactly one Closed, and its sequences
 * only grow.
 */
ngx_int_t
ngx_pty_binding_closed_copy(ngx_pty_client_t *cl)
{
    u_char                 buf[NGX_PTY_CLOSED_MAX];
    size_t                 len;
    ngx_pty_frame_t       *f;
    ngx_pty_session_sh_t  *sh;

    sh = cl->session->sh;
    len = 0;

    ngx_pty_shm_lock(sh);

    f = ngx_pty_binding_find_closed(sh);

    if (f && f->len <= sizeof(buf)) {
        len = f->len;
        ngx_memcpy(buf, ngx_pty_frame_data(f), len);
    }

    ngx_pty_shm_unlock(sh);

    if (len == 0) {
        /* evicted since by targeted frames: what the session record says */
        len = ngx_pty_closed_json(buf, sizeof(buf), sh->closed_reason,
                                  sh->exit_code,
                                  "output_lagged: the session had ended");
    }

    f = ngx_pty_session_append(cl->session, NGX_PTY_FRAME_CLOSED,
                               cl->client_id, buf, len);

    return (f == NULL) ? NGX_ERROR : NGX_OK;
}


static void
ngx_pty_binding_notify(ngx_pty_listener_t *l)
{
    ngx_event_t       *wev;
    ngx_pty_client_t  *cl = l->data;

    if (cl->ws.finished) {
        return;
    }

    wev = cl->ws.connection->write;

    if (cl->session->urgent) {
        /* an echo goes ahead of the bulk work already queued this turn */
        if (wev->posted) {
            ngx_delete_posted_event(wev);
        }

        wev->posted = 1;
        ngx_queue_insert_head(&ngx_posted_events, &wev->queue);
        return;
    }

    if (!wev->posted) {
        ngx_post_event(wev, &ngx_posted_events);
    }
}


/*
 * nginx stops: the session ends with it.  A client level with the ring
 * gets the rest in order; one behind gets the end at once (there is
 * nothing to reconnect to): the session's own Closed if it has one, else
 * Closed instance_terminated, made here and sequenced after the ring's
 * last frame.  The ring itself is left alone: other workers may still be
 * serving their clients (the master records the end when they are gone).
 */
static void
ngx_pty_binding_stop(ngx_pty_client_t *cl)
{
    size_t                 len;
    uint64_t               off, buf[(sizeof(ngx_pty_frame_t)
                                     + NGX_PTY_CLOSED_MAX) / 8 + 1];
    ngx_pty_frame_t       *f, *closed;
    ngx_pty_session_sh_t  *sh;

    ngx_pty_binding_pull(cl);

    if (cl->done || !cl->joined) {
        return;
    }

    sh = cl->session->sh;
    closed = (ngx_pty_frame_t *) buf;
    len = 0;

    ngx_pty_shm_lock(sh);

    /* not yet sent: at or after the client's place in the ring */
    off = ngx_max(cl->cursor, sh->ring->tail);

    while ((f = ngx_pty_ring_read(sh->ring, &off)) != NULL) {
        if (f->kind == NGX_PTY_FRAME_CLOSED && f->target == 0
            && f->len <= NGX_PTY_CLOSED_MAX)
        {
            len = sizeof(ngx_pty_frame_t) + f->len;
            ngx_memcpy(buf, f, len);
            break;
        }
    }

    if (len == 0) {
        ngx_memzero(closed, sizeof(ngx_pty_frame_t));
        closed->seq = sh->seq + 1;
    }

    ngx_pty_shm_unlock(sh);

    if (len == 0) {
        closed->ts = ngx_pty_now_ms();
        closed->kind = NGX_PTY_FRAME_CLOSED;
        len = ngx_pty_closed_json(ngx_pty_frame_data(closed),
                                  NGX_PTY_CLOSED_MAX,
                                  NGX_PTY_CLOSED_INSTANCE_TERMINATED, -1,
                                  NGX_PTY_CLOSED_SHUTDOWN);
        closed->len = (uint32_t) len;
        ngx_pty_uuid7_fast(closed->id, closed->ts);
    }

    if (ngx_pty_binding_send_frame(cl, closed) == NGX_OK) {
        ngx_pty_binding_goodbye(cl, "session_closed", NULL);
    }
}


/*
 * This worker is told to quit for a reload: the client is told to
 * reconnect, and what it sends until it answers the close (its input
 * typed before it heard) still goes to the terminal.  The close's linger
 * timer keeps the worker for that, 2 s at most.  A stop is left to the
 * exit, which sends Closed.
 */
static void
ngx_pty_binding_quit(ngx_pty_listener_t *l)
{
    ngx_pty_client_t  *cl = l->data;

    if (ngx_pty_instance_stopping() || cl->ws.close_sent || cl->ws.finished)
    {
        return;
    }

    /*
     * What it sent before the goodbye goes first: once it reconnects, its
     * next input reaches the terminal through another worker, and must
     * not overtake what this one has not read yet
     */
    ngx_pty_ws_read_pending(&cl->ws);

    if (cl->ws.finished) {
        /* it went while being read: its close was posted */
        ngx_http_run_posted_requests(cl->ws.connection);
        return;
    }

    if (cl->ws.close_sent) {
        return;
    }

    cl->ws.read_after_close = 1;
    ngx_pty_binding_goodbye(cl, "server_shutdown",
                            "reconnect with replay_from");
}


/* this worker exits: say so, send what fits, and go */
static void
ngx_pty_binding_shutdown(ngx_pty_listener_t *l)
{
    ngx_pty_client_t  *cl = l->data;

    ngx_connection_t  *c;

    c = cl->ws.connection;

    /*
     * Input the client sent before it could hear of the exit: it goes to
     * the terminal or the inbox now, not with the socket
     */
    ngx_pty_ws_read_pending(&cl->ws);

    if (cl->ws.finished) {
        ngx_http_run_posted_requests(c);
        return;
    }

    if (ngx_pty_instance_stopping()) {
        ngx_pty_binding_stop(cl);
    }

    /* a reload: the session lives on in the new workers */
    ngx_pty_binding_goodbye(cl, "server_shutdown",
                            "reconnect with replay_from");
    ngx_pty_ws_finalize(&cl->ws);

    /* no event loop turn follows at exit: close the connection now */
    ngx_http_run_posted_requests(c);
}


static void
ngx_pty_binding_writable(ngx_pty_ws_t *ws)
{
    ngx_pty_binding_pull(ws->data);
}


static const char  *ngx_pty_binding_log_names[NGX_PTY_LOG_N] = {
    "client fell behind",
    "observer denied",
    "shared zone is full",
    "input over pty_input_rate"
};


ngx_uint_t
ngx_pty_binding_log(ngx_pty_client_t *cl, ngx_pty_client_log_e which,
    ngx_uint_t level)
{
    return ngx_pty_log_limit(&cl->logs[which], cl->ws.connection->log, level,
                             ngx_pty_binding_log_names[which]);
}


static void
ngx_pty_binding_closed(ngx_pty_ws_t *ws)
{
    ngx_pty_client_t  *cl = ws->data;

    ngx_uint_t  i;

    for (i = 0; i < NGX_PTY_LOG_N; i++) {
        ngx_pty_log_limit_end(&cl->logs[i], ws->connection->log);
    }

    if (cl->keyframe_ev.timer_set) {
        ngx_del_timer(&cl->keyframe_ev);
    }

    if (cl->session == NULL) {
        return;
    }

    ngx_pty_replay_stop(cl);
    ngx_pty_ext_detach(cl);
    ngx_pty_a2a_closed(cl);
    ngx_pty_binding_cache_leave(cl);

    if (cl->service_parameters) {
        json_decref(cl->service_parameters);
        cl->service_parameters = NULL;
    }

    ngx_pty_session_unlisten(cl->session, &cl->listener);
    cl->session = NULL;
}
