
/*
 * ngx_pty_module: turns a location into an interactive-terminal server.
 *
 *   pty_zone      the shared zone of sessions (http)
 *   pty_attach    the pty-ws/v1 WebSocket endpoint
 *                 .../agents/{instance_id}/sessions/{session_id}/attach
 *   pty_api       the agent HTTP API: .../start, .../write, .../kill,
 *                 .../list, .../read
 *   pty_mcp       the same tools as an MCP server (Streamable HTTP)
 *
 * See docs/DIRECTIVES.md for every directive.
 */

#include "ngx_pty.h"
#include "ngx_pty_shm.h"
#include "ngx_pty_session.h"
#include "ngx_pty_binding.h"
#include "ngx_pty_api.h"
#include "ngx_pty_mcp.h"
#include "ngx_pty_card.h"
#include "ngx_pty_doorbell.h"
#include "ngx_pty_keeper.h"
#include "ngx_pty_spawner.h"
#include "ngx_pty_http.h"
#include "ngx_pty_limit.h"
#include "ngx_pty_auth.h"
#include "ngx_pty_audit.h"
#include "ngx_pty_store.h"
#include "ngx_pty_restore.h"
#include "ngx_pty_redact.h"

#include <sys/prctl.h>


static ngx_int_t ngx_pty_attach_handler(ngx_http_request_t *r);
static ngx_int_t ngx_pty_attach_session(ngx_http_request_t *r,
    ngx_pty_session_sh_t *sh);
static ngx_int_t ngx_pty_parse_attach_uri(ngx_http_request_t *r,
    ngx_str_t *instance, ngx_str_t *session);
static void *ngx_pty_create_main_conf(ngx_conf_t *cf);
static char *ngx_pty_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_pty_create_loc_conf(ngx_conf_t *cf);
static char *ngx_pty_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_pty_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_uint_t ngx_pty_zone_resized(ngx_conf_t *cf, ngx_str_t *name,
    ssize_t size);
