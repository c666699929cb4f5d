
/*
 * The agent HTTP API.  Calls are POSTs of a JSON object to
 * <location>/<call>: start, kill, list.
 */

#include "ngx_pty.h"
#include "ngx_pty_api.h"
#include "ngx_pty_session.h"
#include "ngx_pty_ext.h"
#include "ngx_pty_util.h"


typedef ngx_int_t (*ngx_pty_api_call_pt)(ngx_http_request_t *r, json_t *req);

typedef struct {
    ngx_str_t                  name;
    ngx_pty_api_call_pt        handler;
} ngx_pty_api_call_t;


static void ngx_pty_api_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_pty_api_start(ngx_http_request_t *r, json_t *req);
static ngx_int_t ngx_pty_api_kill(ngx_http_request_t *r, json_t *req);
static ngx_int_t ngx_pty_api_list(ngx_http_request_t *r, json_t *req);
static json_t *ngx_pty_api_describe(ngx_http_request_t *r,
    ngx_pty_session_sh_t *sh);


static ngx_pty_api_call_t  ngx_pty_api_calls[] = {
    { ngx_string("start"), ngx_pty_api_start },
    { ngx_string("kill"), ngx_pty_api_kill },
    { ngx_string("list"), ngx_pty_api_list },
    { ngx_null_string, NULL }
};


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
                                 "calls are start, write, kill, list, read");
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

    if (r->request_body == NULL || r->request_body->bufs == NULL) {
        req = json_object();

    } else {
        b = r->request_body->bufs->buf;

        if (b->in_file || r->request_body->bufs->next) {
            rc = ngx_pty_api_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                   "too_large", "request body larger than "
                                   "client_body_buffer_size");
            ngx_http_finalize_request(r, rc);
            return;
        }

        req = json_loadb((char *) b->pos, b->last - b->pos,
                         JSON_REJECT_DUPLICATES, &err);

        if (req == NULL) {
            ngx_snprintf(msg, sizeof(msg) - 1, "malformed JSON: %s%Z",
                         err.text);
            rc = ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "bad_json",
                                   (char *) msg);
            ngx_http_finalize_request(r, rc);
            return;
        }
    }

    if (!json_is_object(req)) {
        json_decref(req);
        rc = ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "bad_json",
                               "the body must be a JSON object");
        ngx_http_finalize_request(r, rc);
        return;
    }

    rc = call->handler(r, req);

    json_decref(req);

    ngx_http_finalize_request(r, rc);
}


/* an integer member in [min, max]; absent gives def */
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
ngx_pty_api_start(ngx_http_request_t *r, json_t *req)
{
    json_t              *command;
    ngx_pty_start_t      st;
    ngx_pty_session_t   *s;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    command = json_object_get(req, "command");

    if (!json_is_string(command) || json_string_length(command) == 0) {
        return ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "bad_request",
                                 "\"command\" must be a non-empty string");
    }

    if (ngx_strlen(json_string_value(command)) != json_string_length(command))
    {
        return ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "bad_request",
                                 "\"command\" must not contain NUL");
    }

    ngx_memzero(&st, sizeof(ngx_pty_start_t));
    st.command = (u_char *) json_string_value(command);
    st.command_len = json_string_length(command);
    st.conf = plcf;

    if (ngx_pty_api_uint(req, "cols", 1, NGX_PTY_MAX_SIZE, plcf->api_cols,
                         &st.cols) != NGX_OK
        || ngx_pty_api_uint(req, "rows", 1, NGX_PTY_MAX_SIZE, plcf->api_rows,
                            &st.rows) != NGX_OK)
    {
        return ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "bad_size",
                                 "\"cols\" and \"rows\" are integers in "
                                 "1..1024");
    }

    s = ngx_pty_session_start(&st, ngx_cycle->log);
    if (s == NULL) {
        return ngx_pty_api_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                 "zone_full", "no room for another session "
                                 "in the shared zone");
    }

    return ngx_pty_api_send(r, NGX_HTTP_OK, ngx_pty_api_describe(r, s->sh));
}


static ngx_int_t
ngx_pty_api_kill(ngx_http_request_t *r, json_t *req)
{
    json_t                *id;
    ngx_str_t              name;
    ngx_pty_session_t     *s;
    ngx_pty_session_sh_t  *sh;

    id = json_object_get(req, "id");

    if (!json_is_string(id)) {
        return ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, "bad_request",
                                 "\"id\" must be a session name or id");
    }

    name.data = (u_char *) json_string_value(id);
    name.len = json_string_length(id);

    sh = ngx_pty_shm_session_find(&name);
    if (sh == NULL) {
        return ngx_pty_api_error(r, NGX_HTTP_NOT_FOUND, "unknown_session",
                                 "no such session");
    }

    s = ngx_pty_session_get(sh);
    ngx_pty_shm_session_release(sh);

    if (s == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    (void) ngx_pty_session_kill(s, NGX_PTY_CLOSED_KILLED);

    req = ngx_pty_api_describe(r, sh);
    ngx_pty_session_put(s);

    return ngx_pty_api_send(r, NGX_HTTP_OK, req);
}


static ngx_int_t
ngx_pty_api_list(ngx_http_request_t *r, json_t *req)
{
    json_t                *list;
    ngx_queue_t           *q;
    ngx_pty_zone_t        *zone;
    ngx_pty_session_sh_t  *sh;

    (void) req;

    zone = ngx_pty_shm_zone();
    list = json_array();

    ngx_shmtx_lock(&zone->shpool->mutex);

    for (q = ngx_queue_head(&zone->sh->sessions);
         q != ngx_queue_sentinel(&zone->sh->sessions);
         q = ngx_queue_next(q))
    {
        sh = ngx_queue_data(q, ngx_pty_session_sh_t, queue);
        json_array_append_new(list, ngx_pty_api_describe(r, sh));
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return ngx_pty_api_send(r, NGX_HTTP_OK,
                            json_pack("{s:o}", "sessions", list));
}


static json_t *
ngx_pty_api_describe(ngx_http_request_t *r, ngx_pty_session_sh_t *sh)
{
    u_char               name[32], url[512];
    json_t              *o;
    ngx_pty_main_conf_t *pmcf;

    pmcf = ngx_http_get_module_main_conf(r, ngx_pty_module);

    ngx_sprintf(name, "pty-%ui%Z", sh->name);
    ngx_snprintf(url, sizeof(url) - 1,
                 "/agents/%V/sessions/%*s/attach%Z", &pmcf->instance_id,
                 (size_t) NGX_PTY_ID_LEN, sh->id);

    o = json_pack("{s:s, s:s#, s:s#, s:s, s:s, s:i, s:i, s:I, s:s#}",
                  "id", (char *) name,
                  "session_id", (char *) sh->id, (size_t) NGX_PTY_ID_LEN,
                  "instance_id", (char *) pmcf->instance_id.data,
                  pmcf->instance_id.len,
                  "attach_path", (char *) url,
                  "state", sh->state == NGX_PTY_STATE_STARTING ? "starting"
                           : sh->state == NGX_PTY_STATE_RUNNING ? "running"
                           : "exited",
                  "cols", (json_int_t) sh->cols,
                  "rows", (json_int_t) sh->rows,
                  "sequence", (json_int_t) sh->seq,
                  "command", (char *) sh->command, sh->command_len);

    if (o && sh->state >= NGX_PTY_STATE_CLOSED) {
        json_object_set_new(o, "exit_code", sh->exit_code >= 0
                                            ? json_integer(sh->exit_code)
                                            : json_null());
    }

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

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}
