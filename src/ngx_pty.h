
/*
 * ngx_pty_module: types shared by every subsystem.
 *
 * Memory map:
 *   shared zone (pty_zone)   ngx_pty_shm_t, ngx_pty_session_sh_t, rings,
 *                            member records: visible to every worker
 *   worker memory            ngx_pty_session_t (local view of a session:
 *                            PTY events when this worker owns it, local
 *                            clients and API waiters), ngx_pty_client_t
 */

#ifndef _NGX_PTY_H_INCLUDED_
#define _NGX_PTY_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>


#define NGX_PTY_BINDING_URI    "https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1"
#define NGX_PTY_BINDING_VER    "1.0.0"
#define NGX_PTY_EXT_URI                                                       \
    "https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1"
#define NGX_PTY_SUBPROTOCOL    "pty-ws.v1"
#define NGX_PTY_SNAPSHOT_FMT   "vt100-screen-state-v1"

#define NGX_PTY_ID_LEN         36          /* UUID text form */
#define NGX_PTY_LABEL_MAX      128
#define NGX_PTY_MAX_SIZE       1024        /* cols and rows */
#define NGX_PTY_MAX_CELLS      100000      /* pty_max_cells: 500 x 200 */
#define NGX_PTY_SESSION_MEMORY (8 * 1024 * 1024)
#define NGX_PTY_READ_CHUNK     16384       /* one Output frame at most */
#define NGX_PTY_RANGE_MAX      (1 << 22)   /* uids in pty_user_range */

#define NGX_HTTP_PTY_UPGRADE_REQUIRED  426

/* the programs' PATH unless pty_env sets one */
#define NGX_PTY_PATH                                                          \
    "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

#if (NGX_HAVE_GCC_ATTRIBUTE_NORETURN) || defined(__GNUC__)
#define ngx_pty_noreturn  __attribute__((__noreturn__))
#else
#define ngx_pty_noreturn
#endif


typedef struct ngx_pty_shm_s          ngx_pty_shm_t;
typedef struct ngx_pty_session_sh_s   ngx_pty_session_sh_t;
typedef struct ngx_pty_session_s      ngx_pty_session_t;
typedef struct ngx_pty_client_s       ngx_pty_client_t;
typedef struct ngx_pty_ring_s         ngx_pty_ring_t;
typedef struct ngx_pty_reveal_s       ngx_pty_reveal_t;


typedef enum {
    NGX_PTY_HANDLER_NONE = 0,
    NGX_PTY_HANDLER_ATTACH,
    NGX_PTY_HANDLER_API,
    NGX_PTY_HANDLER_CARD,
    NGX_PTY_HANDLER_MCP
} ngx_pty_handler_e;


/* the extension's params, as directives */
typedef struct {
    ngx_uint_t                 max_controllers;
    ngx_uint_t                 max_observers;
    ngx_uint_t                 keyframe_interval_seconds;
    ngx_uint_t                 keyframe_interval_frames;
    ngx_uint_t                 replay_buffer_frames;
    ngx_uint_t                 replay_buffer_retention_seconds;
    ngx_uint_t                 default_cols;
    ngx_uint_t                 default_rows;
} ngx_pty_params_t;


/* a rate limit: per second, and the burst allowed; rate 0: none */
typedef struct {
    size_t                     rate;
    size_t                     burst;
} ngx_pty_rate_t;


typedef struct ngx_pty_store_conf_s  ngx_pty_store_conf_t;
typedef struct ngx_pty_redact_conf_s  ngx_pty_redact_conf_t;


typedef struct {
    ngx_shm_zone_t            *shm_zone;
    ngx_str_t                  instance_id;
    ngx_uint_t                 zone_max_sessions;   /* 0: no cap */

    /* who programs run as: pty_user, or a uid per session */
    ngx_str_t                  user;
    ngx_str_t                  group;
    ngx_uint_t                 user_range;
    ngx_uid_t                  uid_first;
    ngx_uid_t                  uid_last;

    ngx_open_file_t           *audit;          /* pty_audit_log; NULL: off */
    ngx_pty_store_conf_t      *store;          /* pty_archive; NULL: off */
    ngx_array_t               *archive_keys;   /* pty_archive_key */
    ngx_pty_redact_conf_t     *redact;         /* what is a secret */
} ngx_pty_main_conf_t;


/* a pty_allow / pty_deny rule: a regex on the whole command line */
typedef struct {
#if (NGX_PCRE)
    ngx_regex_t               *regex;
#endif
    ngx_str_t                  pattern;
} ngx_pty_rule_t;


typedef struct {
    ngx_pty_handler_e          handler;
    ngx_pty_params_t           params;

    size_t                     ring_size;
    size_t                     ring_max_size;
    size_t                     scroll_size;
    size_t                     input_max;
    size_t                     ws_max_message;
    size_t                     ws_send_buffer;
    ngx_uint_t                 ws_send_frames;
    ngx_pty_rate_t             input_rate;     /* of pty.session_input */
    ngx_msec_t                 ws_ping_interval;
    ngx_msec_t                 ws_pong_timeout;

    ngx_uint_t                 api_cols;
    ngx_uint_t                 api_rows;
    size_t                     api_max_body;
    size_t                     api_page_size;
    ngx_msec_t                 api_wait;           /* write's default */
    ngx_msec_t                 api_wait_for;       /* wait_for's default */
    ngx_msec_t                 api_wait_max;

    /* command policy */
    ngx_array_t               *allow;          /* of ngx_pty_rule_t */
    ngx_array_t               *deny;           /* of ngx_pty_rule_t */
    ngx_str_t                  command;        /* pty_command: fixed */

    /* session limits */
    ngx_uint_t                 max_sessions;   /* 0: no cap */
    ngx_uint_t                 max_cells;      /* cols x rows */
    size_t                     session_max_memory;
    size_t                     inbox_max;      /* derived from input_max */
    ngx_uint_t                 ring_capped;    /* by session_max_memory */
    ngx_msec_t                 idle_timeout;   /* 0: none */
    ngx_msec_t                 max_age;        /* 0: none */

    ngx_str_t                  shell;
    ngx_array_t               *env;            /* of ngx_str_t "NAME=value" */
    char                     **sandbox;        /* pty_sandbox words, NULL-
                                                  ended; NULL: none */
    ngx_msec_t                 closed_linger;

    ngx_flag_t                 terminate_on_last_controller;
    ngx_uint_t                 redact;         /* pty_redact: NGX_PTY_REDACT_*
                                                  shown masked, 0: off */
    ngx_uint_t                 answer_queries;  /* NGX_PTY_ANSWER_* */

    /* identity and access (ngx_pty_auth.c) */
    ngx_flag_t                 auth;           /* pty_auth off: anonymous */
    ngx_http_complex_value_t  *principal;      /* pty_principal */
    ngx_http_complex_value_t  *scopes;         /* pty_scopes */
    ngx_array_t               *share;          /* pty_share, of
                                                  ngx_pty_share_t */
    ngx_flag_t                 close_codes;    /* pty_close_codes */
    ngx_uint_t                 refuse;         /* pty_refuse */
    ngx_str_t                  handler_location;  /* for nginx -t */
} ngx_pty_loc_conf_t;


/* who answers terminal queries (DSR/CPR, DA) the program sends */
#define NGX_PTY_ANSWER_AUTO     0     /* the server, while no controller */
#define NGX_PTY_ANSWER_SERVER   1     /* always the server */
#define NGX_PTY_ANSWER_CLIENT   2     /* never the server */


extern ngx_module_t  ngx_pty_module;


#endif /* _NGX_PTY_H_INCLUDED_ */