static char *ngx_pty_handler_set(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_pty_send_buffer(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_pty_input_rate(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_pty_param(ngx_str_t *arg, const char *name,
    ngx_str_t *value);
static void ngx_pty_merge_rate(ngx_pty_loc_conf_t *conf,
    ngx_pty_loc_conf_t *prev);
static char *ngx_pty_env(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_pty_sandbox(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_pty_rule(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_pty_init_module(ngx_cycle_t *cycle);
static ngx_int_t ngx_pty_init_process(ngx_cycle_t *cycle);
static void ngx_pty_exit_process(ngx_cycle_t *cycle);
static ngx_int_t ngx_pty_merge_caps(ngx_conf_t *cf, ngx_pty_loc_conf_t *prev,
    ngx_pty_loc_conf_t *conf);
static void ngx_pty_exit_master(ngx_cycle_t *cycle);


static ngx_conf_num_bounds_t  ngx_pty_size_bounds = {
    ngx_conf_check_num_bounds, 1, NGX_PTY_MAX_SIZE
};

static ngx_conf_num_bounds_t  ngx_pty_positive_bounds = {
    ngx_conf_check_num_bounds, 1, 1000000000
};

static ngx_conf_num_bounds_t  ngx_pty_count_bounds = {
    ngx_conf_check_num_bounds, 0, 1000000
};


static ngx_conf_enum_t  ngx_pty_answer_queries[] = {
    { ngx_string("auto"), NGX_PTY_ANSWER_AUTO },
    { ngx_string("server"), NGX_PTY_ANSWER_SERVER },
    { ngx_string("client"), NGX_PTY_ANSWER_CLIENT },
    { ngx_null_string, 0 }
};


#define NGX_PTY_LOC  NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF


static ngx_command_t  ngx_pty_commands[] = {

    { ngx_string("pty_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_pty_zone,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_zone_max_sessions"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_pty_main_conf_t, zone_max_sessions),
      &ngx_pty_count_bounds },

    { ngx_string("pty_user"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE12,
      ngx_pty_spawner_set_user,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_user_range"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE2,
      ngx_pty_spawner_set_range,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_instance_id"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_pty_main_conf_t, instance_id),
      NULL },

    { ngx_string("pty_attach"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_pty_handler_set,
      NGX_HTTP_LOC_CONF_OFFSET,
      NGX_PTY_HANDLER_ATTACH,
      NULL },

    { ngx_string("pty_api"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_pty_handler_set,
      NGX_HTTP_LOC_CONF_OFFSET,
      NGX_PTY_HANDLER_API,
      NULL },

    { ngx_string("pty_mcp"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_pty_handler_set,
      NGX_HTTP_LOC_CONF_OFFSET,
      NGX_PTY_HANDLER_MCP,
      NULL },

    { ngx_string("pty_agent_card"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_pty_handler_set,
      NGX_HTTP_LOC_CONF_OFFSET,
      NGX_PTY_HANDLER_CARD,
      NULL },

    { ngx_string("pty_max_controllers"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, params.max_controllers),
      &ngx_pty_positive_bounds },

    { ngx_string("pty_max_observers"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, params.max_observers),
      &ngx_pty_count_bounds },

    { ngx_string("pty_keyframe_interval_seconds"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, params.keyframe_interval_seconds),
      &ngx_pty_positive_bounds },

    { ngx_string("pty_keyframe_interval_frames"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, params.keyframe_interval_frames),
      &ngx_pty_positive_bounds },

    { ngx_string("pty_replay_buffer_frames"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, params.replay_buffer_frames),
      &ngx_pty_positive_bounds },

    { ngx_string("pty_replay_buffer_retention_seconds"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, params.replay_buffer_retention_seconds),
      &ngx_pty_positive_bounds },

    { ngx_string("pty_default_cols"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, params.default_cols),
      &ngx_pty_size_bounds },

    { ngx_string("pty_default_rows"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, params.default_rows),
      &ngx_pty_size_bounds },

    { ngx_string("pty_ring_size"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, ring_size),
      NULL },

    { ngx_string("pty_ring_max_size"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, ring_max_size),
      NULL },

    { ngx_string("pty_terminate_on_last_controller"),
      NGX_PTY_LOC|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, terminate_on_last_controller),
      NULL },

    { ngx_string("pty_answer_queries"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, answer_queries),
      &ngx_pty_answer_queries },

    { ngx_string("pty_scrollback_size"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, scroll_size),
      NULL },

    { ngx_string("pty_input_max"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, input_max),
      NULL },

    { ngx_string("pty_ws_max_message"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, ws_max_message),
      NULL },

    { ngx_string("pty_ws_send_buffer"),
      NGX_PTY_LOC|NGX_CONF_TAKE12,
      ngx_pty_send_buffer,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_input_rate"),
      NGX_PTY_LOC|NGX_CONF_TAKE12,
      ngx_pty_input_rate,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_ws_ping_interval"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, ws_ping_interval),
      NULL },

    { ngx_string("pty_ws_pong_timeout"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, ws_pong_timeout),
      NULL },

    { ngx_string("pty_api_cols"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, api_cols),
      &ngx_pty_size_bounds },

    { ngx_string("pty_api_rows"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, api_rows),
      &ngx_pty_size_bounds },

    { ngx_string("pty_api_max_body"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, api_max_body),
      NULL },

    { ngx_string("pty_api_page_size"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, api_page_size),
      NULL },

    { ngx_string("pty_api_wait"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, api_wait),
      NULL },

    { ngx_string("pty_api_wait_for"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, api_wait_for),
      NULL },

    { ngx_string("pty_api_wait_max"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, api_wait_max),
      NULL },

    { ngx_string("pty_allow"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_pty_rule,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, allow),
      NULL },

    { ngx_string("pty_deny"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_pty_rule,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, deny),
      NULL },

    { ngx_string("pty_command"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, command),
      NULL },

    { ngx_string("pty_max_cells"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, max_cells),
      &ngx_pty_positive_bounds },

    { ngx_string("pty_session_max_memory"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, session_max_memory),
      NULL },

    { ngx_string("pty_max_sessions"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, max_sessions),
      &ngx_pty_count_bounds },

    { ngx_string("pty_idle_timeout"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, idle_timeout),
      NULL },

    { ngx_string("pty_max_age"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, max_age),
      NULL },

    { ngx_string("pty_shell"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, shell),
      NULL },

    { ngx_string("pty_sandbox"),
      NGX_PTY_LOC|NGX_CONF_1MORE,
      ngx_pty_sandbox,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_env"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_pty_env,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_auth"),
      NGX_PTY_LOC|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, auth),
      NULL },

    { ngx_string("pty_principal"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_http_set_complex_value_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, principal),
      NULL },

    { ngx_string("pty_scopes"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_http_set_complex_value_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, scopes),
      NULL },

    { ngx_string("pty_share"),
      NGX_PTY_LOC|NGX_CONF_2MORE,
      ngx_pty_auth_share,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_close_codes"),
      NGX_PTY_LOC|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, close_codes),
      NULL },

    { ngx_string("pty_refuse"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS|NGX_CONF_TAKE1,
      ngx_pty_auth_refuse_set,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_audit_log"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_pty_audit_log_set,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_archive"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_pty_store_directive,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_archive_key"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_pty_store_key_directive,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_redact"),
      NGX_PTY_LOC|NGX_CONF_1MORE,
      ngx_conf_set_bitmask_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, redact),
      &ngx_pty_redact_who },

    { ngx_string("pty_redact_pattern"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_pty_redact_pattern,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_redact_secrets"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_pty_redact_secrets,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_redact_wait"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_pty_redact_wait,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_redact_builtin"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_FLAG,
      ngx_pty_redact_builtin,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("pty_closed_linger"),
      NGX_PTY_LOC|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_pty_loc_conf_t, closed_linger),
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_pty_module_ctx = {
    ngx_pty_auth_add_variables,            /* preconfiguration */
    ngx_pty_http_init,                     /* postconfiguration */

    ngx_pty_create_main_conf,              /* create main configuration */
    ngx_pty_init_main_conf,                /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_pty_create_loc_conf,               /* create location configuration */
    ngx_pty_merge_loc_conf                 /* merge location configuration */
};


ngx_module_t  ngx_pty_module = {
    NGX_MODULE_V1,
    &ngx_pty_module_ctx,                   /* module context */
    ngx_pty_commands,                      /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    ngx_pty_init_module,                   /* init module */
    ngx_pty_init_process,                  /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_pty_exit_process,                  /* exit process */
    ngx_pty_exit_master,                   /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_int_t
ngx_pty_attach_handler(ngx_http_request_t *r)
{
    ngx_int_t              rc;
    ngx_str_t              instance, id;
    ngx_pty_loc_conf_t    *plcf;
    ngx_pty_main_conf_t   *pmcf;
    ngx_pty_session_sh_t  *sh;

    pmcf = ngx_http_get_module_main_conf(r, ngx_pty_module);
    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    ngx_pty_http_log_hide(r);

    if (ngx_pty_shm_zone() == NULL) {
        return ngx_pty_api_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 "no_zone", "no pty_zone is configured");
    }

    if (ngx_pty_parse_attach_uri(r, &instance, &id) != NGX_OK) {
        return ngx_pty_api_error(r, NGX_HTTP_NOT_FOUND, "not_found",
                                 "attach at /agents/{instance_id}/sessions/"
                                 "{session_id}/attach");
    }

    if (instance.len != pmcf->instance_id.len
        || ngx_strncmp(instance.data, pmcf->instance_id.data, instance.len))
    {
        return ngx_pty_api_error(r, NGX_HTTP_NOT_FOUND, "wrong_instance",
                                 "this server is another instance");
    }

    /* who asks comes first: an anonymous caller learns nothing of ids */
    rc = ngx_pty_auth_check(r, NULL, 0);
    if (rc != NGX_OK) {
        return ngx_pty_auth_refuse(r, ngx_pty_auth_refusal(rc),
                                   plcf->close_codes);
    }

    sh = ngx_pty_shm_session_find(&id);
    if (sh == NULL) {
        /* an ended session the archive still has comes back for this */
        rc = ngx_pty_restore_attach(r, &id, ngx_pty_attach_session);
        if (rc != NGX_DECLINED) {
            return rc;
        }

        return ngx_pty_auth_refuse(r, NGX_PTY_REFUSE_NOT_FOUND,
                                   plcf->close_codes);
    }

    return ngx_pty_attach_session(r, sh);
}


/* the WebSocket for a session found (and retained), if the caller may */
static ngx_int_t
ngx_pty_attach_session(ngx_http_request_t *r, ngx_pty_session_sh_t *sh)
{
    ngx_int_t            rc;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    rc = ngx_pty_auth_check(r, sh, NGX_PTY_SCOPE_OBSERVE);
    if (rc != NGX_OK) {
        ngx_pty_shm_session_release(sh);
        return ngx_pty_auth_refuse(r, ngx_pty_auth_refusal(rc),
                                   plcf->close_codes);
    }

    rc = ngx_pty_binding_attach(r, sh);

    ngx_pty_shm_session_release(sh);

    switch (rc) {

    case NGX_DONE:
    case NGX_ERROR:
        return rc;

    case NGX_HTTP_PTY_UPGRADE_REQUIRED:
        (void) ngx_pty_ws_add_header(r, "Sec-WebSocket-Version", "13", 2);
        return ngx_pty_api_error(r, rc, "upgrade_required",
                                 "this is a WebSocket (RFC 6455, version 13) "
                                 "endpoint");

    default:
        return ngx_pty_api_error(r, rc, "bad_upgrade",
                                 "a WebSocket upgrade (HTTP/1.1, a "
                                 "Sec-WebSocket-Key of 16 bytes in base64) "
                                 "with the subprotocol "
                                 "\"" NGX_PTY_SUBPROTOCOL "\" is required");
    }
}


/* the last five segments: agents/{instance}/sessions/{id}/attach */
static ngx_int_t
ngx_pty_parse_attach_uri(ngx_http_request_t *r, ngx_str_t *instance,
    ngx_str_t *session)
{
    u_char      *p, *seg[6];
    ngx_uint_t   n;

    p = r->uri.data + r->uri.len;
    n = 0;
    seg[0] = p;

    while (p > r->uri.data && n < 5) {
        p--;

        if (*p == '/') {
            seg[++n] = p;
        }
    }

    /* seg[k]: the slash before segment 5-k; seg[0]: the end */
    if (n < 5) {
        return NGX_ERROR;
    }

#define ngx_pty_seg_is(k, s)                                                  \
    ((size_t) (seg[k - 1] - seg[k] - 1) == sizeof(s) - 1                      \
     && ngx_strncmp(seg[k] + 1, s, sizeof(s) - 1) == 0)

    if (!ngx_pty_seg_is(1, "attach") || !ngx_pty_seg_is(3, "sessions")
        || !ngx_pty_seg_is(5, "agents"))
    {
        return NGX_ERROR;
    }

#undef ngx_pty_seg_is

    instance->data = seg[4] + 1;
    instance->len = seg[3] - seg[4] - 1;
    session->data = seg[2] + 1;
    session->len = seg[1] - seg[2] - 1;

    return (instance->len && session->len) ? NGX_OK : NGX_ERROR;
}


static void *
ngx_pty_create_main_conf(ngx_conf_t *cf)
{
    ngx_pty_main_conf_t  *pmcf;

    pmcf = ngx_pcalloc(cf->pool, sizeof(ngx_pty_main_conf_t));
    if (pmcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     pmcf->shm_zone = NULL;
     *     pmcf->instance_id = { 0, NULL };
     */

    pmcf->zone_max_sessions = NGX_CONF_UNSET_UINT;
    pmcf->audit = NGX_CONF_UNSET_PTR;
    pmcf->store = NGX_CONF_UNSET_PTR;

    pmcf->redact = ngx_pcalloc(cf->pool, sizeof(ngx_pty_redact_conf_t));
    if (pmcf->redact == NULL) {
        return NULL;
    }

    pmcf->redact->builtin = NGX_CONF_UNSET;
    pmcf->redact->wait = NGX_CONF_UNSET_MSEC;

    return pmcf;
}


static char *
ngx_pty_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    if (pmcf->instance_id.data == NULL) {
        /* the host name: one instance per machine unless told otherwise */
        pmcf->instance_id = cf->cycle->hostname;
    }

    ngx_conf_init_uint_value(pmcf->zone_max_sessions, 0);
    ngx_conf_init_ptr_value(pmcf->audit, NULL);
    ngx_conf_init_ptr_value(pmcf->store, NULL);
    ngx_conf_init_value(pmcf->redact->builtin, 1);
    ngx_conf_init_msec_value(pmcf->redact->wait, 30);

    if (ngx_pty_redact_init_conf(cf, pmcf->redact) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static void *
ngx_pty_create_loc_conf(ngx_conf_t *cf)
{
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_pcalloc(cf->pool, sizeof(ngx_pty_loc_conf_t));
    if (plcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     plcf->handler = NGX_PTY_HANDLER_NONE;
     *     plcf->shell = { 0, NULL };
     *     plcf->command = { 0, NULL };
     */

    plcf->params.max_controllers = NGX_CONF_UNSET_UINT;
    plcf->params.max_observers = NGX_CONF_UNSET_UINT;
    plcf->params.keyframe_interval_seconds = NGX_CONF_UNSET_UINT;
    plcf->params.keyframe_interval_frames = NGX_CONF_UNSET_UINT;
    plcf->params.replay_buffer_frames = NGX_CONF_UNSET_UINT;
    plcf->params.replay_buffer_retention_seconds = NGX_CONF_UNSET_UINT;
    plcf->params.default_cols = NGX_CONF_UNSET_UINT;
    plcf->params.default_rows = NGX_CONF_UNSET_UINT;

    plcf->ring_size = NGX_CONF_UNSET_SIZE;
    plcf->ring_max_size = NGX_CONF_UNSET_SIZE;
    plcf->terminate_on_last_controller = NGX_CONF_UNSET;
    plcf->answer_queries = NGX_CONF_UNSET_UINT;
    plcf->scroll_size = NGX_CONF_UNSET_SIZE;
    plcf->input_max = NGX_CONF_UNSET_SIZE;
    plcf->ws_max_message = NGX_CONF_UNSET_SIZE;
    plcf->ws_send_buffer = NGX_CONF_UNSET_SIZE;
    plcf->ws_send_frames = NGX_CONF_UNSET_UINT;
    plcf->input_rate.rate = NGX_CONF_UNSET_SIZE;
    plcf->input_rate.burst = NGX_CONF_UNSET_SIZE;
    plcf->ws_ping_interval = NGX_CONF_UNSET_MSEC;
    plcf->ws_pong_timeout = NGX_CONF_UNSET_MSEC;
    plcf->api_cols = NGX_CONF_UNSET_UINT;
    plcf->api_rows = NGX_CONF_UNSET_UINT;
    plcf->api_max_body = NGX_CONF_UNSET_SIZE;
    plcf->api_page_size = NGX_CONF_UNSET_SIZE;
    plcf->api_wait = NGX_CONF_UNSET_MSEC;
    plcf->api_wait_for = NGX_CONF_UNSET_MSEC;
    plcf->api_wait_max = NGX_CONF_UNSET_MSEC;
    plcf->allow = NGX_CONF_UNSET_PTR;
    plcf->deny = NGX_CONF_UNSET_PTR;
    plcf->max_sessions = NGX_CONF_UNSET_UINT;
    plcf->max_cells = NGX_CONF_UNSET_UINT;
    plcf->session_max_memory = NGX_CONF_UNSET_SIZE;
    plcf->idle_timeout = NGX_CONF_UNSET_MSEC;
    plcf->max_age = NGX_CONF_UNSET_MSEC;
    plcf->env = NGX_CONF_UNSET_PTR;
    plcf->sandbox = NGX_CONF_UNSET_PTR;
    plcf->closed_linger = NGX_CONF_UNSET_MSEC;
    plcf->auth = NGX_CONF_UNSET;
    plcf->principal = NGX_CONF_UNSET_PTR;
    plcf->scopes = NGX_CONF_UNSET_PTR;
    plcf->share = NGX_CONF_UNSET_PTR;
    plcf->close_codes = NGX_CONF_UNSET;
    plcf->refuse = NGX_CONF_UNSET_UINT;

    return plcf;
}


static char *
ngx_pty_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_pty_loc_conf_t  *prev = parent;
    ngx_pty_loc_conf_t  *conf = child;

    ngx_pty_params_t  *p, *pp;

    p = &conf->params;
    pp = &prev->params;

    ngx_conf_merge_uint_value(p->max_controllers, pp->max_controllers, 1);
    ngx_conf_merge_uint_value(p->max_observers, pp->max_observers, 32);
    ngx_conf_merge_uint_value(p->keyframe_interval_seconds,
                              pp->keyframe_interval_seconds, 5);
    ngx_conf_merge_uint_value(p->keyframe_interval_frames,
                              pp->keyframe_interval_frames, 100);
    ngx_conf_merge_uint_value(p->replay_buffer_frames,
                              pp->replay_buffer_frames, 1000);
    ngx_conf_merge_uint_value(p->replay_buffer_retention_seconds,
                              pp->replay_buffer_retention_seconds, 86400);
    ngx_conf_merge_uint_value(p->default_cols, pp->default_cols, 120);
    ngx_conf_merge_uint_value(p->default_rows, pp->default_rows, 30);

    ngx_conf_merge_size_value(conf->ring_size, prev->ring_size, 512 * 1024);
    ngx_conf_merge_size_value(conf->ring_max_size, prev->ring_max_size,
                              16 * 1024 * 1024);
    if (ngx_pty_redact_merge(cf, &conf->redact, prev->redact)
        != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
    }

    ngx_conf_merge_value(conf->terminate_on_last_controller,
                         prev->terminate_on_last_controller, 0);
    ngx_conf_merge_uint_value(conf->answer_queries, prev->answer_queries,
                              NGX_PTY_ANSWER_AUTO);
    ngx_conf_merge_size_value(conf->scroll_size, prev->scroll_size,
                              256 * 1024);
    ngx_conf_merge_size_value(conf->input_max, prev->input_max, 64 * 1024);
    ngx_conf_merge_size_value(conf->ws_max_message, prev->ws_max_message,
                              1024 * 1024);
    ngx_conf_merge_size_value(conf->ws_send_buffer, prev->ws_send_buffer,
                              256 * 1024);
    ngx_conf_merge_uint_value(conf->ws_send_frames, prev->ws_send_frames,
                              1024);
    ngx_pty_merge_rate(conf, prev);
    ngx_conf_merge_msec_value(conf->ws_ping_interval, prev->ws_ping_interval,
                              30000);
    ngx_conf_merge_msec_value(conf->ws_pong_timeout, prev->ws_pong_timeout,
                              10000);
    ngx_conf_merge_uint_value(conf->api_cols, prev->api_cols, 120);
    ngx_conf_merge_uint_value(conf->api_rows, prev->api_rows, 32);
    ngx_conf_merge_size_value(conf->api_max_body, prev->api_max_body,
                              1024 * 1024);
    ngx_conf_merge_size_value(conf->api_page_size, prev->api_page_size,
                              64 * 1024);
    ngx_conf_merge_msec_value(conf->api_wait, prev->api_wait, 700);
    ngx_conf_merge_msec_value(conf->api_wait_for, prev->api_wait_for, 10000);
    ngx_conf_merge_msec_value(conf->api_wait_max, prev->api_wait_max, 30000);
    ngx_conf_merge_ptr_value(conf->allow, prev->allow, NULL);
    ngx_conf_merge_ptr_value(conf->deny, prev->deny, NULL);
    ngx_conf_merge_str_value(conf->command, prev->command, "");
    ngx_conf_merge_uint_value(conf->max_sessions, prev->max_sessions, 0);
    ngx_conf_merge_msec_value(conf->idle_timeout, prev->idle_timeout, 0);
    ngx_conf_merge_msec_value(conf->max_age, prev->max_age, 0);
    ngx_conf_merge_str_value(conf->shell, prev->shell, "/bin/bash");
    ngx_conf_merge_ptr_value(conf->env, prev->env, NULL);
    ngx_conf_merge_ptr_value(conf->sandbox, prev->sandbox, NULL);
    ngx_conf_merge_msec_value(conf->closed_linger, prev->closed_linger,
                              300000);

    ngx_conf_merge_uint_value(conf->max_cells, prev->max_cells,
                              NGX_PTY_MAX_CELLS);

    if (ngx_pty_merge_caps(cf, prev, conf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    if (ngx_pty_auth_merge(cf, prev, conf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    if (conf->ring_size < 64 * 1024) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"pty_ring_size\" must be at least 64k");
        return NGX_CONF_ERROR;
    }

    /* records and pads are multiples of 64 (ngx_pty_shm.h) */
    conf->ring_size = ngx_align(conf->ring_size, NGX_PTY_RING_ALIGN);
    conf->ring_max_size = ngx_max(conf->ring_max_size, conf->ring_size);

    if (conf->scroll_size < 4096) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"pty_scrollback_size\" must be at least 4k");
        return NGX_CONF_ERROR;
    }

    if (conf->ws_send_buffer < 16384) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"pty_ws_send_buffer\" must be at least 16k");
        return NGX_CONF_ERROR;
    }

    if (conf->api_page_size < 4096) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"pty_api_page_size\" must be at least 4k");
        return NGX_CONF_ERROR;
    }

    if (conf->api_wait > conf->api_wait_max
        || conf->api_wait_for > conf->api_wait_max)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"pty_api_wait\" and \"pty_api_wait_for\" "
                           "must not exceed \"pty_api_wait_max\"");
        return NGX_CONF_ERROR;
    }

    if (conf->shell.data[conf->shell.len] != '\0') {
        /* ngx_conf_set_str_slot values are terminated; defaults too */
        return "pty_shell is not terminated";
    }

    return NGX_CONF_OK;
}


/*
 * pty_max_cells bounds the sizes this location may set; pty_session_max_memory
 * bounds a session's rings and inbox in the zone: the scrollback and the
 * inbox get their sizes, the frame ring what is left.  Unset, the memory cap
 * is 8m, or what the location's own ring, scrollback and inbox sizes need.
 */
static ngx_int_t
ngx_pty_merge_caps(ngx_conf_t *cf, ngx_pty_loc_conf_t *prev,
    ngx_pty_loc_conf_t *conf)
{
    size_t  fixed, ring;

    if ((conf->handler == NGX_PTY_HANDLER_API
         || conf->handler == NGX_PTY_HANDLER_MCP)
        && conf->api_cols * conf->api_rows > conf->max_cells)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"pty_api_cols\" x \"pty_api_rows\" must not "
                           "exceed \"pty_max_cells\" %ui", conf->max_cells);
        return NGX_ERROR;
    }

    conf->inbox_max = ngx_max(2 * conf->input_max + 1024, 64 * 1024);
    fixed = conf->scroll_size + conf->inbox_max;

    ngx_conf_merge_size_value(conf->session_max_memory,
                              prev->session_max_memory,
                              ngx_max(NGX_PTY_SESSION_MEMORY,
                                      fixed + ngx_align(conf->ring_size,
                                                        NGX_PTY_RING_ALIGN)));

    if (conf->session_max_memory < fixed + 64 * 1024) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"pty_session_max_memory\" must be at least "
                           "\"pty_scrollback_size\" + 2 x \"pty_input_max\" "
                           "+ 64k (%uz)", fixed + 64 * 1024);
        return NGX_ERROR;
    }

    ring = (conf->session_max_memory - fixed)
           & ~((size_t) NGX_PTY_RING_ALIGN - 1);

    conf->ring_capped = (ring < ngx_max(conf->ring_max_size,
                                        conf->ring_size));
    conf->ring_max_size = ngx_min(conf->ring_max_size, ring);
    conf->ring_size = ngx_min(conf->ring_size, ring);

    return NGX_OK;
}


