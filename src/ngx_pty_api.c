
/*
 * The agent HTTP API.  Calls are POSTs of a JSON object to
 * <location>/<call>: start, write, kill, list, read (docs/API.md).
 *
 * Waiting never blocks the worker: a call that waits (write's wait_for and
 * wait_ms, start's settle, kill's grace, read's wait_for) becomes a waiter,
 * a session listener plus a timer on the request, and answers from
 * whichever of them sees its condition first.
 *
 * Output is settled text (docs/SETTLED_TEXT.md) of the raw scrollback ring
 * in the zone, read from sh->api_cursor on.  Any worker serves any call:
 * the reader's position, counters and undelivered text are in the zone,
 * one worker uses them at a time (sh->api_busy), and a worker whose own
 * converter is not the one used last rebuilds it from the start of the
 * unfinished line (ngx_pty_api_sync).  Input from a worker that does not
 * own the terminal goes through the session's inbox; read's screen is
 * rebuilt from the ring there (ngx_pty_session_screen_text).
 */

#include "ngx_pty.h"
#include "ngx_pty_transcript.h"
#include "ngx_pty_api.h"
#include "ngx_pty_session.h"
#include "ngx_pty_keeper.h"
#include "ngx_pty_escape.h"
#include "ngx_pty_text.h"
#include "ngx_pty_ext.h"
#include "ngx_pty_ws.h"
#include "ngx_pty_util.h"
#include "ngx_pty_policy.h"
#include "ngx_pty_http.h"
#include "ngx_pty_auth.h"
#include "ngx_pty_audit.h"


#define NGX_PTY_API_CHUNK        16384   /* raw bytes fed per step */
#define NGX_PTY_API_QUIET        150     /* ms of quiet that settles start */
#define NGX_PTY_API_START_WAIT   1000    /* ms: start's settle at most */
#define NGX_PTY_API_KILL_WAIT    (NGX_PTY_KILL_GRACE + 1000)


/* a worker's settled-text converter for a session, in its local view */
typedef struct {
    ngx_pty_text_t            *text;
    ngx_atomic_uint_t          epoch;      /* sh->api_epoch it matches */
    ngx_http_request_t        *busy;       /* the call waiting on it */
} ngx_pty_api_reader_t;


typedef struct ngx_pty_api_wait_s  ngx_pty_api_wait_t;

/* NGX_OK: answer now; NGX_AGAIN: keep waiting */
typedef ngx_int_t (*ngx_pty_api_check_pt)(ngx_pty_api_wait_t *w);
/* sends the answer, returns what ngx_http_finalize_request() wants */
typedef ngx_int_t (*ngx_pty_api_answer_pt)(ngx_pty_api_wait_t *w);

struct ngx_pty_api_wait_s {
    ngx_http_request_t        *request;
    ngx_pty_session_t         *session;
    ngx_pty_api_reader_t      *reader;     /* write and start */
    ngx_pty_listener_t         listener;
    ngx_event_t                timer;
    ngx_event_t                wake;
    ngx_pty_api_check_pt       check;
    ngx_pty_api_answer_pt      answer;
    ngx_str_t                  wait_for;
    ngx_msec_t                 timeout;
    ngx_msec_t                 deadline;
    ngx_msec_t                 quiet;      /* 0: no settle */
    ngx_msec_t                 last_output;
    uint64_t                   seen;       /* scroll head at the last look */
    size_t                     page;
    size_t                     scanned;    /* stable text searched already */

    unsigned                   attached:1;
    unsigned                   claimed:1;  /* holds sh->api_busy */
    unsigned                   matched:1;
    unsigned                   timed_out:1;
    unsigned                   output:1;
    unsigned                   start:1;    /* start's answer */
};


typedef ngx_int_t (*ngx_pty_api_call_pt)(ngx_http_request_t *r, json_t *req);

typedef struct {
    ngx_str_t                  name;
    ngx_pty_api_call_pt        handler;
} ngx_pty_api_call_t;


static void ngx_pty_api_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_pty_api_body(ngx_http_request_t *r, ngx_buf_t **bp);
static ngx_int_t ngx_pty_api_start(ngx_http_request_t *r, json_t *req);
static ngx_int_t ngx_pty_api_start_command(ngx_http_request_t *r,
    json_t *req, ngx_str_t *command);
static ngx_int_t ngx_pty_api_too_large(ngx_http_request_t *r,
    ngx_uint_t cols, ngx_uint_t rows);
static ngx_int_t ngx_pty_api_start_wait(ngx_http_request_t *r,
    ngx_pty_session_t *s, ngx_msec_t timeout, ngx_str_t *wait_for);
static ngx_int_t ngx_pty_api_write(ngx_http_request_t *r, json_t *req);
static ngx_int_t ngx_pty_api_write_input(ngx_http_request_t *r,
    ngx_pty_session_t *s, ngx_str_t *input, ngx_uint_t submit);
static ngx_int_t ngx_pty_api_kill(ngx_http_request_t *r, json_t *req);
static ngx_int_t ngx_pty_api_list(ngx_http_request_t *r, json_t *req);
static ngx_int_t ngx_pty_api_read(ngx_http_request_t *r, json_t *req);
static ngx_int_t ngx_pty_api_stat(ngx_http_request_t *r, json_t *req);
static ngx_int_t ngx_pty_api_revoke(ngx_http_request_t *r, json_t *req);
static void ngx_pty_api_audit(ngx_http_request_t *r,
    ngx_pty_session_sh_t *sh, const char *event, ngx_str_t *command);

static ngx_int_t ngx_pty_api_policy(ngx_http_request_t *r,
    ngx_str_t *command, ngx_uint_t fixed, ngx_pty_start_t *st);
static ngx_int_t ngx_pty_api_limits(ngx_http_request_t *r, uint32_t tag);
static uint32_t ngx_pty_api_loc_tag(ngx_http_request_t *r);

static ngx_int_t ngx_pty_api_session(ngx_http_request_t *r, json_t *req,
    ngx_uint_t scope, ngx_pty_session_t **sp);
static ngx_pty_api_reader_t *ngx_pty_api_reader(ngx_pty_session_t *s);
static void ngx_pty_api_reader_cleanup(void *data);
static ngx_int_t ngx_pty_api_claim(ngx_pty_api_reader_t *rd,
    ngx_pty_session_sh_t *sh);
static void ngx_pty_api_unclaim(ngx_pty_session_sh_t *sh);
static void ngx_pty_api_sync(ngx_pty_api_reader_t *rd,
    ngx_pty_session_sh_t *sh);
static void ngx_pty_api_pull(ngx_pty_api_reader_t *rd,
    ngx_pty_session_sh_t *sh, size_t page);
static ngx_int_t ngx_pty_api_deliver(ngx_pty_api_reader_t *rd,
    ngx_pty_session_sh_t *sh, size_t page, const char *key, json_t *o);

static ngx_pty_api_wait_t *ngx_pty_api_wait_create(ngx_http_request_t *r,
    ngx_pty_session_t *s, ngx_msec_t timeout, ngx_str_t *wait_for,
    ngx_pty_api_check_pt check, ngx_pty_api_answer_pt answer);
static ngx_int_t ngx_pty_api_wait(ngx_pty_api_wait_t *w);
static void ngx_pty_api_wait_notify(ngx_pty_listener_t *l);
static void ngx_pty_api_wait_shutdown(ngx_pty_listener_t *l);
static void ngx_pty_api_wait_wake(ngx_event_t *ev);
static void ngx_pty_api_wait_timer(ngx_event_t *ev);
static void ngx_pty_api_wait_finish(ngx_pty_api_wait_t *w);
static void ngx_pty_api_wait_detach(ngx_pty_api_wait_t *w);
static void ngx_pty_api_wait_release(ngx_pty_api_wait_t *w);
static void ngx_pty_api_wait_cleanup(void *data);

