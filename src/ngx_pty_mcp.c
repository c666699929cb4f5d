
/*
 * pty_mcp: an MCP server over the Streamable HTTP transport.
 *
 * Each POST carries one JSON-RPC message.  Requests get a JSON answer, or
 * an SSE stream when the client asked for progress during a long wait
 * (notifications/progress, then the answer); notifications and responses
 * get 202.  There is no server-initiated stream: GET and DELETE are 405.
 *
 * The tools are the agent engine's (ngx_pty_agent.c): one implementation
 * of start, write, read, kill and list, with the location's limits and
 * policy, whatever the transport.  An engine error is a tool error
 * (isError) carrying the HTTP API's error object.
 *
 * Sessions (Mcp-Session-Id) are stateless: the id is random bytes and a
 * MAC under a secret kept in the zone, so any worker, and any worker
 * after a reload, knows the ids the server gave.
 */

#include "ngx_pty.h"
#include "ngx_pty_mcp.h"
#include "ngx_pty_mcp_tools.h"
#include "ngx_pty_store.h"
#include "ngx_pty_shm.h"
#include "ngx_pty_agent.h"
#include "ngx_pty_api.h"
#include "ngx_pty_ws.h"
#include "ngx_pty_http.h"
#include "ngx_pty_util.h"
#include "ngx_pty_auth.h"

#include <ngx_sha1.h>


#define NGX_PTY_MCP_LATEST        "2025-11-25"
#define NGX_PTY_MCP_ID_RANDOM     16
#define NGX_PTY_MCP_ID_MAC        8
#define NGX_PTY_MCP_ID_LEN        (2 * (NGX_PTY_MCP_ID_RANDOM                 \
                                        + NGX_PTY_MCP_ID_MAC))
#define NGX_PTY_MCP_PROGRESS      1000     /* ms between notifications */

#define NGX_PTY_RPC_PARSE         -32700
#define NGX_PTY_RPC_INVALID       -32600
#define NGX_PTY_RPC_NO_METHOD     -32601
#define NGX_PTY_RPC_PARAMS        -32602
#define NGX_PTY_RPC_INTERNAL      -32603


typedef struct {
    ngx_http_request_t        *request;
    ngx_pty_agent_call_t       call;
    json_t                    *id;
    json_t                    *token;      /* progress token, or NULL */
    unsigned                   sse:1;      /* answering as an event stream */
} ngx_pty_mcp_ctx_t;


static void ngx_pty_mcp_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_pty_mcp_message(ngx_http_request_t *r, json_t *msg);
static ngx_int_t ngx_pty_mcp_initialize(ngx_http_request_t *r, json_t *id,
    json_t *params);
static ngx_int_t ngx_pty_mcp_tools_list(ngx_http_request_t *r, json_t *id);
static ngx_int_t ngx_pty_mcp_tools_call(ngx_http_request_t *r, json_t *id,
    json_t *params);
static json_t *ngx_pty_mcp_tool_result(ngx_pty_agent_call_t *call);
static void ngx_pty_mcp_done(ngx_pty_agent_call_t *call);
static void ngx_pty_mcp_progress(ngx_pty_agent_call_t *call,
    ngx_msec_t waited, ngx_msec_t timeout);
static void ngx_pty_mcp_ctx_cleanup(void *data);

static ngx_int_t ngx_pty_mcp_session_check(ngx_http_request_t *r);
static void ngx_pty_mcp_session_mac(u_char *random, u_char *mac);
static ngx_int_t ngx_pty_mcp_origin(ngx_http_request_t *r);
static ngx_int_t ngx_pty_mcp_add_header(ngx_http_request_t *r,
    const char *name, u_char *value, size_t len);
static ngx_uint_t ngx_pty_mcp_version(const char *v, size_t len);

static ngx_int_t ngx_pty_mcp_result(ngx_http_request_t *r, json_t *id,
    json_t *result);
static ngx_int_t ngx_pty_mcp_error(ngx_http_request_t *r,
    ngx_uint_t status, json_t *id, ngx_int_t code, const char *message);