static char *
ngx_pty_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_main_conf_t  *pmcf = conf;

    u_char     *p;
    ssize_t     size;
    ngx_str_t  *value, name, s;

    if (pmcf->shm_zone) {
        return "is duplicate";
    }

    value = cf->args->elts;

    p = (u_char *) ngx_strchr(value[1].data, ':');
    if (p == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone \"%V\", use name:size", &value[1]);
        return NGX_CONF_ERROR;
    }

    name.data = value[1].data;
    name.len = p - value[1].data;

    s.data = p + 1;
    s.len = value[1].data + value[1].len - s.data;

    size = ngx_parse_size(&s);

    if (name.len == 0 || size == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (size < (ssize_t) (8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is too small", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (ngx_pty_zone_resized(cf, &name, size)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "the size of pty_zone \"%V\" cannot change while "
                           "nginx runs: its sessions live in it; stop and "
                           "start nginx to resize it", &name);
        return NGX_CONF_ERROR;
    }

    pmcf->shm_zone = ngx_shared_memory_add(cf, &name, size, &ngx_pty_module);
    if (pmcf->shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    if (pmcf->shm_zone->data) {
        return "is duplicate";
    }

    pmcf->shm_zone->init = ngx_pty_shm_init_zone;
    pmcf->shm_zone->data = pmcf;   /* replaced by the zone's root */
    pmcf->shm_zone->noreuse = 0;

    (void) cmd;

    return NGX_CONF_OK;
}


/*
 * A reload with another size would give nginx a new, empty zone, and the
 * running sessions (their keepers, rings, sequences) would be cut loose:
 * refuse it, so the old configuration keeps serving them.
 */
static ngx_uint_t
ngx_pty_zone_resized(ngx_conf_t *cf, ngx_str_t *name, ssize_t size)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_shm_zone_t   *zone;
    ngx_cycle_t      *old;

    old = cf->cycle->old_cycle;

    if (old == NULL || old->shared_memory.part.elts == NULL
        || ngx_is_init_cycle(old))
    {
        return 0;
    }

    part = &old->shared_memory.part;
    zone = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                return 0;
            }

            part = part->next;
            zone = part->elts;
            i = 0;
        }

        if (zone[i].tag == &ngx_pty_module
            && zone[i].shm.name.len == name->len
            && ngx_strncmp(zone[i].shm.name.data, name->data, name->len) == 0)
        {
            return zone[i].shm.size != (size_t) size;
        }
    }
}


