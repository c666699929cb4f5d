
/*
 * pty-ws/v1: one attached WebSocket client, its envelope handling,
 * dispatch, binding frames (hello, goodbye, Error, pong) and its walk
 * through the session's frame ring.
 */

#ifndef _NGX_PTY_BINDING_H_INCLUDED_
#define _NGX_PTY_BINDING_H_INCLUDED_


#include <jansson.h>

#include "ngx_pty.h"
#include "ngx_pty_ws.h"
#include "ngx_pty_session.h"


typedef enum {
    NGX_PTY_ERR_TASK_NOT_FOUND = 0,
    NGX_PTY_ERR_TASK_NOT_CANCELABLE,
    NGX_PTY_ERR_INVALID_REQUEST,
    NGX_PTY_ERR_UNSUPPORTED_OPERATION,
    NGX_PTY_ERR_UNAUTHENTICATED,
    NGX_PTY_ERR_PERMISSION_DENIED,
    NGX_PTY_ERR_RATE_LIMITED,
    NGX_PTY_ERR_INTERNAL,
    NGX_PTY_ERR_REPLAY_OUT_OF_RANGE
} ngx_pty_error_e;


struct ngx_pty_client_s {
    ngx_pty_ws_t               ws;
    ngx_pty_listener_t         listener;
    ngx_pty_session_t         *session;
    ngx_pty_loc_conf_t        *conf;

    uint32_t                   client_id;
    ngx_pty_member_t          *member;
    ngx_uint_t                 role;

    uint64_t                   cursor;       /* ring offset of next frame */
    uint64_t                   sent_seq;     /* RoleAssigned sent ahead */
    uint64_t                   leave_seq;    /* close once this is sent */

    ngx_msec_t                 last_keyframe_request;
    ngx_event_t                keyframe_ev;

    json_t                    *service_parameters;

    unsigned                   ext_active:1;
    unsigned                   first_frame:1;
    unsigned                   joined:1;
    unsigned                   leaving:1;
    unsigned                   done:1;
    unsigned                   lagged:1;
};


ngx_int_t ngx_pty_binding_attach(ngx_http_request_t *r,
    ngx_pty_session_sh_t *sh);

void ngx_pty_binding_error(ngx_pty_client_t *cl, json_t *id,
    ngx_uint_t code, const char *message);
void ngx_pty_binding_goodbye(ngx_pty_client_t *cl, const char *reason,
    const char *detail);
void ngx_pty_binding_pull(ngx_pty_client_t *cl);
ngx_int_t ngx_pty_binding_send_frame(ngx_pty_client_t *cl,
    ngx_pty_frame_t *f);
ngx_int_t ngx_pty_binding_closed_copy(ngx_pty_client_t *cl);


#endif /* _NGX_PTY_BINDING_H_INCLUDED_ */
