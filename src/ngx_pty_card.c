
/*
 * The AgentCard.  The params are this location's, which it inherits from
 * the server and http levels: set them there so that the card and the
 * attach location agree (docs/PROTOCOL.md, "AgentCard").
 */

#include "ngx_pty.h"

#include <jansson.h>
#include "ngx_pty_card.h"
#include "ngx_pty_api.h"
#include "ngx_pty_http.h"


#define NGX_PTY_CARD_NOTES                                                    \
    "One WebSocket per session at /agents/{instance_id}/sessions/"           \
    "{session_id}/attach, subprotocol pty-ws.v1, text frames only. "         \
    "Activate pty-extensions/v1 with the A2A-Extensions header on the "      \
    "upgrade or \"extensions\" on the first frame. The pty-ws/v1 binding "   \
    "is the only one carrying pty-extensions/v1: the HTTP API refuses it "   \
    "with UnsupportedExtension. Task operations and ListTasks are scoped "   \
    "to the connection's session. Replay is kept in memory shared by the "  \
    "workers: at least replay_buffer_frames frames per session."


static json_t *ngx_pty_card_params(ngx_pty_params_t *p);
static json_t *ngx_pty_card_binding(ngx_http_request_t *r,
    ngx_str_t *instance);


ngx_int_t
ngx_pty_card_handler(ngx_http_request_t *r)
{
    json_t               *card;
    ngx_pty_loc_conf_t   *plcf;
    ngx_pty_main_conf_t  *pmcf;

    ngx_pty_http_log_hide(r);

    if (r->method != NGX_HTTP_GET && r->method != NGX_HTTP_HEAD) {
        return ngx_pty_api_error(r, NGX_HTTP_NOT_ALLOWED, "method",
                                 "the AgentCard is read with GET");
    }

    plcf = ngx_http_get_module_loc_conf(r, ngx_pty_module);
    pmcf = ngx_http_get_module_main_conf(r, ngx_pty_module);

    card = json_pack("{s:s, s:s, s:s, s:s, s:s%, "
                     "s:{s:b, s:b, s:b, s:[{s:s, s:s, s:b, s:o}]}, "
                     "s:[s], s:[s], "
                     "s:[{s:s, s:s, s:s, s:[s]}], s:[o]}",
                     "name", "ngx_pty_module",
                     "description", "Interactive terminal sessions served "
                                    "by nginx: people and IDEs attach over "
                                    "pty-ws/v1, agents use the HTTP API; "
                                    "both see the same sessions.",
                     "version", NGX_PTY_BINDING_VER,
                     "protocolVersion", "0.3.0",
                     "instance_id", pmcf->instance_id.data,
                     pmcf->instance_id.len,
                     "capabilities",
                         "streaming", 1,
                         "pushNotifications", 0,
                         "stateTransitionHistory", 0,
                         "extensions",
                             "uri", NGX_PTY_EXT_URI,
                             "description", "Interactive PTY sessions: "
                                            "role-based attach, replay "
                                            "buffer, Keyframe snapshots.",
                             "required", 0,
                             "params", ngx_pty_card_params(&plcf->params),
                     "defaultInputModes", "text/plain",
                     "defaultOutputModes", "text/plain",
                     "skills",
                         "id", "pty",
                         "name", "Interactive terminal",
                         "description", "Run programs that need a real "
                                        "terminal and attach to them.",
                         "tags", "terminal",
                     "bindings",
                         ngx_pty_card_binding(r, &pmcf->instance_id));

    return ngx_pty_api_send(r, NGX_HTTP_OK, card);
}


static json_t *
ngx_pty_card_params(ngx_pty_params_t *p)
{
    /* json_pack's "I" is json_int_t: the values are at most 10^9 */
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                     "max_controllers", (json_int_t) p->max_controllers,
                     "max_observers", (json_int_t) p->max_observers,
                     "keyframe_interval_seconds",
                     (json_int_t) p->keyframe_interval_seconds,
                     "keyframe_interval_frames",
                     (json_int_t) p->keyframe_interval_frames,
                     "replay_buffer_frames",
                     (json_int_t) p->replay_buffer_frames,
                     "replay_buffer_retention_seconds",
                     (json_int_t) p->replay_buffer_retention_seconds,
                     "default_cols", (json_int_t) p->default_cols,
                     "default_rows", (json_int_t) p->default_rows);
}


static json_t *
ngx_pty_card_binding(ngx_http_request_t *r, ngx_str_t *instance)
{
    (void) r;

    return json_pack("{s:s, s:s, s:s, s:s, s:s+#+, s:[s], s:s}",
                     "uri", NGX_PTY_BINDING_URI,
                     "version", NGX_PTY_BINDING_VER,
                     "transport", "websocket",
                     "subprotocol", NGX_PTY_SUBPROTOCOL,
                     "url_template", "/agents/", instance->data,
                     instance->len, "/sessions/{session_id}/attach",
                     "extensions", NGX_PTY_EXT_URI,
                     "notes", NGX_PTY_CARD_NOTES);
}