static char *
ngx_pty_handler_set(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_loc_conf_t  *plcf = conf;

    ngx_http_core_loc_conf_t  *clcf;

    if (plcf->handler != NGX_PTY_HANDLER_NONE) {
        return "is duplicate";
    }

    plcf->handler = cmd->offset;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    plcf->handler_location = clcf->name;

    switch (cmd->offset) {

    case NGX_PTY_HANDLER_ATTACH:
        clcf->handler = ngx_pty_attach_handler;
        break;

    case NGX_PTY_HANDLER_CARD:
        clcf->handler = ngx_pty_card_handler;
        break;

    case NGX_PTY_HANDLER_MCP:
        clcf->handler = ngx_pty_mcp_handler;
        break;

    default:
        clcf->handler = ngx_pty_api_handler;
    }

    return NGX_CONF_OK;
}


/* pty_ws_send_buffer size [frames=number] */
static char *
ngx_pty_send_buffer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_loc_conf_t  *plcf = conf;

    ssize_t     size;
    ngx_int_t   n;
    ngx_str_t  *value, v;

    if (plcf->ws_send_buffer != NGX_CONF_UNSET_SIZE) {
        return "is duplicate";
    }

    value = cf->args->elts;

    size = ngx_parse_size(&value[1]);
    if (size == NGX_ERROR) {
        return "has an invalid size";
    }

    plcf->ws_send_buffer = size;

    if (cf->args->nelts == 3) {
        if (ngx_pty_param(&value[2], "frames=", &v) != NGX_OK) {
            return "takes a size and an optional \"frames=number\"";
        }

        n = ngx_atoi(v.data, v.len);
        if (n < 16 || n > 1000000) {
            return "takes \"frames=\" from 16 to 1000000";
        }

        plcf->ws_send_frames = n;
    }

    (void) cmd;

    return NGX_CONF_OK;
}


