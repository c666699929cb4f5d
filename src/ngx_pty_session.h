
/*
 * A session as one worker sees it.  The owning worker reads and writes the
 * PTY master in its event loop, appends Output frames to the shared ring,
 * folds them into the screen model behind the clients, and emits the one
 * Closed frame.  Every worker keeps the listeners (WebSocket clients, API
 * waiters) it serves and wakes them when frames arrive.
 */

#ifndef _NGX_PTY_SESSION_H_INCLUDED_
#define _NGX_PTY_SESSION_H_INCLUDED_


#include "ngx_pty.h"
#include "ngx_pty_shm.h"
#include "ngx_pty_screen.h"
#include "ngx_pty_keeper.h"
#include "ngx_pty_limit.h"
#include "ngx_pty_redact.h"


typedef struct ngx_pty_listener_s  ngx_pty_listener_t;

struct ngx_pty_listener_s {
    ngx_queue_t                queue;
    void                     (*notify)(ngx_pty_listener_t *l);
    void                     (*shutdown)(ngx_pty_listener_t *l);
    void                     (*quit)(ngx_pty_listener_t *l);   /* or NULL */
    void                      *data;
};


struct ngx_pty_session_s {
    ngx_rbtree_node_t          node;        /* key: the shared record */
    ngx_pty_session_sh_t      *sh;
    ngx_log_t                 *log;
    ngx_pool_t                *pool;

    ngx_queue_t                listeners;

    /* the owner's side */
    ngx_connection_t          *pty;
    ngx_connection_t          *ctl;
    ngx_pty_keeper_req_t      *spawn;       /* waits for its keeper */
    ngx_pty_screen_t          *screen;
    uint64_t                   screen_off;  /* ring offset not yet folded */
    uint64_t                   screen_seq;  /* last Output/Resize folded */
    ngx_event_t                screen_ev;
    ngx_event_t                drain;
    ngx_event_t                linger;
    ngx_event_t                keyframe;
    ngx_event_t                limits;      /* pty_idle_timeout, pty_max_age */
    ngx_event_t                batch;       /* notifies a flood's output */
    ngx_event_t                redact_ev;   /* lets held output go */
    ngx_pty_redact_t          *redact;      /* pty_redact, while owned */
    ngx_msec_t                 redact_wait;
    ngx_msec_t                 notified;    /* when output was last notified */
    size_t                     unnotified;  /* output appended since */

    /* the agent API's reader (ngx_pty_api.c); freed with the pool */
    void                      *api;

    /* frames serialized for this worker's clients (ngx_pty_binding.c) */
    void                      *frames;

    u_char                    *input;       /* bytes the PTY did not take */
    size_t                     input_start; /* at input + input_start */
    size_t                     input_len;
    size_t                     input_size;
    ngx_pty_log_limit_t        input_log;   /* input dropped: clients cause
                                               it, at their pace */

    ngx_pty_params_t           params;
    ngx_uint_t                 answer_queries;
    ngx_flag_t                 terminate_on_last_controller;
    ngx_msec_t                 closed_linger;
    ngx_uint_t                 frames_since_keyframe;
    uint64_t                   keyframe_anchor;  /* of the last broadcast */
    ngx_msec_t                 last_keyframe;
    ngx_msec_t                 idle_timeout;
    ngx_msec_t                 max_age;
    ngx_msec_t                 started;
    ngx_msec_t                 last_active;  /* last output or input */

    ngx_int_t                  wait_status;
    ngx_uint_t                 kill_reason;
    const char                *kill_detail;   /* NULL: the wait status */

    unsigned                   owner:1;
    unsigned                   pinned:1;    /* the worker's exit walks it */
    unsigned                   draining:1;  /* applying the inbox's copy */
    unsigned                   exited:1;
    unsigned                   eof:1;
    unsigned                   closed:1;
    unsigned                   killing:1;
    unsigned                   throttled:1;
    unsigned                   output_since_keyframe:1;
    unsigned                   urgent:1;    /* the frames notified answer
                                               input: serve them first */
};