static ngx_int_t ngx_pty_mcp_accepted(ngx_http_request_t *r);
static ngx_int_t ngx_pty_mcp_sse_start(ngx_http_request_t *r);
static ngx_int_t ngx_pty_mcp_event(ngx_http_request_t *r, json_t *msg,
    ngx_uint_t last);


static const char  *ngx_pty_mcp_versions[] = {
    NGX_PTY_MCP_LATEST, "2025-06-18", "2025-03-26", NULL
};

/* the tools offered, each an engine tool under the name "pty_" + its own */
static const char  *ngx_pty_mcp_tools[] = {
    "start", "write", "read", "kill", "list", "transcript", NULL
};

static json_t  *ngx_pty_mcp_tools_cache;


static const char  ngx_pty_mcp_instructions[] =
    "Terminal sessions on a server. pty_start runs a program (python3, "
    "bash, node, a debugger, a TUI) and returns its id; pty_write types "
    "into it and returns what it printed since the last read, as plain "
    "text; pty_read shows the screen of full-screen programs; pty_kill "
    "ends it. In input, \\x03 is Ctrl-C, \\x04 Ctrl-D, \\e Escape, \\r "
    "Enter (or submit: true). Prefer wait_for with the program's prompt "
    "(\">>> \", \"$ \") to guessing wait_ms.";


