
/*
 * The agent HTTP API (pty-start, pty-write, pty-kill, list, read) and the
 * JSON answers every HTTP-level refusal of the module uses.
 */

#ifndef _NGX_PTY_API_H_INCLUDED_
#define _NGX_PTY_API_H_INCLUDED_


#include <jansson.h>

#include "ngx_pty.h"


ngx_int_t ngx_pty_api_handler(ngx_http_request_t *r);

/*
 * The request body in one buffer (NULL: none); NGX_ERROR when it is in a
 * file (larger than client_body_buffer_size) or there is no memory.
 */
ngx_int_t ngx_pty_api_body(ngx_http_request_t *r, ngx_buf_t **bp);

/* sends {"error":{"code":..,"message":..}} with that status */
ngx_int_t ngx_pty_api_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const char *message);
/* sends the object (and takes the reference) */
ngx_int_t ngx_pty_api_send(ngx_http_request_t *r, ngx_uint_t status,
    json_t *obj);


#endif /* _NGX_PTY_API_H_INCLUDED_ */