/* pty_input_rate off | rate [burst=size]: bytes per second */
static char *
ngx_pty_input_rate(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_loc_conf_t  *plcf = conf;

    ssize_t     rate, burst;
    ngx_str_t  *value, v;

    if (plcf->input_rate.rate != NGX_CONF_UNSET_SIZE) {
        return "is duplicate";
    }

    value = cf->args->elts;

    rate = (ngx_strcmp(value[1].data, "off") == 0)
           ? 0 : ngx_parse_size(&value[1]);

    if (rate == NGX_ERROR || rate > NGX_PTY_RATE_MAX) {
        return "takes \"off\" or a size per second up to 1g";
    }

    burst = NGX_CONF_UNSET_SIZE;

    if (cf->args->nelts == 3) {
        if (rate == 0 || ngx_pty_param(&value[2], "burst=", &v) != NGX_OK) {
            return "takes a rate and an optional \"burst=size\"";
        }

        burst = ngx_parse_size(&v);
        if (burst == NGX_ERROR || burst > NGX_PTY_RATE_MAX) {
            return "takes \"burst=\" as a size up to 1g";
        }
    }

    plcf->input_rate.rate = rate;
    plcf->input_rate.burst = burst;

    (void) cmd;

    return NGX_CONF_OK;
}


/* "name=value": the value */
static ngx_int_t
ngx_pty_param(ngx_str_t *arg, const char *name, ngx_str_t *value)
{
    size_t  len;

    len = ngx_strlen(name);

    if (arg->len <= len || ngx_strncmp(arg->data, name, len) != 0) {
        return NGX_ERROR;
    }

    value->data = arg->data + len;
    value->len = arg->len - len;

    return NGX_OK;
}