ngx_int_t
ngx_pty_mcp_handler(ngx_http_request_t *r)
{
    ngx_int_t            rc;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    ngx_pty_http_log_hide(r);

    if (ngx_pty_shm_zone() == NULL) {
        return ngx_pty_mcp_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                                 NGX_PTY_RPC_INTERNAL,
                                 "no pty_zone is configured");
    }

    if (ngx_pty_mcp_origin(r) != NGX_OK) {
        return ngx_pty_mcp_error(r, NGX_HTTP_FORBIDDEN, NULL,
                                 NGX_PTY_RPC_INVALID, "the Origin is not "
                                 "this server's");
    }

    /* a token in the query string was refused before auth_request */

    /* who calls, before a byte of the body is read: HTTP's 401 */
    rc = ngx_pty_auth_check(r, NULL, 0);
    if (rc != NGX_OK) {
        return ngx_pty_auth_api_refuse(r, rc);
    }

    if (r->method != NGX_HTTP_POST) {
        /* no stream of the server's own, no sessions to end (DELETE) */
        if (ngx_pty_ws_add_header(r, "Allow", "POST", 4) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        return ngx_pty_mcp_error(r, NGX_HTTP_NOT_ALLOWED, NULL,
                                 NGX_PTY_RPC_INVALID, "this MCP endpoint "
                                 "takes POSTs of JSON-RPC messages");
    }

    if (r->headers_in.content_length_n > (off_t) plcf->api_max_body) {
        return ngx_pty_mcp_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, NULL,
                                 NGX_PTY_RPC_INVALID, "request body too "
                                 "large (pty_api_max_body)");
    }

    r->request_body_in_single_buf = 1;

    rc = ngx_http_read_client_request_body(r, ngx_pty_mcp_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


static void
ngx_pty_mcp_body_handler(ngx_http_request_t *r)
{
    u_char        msg[256];
    json_t       *req;
    ngx_int_t     rc;
    ngx_buf_t    *b;
    json_error_t  err;

    /* the part that came with the header and the rest are one body */
    rc = ngx_pty_api_body(r, &b);

    if (rc != NGX_OK || b == NULL) {
        rc = ngx_pty_mcp_error(r, NGX_HTTP_BAD_REQUEST, NULL,
                               NGX_PTY_RPC_INVALID, rc != NGX_OK ? "the body "
                               "must fit client_body_buffer_size" : "no body");
        ngx_http_finalize_request(r, rc);
        return;
    }

    req = json_loadb((char *) b->pos, b->last - b->pos,
                     JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);

    if (req == NULL) {
        ngx_snprintf(msg, sizeof(msg) - 1, "Parse error: %s%Z", err.text);
        rc = ngx_pty_mcp_error(r, NGX_HTTP_BAD_REQUEST, NULL,
                               NGX_PTY_RPC_PARSE, (char *) msg);
        ngx_http_finalize_request(r, rc);
        return;
    }

    rc = ngx_pty_mcp_message(r, req);

    json_decref(req);

    if (rc == NGX_DONE) {
        /* a tool call waits; it holds the body's request reference */
        return;
    }

    ngx_http_finalize_request(r, rc);
}


/* one JSON-RPC message: what to finalize with, or NGX_DONE */
static ngx_int_t
ngx_pty_mcp_message(ngx_http_request_t *r, json_t *msg)
{
    json_t           *id, *method, *params;
    ngx_table_elt_t  *h;
    const char       *m;

    if (json_is_array(msg)) {
        return ngx_pty_mcp_error(r, NGX_HTTP_BAD_REQUEST, NULL,
                                 NGX_PTY_RPC_INVALID, "JSON-RPC batches are "
                                 "not supported (MCP 2025-06-18 and later)");
    }

    if (!json_is_object(msg)) {
        return ngx_pty_mcp_error(r, NGX_HTTP_BAD_REQUEST, NULL,
                                 NGX_PTY_RPC_INVALID, "a JSON-RPC message "
                                 "is an object");
    }

    h = ngx_pty_ws_header(r, "mcp-protocol-version");

    if (h && !ngx_pty_mcp_version((char *) h->value.data, h->value.len)) {
        return ngx_pty_mcp_error(r, NGX_HTTP_BAD_REQUEST, NULL,
                                 NGX_PTY_RPC_INVALID, "unsupported "
                                 "MCP-Protocol-Version (this server speaks "
                                 "2025-03-26 to " NGX_PTY_MCP_LATEST ")");
    }

    method = json_object_get(msg, "method");
    id = json_object_get(msg, "id");
    params = json_object_get(msg, "params");

    if (method == NULL
        && (json_object_get(msg, "result") || json_object_get(msg, "error")))
    {
        /* a response: the server never asks, so nothing waits for it */
        return ngx_pty_mcp_accepted(r);
    }

    if (!json_is_string(method)
        || (id && !json_is_string(id) && !json_is_integer(id))
        || (params && !json_is_object(params)))
    {
        return ngx_pty_mcp_error(r, NGX_HTTP_BAD_REQUEST,
                                 json_is_string(id) || json_is_integer(id)
                                 ? id : NULL, NGX_PTY_RPC_INVALID,
                                 "not a JSON-RPC 2.0 request");
    }

    m = json_string_value(method);

    if (ngx_strcmp(m, "initialize") == 0 && id) {
        return ngx_pty_mcp_initialize(r, id, params);
    }

    switch (ngx_pty_mcp_session_check(r)) {

    case NGX_OK:
        break;

    case NGX_DECLINED:
        return ngx_pty_mcp_error(r, NGX_HTTP_BAD_REQUEST, id,
                                 NGX_PTY_RPC_INVALID, "Mcp-Session-Id is "
                                 "required after initialize");

    default:
        return ngx_pty_mcp_error(r, NGX_HTTP_NOT_FOUND, id,
                                 NGX_PTY_RPC_INVALID, "unknown "
                                 "Mcp-Session-Id: initialize again");
    }

    if (id == NULL) {
        /* notifications: initialized, cancelled (closing the connection
         * of the call is what ends its wait), progress... */
        return ngx_pty_mcp_accepted(r);
    }

    if (ngx_strcmp(m, "ping") == 0) {
        return ngx_pty_mcp_result(r, id, json_object());
    }

    if (ngx_strcmp(m, "tools/list") == 0) {
        return ngx_pty_mcp_tools_list(r, id);
    }

    if (ngx_strcmp(m, "tools/call") == 0) {
        return ngx_pty_mcp_tools_call(r, id, params);
    }

    return ngx_pty_mcp_error(r, NGX_HTTP_OK, id, NGX_PTY_RPC_NO_METHOD,
                             "Method not found");
}


static ngx_int_t
ngx_pty_mcp_initialize(ngx_http_request_t *r, json_t *id, json_t *params)
{
    u_char       raw[NGX_PTY_MCP_ID_RANDOM + NGX_PTY_MCP_ID_MAC];
    u_char       sid[NGX_PTY_MCP_ID_LEN];
    json_t      *v;
    const char  *version;

    v = params ? json_object_get(params, "protocolVersion") : NULL;

    if (!json_is_string(v)) {
        return ngx_pty_mcp_error(r, NGX_HTTP_OK, id, NGX_PTY_RPC_PARAMS,
                                 "initialize needs \"protocolVersion\"");
    }

    /* the client's version if we speak it, else our newest */
    version = ngx_pty_mcp_version(json_string_value(v), json_string_length(v))
              ? json_string_value(v) : NGX_PTY_MCP_LATEST;

    if (ngx_pty_random(raw, NGX_PTY_MCP_ID_RANDOM) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_pty_mcp_session_mac(raw, raw + NGX_PTY_MCP_ID_RANDOM);
    ngx_hex_dump(sid, raw, sizeof(raw));

    if (ngx_pty_mcp_add_header(r, "Mcp-Session-Id", sid, sizeof(sid))
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_pty_mcp_result(r, id,
               json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}",
                         "protocolVersion", version,
                         "capabilities", "tools", "listChanged", 0,
                         "serverInfo", "name", "ngx_pty_module",
                         "title", "Terminals on nginx",
                         "version", NGX_PTY_BINDING_VER,
                         "instructions", ngx_pty_mcp_instructions));
}


static ngx_int_t
ngx_pty_mcp_tools_list(ngx_http_request_t *r, json_t *id)
{
    size_t               i;
    json_t              *tools, *tool;
    const char          *name;
    json_error_t         err;
    ngx_pty_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);

    if (ngx_pty_mcp_tools_cache == NULL) {
        ngx_pty_mcp_tools_cache = json_loads(ngx_pty_mcp_tools_json, 0,
                                             &err);

        if (ngx_pty_mcp_tools_cache == NULL) {
            ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                          "pty: the MCP tools do not parse: %s", err.text);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    if (plcf->command.len == 0 && ngx_pty_store_enabled()) {
        tools = json_incref(ngx_pty_mcp_tools_cache);

    } else {
        /*
         * pty_command: start takes no command (the others still need
         * "id"); no archive: no transcripts
         */
        tools = json_deep_copy(ngx_pty_mcp_tools_cache);

        for (i = json_array_size(tools); i-- > 0; /* void */) {
            name = json_string_value(json_object_get(json_array_get(tools, i),
                                                     "name"));

            if (plcf->command.len && ngx_strcmp(name, "pty_start") == 0) {
                tool = json_array_get(tools, i);
                json_object_del(json_object_get(tool, "inputSchema"),
                                "required");
            }

            if (!ngx_pty_store_enabled()
                && ngx_strcmp(name, "pty_transcript") == 0)
            {
                json_array_remove(tools, i);
            }
        }
    }

    return ngx_pty_mcp_result(r, id, json_pack("{s:o}", "tools", tools));
}


static ngx_int_t
ngx_pty_mcp_tools_call(ngx_http_request_t *r, json_t *id, json_t *params)
{
    json_t                    *name, *args, *meta;
    ngx_int_t                  rc, tool;
    ngx_str_t                  n;
    ngx_uint_t                 i;
    ngx_table_elt_t           *accept;
    ngx_pool_cleanup_t        *cln;
    ngx_pty_mcp_ctx_t         *ctx;
    ngx_http_core_loc_conf_t  *clcf;

    name = params ? json_object_get(params, "name") : NULL;
    args = params ? json_object_get(params, "arguments") : NULL;

    if (!json_is_string(name) || (args && !json_is_object(args))) {
        return ngx_pty_mcp_error(r, NGX_HTTP_OK, id, NGX_PTY_RPC_PARAMS,
                                 "tools/call takes \"name\" and an object "
                                 "of \"arguments\"");
    }

    tool = NGX_ERROR;

    for (i = 0; ngx_pty_mcp_tools[i]; i++) {
        if (ngx_strncmp(json_string_value(name), "pty_", 4) == 0
            && ngx_strcmp(json_string_value(name) + 4, ngx_pty_mcp_tools[i])
               == 0)
        {
            n.data = (u_char *) ngx_pty_mcp_tools[i];
            n.len = ngx_strlen(n.data);
            tool = ngx_pty_agent_tool(&n);
        }
    }

    if (tool == NGX_ERROR) {
        return ngx_pty_mcp_error(r, NGX_HTTP_OK, id, NGX_PTY_RPC_PARAMS,
                                 "unknown tool");
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_pty_mcp_ctx_t));
    cln = ngx_pool_cleanup_add(r->pool, 0);

    if (ctx == NULL || cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    meta = json_object_get(params, "_meta");

    ctx->request = r;
    ctx->id = json_incref(id);
    ctx->token = json_incref(meta ? json_object_get(meta, "progressToken")
                                  : NULL);
    cln->handler = ngx_pty_mcp_ctx_cleanup;
    cln->data = ctx;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);
    accept = ngx_pty_ws_header(r, "accept");

    ctx->call.request = r;
    ctx->call.pool = r->pool;
    ctx->call.log = r->connection->log;
    ctx->call.conf = ngx_http_get_module_loc_conf(r, ngx_pty_module);
    ctx->call.main_conf = ngx_http_get_module_main_conf(r, ngx_pty_module);
    ctx->call.loc_tag = ngx_pty_loc_tag(&clcf->name);
    ctx->call.done = ngx_pty_mcp_done;
    ctx->call.data = ctx;

    if (ctx->token && accept
        && ngx_strlcasestrn(accept->value.data,
                            accept->value.data + accept->value.len,
                            (u_char *) "text/event-stream", 17 - 1))
    {
        ctx->call.progress = ngx_pty_mcp_progress;
        ctx->call.progress_interval = NGX_PTY_MCP_PROGRESS;
    }

    args = args ? json_incref(args) : json_object();
    rc = ngx_pty_agent_run(&ctx->call, tool, args);
    json_decref(args);

    if (rc == NGX_AGAIN) {
        if (ctx->call.progress) {
            /* progress comes before the answer: a stream */
            ctx->sse = 1;

            rc = ngx_pty_mcp_sse_start(r);
            if (rc == NGX_ERROR || rc > NGX_OK) {
                ngx_pty_agent_cancel(&ctx->call);
                return rc == NGX_ERROR ? NGX_ERROR : rc;
            }
        }

        /* a client that goes away ends the wait (the pool's cleanup) */
        r->read_event_handler = ngx_http_test_reading;
        r->write_event_handler = ngx_http_request_empty_handler;
        return NGX_DONE;
    }

    if (rc != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_pty_mcp_result(r, id, ngx_pty_mcp_tool_result(&ctx->call));

    /* the pool's cleanup would drop it again */
    json_decref(ctx->call.answer);
    ctx->call.answer = NULL;

    return rc;
}


/* the engine's answer as an MCP tool result */
static json_t *
ngx_pty_mcp_tool_result(ngx_pty_agent_call_t *call)
{
    char    *text;
    json_t  *result;

    if (call->answer == NULL) {
        return NULL;
    }

    text = json_dumps(call->answer, JSON_COMPACT);
    if (text == NULL) {
        return NULL;
    }

    result = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
                       "text", text, "isError", call->status != NGX_HTTP_OK);
    free(text);

    if (result && call->status == NGX_HTTP_OK) {
        json_object_set(result, "structuredContent", call->answer);
    }

    return result;
}


