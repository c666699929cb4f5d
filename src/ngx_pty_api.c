
/*
 * The agent HTTP API: POSTs of a JSON object to <location>/<call>, the
 * calls being the agent engine's tools (start, write, read, kill, list,
 * status: ngx_pty_agent.c, docs/API.md).  This file is the HTTP layer:
 * the body, the JSON, the answer; and the JSON error answers every
 * HTTP-level refusal of the module uses.
 */

#include "ngx_pty.h"
#include "ngx_pty_api.h"
#include "ngx_pty_agent.h"
#include "ngx_pty_ext.h"
#include "ngx_pty_ws.h"
#include "ngx_pty_http.h"
#include "ngx_pty_util.h"
#include "ngx_pty_auth.h"


static void ngx_pty_api_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_pty_api_call(ngx_http_request_t *r, ngx_int_t tool,
    json_t *req);
static void ngx_pty_api_done(ngx_pty_agent_call_t *call);


#define ngx_pty_api_bad(r, code, msg)                                         \
    ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST, code, msg)


/* the tool named by the last part of the URI */
static ngx_int_t
ngx_pty_api_find_call(ngx_http_request_t *r)
{
    u_char     *p, *last;
    ngx_str_t   name;

    last = r->uri.data + r->uri.len;
    p = last;

    while (p > r->uri.data && p[-1] != '/') {
        p--;
    }

    name.data = p;
    name.len = last - p;

    return ngx_pty_agent_tool(&name);
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

    if (ngx_pty_api_find_call(r) == NGX_ERROR) {
        return ngx_pty_api_error(r, NGX_HTTP_NOT_FOUND, "unknown_call",
                                 "calls are start, write, kill, list, read, "
                                 "status, revoke");
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
    json_t        *req;
    ngx_int_t      rc;
    ngx_buf_t     *b;
    json_error_t   err;
    u_char         msg[256];

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

    rc = ngx_pty_api_call(r, ngx_pty_api_find_call(r), req);

    json_decref(req);

    if (rc == NGX_DONE) {
        /* a waiter answers later; it holds the body's request reference */
        return;
    }

    ngx_http_finalize_request(r, rc);
}


/* the tool's run: what to finalize with, or NGX_DONE when it waits */
static ngx_int_t
ngx_pty_api_call(ngx_http_request_t *r, ngx_int_t tool, json_t *req)
{
    ngx_int_t                  rc;
    ngx_pty_agent_call_t      *call;
    ngx_http_core_loc_conf_t  *clcf;

    call = ngx_pcalloc(r->pool, sizeof(ngx_pty_agent_call_t));
    if (call == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    call->request = r;
    call->pool = r->pool;
    call->log = r->connection->log;
    call->conf = ngx_http_get_module_loc_conf(r, ngx_pty_module);
    call->main_conf = ngx_http_get_module_main_conf(r, ngx_pty_module);
    call->loc_tag = ngx_pty_loc_tag(&clcf->name);
    call->done = ngx_pty_api_done;
    call->data = r;

    rc = ngx_pty_agent_run(call, tool, req);

    if (rc == NGX_AGAIN) {
        /* a client that goes away ends the wait (the pool's cleanup) */
        r->read_event_handler = ngx_http_test_reading;
        r->write_event_handler = ngx_http_request_empty_handler;
        return NGX_DONE;
    }

    if (rc != NGX_OK) {
        json_decref(call->answer);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_pty_api_send(r, call->status, call->answer);
}


static void
ngx_pty_api_done(ngx_pty_agent_call_t *call)
{
    ngx_int_t            rc;
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = call->data;
    c = r->connection;

    rc = ngx_pty_api_send(r, call->status, call->answer);

    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}


/*
 * The body as one buffer (NULL when empty).  It may arrive in two: what
 * came with the header, and the rest; a body spilled to a file is refused.
 */
ngx_int_t
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