static ngx_int_t ngx_pty_api_text_check(ngx_pty_api_wait_t *w);
static ngx_int_t ngx_pty_api_text_answer(ngx_pty_api_wait_t *w);
static ngx_int_t ngx_pty_api_closed_check(ngx_pty_api_wait_t *w);
static ngx_int_t ngx_pty_api_describe_answer(ngx_pty_api_wait_t *w);
static ngx_int_t ngx_pty_api_screen_check(ngx_pty_api_wait_t *w);
static ngx_int_t ngx_pty_api_screen_answer(ngx_pty_api_wait_t *w);

static json_t *ngx_pty_api_head(ngx_pty_session_sh_t *sh);
static void ngx_pty_api_status(json_t *o, ngx_pty_session_sh_t *sh);
static void ngx_pty_api_matched(ngx_pty_api_wait_t *w, json_t *o);
static json_t *ngx_pty_api_describe(ngx_http_request_t *r,
    ngx_pty_session_sh_t *sh);


static ngx_pty_api_call_t  ngx_pty_api_calls[] = {
    { ngx_string("start"), ngx_pty_api_start },
    { ngx_string("write"), ngx_pty_api_write },
    { ngx_string("kill"), ngx_pty_api_kill },
    { ngx_string("list"), ngx_pty_api_list },
    { ngx_string("read"), ngx_pty_api_read },
    { ngx_string("status"), ngx_pty_api_stat },
    { ngx_string("revoke"), ngx_pty_api_revoke },
    { ngx_string("history"), ngx_pty_history_call },
    { ngx_string("transcript"), ngx_pty_transcript_call },
    { ngx_null_string, NULL }
};


#define ngx_pty_api_bad(r, code, msg)                                         \
    ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, code, msg)

#define ngx_pty_api_is_closed(sh)  ((sh)->state >= NGX_PTY_STATE_CLOSED)


static ngx_pty_api_call_t *
ngx_pty_api_find_call(ngx_http_request_t *r)
{
    u_char              *p, *last;
    ngx_str_t            name;
    ngx_pty_api_call_t  *call;

    last = r->uri.data + r->uri.len;
    p = last;

    while (p > r->uri.data && p[-1] != '/') {
        p--;
    }

    name.data = p;
    name.len = last - p;

    for (call = ngx_pty_api_calls; call->handler; call++) {
        if (call->name.len == name.len
            && ngx_strncmp(call->name.data, name.data, name.len) == 0)
        {
            return call;
        }
    }

    return NULL;
}


ngx_int_t
ngx_pty_api_handler(ngx_http_request_t *r)
{
    ngx_int_t            rc;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    ngx_pty_http_log_hide(r);

    if (ngx_pty_shm_zone() == NULL) {
        return ngx_pty_api_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 "no_zone", "no pty_zone is configured");
    }

    if (ngx_pty_ext_requested(r)) {
        /* pty-extensions/v1 rides on pty-ws/v1 only (its section 3) */
        return ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST,
                                 "UnsupportedExtension",
                                 "pty-extensions/v1 is only available on "
                                 "the pty-ws/v1 WebSocket binding");
    }

    if (ngx_pty_api_find_call(r) == NULL) {
        return ngx_pty_api_error(r, NGX_HTTP_NOT_FOUND, "unknown_call",
                                 "calls are start, write, kill, list, read, "
                                 "status, revoke, history, transcript");
    }

    if (ngx_pty_auth_token_in_query(r)) {
        return ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "token_in_query",
                                 "tokens must not ride in the URL: send "
                                 "Authorization: Bearer");
    }

    /* who calls, before a byte of the body is read */
    rc = ngx_pty_auth_check(r, NULL, 0);
    if (rc != NGX_OK) {
        return ngx_pty_auth_api_refuse(r, rc);
    }

    if (r->method != NGX_HTTP_POST) {
        return ngx_pty_api_error(r, NGX_HTTP_NOT_ALLOWED, "method",
                                 "calls are POSTs of a JSON object");
    }

    if (r->headers_in.content_length_n > (off_t) plcf->api_max_body) {
        return ngx_pty_api_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                 "too_large", "request body too large "
                                 "(pty_api_max_body)");
    }

    r->request_body_in_single_buf = 1;

    rc = ngx_http_read_client_request_body(r, ngx_pty_api_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


static void
ngx_pty_api_body_handler(ngx_http_request_t *r)
{
    json_t              *req;
    ngx_int_t            rc;
    ngx_buf_t           *b;
    json_error_t         err;
    ngx_pty_api_call_t  *call;
    u_char               msg[256];

    call = ngx_pty_api_find_call(r);

    if (ngx_pty_api_body(r, &b) != NGX_OK) {
        rc = ngx_pty_api_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                               "too_large", "request body larger than "
                               "client_body_buffer_size");
        ngx_http_finalize_request(r, rc);
        return;
    }

    if (b == NULL || b->pos == b->last) {
        /* no body (Content-Length: 0 included) is an empty object */
        req = json_object();

    } else {
        /* JSON_ALLOW_NUL: "\u0000" is a NUL byte like "\\x00" */
        req = json_loadb((char *) b->pos, b->last - b->pos,
                         JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);

        if (req == NULL) {
            ngx_snprintf(msg, sizeof(msg) - 1, "malformed JSON: %s%Z",
                         err.text);
            rc = ngx_pty_api_bad(r, "bad_json", (char *) msg);
            ngx_http_finalize_request(r, rc);
            return;
        }
    }

    if (!json_is_object(req)) {
        json_decref(req);
        rc = ngx_pty_api_bad(r, "bad_json", "the body must be a JSON object");
        ngx_http_finalize_request(r, rc);
        return;
    }

    rc = call->handler(r, req);

    json_decref(req);

    if (rc == NGX_DONE) {
        /* a waiter answers later; it holds the body's request reference */
        return;
    }

    ngx_http_finalize_request(r, rc);
}


/*
 * The body as one buffer (NULL when empty).  It may arrive in two: what
 * came with the header, and the rest; a body spilled to a file is refused.
 */
static ngx_int_t
ngx_pty_api_body(ngx_http_request_t *r, ngx_buf_t **bp)
{
    size_t        len;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    *bp = NULL;

    if (r->request_body == NULL || r->request_body->bufs == NULL) {
        return NGX_OK;
    }

    len = 0;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        if (cl->buf->in_file) {
            return NGX_ERROR;
        }

        len += cl->buf->last - cl->buf->pos;
    }

    if (r->request_body->bufs->next == NULL) {
        *bp = r->request_body->bufs->buf;
        return NGX_OK;
    }

    b = ngx_create_temp_buf(r->pool, len);
    if (b == NULL) {
        return NGX_ERROR;
    }

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b->last = ngx_cpymem(b->last, cl->buf->pos,
                             cl->buf->last - cl->buf->pos);
    }

    *bp = b;

    return NGX_OK;
}


/* request members: absent or null gives the default; a wrong type fails */

static ngx_int_t
ngx_pty_api_uint(json_t *req, const char *name, ngx_uint_t min,
    ngx_uint_t max, ngx_uint_t def, ngx_uint_t *v)
{
    json_t  *j;

    j = json_object_get(req, name);

    if (j == NULL || json_is_null(j)) {
        *v = def;
        return NGX_OK;
    }

    if (!json_is_integer(j) || json_integer_value(j) < (json_int_t) min
        || json_integer_value(j) > (json_int_t) max)
    {
        return NGX_ERROR;
    }

    *v = (ngx_uint_t) json_integer_value(j);

    return NGX_OK;
}


static ngx_int_t
ngx_pty_api_string(json_t *req, const char *name, ngx_str_t *v)
{
    json_t  *j;

    j = json_object_get(req, name);

    if (j == NULL || json_is_null(j)) {
        ngx_str_null(v);
        return NGX_OK;
    }

    if (!json_is_string(j)) {
        return NGX_ERROR;
    }

    v->data = (u_char *) json_string_value(j);
    v->len = json_string_length(j);

    return NGX_OK;
}


