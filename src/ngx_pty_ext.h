
/*
 * pty-extensions/v1: the pty.* verbs, roles and membership, and the
 * serialization of session frames (pty.session_frame).
 */

#ifndef _NGX_PTY_EXT_H_INCLUDED_
#define _NGX_PTY_EXT_H_INCLUDED_


#include "ngx_pty.h"
#include "ngx_pty_binding.h"


ngx_uint_t ngx_pty_ext_requested(ngx_http_request_t *r);
void ngx_pty_ext_dispatch(ngx_pty_client_t *cl, json_t *msg, const char *op,
    json_t *id);
void ngx_pty_ext_detach(ngx_pty_client_t *cl);
/* within pty_input_rate: NGX_OK; else the client is told (RATE_LIMITED) */
ngx_int_t ngx_pty_ext_paced(ngx_pty_client_t *cl, json_t *id, size_t cost);

size_t ngx_pty_ext_frame_size(ngx_pty_frame_t *f);
u_char *ngx_pty_ext_frame_write(u_char *p, ngx_pty_frame_t *f);

ngx_pty_frame_t *ngx_pty_ext_error_frame(ngx_pty_client_t *cl,
    const char *code, const char *message);
ngx_int_t ngx_pty_ext_membership(ngx_pty_session_t *s);


#endif /* _NGX_PTY_EXT_H_INCLUDED_ */
