
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
#include "ngx_pty_limit.h"
#include "ngx_pty_auth.h"


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


/* the log lines a client can cause, each limited (ngx_pty_limit.h) */
typedef enum {
    NGX_PTY_LOG_LAGGED = 0,
    NGX_PTY_LOG_DENIED,
    NGX_PTY_LOG_ZONE_FULL,
    NGX_PTY_LOG_RATE,
    NGX_PTY_LOG_N
} ngx_pty_client_log_e;


typedef struct ngx_pty_replay_s  ngx_pty_replay_t;

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
    uint64_t                   hold_seq;     /* see ngx_pty_binding_held() */
    uint64_t                   live_seq;     /* before it: replay */

    ngx_msec_t                 last_keyframe_request;
    ngx_event_t                keyframe_ev;

    json_t                    *service_parameters;
    ngx_pty_ident_t           *ident;        /* fixed at the upgrade */
    void                      *a2a;          /* the tasks it follows */
    ngx_pty_replay_t          *replay;       /* from the archive, first */

    ngx_pty_bucket_t           input;        /* pty_input_rate */
    ngx_pty_log_limit_t        logs[NGX_PTY_LOG_N];

    unsigned                   ext_active:1;
    unsigned                   first_frame:1;
    unsigned                   joined:1;
    unsigned                   leaving:1;
    unsigned                   done:1;
    unsigned                   lagged:1;
    unsigned                   a2a_watch:1;  /* walks the ring for tasks */
    unsigned                   holding:1;    /* its Keyframe is on its way */
    unsigned                   hold_all:1;   /* after a lag: all but it */
};


ngx_int_t ngx_pty_binding_attach(ngx_http_request_t *r,
    ngx_pty_session_sh_t *sh);

void ngx_pty_binding_error(ngx_pty_client_t *cl, json_t *id,
    ngx_uint_t code, const char *message);
/* an Error frame's text at p; room: 2 KiB for a message up to 256 bytes */
u_char *ngx_pty_binding_error_json(u_char *p, json_t *id, ngx_uint_t code,
    const char *message);
void ngx_pty_binding_goodbye(ngx_pty_client_t *cl, const char *reason,
    const char *detail);
void ngx_pty_binding_pull(ngx_pty_client_t *cl);
/* 1: log this line of the client's now; 0: it is counted instead */
ngx_uint_t ngx_pty_binding_log(ngx_pty_client_t *cl,
    ngx_pty_client_log_e which, ngx_uint_t level);
ngx_int_t ngx_pty_binding_send_frame(ngx_pty_client_t *cl,
    ngx_pty_frame_t *f);
ngx_int_t ngx_pty_binding_closed_copy(ngx_pty_client_t *cl);
void ngx_pty_binding_hold(ngx_pty_client_t *cl, uint64_t after,
    ngx_uint_t all);


#endif /* _NGX_PTY_BINDING_H_INCLUDED_ */