static ngx_int_t
ngx_pty_api_bool(json_t *req, const char *name, ngx_uint_t *v)
{
    json_t  *j;

    j = json_object_get(req, name);

    if (j == NULL || json_is_null(j)) {
        *v = 0;
        return NGX_OK;
    }

    if (!json_is_boolean(j)) {
        return NGX_ERROR;
    }

    *v = json_is_true(j);

    return NGX_OK;
}


/*
 * wait_for and wait_ms, shared by the calls that wait: with wait_for the
 * call waits up to wait_ms (default pty_api_wait_for) for it; without, a
 * call waits wait_ms (default def).  Both are capped by pty_api_wait_max.
 * Returns NULL, or the message of a 400 whose code is set in *code.
 */
static const char *
ngx_pty_api_wait_args(ngx_http_request_t *r, json_t *req, ngx_msec_t def,
    ngx_str_t *wait_for, ngx_msec_t *timeout, const char **code)
{
    u_char              *p;
    ngx_uint_t           ms;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);
    *code = "bad_request";

    if (ngx_pty_api_string(req, "wait_for", wait_for) != NGX_OK) {
        return "\"wait_for\" must be a string";
    }

    if (wait_for->len > 4096) {
        return "\"wait_for\" is longer than 4096 bytes";
    }

    if (wait_for->len) {
        /* the request's JSON is gone before the wait ends */
        p = ngx_pnalloc(r->pool, wait_for->len);
        if (p == NULL) {
            *code = "no_memory";
            return "out of memory";
        }

        ngx_memcpy(p, wait_for->data, wait_for->len);
        wait_for->data = p;
        def = plcf->api_wait_for;
    }

    if (ngx_pty_api_uint(req, "wait_ms", 0, NGX_MAX_INT32_VALUE, def, &ms)
        != NGX_OK)
    {
        return "\"wait_ms\" must be a non-negative integer";
    }

    if (ms > plcf->api_wait_max) {
        *code = "wait_too_long";
        return "\"wait_ms\" is above the limit (pty_api_wait_max)";
    }

    *timeout = ms;

    return NULL;
}


static ngx_int_t
ngx_pty_api_start(ngx_http_request_t *r, json_t *req)
{
    uint32_t              tag;
    ngx_int_t             rc;
    ngx_str_t             command, wait_for;
    ngx_msec_t            timeout;
    const char           *code, *msg;
    ngx_pty_start_t       st;
    ngx_pty_session_t    *s;
    ngx_pty_loc_conf_t   *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    rc = ngx_pty_auth_check(r, NULL, NGX_PTY_SCOPE_START);
    if (rc != NGX_OK) {
        return ngx_pty_auth_api_refuse(r, rc);
    }

    rc = ngx_pty_api_start_command(r, req, &command);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    ngx_memzero(&st, sizeof(ngx_pty_start_t));
    st.command = command.data;
    st.command_len = command.len;
    st.conf = plcf;

    /* the starter owns it, in every location and worker */
    if (ngx_pty_auth_acl(r, &st.acl) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ngx_pty_api_uint(req, "cols", 1, NGX_PTY_MAX_SIZE, plcf->api_cols,
                         &st.cols) != NGX_OK
        || ngx_pty_api_uint(req, "rows", 1, NGX_PTY_MAX_SIZE, plcf->api_rows,
                            &st.rows) != NGX_OK)
    {
        return ngx_pty_api_bad(r, "bad_size", "\"cols\" and \"rows\" are "
                               "integers in 1..1024");
    }

    if (st.cols * st.rows > plcf->max_cells) {
        return ngx_pty_api_too_large(r, st.cols, st.rows);
    }

    msg = ngx_pty_api_wait_args(r, req, NGX_PTY_API_START_WAIT, &wait_for,
                                &timeout, &code);
    if (msg) {
        return ngx_pty_api_bad(r, code, msg);
    }

    rc = ngx_pty_api_policy(r, &command, plcf->command.len != 0, &st);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    tag = ngx_pty_api_loc_tag(r);

    rc = ngx_pty_api_limits(r, tag);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    s = ngx_pty_session_start(&st, ngx_cycle->log);
    if (s == NULL) {
        return ngx_pty_api_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                 "zone_full", "no room for another session "
                                 "in the shared zone");
    }

    s->sh->loc_tag = tag;

    ngx_pty_api_audit(r, s->sh, "session_start", &command);

    return ngx_pty_api_start_wait(r, s, timeout, &wait_for);
}