static void
ngx_pty_mcp_done(ngx_pty_agent_call_t *call)
{
    json_t              *msg;
    ngx_int_t            rc;
    ngx_connection_t    *c;
    ngx_pty_mcp_ctx_t   *ctx;
    ngx_http_request_t  *r;

    ctx = call->data;
    r = ctx->request;
    c = r->connection;

    if (ctx->sse) {
        msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", ctx->id,
                        "result", ngx_pty_mcp_tool_result(call));
        rc = msg ? ngx_pty_mcp_event(r, msg, 1) : NGX_ERROR;

    } else {
        rc = ngx_pty_mcp_result(r, ctx->id, ngx_pty_mcp_tool_result(call));
    }

    json_decref(call->answer);
    call->answer = NULL;

    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}


/* once a second of a long wait, on the stream */
static void
ngx_pty_mcp_progress(ngx_pty_agent_call_t *call, ngx_msec_t waited,
    ngx_msec_t timeout)
{
    u_char              text[96];
    json_t             *msg;
    ngx_pty_mcp_ctx_t  *ctx;

    ctx = call->data;

    if (!ctx->sse) {
        return;
    }

    ngx_snprintf(text, sizeof(text), "waited %M of at most %M ms%Z",
                 waited, timeout);

    msg = json_pack("{s:s, s:s, s:{s:O, s:I, s:I, s:s}}",
                    "jsonrpc", "2.0", "method", "notifications/progress",
                    "params", "progressToken", ctx->token,
                    "progress", (json_int_t) waited,
                    "total", (json_int_t) timeout, "message", (char *) text);

    if (msg) {
        (void) ngx_pty_mcp_event(ctx->request, msg, 0);
    }
}