/*
 * The pair is set as one.  A burst is four seconds' worth unless given,
 * and at least pty_input_max, so that any frame that size allows passes
 * a full bucket.
 */
static void
ngx_pty_merge_rate(ngx_pty_loc_conf_t *conf, ngx_pty_loc_conf_t *prev)
{
    ngx_pty_rate_t  *r;

    r = &conf->input_rate;

    if (r->rate == NGX_CONF_UNSET_SIZE) {
        *r = prev->input_rate;
    }

    if (r->rate == NGX_CONF_UNSET_SIZE) {
        r->rate = 256 * 1024;
        r->burst = NGX_CONF_UNSET_SIZE;
    }

    if (r->rate == 0) {
        r->burst = 0;
        return;
    }

    if (r->burst == NGX_CONF_UNSET_SIZE) {
        r->burst = ngx_min(4 * r->rate, NGX_PTY_RATE_MAX);
    }

    r->burst = ngx_max(r->burst, conf->input_max);
}


static char *
ngx_pty_env(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_loc_conf_t  *plcf = conf;

    ngx_str_t  *value, *e;

    value = cf->args->elts;

    if (ngx_strlchr(value[1].data, value[1].data + value[1].len, '=')
        == NULL || value[1].data[0] == '=')
    {
        return "takes NAME=value";
    }

    if (plcf->env == NGX_CONF_UNSET_PTR) {
        plcf->env = ngx_array_create(cf->pool, 4, sizeof(ngx_str_t));
        if (plcf->env == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    e = ngx_array_push(plcf->env);
    if (e == NULL) {
        return NGX_CONF_ERROR;
    }

    *e = value[1];      /* the parser leaves values null-terminated */

    (void) cmd;

    return NGX_CONF_OK;
}


/*
 * pty_sandbox program [arg...] | off: what every program of the location
 * runs under, its words before the program's own.
 */
static char *
ngx_pty_sandbox(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_pty_loc_conf_t  *plcf = conf;

    char       **words;
    ngx_str_t   *value;
    ngx_uint_t   i;

    if (plcf->sandbox != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "off") == 0) {
        plcf->sandbox = NULL;
        return NGX_CONF_OK;
    }

    if (value[1].data[0] != '/') {
        return "takes the sandbox program's absolute path first";
    }

    if (access((char *) value[1].data, X_OK) == -1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "pty_sandbox: \"%V\" cannot be run", &value[1]);
        return NGX_CONF_ERROR;
    }

    words = ngx_palloc(cf->pool, cf->args->nelts * sizeof(char *));
    if (words == NULL) {
        return NGX_CONF_ERROR;
    }

    /* the parser leaves values null-terminated */
    for (i = 1; i < cf->args->nelts; i++) {
        words[i - 1] = (char *) value[i].data;
    }

    words[i - 1] = NULL;
    plcf->sandbox = words;

    (void) cmd;

    return NGX_CONF_OK;
}