/* every worker's screen model of the session costs cols x rows cells */
static ngx_int_t
ngx_pty_api_too_large(ngx_http_request_t *r, ngx_uint_t cols,
    ngx_uint_t rows)
{
    u_char              *msg;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    msg = ngx_pnalloc(r->pool, 128);
    if (msg == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_sprintf(msg, "\"cols\" x \"rows\" (%uix%ui = %ui cells) is above "
                "the limit of %ui cells (pty_max_cells)%Z",
                cols, rows, cols * rows, plcf->max_cells);

    return ngx_pty_api_bad(r, "size_too_large", (char *) msg);
}


/*
 * start's "command", or the location's pty_command.  NGX_DECLINED to go
 * on; otherwise an error was sent and this is its code.
 */
static ngx_int_t
ngx_pty_api_start_command(ngx_http_request_t *r, json_t *req,
    ngx_str_t *command)
{
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    if (ngx_pty_api_string(req, "command", command) != NGX_OK) {
        return ngx_pty_api_bad(r, "bad_request",
                               "\"command\" must be a string");
    }

    if (plcf->command.len) {
        /* pty_command: this location runs that and nothing else */
        if (command->len
            && (command->len != plcf->command.len
                || ngx_strncmp(command->data, plcf->command.data,
                               command->len) != 0))
        {
            return ngx_pty_api_error(r, NGX_HTTP_FORBIDDEN, "command_fixed",
                                     "this location runs only its "
                                     "pty_command; omit \"command\"");
        }

        *command = plcf->command;
    }

    if (command->len == 0) {
        return ngx_pty_api_bad(r, "bad_request",
                               "\"command\" must be a non-empty string");
    }

    if (ngx_strlen(command->data) != command->len) {
        return ngx_pty_api_bad(r, "bad_request",
                               "\"command\" must not contain NUL");
    }

    return NGX_DECLINED;
}


/* a new session's start waits for its initial screen */
static ngx_int_t
ngx_pty_api_start_wait(ngx_http_request_t *r, ngx_pty_session_t *s,
    ngx_msec_t timeout, ngx_str_t *wait_for)
{
    ngx_pty_api_wait_t  *w;

    w = ngx_pty_api_wait_create(r, s, timeout, wait_for,
                                ngx_pty_api_text_check,
                                ngx_pty_api_text_answer);
    if (w == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    w->reader = ngx_pty_api_reader(s);
    if (w->reader == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* a new session: nobody else can be reading it yet */
    (void) ngx_pty_api_claim(w->reader, s->sh);
    w->claimed = 1;

    /* the initial screen: settled once output pauses, or on wait_for */
    w->quiet = wait_for->len ? 0 : NGX_PTY_API_QUIET;
    w->start = 1;

    return ngx_pty_api_wait(w);
}


static ngx_int_t
ngx_pty_api_write(ngx_http_request_t *r, json_t *req)
{
    ngx_int_t              rc;
    ngx_str_t              input, wait_for;
    ngx_uint_t             submit, cursor;
    ngx_msec_t             timeout;
    const char            *code, *msg;
    ngx_pty_session_t     *s;
    ngx_pty_api_wait_t    *w;
    ngx_pty_loc_conf_t    *plcf;
    ngx_pty_api_reader_t  *rd;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    if (ngx_pty_api_string(req, "input", &input) != NGX_OK) {
        return ngx_pty_api_bad(r, "bad_request",
                               "\"input\" must be a string");
    }

    if (ngx_pty_api_bool(req, "submit", &submit) != NGX_OK) {
        return ngx_pty_api_bad(r, "bad_request",
                               "\"submit\" must be a boolean");
    }

    if (ngx_pty_api_uint(req, "cursor", 0, NGX_MAX_INT_T_VALUE,
                         NGX_CONF_UNSET_UINT, &cursor) != NGX_OK)
    {
        return ngx_pty_api_bad(r, "bad_request", "\"cursor\" must be a "
                               "non-negative integer");
    }

    msg = ngx_pty_api_wait_args(r, req, plcf->api_wait, &wait_for, &timeout,
                                &code);
    if (msg) {
        return ngx_pty_api_bad(r, code, msg);
    }

    if (input.len + 1 > plcf->input_max) {
        return ngx_pty_api_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                 "input_too_large", "\"input\" is longer "
                                 "than the limit (pty_input_max)");
    }

    rc = ngx_pty_api_session(r, req, NGX_PTY_SCOPE_CONTROL, &s);
    if (s == NULL) {
        return rc;
    }

    rd = ngx_pty_api_reader(s);
    if (rd == NULL) {
        ngx_pty_session_put(s);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ngx_pty_api_claim(rd, s->sh) != NGX_OK) {
        ngx_pty_session_put(s);
        return ngx_pty_api_error(r, NGX_HTTP_CONFLICT, "busy",
                                 "another call is waiting on this session");
    }

    if (cursor != NGX_CONF_UNSET_UINT && cursor != s->sh->api_delivered) {
        ngx_pty_api_unclaim(s->sh);
        ngx_pty_session_put(s);
        return ngx_pty_api_error(r, NGX_HTTP_CONFLICT, "cursor_mismatch",
                                 "\"cursor\" is not where this session's "
                                 "output was last read up to");
    }

    rc = ngx_pty_api_write_input(r, s, &input, submit);

    if (input.len || submit) {
        ngx_pty_audit(ngx_pty_auth_ident(r), r->connection, "write",
                      "\"bytes\":%uz,\"accepted\":%s", input.len + submit,
                      rc == NGX_DECLINED ? "true" : "false");
    }

    if (rc != NGX_DECLINED) {
        ngx_pty_api_unclaim(s->sh);
        ngx_pty_session_put(s);
        return rc;
    }

    w = ngx_pty_api_wait_create(r, s, timeout, &wait_for,
                                ngx_pty_api_text_check,
                                ngx_pty_api_text_answer);
    if (w == NULL) {
        ngx_pty_api_unclaim(s->sh);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    w->reader = rd;
    w->claimed = 1;

    return ngx_pty_api_wait(w);
}


/*
 * The input of a write, decoded, to the terminal (or its owner's inbox).
 * NGX_DECLINED to go on; otherwise an error was sent and this is its code.
 */
static ngx_int_t
ngx_pty_api_write_input(ngx_http_request_t *r, ngx_pty_session_t *s,
    ngx_str_t *input, ngx_uint_t submit)
{
    u_char     *buf;
    size_t      len;
    ngx_int_t   rc;

    buf = ngx_pnalloc(r->pool, input->len + 1);
    if (buf == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = ngx_pty_escape_decode(buf, input->data, input->len);

    if (submit) {
        buf[len++] = '\r';
    }

    if (len == 0) {
        return NGX_DECLINED;
    }

    if (ngx_pty_api_is_closed(s->sh) || s->closed) {
        return ngx_pty_api_error(r, NGX_HTTP_CONFLICT, "session_closed",
                                 "the program has exited; write with "
                                 "no input to read what is left");
    }

    rc = ngx_pty_session_input(s, buf, len);

    if (rc == NGX_DECLINED) {
        return ngx_pty_api_error(r, NGX_HTTP_CONFLICT, "not_running",
                                 "the terminal is not open yet");
    }

    if (rc != NGX_OK) {
        return ngx_pty_api_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                 "input_failed", "the terminal did not "
                                 "take the input");
    }

    return NGX_DECLINED;
}


static ngx_int_t
ngx_pty_api_kill(ngx_http_request_t *r, json_t *req)
{
    ngx_int_t              rc;
    ngx_pty_session_t     *s;
    ngx_pty_api_wait_t    *w;
    ngx_pty_session_sh_t  *sh;

    rc = ngx_pty_api_session(r, req, NGX_PTY_SCOPE_KILL, &s);
    if (s == NULL) {
        return rc;
    }

    sh = s->sh;

    if (!ngx_pty_api_is_closed(sh)) {
        ngx_pty_api_audit(r, sh, "session_kill", NULL);
        (void) ngx_pty_session_kill(s, NGX_PTY_CLOSED_KILLED);
    }

    /* answer once Closed is out, so the exit code is in the answer */
    w = ngx_pty_api_wait_create(r, s, NGX_PTY_API_KILL_WAIT, NULL,
                                ngx_pty_api_closed_check,
                                ngx_pty_api_describe_answer);
    if (w == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_pty_api_wait(w);
}


static ngx_int_t
ngx_pty_api_read(ngx_http_request_t *r, json_t *req)
{
    ngx_int_t            rc;
    ngx_str_t            wait_for;
    ngx_msec_t           timeout;
    const char          *code, *msg;
    ngx_pty_session_t   *s;
    ngx_pty_api_wait_t  *w;

    msg = ngx_pty_api_wait_args(r, req, 0, &wait_for, &timeout, &code);
    if (msg) {
        return ngx_pty_api_bad(r, code, msg);
    }

    rc = ngx_pty_api_session(r, req, NGX_PTY_SCOPE_OBSERVE, &s);
    if (s == NULL) {
        return rc;
    }

    w = ngx_pty_api_wait_create(r, s, timeout, &wait_for,
                                ngx_pty_api_screen_check,
                                ngx_pty_api_screen_answer);
    if (w == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_pty_api_wait(w);
}


static ngx_int_t
ngx_pty_api_list(ngx_http_request_t *r, json_t *req)
{
    json_t                *list;
    ngx_int_t              rc;
    ngx_queue_t           *q;
    ngx_pty_zone_t        *zone;
    ngx_pty_ident_t       *id;
    ngx_pty_session_sh_t  *sh;

    (void) req;

    rc = ngx_pty_auth_check(r, NULL, NGX_PTY_SCOPE_OBSERVE);
    if (rc != NGX_OK) {
        return ngx_pty_auth_api_refuse(r, rc);
    }

    id = ngx_pty_auth_ident(r);
    zone = ngx_pty_shm_zone();
    list = json_array();

    if (list == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_shmtx_lock(&zone->shpool->mutex);

    for (q = ngx_queue_head(&zone->sh->sessions);
         q != ngx_queue_sentinel(&zone->sh->sessions);
         q = ngx_queue_next(q))
    {
        sh = ngx_queue_data(q, ngx_pty_session_sh_t, queue);

        /* only what the principal may see: not even that it exists */
        if (ngx_pty_auth_right(id, sh) != NGX_PTY_RIGHT_NONE) {
            json_array_append_new(list, ngx_pty_api_describe(r, sh));
        }
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return ngx_pty_api_send(r, NGX_HTTP_OK,
                            json_pack("{s:o}", "sessions", list));
}


/* the zone's fill and this worker's part: what an operator sizes by */
static ngx_int_t
ngx_pty_api_stat(ngx_http_request_t *r, json_t *req)
{
    ngx_int_t                rc;
    ngx_pty_shm_stat_t       zs;
    ngx_pty_sessions_stat_t  ws;

    (void) req;

    rc = ngx_pty_auth_check(r, NULL, NGX_PTY_SCOPE_OBSERVE);
    if (rc != NGX_OK) {
        return ngx_pty_auth_api_refuse(r, rc);
    }

    ngx_pty_shm_stat(&zs);
    ngx_pty_sessions_stat(&ws);

    return ngx_pty_api_send(r, NGX_HTTP_OK,
        json_pack("{s:{s:I, s:I, s:I}, s:{s:I, s:I},"
                  " s:{s:I, s:I, s:I, s:I, s:I},"
                  " s:{s:i, s:I, s:I, s:I}}",
                  "zone",
                  "size", (json_int_t) zs.size,
                  "used", (json_int_t) zs.used,
                  "free", (json_int_t) (zs.size - zs.used),
                  "sessions",
                  "total", (json_int_t) zs.sessions,
                  "running", (json_int_t) zs.running,
                  "buffers",
                  "ring", (json_int_t) zs.ring,
                  "ring_used", (json_int_t) zs.ring_used,
                  "scrollback", (json_int_t) zs.scroll,
                  "scrollback_used", (json_int_t) zs.scroll_used,
                  "inbox", (json_int_t) zs.inbox,
                  "worker",
                  "pid", (int) ngx_pid,
                  "sessions", (json_int_t) ws.views,
                  "owned", (json_int_t) ws.owned,
                  "screen_bytes", (json_int_t) ws.screens));
}


/*
 * pty:admin: every live connection of a principal ends now (auth ran at
 * its upgrade and will not run again on its own).
 */
static ngx_int_t
ngx_pty_api_revoke(ngx_http_request_t *r, json_t *req)
{
    u_char      esc[NGX_PTY_PRINCIPAL_MAX * 6 + 1];
    ngx_int_t   rc;
    ngx_str_t   principal;
    ngx_uint_t  n;

    rc = ngx_pty_auth_check(r, NULL, NGX_PTY_SCOPE_ADMIN);
    if (rc != NGX_OK) {
        return ngx_pty_auth_api_refuse(r, rc);
    }

    if (ngx_pty_api_string(req, "principal", &principal) != NGX_OK
        || principal.len == 0 || principal.len > NGX_PTY_PRINCIPAL_MAX)
    {
        return ngx_pty_api_bad(r, "bad_request", "\"principal\" must be a "
                               "string of 1 to 255 bytes");
    }

    if (ngx_pty_auth_revoke(&principal, r->connection->log, &n) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_pty_audit(ngx_pty_auth_ident(r), r->connection, "revoke",
                  "\"revoked\":\"%s\",\"connections\":%ui",
                  ngx_pty_audit_escape(esc, sizeof(esc), principal.data,
                                       principal.len), n);

    return ngx_pty_api_send(r, NGX_HTTP_OK,
                            json_pack("{s:s%, s:I}", "principal",
                                      principal.data, principal.len,
                                      "connections", (json_int_t) n));
}


/* a state change through the API, with the session and its command */
static void
ngx_pty_api_audit(ngx_http_request_t *r, ngx_pty_session_sh_t *sh,
    const char *event, ngx_str_t *command)
{
    u_char            esc[1024];
    ngx_pty_ident_t  *id;

    if (!ngx_pty_audit_on()) {
        return;
    }

    id = ngx_pty_auth_ident(r);
    if (id == NULL) {
        return;
    }

    ngx_pty_auth_touch(id, sh);

    if (command == NULL) {
        ngx_pty_audit(id, r->connection, event, NULL);
        return;
    }

    ngx_pty_audit(id, r->connection, event, "\"command\":\"%s\"",
                  ngx_pty_audit_escape(esc, sizeof(esc), command->data,
                                       command->len));
}


/*
 * Command policy (ngx_pty_policy.c): NGX_DECLINED to go on, with the words
 * to run in st when the location has pty_allow; otherwise the 403 is sent
 * and its code returned.
 */
static ngx_int_t
ngx_pty_api_policy(ngx_http_request_t *r, ngx_str_t *command,
    ngx_uint_t fixed, ngx_pty_start_t *st)
{
    size_t               n;
    ngx_int_t            rc;
    ngx_pty_policy_t     pol;
    ngx_pty_loc_conf_t  *plcf;
    u_char               cmd[NGX_PTY_LOG_STR];

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    rc = ngx_pty_policy_decide(plcf, r->pool, command, fixed, &pol);

    if (rc == NGX_ERROR) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (rc == NGX_OK) {
        st->argv = pol.argv;
        st->path = pol.path;
        return NGX_DECLINED;
    }

    n = ngx_pty_log_escape(cmd, sizeof(cmd), command->data, command->len);

    ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                  "pty: start of \"%*s\" refused: %s", n, cmd, pol.reason);

    return ngx_pty_api_error(r, NGX_HTTP_FORBIDDEN, pol.code,
                             (char *) pol.reason);
}


/* the caps on live sessions; NGX_DECLINED to go on, else the 429 sent */
static ngx_int_t
ngx_pty_api_limits(ngx_http_request_t *r, uint32_t tag)
{
    ngx_uint_t             here, all;
    ngx_queue_t           *q;
    ngx_pty_zone_t        *zone;
    ngx_pty_loc_conf_t    *plcf;
    ngx_pty_main_conf_t   *pmcf;
    ngx_pty_session_sh_t  *sh;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);
    pmcf = ngx_http_get_module_main_conf(r, ngx_pty_module);

    if (plcf->max_sessions == 0 && pmcf->zone_max_sessions == 0) {
        return NGX_DECLINED;
    }

    zone = ngx_pty_shm_zone();
    here = 0;
    all = 0;

    ngx_shmtx_lock(&zone->shpool->mutex);

    for (q = ngx_queue_head(&zone->sh->sessions);
         q != ngx_queue_sentinel(&zone->sh->sessions);
         q = ngx_queue_next(q))
    {
        sh = ngx_queue_data(q, ngx_pty_session_sh_t, queue);

        if (sh->state < NGX_PTY_STATE_CLOSED) {
            all++;
            here += (sh->loc_tag == tag);
        }
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (plcf->max_sessions && here >= plcf->max_sessions) {
        return ngx_pty_api_error(r, NGX_HTTP_TOO_MANY_REQUESTS,
                                 "too_many_sessions", "this location's "
                                 "sessions are at the limit "
                                 "(pty_max_sessions)");
    }

    if (pmcf->zone_max_sessions && all >= pmcf->zone_max_sessions) {
        return ngx_pty_api_error(r, NGX_HTTP_TOO_MANY_REQUESTS,
                                 "too_many_sessions", "the zone's sessions "
                                 "are at the limit (pty_zone_max_sessions)");
    }

    return NGX_DECLINED;
}


/* which location started a session: its name survives reloads */
static uint32_t
ngx_pty_api_loc_tag(ngx_http_request_t *r)
{
    uint32_t                   tag;
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    tag = ngx_crc32_short(clcf->name.data, clcf->name.len);

    return tag ? tag : 1;
}


/*
 * The session named by "id" (pty-N or the UUID), as this worker's view.
 * On failure *sp is NULL and the error sent is returned.
 */
static ngx_int_t
ngx_pty_api_session(ngx_http_request_t *r, json_t *req, ngx_uint_t scope,
    ngx_pty_session_t **sp)
{
    ngx_int_t              rc;
    ngx_str_t              name;
    ngx_pty_session_t     *s;
    ngx_pty_session_sh_t  *sh;

    *sp = NULL;

    if (ngx_pty_api_string(req, "id", &name) != NGX_OK || name.len == 0) {
        return ngx_pty_api_bad(r, "bad_request",
                               "\"id\" must be a session name or id");
    }

    sh = ngx_pty_shm_session_find(&name);
    if (sh == NULL) {
        return ngx_pty_auth_api_refuse(r, NGX_HTTP_NOT_FOUND);
    }

    /* one the principal may not see is answered as one that is not */
    rc = ngx_pty_auth_check(r, sh, scope);
    if (rc != NGX_OK) {
        ngx_pty_shm_session_release(sh);
        return ngx_pty_auth_api_refuse(r, rc);
    }

    s = ngx_pty_session_get(sh);
    ngx_pty_shm_session_release(sh);

    if (s == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    *sp = s;

    return NGX_OK;
}


static ngx_pty_api_reader_t *
ngx_pty_api_reader(ngx_pty_session_t *s)
{
    ngx_pool_cleanup_t    *cln;
    ngx_pty_api_reader_t  *rd;

    if (s->api) {
        return s->api;
    }

    rd = ngx_pcalloc(s->pool, sizeof(ngx_pty_api_reader_t));
    if (rd == NULL) {
        return NULL;
    }

    cln = ngx_pool_cleanup_add(s->pool, 0);
    if (cln == NULL) {
        return NULL;
    }

    rd->text = ngx_pty_text_create(0);
    if (rd->text == NULL) {
        ngx_log_error(NGX_LOG_ERR, s->log, 0,
                      "pty: no memory for the settled text of pty-%ui",
                      s->sh->name);
        return NULL;
    }

    cln->handler = ngx_pty_api_reader_cleanup;
    cln->data = rd;
    s->api = rd;

    return rd;
}


static void
ngx_pty_api_reader_cleanup(void *data)
{
    ngx_pty_api_reader_t  *rd = data;

    ngx_pty_text_destroy(rd->text);
}


/*
 * The session's reader is used by one call at a time, in any worker:
 * NGX_BUSY when another call holds it.  A holder that died (a killed
 * worker) does not hold it.  Then this worker's converter is made the
 * current one.
 */
static ngx_int_t
ngx_pty_api_claim(ngx_pty_api_reader_t *rd, ngx_pty_session_sh_t *sh)
{
    ngx_atomic_uint_t  pid;

    if (rd->busy) {
        return NGX_BUSY;
    }

    for ( ;; ) {
        pid = sh->api_busy;

        if (pid == (ngx_atomic_uint_t) ngx_pid) {
            /* ours, and no call here waits: one left without letting go */
            break;
        }

        if (pid != 0 && ngx_pty_pid_alive((ngx_pid_t) pid)) {
            return NGX_BUSY;
        }

        if (ngx_atomic_cmp_set(&sh->api_busy, pid, ngx_pid)) {
            break;
        }
    }

    ngx_pty_api_sync(rd, sh);

    return NGX_OK;
}


static void
ngx_pty_api_unclaim(ngx_pty_session_sh_t *sh)
{
    (void) ngx_atomic_cmp_set(&sh->api_busy, ngx_pid, 0);
}


/*
 * Another worker read last (or this view is new): the converter is
 * rebuilt from the start of the unfinished line, up to where the last
 * reader fed.  All of that was taken already (a call takes all it fed),
 * so what it gives now is dropped: the next take continues the stream
 * as the last reader's converter would have.
 */
static void
ngx_pty_api_sync(ngx_pty_api_reader_t *rd, ngx_pty_session_sh_t *sh)
{
    u_char               buf[NGX_PTY_API_CHUNK];
    size_t               n;
    uint64_t             off, missed;
    ngx_pty_text_view_t  v;

    if (sh->api_reader == ngx_pid && rd->epoch == sh->api_epoch) {
        return;
    }

    ngx_pty_text_reset(rd->text);

    off = sh->api_line;

    while (off < sh->api_cursor) {
        ngx_pty_shm_lock(sh);
        n = ngx_pty_scroll_read(sh->scroll, &off, buf,
                                ngx_min(sizeof(buf), sh->api_cursor - off),
                                &missed);
        ngx_pty_shm_unlock(sh);

        if (n == 0 || ngx_pty_text_feed(rd->text, buf, n) != 0) {
            break;
        }
    }

    (void) ngx_pty_text_take(rd->text, &v);

    sh->api_reader = ngx_pid;
    rd->epoch = ngx_atomic_fetch_add(&sh->api_epoch, 1) + 1;
}


/*
 * Feeds raw output from the API's cursor into the converter until a page
 * of text is waiting or the ring has no more; what is not fed stays in
 * the ring (and may be overwritten there: that is counted as missed).
 * The offset after the last line feed is kept for a rebuild elsewhere.
 */
static void
ngx_pty_api_pull(ngx_pty_api_reader_t *rd, ngx_pty_session_sh_t *sh,
    size_t page)
{
    u_char               buf[NGX_PTY_API_CHUNK], *lf;
    size_t               n;
    uint64_t             missed;
    ngx_pty_text_view_t  v;

    for ( ;; ) {
        if (ngx_pty_text_peek(rd->text, &v) != 0 || v.len >= page) {
            return;
        }

        ngx_pty_shm_lock(sh);

        n = ngx_pty_scroll_read(sh->scroll, &sh->api_cursor, buf,
                                sizeof(buf), &missed);
        sh->api_missed += missed;

        lf = n ? memrchr(buf, '\n', n) : NULL;

        if (lf) {
            sh->api_line = sh->api_cursor - n + (lf - buf) + 1;
        }

        ngx_pty_shm_unlock(sh);

        if (n == 0) {
            return;
        }

        if (ngx_pty_text_feed(rd->text, buf, n) != 0) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                          "pty: no memory for the settled text of pty-%ui",
                          sh->name);
            return;
        }
    }
}


/* text taken but not yet delivered, in the zone for whoever reads next */
static ngx_int_t
ngx_pty_api_spill(ngx_pty_session_sh_t *sh, const u_char *data, size_t len)
{
    u_char          *p;
    size_t           size;
    ngx_pty_zone_t  *zone;

    zone = ngx_pty_shm_zone();

    if (sh->api_spill_len + len > sh->api_spill_size) {
        size = ngx_max(sh->api_spill_size * 2, sh->api_spill_len + len);

        p = ngx_slab_alloc(zone->shpool, size);
        if (p == NULL) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                          "pty: shared zone is full, cannot keep %uz bytes "
                          "of output of pty-%ui for the next read; raise "
                          "the size in \"pty_zone\"", len, sh->name);
            return NGX_ERROR;
        }

        if (sh->api_spill) {
            ngx_memcpy(p, sh->api_spill, sh->api_spill_len);
            ngx_slab_free(zone->shpool, sh->api_spill);
        }

        sh->api_spill = p;
        sh->api_spill_size = size;
    }

    ngx_memcpy(sh->api_spill + sh->api_spill_len, data, len);
    sh->api_spill_len += len;

    return NGX_OK;
}


/*
 * The next page of settled text as o[key], with "missed", "more" and
 * "cursor".  A page ends on a UTF-8 character boundary; the rest of a
 * long take waits in the spill for the next call.
 */
static ngx_int_t
ngx_pty_api_deliver(ngx_pty_api_reader_t *rd, ngx_pty_session_sh_t *sh,
    size_t page, const char *key, json_t *o)
{
    size_t                len;
    const u_char         *data;
    ngx_pty_text_view_t   v;

    if (sh->api_spill_len == 0) {
        if (ngx_pty_text_take(rd->text, &v) != 0) {
            return NGX_ERROR;
        }

        sh->api_missed += v.dropped;
        data = v.data;
        len = v.len;

        if (len > page && ngx_pty_api_spill(sh, data, len) != NGX_OK) {
            /* a full zone: this page is delivered, the rest counts missed */
            for (len = page; len > 0 && (data[len] & 0xc0) == 0x80; len--) {
                /* void */
            }

            sh->api_missed += v.len - len;
        }
    }

    if (sh->api_spill_len) {
        data = sh->api_spill;
        len = ngx_min(sh->api_spill_len, page);

        while (len < sh->api_spill_len && len > 0
               && (data[len] & 0xc0) == 0x80)
        {
            len--;
        }
    }

    if (json_object_set_new(o, key, json_stringn((char *) data, len)) != 0) {
        return NGX_ERROR;
    }

    if (sh->api_spill_len) {
        sh->api_spill_len -= len;
        ngx_memmove(sh->api_spill, sh->api_spill + len, sh->api_spill_len);

        if (sh->api_spill_len == 0) {
            ngx_slab_free(ngx_pty_shm_zone()->shpool, sh->api_spill);
            sh->api_spill = NULL;
            sh->api_spill_size = 0;
        }
    }

    sh->api_delivered += len;

    json_object_set_new(o, "missed",
                        json_integer((json_int_t) sh->api_missed));
    json_object_set_new(o, "more",
                        json_boolean(sh->api_spill_len
                                     || sh->api_cursor < sh->scroll->head));
    json_object_set_new(o, "cursor",
                        json_integer((json_int_t) sh->api_delivered));

    sh->api_missed = 0;

    return NGX_OK;
}


/* waiters */

/* a waiter on s (which it puts when done, or here on failure) */
static ngx_pty_api_wait_t *
ngx_pty_api_wait_create(ngx_http_request_t *r, ngx_pty_session_t *s,
    ngx_msec_t timeout, ngx_str_t *wait_for, ngx_pty_api_check_pt check,
    ngx_pty_api_answer_pt answer)
{
    ngx_pty_api_wait_t  *w;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    w = ngx_pcalloc(r->pool, sizeof(ngx_pty_api_wait_t));
    if (w == NULL) {
        ngx_pty_session_put(s);
        return NULL;
    }

    if (wait_for) {
        w->wait_for = *wait_for;
    }

    w->check = check;
    w->answer = answer;
    w->request = r;
    w->session = s;
    w->page = plcf->api_page_size;
    w->timeout = timeout;
    w->deadline = ngx_current_msec + timeout;
    w->seen = s->sh->scroll->head;

    w->listener.notify = ngx_pty_api_wait_notify;
    w->listener.shutdown = ngx_pty_api_wait_shutdown;
    w->listener.data = w;

    w->timer.handler = ngx_pty_api_wait_timer;
    w->timer.data = w;
    w->timer.log = r->connection->log;

    w->wake.handler = ngx_pty_api_wait_wake;
    w->wake.data = w;
    w->wake.log = r->connection->log;

    return w;
}


static void
ngx_pty_api_wait_arm(ngx_pty_api_wait_t *w)
{
    ngx_msec_t  t;

    t = w->deadline - ngx_current_msec;

    if (w->quiet && w->output) {
        t = ngx_min(t, w->last_output + w->quiet - ngx_current_msec);
    }

    if ((ngx_msec_int_t) t <= 0) {
        t = 1;
    }

    if (w->timer.timer_set) {
        ngx_del_timer(&w->timer);
    }

    ngx_add_timer(&w->timer, t);
}


/* answers at once if it can; else listens and returns NGX_DONE */
static ngx_int_t
ngx_pty_api_wait(ngx_pty_api_wait_t *w)
{
    ngx_int_t            rc;
    ngx_pool_cleanup_t  *cln;
    ngx_http_request_t  *r;

    r = w->request;

    if (w->check(w) == NGX_OK || w->timeout == 0) {
        rc = w->answer(w);

        if (w->claimed) {
            w->claimed = 0;
            ngx_pty_api_unclaim(w->session->sh);
        }

        ngx_pty_session_put(w->session);
        return rc;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        ngx_pty_session_put(w->session);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_pty_api_wait_cleanup;
    cln->data = w;

    ngx_pty_session_listen(w->session, &w->listener);
    w->attached = 1;

    if (w->reader) {
        w->reader->busy = r;
    }

    ngx_pty_api_wait_arm(w);

    /* a client that goes away ends the wait (the cleanup detaches) */
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_request_empty_handler;

    return NGX_DONE;
}


static void
ngx_pty_api_wait_notify(ngx_pty_listener_t *l)
{
    ngx_pty_api_wait_t  *w = l->data;

    /* one look per event loop turn, however many frames came */
    if (!w->wake.posted) {
        ngx_post_event(&w->wake, &ngx_posted_events);
    }
}


static void
ngx_pty_api_wait_wake(ngx_event_t *ev)
{
    uint64_t             head;
    ngx_pty_api_wait_t  *w;

    w = ev->data;
    head = w->session->sh->scroll->head;

    if (head != w->seen) {
        w->seen = head;
        w->output = 1;
        w->last_output = ngx_current_msec;

        if (w->quiet) {
            ngx_pty_api_wait_arm(w);
        }
    }

    if (w->check(w) == NGX_OK) {
        ngx_pty_api_wait_finish(w);
    }
}


static void
ngx_pty_api_wait_timer(ngx_event_t *ev)
{
    ngx_pty_api_wait_t  *w;

    w = ev->data;

    if ((ngx_msec_int_t) (w->deadline - ngx_current_msec) <= 0) {
        /* one last look: output may have come with the deadline */
        if (w->check(w) != NGX_OK) {
            w->timed_out = (w->wait_for.len > 0);
        }

        ngx_pty_api_wait_finish(w);
        return;
    }

    if (w->quiet && w->output
        && ngx_current_msec - w->last_output >= w->quiet)
    {
        ngx_pty_api_wait_finish(w);
        return;
    }

    ngx_pty_api_wait_arm(w);
}


static void
ngx_pty_api_wait_finish(ngx_pty_api_wait_t *w)
{
    ngx_int_t            rc;
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = w->request;
    c = r->connection;

    ngx_pty_api_wait_detach(w);

    /* the answer reads the session: it goes before the view may go */
    rc = w->answer(w);

    ngx_pty_api_wait_release(w);

    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}


/* this worker exits: the waiting call gets an error and ends */
static void
ngx_pty_api_wait_shutdown(ngx_pty_listener_t *l)
{
    ngx_int_t            rc;
    ngx_connection_t    *c;
    ngx_http_request_t  *r;
    ngx_pty_api_wait_t  *w;

    w = l->data;
    r = w->request;
    c = r->connection;

    ngx_pty_api_wait_detach(w);
    ngx_pty_api_wait_release(w);

    rc = ngx_pty_api_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "shutting_down",
                           "nginx is stopping this worker");

    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}


static void
ngx_pty_api_wait_detach(ngx_pty_api_wait_t *w)
{
    if (w->timer.timer_set) {
        ngx_del_timer(&w->timer);
    }

    if (w->wake.posted) {
        ngx_delete_posted_event(&w->wake);
    }
}


static void
ngx_pty_api_wait_release(ngx_pty_api_wait_t *w)
{
    if (!w->attached) {
        return;
    }

    w->attached = 0;

    if (w->reader && w->reader->busy == w->request) {
        w->reader->busy = NULL;
    }

    if (w->claimed) {
        w->claimed = 0;
        ngx_pty_api_unclaim(w->session->sh);
    }

    /* may free this worker's view of the session */
    ngx_pty_session_unlisten(w->session, &w->listener);
}


/* the request is freed (answered, or the client went away) */
static void
ngx_pty_api_wait_cleanup(void *data)
{
    ngx_pty_api_wait_t  *w = data;

    ngx_pty_api_wait_detach(w);
    ngx_pty_api_wait_release(w);
}


/* write and start: settled text */

static ngx_uint_t
ngx_pty_api_search(ngx_pty_api_wait_t *w, ngx_pty_text_view_t *v)
{
    size_t  from;

    /* the stable part only grows: rescan just its tail and what follows */
    from = (w->scanned >= w->wait_for.len)
           ? w->scanned - w->wait_for.len + 1 : 0;

    if (from > v->len) {
        from = 0;
    }

    if (memmem(v->data + from, v->len - from, w->wait_for.data,
               w->wait_for.len))
    {
        return 1;
    }

    w->scanned = v->stable;

    return 0;
}


static ngx_int_t
ngx_pty_api_text_check(ngx_pty_api_wait_t *w)
{
    ngx_pty_text_view_t    v;
    ngx_pty_session_sh_t  *sh;
    ngx_pty_api_reader_t  *rd;

    rd = w->reader;
    sh = w->session->sh;

    if (sh->api_spill_len) {
        /* the rest of a long read: no waiting while it is there */
        return NGX_OK;
    }

    ngx_pty_api_pull(rd, sh, w->page);

    if (ngx_pty_text_peek(rd->text, &v) != 0) {
        return NGX_OK;
    }

    if (w->wait_for.len && ngx_pty_api_search(w, &v)) {
        w->matched = 1;
        return NGX_OK;
    }

    if (v.len >= w->page) {
        return NGX_OK;
    }

    if (ngx_pty_api_is_closed(sh) && sh->api_cursor >= sh->scroll->head) {
        return NGX_OK;
    }

    return NGX_AGAIN;
}


static ngx_int_t
ngx_pty_api_text_answer(ngx_pty_api_wait_t *w)
{
    json_t                *o;
    ngx_http_request_t    *r;
    ngx_pty_session_sh_t  *sh;

    r = w->request;
    sh = w->session->sh;

    o = w->start ? ngx_pty_api_describe(r, sh) : ngx_pty_api_head(sh);
    if (o == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (!w->start) {
        ngx_pty_api_status(o, sh);
    }

    if (ngx_pty_api_deliver(w->reader, sh, w->page,
                            w->start ? "screen" : "output", o)
        != NGX_OK)
    {
        json_decref(o);
        return ngx_pty_api_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 "no_memory", "out of memory reading the "
                                 "output");
    }

    ngx_pty_api_matched(w, o);

    /*
     * Let go before the answer leaves: its client may send the next
     * call through another worker as soon as it has read this one.
     */
    if (w->claimed) {
        w->claimed = 0;
        ngx_pty_api_unclaim(sh);
    }

    return ngx_pty_api_send(r, NGX_HTTP_OK, o);
}


/* kill: until Closed */

static ngx_int_t
ngx_pty_api_closed_check(ngx_pty_api_wait_t *w)
{
    return ngx_pty_api_is_closed(w->session->sh) ? NGX_OK : NGX_AGAIN;
}


static ngx_int_t
ngx_pty_api_describe_answer(ngx_pty_api_wait_t *w)
{
    return ngx_pty_api_send(w->request, NGX_HTTP_OK,
                            ngx_pty_api_describe(w->request,
                                                 w->session->sh));
}


/* read: the screen model as text */

static ngx_int_t
ngx_pty_api_screen_check(ngx_pty_api_wait_t *w)
{
    u_char      *text;
    size_t       len;
    ngx_uint_t   found;

    if (w->wait_for.len == 0 || ngx_pty_api_is_closed(w->session->sh)) {
        return NGX_OK;
    }

    text = ngx_pty_session_screen_text(w->session, &len);
    if (text == NULL) {
        return NGX_OK;
    }

    found = memmem(text, len, w->wait_for.data, w->wait_for.len) != NULL;
    free(text);

    if (found) {
        w->matched = 1;
        return NGX_OK;
    }

    return NGX_AGAIN;
}


static ngx_int_t
ngx_pty_api_screen_answer(ngx_pty_api_wait_t *w)
{
    u_char                *text;
    size_t                 len;
    json_t                *o;
    ngx_pty_session_sh_t  *sh;

    sh = w->session->sh;

    o = ngx_pty_api_head(sh);
    if (o == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_pty_api_status(o, sh);

    text = ngx_pty_session_screen_text(w->session, &len);

    json_object_set_new(o, "screen",
                        text ? json_stringn((char *) text, len)
                             : json_string(""));
    free(text);

    json_object_set_new(o, "cols", json_integer((json_int_t) sh->cols));
    json_object_set_new(o, "rows", json_integer((json_int_t) sh->rows));

    ngx_pty_api_matched(w, o);

    return ngx_pty_api_send(w->request, NGX_HTTP_OK, o);
}


/* answers */

static json_t *
ngx_pty_api_head(ngx_pty_session_sh_t *sh)
{
    u_char  name[32];

    ngx_sprintf(name, "pty-%ui%Z", sh->name);

    return json_pack("{s:s, s:s#}", "id", (char *) name,
                     "session_id", (char *) sh->id, (size_t) NGX_PTY_ID_LEN);
}


static void
ngx_pty_api_status(json_t *o, ngx_pty_session_sh_t *sh)
{
    ngx_uint_t  reason;

    json_object_set_new(o, "state",
                        json_string(sh->state == NGX_PTY_STATE_STARTING
                                    ? "starting"
                                    : sh->state == NGX_PTY_STATE_RUNNING
                                    ? "running" : "exited"));
    json_object_set_new(o, "running",
                        json_boolean(!ngx_pty_api_is_closed(sh)));

    if (!ngx_pty_api_is_closed(sh)) {
        return;
    }

    reason = ngx_min(sh->closed_reason, NGX_PTY_CLOSED_ERROR);

    json_object_set_new(o, "exit_code", sh->exit_code >= 0
                                        ? json_integer(sh->exit_code)
                                        : json_null());
    json_object_set_new(o, "closed_reason",
                        json_string(ngx_pty_closed_reasons[reason]));
}


static void
ngx_pty_api_matched(ngx_pty_api_wait_t *w, json_t *o)
{
    if (w->wait_for.len) {
        json_object_set_new(o, "matched", json_boolean(w->matched));
        json_object_set_new(o, "timed_out", json_boolean(w->timed_out));
    }
}


static json_t *
ngx_pty_api_describe(ngx_http_request_t *r, ngx_pty_session_sh_t *sh)
{
    u_char               url[512];
    json_t              *o;
    ngx_pty_main_conf_t *pmcf;

    pmcf = ngx_http_get_module_main_conf(r, ngx_pty_module);

    ngx_snprintf(url, sizeof(url) - 1,
                 "/agents/%V/sessions/%*s/attach%Z", &pmcf->instance_id,
                 (size_t) NGX_PTY_ID_LEN, sh->id);

    o = ngx_pty_api_head(sh);
    if (o == NULL) {
        return NULL;
    }

    ngx_pty_api_status(o, sh);

    json_object_set_new(o, "instance_id",
                        json_stringn((char *) pmcf->instance_id.data,
                                     pmcf->instance_id.len));
    json_object_set_new(o, "attach_path", json_string((char *) url));
    json_object_set_new(o, "cols", json_integer((json_int_t) sh->cols));
    json_object_set_new(o, "rows", json_integer((json_int_t) sh->rows));
    json_object_set_new(o, "sequence", json_integer((json_int_t) sh->seq));
    json_object_set_new(o, "command",
                        json_stringn((char *) sh->command, sh->command_len));
    json_object_set_new(o, "age_seconds",
                        json_integer((json_int_t) (ngx_time() - sh->created)));

    return o;
}


ngx_int_t
ngx_pty_api_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const char *message)
{
    if (!r->request_body) {
        /* refused before reading: the body must not be taken for a request */
        if (ngx_http_discard_request_body(r) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    return ngx_pty_api_send(r, status,
                            json_pack("{s:{s:s, s:s}}", "error",
                                      "code", code, "message", message));
}


ngx_int_t
ngx_pty_api_send(ngx_http_request_t *r, ngx_uint_t status, json_t *obj)
{
    char         *text;
    size_t        len;
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    if (obj == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);

    if (text == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = ngx_strlen(text);

    b = ngx_create_temp_buf(r->pool, len + 1);
    if (b == NULL) {
        free(text);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->last = ngx_cpymem(b->last, text, len);
    *b->last++ = '\n';
    b->last_buf = (r == r->main);
    b->last_in_chain = 1;
    free(text);

    r->headers_out.status = status;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;

    if (ngx_pty_worker_header(r) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}
