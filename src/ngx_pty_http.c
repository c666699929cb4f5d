
/*
 * Errors nginx answers itself in a pty location (client_max_body_size's
 * 413 before the handler runs, a bad chunked body, a handler's 500) come
 * as its HTML error page; clients of this module read JSON only.  The
 * header filter turns such a response into {"error":{code, message}}
 * and the body filter sends that instead of the page.  A response is
 * recognised as replaced by its content type, which points to this
 * file's own string.
 */

#include "ngx_pty.h"
#include "ngx_pty_http.h"
#include "ngx_pty_api.h"
#include "ngx_pty_auth.h"


typedef struct {
    ngx_uint_t                 status;
    const char                *code;
    const char                *message;
} ngx_pty_http_error_t;


static ngx_int_t ngx_pty_http_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_pty_http_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static ngx_buf_t *ngx_pty_http_error_body(ngx_http_request_t *r);
static u_char *ngx_pty_http_log_handler(ngx_http_request_t *r,
    ngx_http_request_t *sr, u_char *buf, size_t len);
static ngx_int_t ngx_pty_http_preaccess(ngx_http_request_t *r);


static ngx_http_output_header_filter_pt  ngx_pty_http_next_header;
static ngx_http_output_body_filter_pt    ngx_pty_http_next_body;
static ngx_http_log_handler_pt           ngx_pty_http_log_next;

/* its address marks a replaced response */
static u_char  ngx_pty_http_json[] = "application/json";


static ngx_pty_http_error_t  ngx_pty_http_errors[] = {
    { NGX_HTTP_BAD_REQUEST, "bad_request", "the request is malformed" },
    { NGX_HTTP_REQUEST_TIME_OUT, "timeout",
      "the request did not arrive in time" },
    { NGX_HTTP_LENGTH_REQUIRED, "bad_request",
      "the body needs a length" },
    { NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, "too_large",
      "request body too large (client_max_body_size)" },
    { NGX_HTTP_REQUEST_URI_TOO_LARGE, "too_large",
      "request line too long" },
    { NGX_HTTP_REQUEST_HEADER_TOO_LARGE, "too_large",
      "request header too large" },
    { NGX_HTTP_SERVICE_UNAVAILABLE, "unavailable",
      "the service is unavailable" },
    { 0, "error", "the request failed" }
};


ngx_int_t
ngx_pty_http_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    /* before auth_request (access phase) sends the URI anywhere */
    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_pty_http_preaccess;

    ngx_pty_http_next_header = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_pty_http_header_filter;

    ngx_pty_http_next_body = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_pty_http_body_filter;

    return NGX_OK;
}


static ngx_int_t
ngx_pty_http_header_filter(ngx_http_request_t *r)
{
    ngx_buf_t           *b;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    /* nginx's own error pages are text/html; the module's answers JSON */
    if (r != r->main
        || plcf == NULL
        || plcf->handler == NGX_PTY_HANDLER_NONE
        || r->headers_out.status < NGX_HTTP_BAD_REQUEST
        || r->headers_out.content_type.len != sizeof("text/html") - 1
        || ngx_strncmp(r->headers_out.content_type.data, "text/html",
                       sizeof("text/html") - 1) != 0)
    {
        return ngx_pty_http_next_header(r);
    }

    b = ngx_pty_http_error_body(r);
    if (b == NULL) {
        return NGX_ERROR;
    }

    r->headers_out.content_type.data = ngx_pty_http_json;
    r->headers_out.content_type.len = sizeof(ngx_pty_http_json) - 1;
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;
    r->headers_out.charset.len = 0;

    ngx_http_clear_content_length(r);
    r->headers_out.content_length_n = b->last - b->pos;

    return ngx_pty_http_next_header(r);
}


static ngx_int_t
ngx_pty_http_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_buf_t    *b;
    ngx_uint_t    last;
    ngx_chain_t  *cl, out;

    if (r->headers_out.content_type.data != ngx_pty_http_json) {
        return ngx_pty_http_next_body(r, in);
    }

    /* the error page goes unsent; the JSON goes with its last buffer */
    last = 0;

    for (cl = in; cl; cl = cl->next) {
        cl->buf->pos = cl->buf->last;
        last |= cl->buf->last_buf;
    }

    if (!last) {
        return NGX_OK;
    }

    b = ngx_pty_http_error_body(r);
    if (b == NULL) {
        return NGX_ERROR;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_pty_http_next_body(r, &out);
}


static ngx_buf_t *
ngx_pty_http_error_body(ngx_http_request_t *r)
{
    size_t                 len;
    ngx_buf_t             *b;
    ngx_pty_http_error_t  *e;

    for (e = ngx_pty_http_errors; e->status; e++) {
        if (e->status == r->headers_out.status) {
            break;
        }
    }

    len = sizeof("{\"error\":{\"code\":\"\",\"message\":\"\"}}\n") - 1
          + ngx_strlen(e->code) + ngx_strlen(e->message);

    b = ngx_create_temp_buf(r->pool, len);
    if (b == NULL) {
        return NULL;
    }

    /* codes and messages are ours: nothing to escape */
    b->last = ngx_sprintf(b->pos,
                          "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
                          e->code, e->message);
    b->last_buf = 1;
    b->last_in_chain = 1;

    return b;
}


/*
 * A token in the query string is refused before auth_request would pass
 * the URI to the auth service (X-Original-URI $request_uri), and the log
 * lines of the auth subrequest already name the request without it.
 */
static ngx_int_t
ngx_pty_http_preaccess(ngx_http_request_t *r)
{
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    if (r != r->main
        || (plcf->handler != NGX_PTY_HANDLER_ATTACH
            && plcf->handler != NGX_PTY_HANDLER_API
            && plcf->handler != NGX_PTY_HANDLER_MCP))
    {
        return NGX_DECLINED;
    }

    ngx_pty_http_log_hide(r);

    if (!ngx_pty_auth_token_in_query(r)) {
        return NGX_DECLINED;
    }

    ngx_http_finalize_request(r, ngx_pty_api_error(r, NGX_HTTP_BAD_REQUEST,
                              "token_in_query", "tokens must not ride in "
                              "the URL: send Authorization: Bearer, or a "
                              "bearer. subprotocol entry"));

    return NGX_DONE;
}


void
ngx_pty_http_log_hide(ngx_http_request_t *r)
{
    if (r->log_handler == ngx_pty_http_log_handler) {
        return;
    }

    if (ngx_pty_http_log_next == NULL) {
        ngx_pty_http_log_next = r->log_handler;
    }

    /* nginx's context writer is the same for every request */
    if (r->log_handler == ngx_pty_http_log_next) {
        r->log_handler = ngx_pty_http_log_handler;
    }
}


/*
 * nginx's context (client, server, request line, host, ...) as it writes
 * it, but for the request line's query and the Referer, which it is
 * given without.
 */
static u_char *
ngx_pty_http_log_handler(ngx_http_request_t *r, ngx_http_request_t *sr,
    u_char *buf, size_t len)
{
    u_char           *p, *q;
    ngx_str_t         line;
    ngx_table_elt_t  *referer;

    line = r->request_line;
    referer = r->headers_in.referer;

    q = ngx_strlchr(line.data, line.data + line.len, '?');
    if (q) {
        r->request_line.len = q - line.data;
    }

    r->headers_in.referer = NULL;

    p = ngx_pty_http_log_next(r, sr, buf, len);

    r->request_line = line;
    r->headers_in.referer = referer;

    return p;
}
