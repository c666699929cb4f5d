
/*
 * The agent engine: the tools start, write, read, kill, list and status
 * on JSON arguments, with their waits (wait_for, wait_for_regex, wait_ms,
 * settle_ms), the settled-text reader and the answers.  Transports call
 * it: the HTTP API (ngx_pty_api.c), the MCP endpoint (ngx_pty_mcp.c) and
 * anything else that speaks for an agent.  It knows nothing of HTTP: a
 * call carries its pool, log, location settings and a callback for an
 * answer that comes later.
 */

#ifndef _NGX_PTY_AGENT_H_INCLUDED_
#define _NGX_PTY_AGENT_H_INCLUDED_


#include <jansson.h>

#include "ngx_pty.h"


typedef enum {
    NGX_PTY_AGENT_START = 0,
    NGX_PTY_AGENT_WRITE,
    NGX_PTY_AGENT_READ,
    NGX_PTY_AGENT_KILL,
    NGX_PTY_AGENT_LIST,
    NGX_PTY_AGENT_STATUS,
    NGX_PTY_AGENT_REVOKE,
    NGX_PTY_AGENT_TRANSCRIPT,
    NGX_PTY_AGENT_NTOOLS
} ngx_pty_agent_tool_e;


typedef struct ngx_pty_agent_call_s  ngx_pty_agent_call_t;

/* the answer of a call that returned NGX_AGAIN is ready */
typedef void (*ngx_pty_agent_done_pt)(ngx_pty_agent_call_t *call);

/* a long wait goes on: waited so far, of at most timeout (ms) */
typedef void (*ngx_pty_agent_progress_pt)(ngx_pty_agent_call_t *call,
    ngx_msec_t waited, ngx_msec_t timeout);


struct ngx_pty_agent_call_s {
    /* set by the transport */
    ngx_http_request_t        *request;    /* who calls: identity, audit */
    ngx_pool_t                *pool;       /* freeing it cancels a wait */
    ngx_log_t                 *log;
    ngx_pty_loc_conf_t        *conf;       /* limits and policy */
    ngx_pty_main_conf_t       *main_conf;
    uint32_t                   loc_tag;    /* pty_max_sessions' count */
    ngx_pty_agent_done_pt      done;
    ngx_pty_agent_progress_pt  progress;   /* NULL: none */
    ngx_msec_t                 progress_interval;
    void                      *data;

    /*
     * The answer: status 200 and the tool's object, or an HTTP status
     * and {"error":{"code":..,"message":..,...facts}}.  The transport
     * owns the reference.
     */
    ngx_uint_t                 status;
    json_t                    *answer;

    void                      *wait;       /* the engine's */
};


/* the tool by name, or NGX_ERROR */
ngx_int_t ngx_pty_agent_tool(ngx_str_t *name);
const char *ngx_pty_agent_tool_name(ngx_uint_t tool);

/*
 * Runs a tool on its arguments (a JSON object; the call keeps no
 * reference).  NGX_OK: answered; NGX_AGAIN: call->done() answers later,
 * unless the pool goes first; NGX_ERROR: out of memory, no answer.
 */
ngx_int_t ngx_pty_agent_run(ngx_pty_agent_call_t *call, ngx_uint_t tool,
    json_t *args);

/* ends a wait without an answer (the pool's cleanup does the same) */
void ngx_pty_agent_cancel(ngx_pty_agent_call_t *call);

/*
 * Members: absent or null gives the default (for a boolean: false);
 * NGX_ERROR: the wrong type or out of range.
 */
ngx_int_t ngx_pty_agent_uint(json_t *args, const char *name, ngx_uint_t min,
    ngx_uint_t max, ngx_uint_t def, ngx_uint_t *v);
ngx_int_t ngx_pty_agent_bool(json_t *args, const char *name, ngx_uint_t *v);

/* the answer of an ngx_pty_auth_check() refusal; returns NGX_OK */
ngx_int_t ngx_pty_agent_refuse(ngx_pty_agent_call_t *call, ngx_int_t status);

/* sets an error answer; returns NGX_OK */
ngx_int_t ngx_pty_agent_error(ngx_pty_agent_call_t *call, ngx_uint_t status,
    const char *code, const char *message);


#endif /* _NGX_PTY_AGENT_H_INCLUDED_ */