typedef struct {
    u_char                    *command;
    size_t                     command_len;
    char                     **argv;        /* NULL: command by pty_shell */
    char                      *path;        /* argv's program */
    ngx_uint_t                 cols;
    ngx_uint_t                 rows;
    ngx_str_t                  acl;         /* who may reach it
                                               (ngx_pty_auth.c) */
    ngx_pty_loc_conf_t        *conf;
} ngx_pty_start_t;


ngx_pty_session_t *ngx_pty_session_start(ngx_pty_start_t *st, ngx_log_t *log);
ngx_pty_session_t *ngx_pty_session_get(ngx_pty_session_sh_t *sh);
/* an ended session of the archive: this worker keeps it for the linger */
ngx_int_t ngx_pty_session_restored(ngx_pty_session_sh_t *sh, ngx_log_t *log);
void ngx_pty_session_put(ngx_pty_session_t *s);

void ngx_pty_session_listen(ngx_pty_session_t *s, ngx_pty_listener_t *l);
void ngx_pty_session_unlisten(ngx_pty_session_t *s, ngx_pty_listener_t *l);
void ngx_pty_session_notify(ngx_pty_session_t *s);

/* NGX_OK, NGX_DECLINED (not running here), NGX_ERROR (PTY refused it) */
ngx_int_t ngx_pty_session_input(ngx_pty_session_t *s, u_char *data,
    size_t len);
ngx_int_t ngx_pty_session_resize(ngx_pty_session_t *s, ngx_uint_t cols,
    ngx_uint_t rows);
ngx_pty_frame_t *ngx_pty_session_keyframe(ngx_pty_session_t *s,
    uint32_t target);
ngx_int_t ngx_pty_session_request_keyframe(ngx_pty_session_t *s,
    uint32_t target);
ngx_int_t ngx_pty_session_kill(ngx_pty_session_t *s, ngx_uint_t reason);

/* an ended session that nobody is joined to any more gives memory back */
void ngx_pty_session_settle(ngx_pty_session_t *s);

#define NGX_PTY_DETAIL_LAST_CONTROLLER                                        \
    "last_controller_left: terminate_on_last_controller"

/* appends a frame whose payload is JSON text; takes the session lock */
ngx_pty_frame_t *ngx_pty_session_append(ngx_pty_session_t *s,
    ngx_uint_t kind, uint32_t target, u_char *json, size_t len);

u_char *ngx_pty_session_screen_text(ngx_pty_session_t *s, size_t *len);

/*
 * Calls handler with the session's screen as it is now: the owner's
 * model, or one rebuilt from the ring (after the end too).  NGX_ERROR:
 * no memory.
 */
typedef void (*ngx_pty_screen_handler_pt)(ngx_pty_screen_t *screen,
    void *data);

ngx_int_t ngx_pty_session_screen_apply(ngx_pty_session_t *s,
    ngx_pty_screen_handler_pt handler, void *data);

/* a Closed payload; buf holds at least NGX_PTY_CLOSED_MAX bytes */
#define NGX_PTY_CLOSED_MAX  1200

/* the detail of the Closed instance_terminated of a stop */
#define NGX_PTY_CLOSED_SHUTDOWN  "agent_disconnect: nginx is shutting down"

size_t ngx_pty_closed_json(u_char *buf, size_t size, ngx_uint_t reason,
    ngx_int_t exit_code, const char *detail);

/* this worker's part, for the API's status call */
typedef struct {
    size_t                     views;       /* sessions it has a view of */
    size_t                     owned;       /* whose terminal it runs */
    size_t                     screens;     /* screen models, bytes */
} ngx_pty_sessions_stat_t;

void ngx_pty_sessions_stat(ngx_pty_sessions_stat_t *st);
void ngx_pty_sessions_shutdown(ngx_cycle_t *cycle);
void ngx_pty_sessions_quit(void);
void ngx_pty_sessions_wake(ngx_int_t slot);
void ngx_pty_sessions_adopt_orphans(void);
void ngx_pty_sessions_terminate_all(ngx_log_t *log);
void ngx_pty_instance_started(void);
ngx_uint_t ngx_pty_instance_stopping(void);

extern const char  *ngx_pty_closed_reasons[];


#endif /* _NGX_PTY_SESSION_H_INCLUDED_ */