static void
ngx_pty_mcp_ctx_cleanup(void *data)
{
    ngx_pty_mcp_ctx_t  *ctx = data;

    json_decref(ctx->id);
    json_decref(ctx->token);
    json_decref(ctx->call.answer);
    ctx->call.answer = NULL;
}


/*
 * NGX_OK: a session id this server gave; NGX_DECLINED: none given;
 * NGX_ERROR: one it did not give.
 */
static ngx_int_t
ngx_pty_mcp_session_check(ngx_http_request_t *r)
{
    u_char            raw[NGX_PTY_MCP_ID_RANDOM + NGX_PTY_MCP_ID_MAC];
    u_char            mac[NGX_PTY_MCP_ID_MAC];
    ngx_uint_t        i;
    ngx_table_elt_t  *h;

    h = ngx_pty_ws_header(r, "mcp-session-id");

    if (h == NULL) {
        return NGX_DECLINED;
    }

    if (h->value.len != NGX_PTY_MCP_ID_LEN) {
        return NGX_ERROR;
    }

    for (i = 0; i < sizeof(raw); i++) {
        if (ngx_hextoi(h->value.data + 2 * i, 2) == NGX_ERROR) {
            return NGX_ERROR;
        }

        raw[i] = (u_char) ngx_hextoi(h->value.data + 2 * i, 2);
    }

    ngx_pty_mcp_session_mac(raw, mac);

    return ngx_memcmp(mac, raw + NGX_PTY_MCP_ID_RANDOM, NGX_PTY_MCP_ID_MAC)
           == 0 ? NGX_OK : NGX_ERROR;
}