/* pty_allow, pty_deny: one regex each, on the whole command line */
static char *
ngx_pty_rule(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
#if (NGX_PCRE)
    char  *p = conf;

    ngx_str_t             *value;
    ngx_array_t          **rules;
    ngx_pty_rule_t        *rule;
    ngx_regex_compile_t    rc;
    u_char                 errstr[NGX_MAX_CONF_ERRSTR];

    value = cf->args->elts;
    rules = (ngx_array_t **) (p + cmd->offset);

    if (*rules == NGX_CONF_UNSET_PTR || *rules == NULL) {
        *rules = ngx_array_create(cf->pool, 4, sizeof(ngx_pty_rule_t));
        if (*rules == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    rule = ngx_array_push(*rules);
    if (rule == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(&rc, sizeof(ngx_regex_compile_t));
    rc.pattern = value[1];
    rc.pool = cf->pool;
    rc.err.len = NGX_MAX_CONF_ERRSTR;
    rc.err.data = errstr;

    if (ngx_regex_compile(&rc) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V", &rc.err);
        return NGX_CONF_ERROR;
    }

    rule->regex = rc.regex;
    rule->pattern = value[1];

    return NGX_CONF_OK;

#else

    (void) conf;

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "\"%V\" requires PCRE in nginx", &cmd->name);
    return NGX_CONF_ERROR;

#endif
}


static ngx_int_t
ngx_pty_init_module(ngx_cycle_t *cycle)
{
    if (ngx_pty_store_init_module(cycle) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_pty_spawner_init(cycle);
}


static ngx_int_t
ngx_pty_init_process(ngx_cycle_t *cycle)
{
    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        /* a cache manager or loader: no forker, no doorbell, no orphans */
        return NGX_OK;
    }

    /*
     * nginx makes workers dumpable after setuid(); sessions' secrets and
     * terminals live in this memory, and no process of the workers' user
     * may trace it or read it through /proc
     */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, ngx_errno,
                      "pty: prctl(PR_SET_DUMPABLE, 0) failed");
        return NGX_ERROR;
    }

    ngx_pty_instance_started();

    if (ngx_pty_shm_zone() && ngx_pty_keeper_forker_start(cycle) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_pty_store_init_process(cycle) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_pty_doorbell_init(cycle);
}


/* the sessions this worker owned are rung over to the live workers */
static void
ngx_pty_exit_process(ngx_cycle_t *cycle)
{
    /* starts still waiting for a spare get their keepers, to be adopted */
    ngx_pty_keeper_spawn_flush(1);
    ngx_pty_sessions_shutdown(cycle);
    ngx_pty_doorbell_orphans();
    ngx_pty_doorbell_exit();
    ngx_pty_keeper_forker_stop();
    ngx_pty_store_exit_process(cycle);
}


static void
ngx_pty_exit_master(ngx_cycle_t *cycle)
{
    ngx_pty_sessions_terminate_all(cycle->log);
    ngx_pty_store_exit_master(cycle);
}