static void
ngx_pty_mcp_session_mac(u_char *random, u_char *mac)
{
    u_char           digest[20];
    ngx_sha1_t       sha1;
    ngx_pty_zone_t  *zone;

    zone = ngx_pty_shm_zone();

    ngx_sha1_init(&sha1);
    ngx_sha1_update(&sha1, zone->sh->mcp_secret, sizeof(zone->sh->mcp_secret));
    ngx_sha1_update(&sha1, random, NGX_PTY_MCP_ID_RANDOM);
    ngx_sha1_final(digest, &sha1);

    ngx_memcpy(mac, digest, NGX_PTY_MCP_ID_MAC);
}


/*
 * A browser's request from another site (DNS rebinding) carries an
 * Origin that is not this server: refused.  Clients that are not
 * browsers send none.
 */
static ngx_int_t
ngx_pty_mcp_origin(ngx_http_request_t *r)
{
    u_char           *p, *last, *host;
    ngx_table_elt_t  *origin;

    origin = ngx_pty_ws_header(r, "origin");

    if (origin == NULL) {
        return NGX_OK;
    }

    if (r->headers_in.host == NULL) {
        return NGX_ERROR;
    }

    p = origin->value.data;
    last = p + origin->value.len;

    for (host = p; host + 3 <= last && ngx_strncmp(host, "://", 3) != 0;
         host++)
    {
        /* void */
    }

    if (host + 3 > last) {
        return NGX_ERROR;
    }

    host += 3;

    for (p = host; p < last && *p != '/'; p++) { /* void */ }

    if ((size_t) (p - host) != r->headers_in.host->value.len
        || ngx_strncasecmp(host, r->headers_in.host->value.data, p - host)
           != 0)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* a response header whose value is copied to the pool */
static ngx_int_t
ngx_pty_mcp_add_header(ngx_http_request_t *r, const char *name,
    u_char *value, size_t len)
{
    u_char  *p;

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(p, value, len);

    return ngx_pty_ws_add_header(r, name, (char *) p, len);
}


static ngx_uint_t
ngx_pty_mcp_version(const char *v, size_t len)
{
    ngx_uint_t  i;

    for (i = 0; ngx_pty_mcp_versions[i]; i++) {
        if (ngx_strlen(ngx_pty_mcp_versions[i]) == len
            && ngx_strncmp(ngx_pty_mcp_versions[i], v, len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/* answers */

static ngx_int_t
ngx_pty_mcp_result(ngx_http_request_t *r, json_t *id, json_t *result)
{
    if (result == NULL) {
        return ngx_pty_mcp_error(r, NGX_HTTP_OK, id, NGX_PTY_RPC_INTERNAL,
                                 "out of memory");
    }

    return ngx_pty_api_send(r, NGX_HTTP_OK,
                            json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0",
                                      "id", id, "result", result));
}


static ngx_int_t
ngx_pty_mcp_error(ngx_http_request_t *r, ngx_uint_t status, json_t *id,
    ngx_int_t code, const char *message)
{
    if (!r->request_body) {
        /* refused before reading: the body must not be taken for a request */
        if (ngx_http_discard_request_body(r) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    return ngx_pty_api_send(r, status,
                            json_pack("{s:s, s:O, s:{s:I, s:s}}",
                                      "jsonrpc", "2.0",
                                      "id", id ? id : json_null(),
                                      "error", "code", (json_int_t) code,
                                      "message", message));
}


/* 202, no body: a notification or a response taken */
static ngx_int_t
ngx_pty_mcp_accepted(ngx_http_request_t *r)
{
    r->headers_out.status = NGX_HTTP_ACCEPTED;
    r->headers_out.content_length_n = 0;
    r->header_only = 1;

    if (ngx_pty_worker_header(r) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_send_header(r);
}


static ngx_int_t
ngx_pty_mcp_sse_start(ngx_http_request_t *r)
{
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = -1;
    ngx_str_set(&r->headers_out.content_type, "text/event-stream");
    r->headers_out.content_type_len = r->headers_out.content_type.len;

    if (ngx_pty_ws_add_header(r, "Cache-Control", "no-cache", 8) != NGX_OK
        || ngx_pty_ws_add_header(r, "X-Accel-Buffering", "no", 2) != NGX_OK
        || ngx_pty_worker_header(r) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_http_send_header(r);
}


/* a message on the stream; the last ends it */
static ngx_int_t
ngx_pty_mcp_event(ngx_http_request_t *r, json_t *msg, ngx_uint_t last)
{
    char         *text;
    size_t        len;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);

    if (text == NULL) {
        return NGX_ERROR;
    }

    len = ngx_strlen(text);

    b = ngx_create_temp_buf(r->pool, len + sizeof("event: message\ndata: "
                                                  "\n\n"));
    if (b == NULL) {
        free(text);
        return NGX_ERROR;
    }

    b->last = ngx_cpymem(b->last, "event: message\ndata: ",
                         sizeof("event: message\ndata: ") - 1);
    b->last = ngx_cpymem(b->last, text, len);
    *b->last++ = '\n';
    *b->last++ = '\n';
    free(text);

    b->flush = 1;
    b->last_buf = last && (r == r->main);
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}
