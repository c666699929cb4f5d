
/*
 * The agent engine (ngx_pty_agent.h): the tools on JSON arguments, their
 * waits and their answers, for every transport.
 *
 * Waiting never blocks the worker: a call that waits (write's and
 * start's wait_for, wait_ms and settle_ms, kill's grace, read's wait)
 * becomes a waiter, a session listener plus a timer, and answers from
 * whichever of them sees its condition first.  The answer goes to the
 * transport through call->done(); freeing the call's pool first (the
 * client went away) ends the wait without one.
 */

#include "ngx_pty.h"
#include "ngx_pty_agent.h"
#include "ngx_pty_session.h"
#include "ngx_pty_keeper.h"
#include "ngx_pty_escape.h"
#include "ngx_pty_reader.h"
#include "ngx_pty_match.h"
#include "ngx_pty_util.h"
#include "ngx_pty_policy.h"
#include "ngx_pty_auth.h"
#include "ngx_pty_audit.h"
#include "ngx_pty_transcript.h"
#include "ngx_pty_store.h"
#include "ngx_pty_redact.h"


#define NGX_PTY_AGENT_QUIET        150   /* ms of quiet that settles start */
#define NGX_PTY_AGENT_START_WAIT   1000  /* ms: start's settle at most */
#define NGX_PTY_AGENT_KILL_WAIT    (NGX_PTY_KILL_GRACE + 1000)
#define NGX_PTY_AGENT_WAIT_FOR     4096  /* bytes of wait_for at most */
#define NGX_PTY_AGENT_LIST         50    /* sessions list gives by default */
#define NGX_PTY_AGENT_SPANS        256   /* highlights read gives at most */


typedef struct ngx_pty_agent_wait_s  ngx_pty_agent_wait_t;

/* NGX_OK: answer now; NGX_AGAIN: keep waiting */
typedef ngx_int_t (*ngx_pty_agent_check_pt)(ngx_pty_agent_wait_t *w);
/* sets the call's answer */
typedef void (*ngx_pty_agent_answer_pt)(ngx_pty_agent_wait_t *w);


/* what the waiting calls share of their arguments */
typedef struct {
    ngx_pty_matcher_t          match;
    ngx_msec_t                 timeout;
    ngx_msec_t                 settle;     /* 0: none */
} ngx_pty_agent_waitargs_t;


struct ngx_pty_agent_wait_s {
    ngx_pty_agent_call_t      *call;
    ngx_pty_session_t         *session;
    ngx_pty_reader_t          *reader;     /* write and start */
    ngx_pty_listener_t         listener;
    ngx_event_t                timer;
    ngx_event_t                wake;
    ngx_event_t                tick;       /* progress */
    ngx_pty_agent_check_pt     check;
    ngx_pty_agent_answer_pt    answer;
    ngx_pty_matcher_t          match;
    ngx_pty_echo_t            *echo;       /* of write's input */
    ngx_msec_t                 timeout;
    ngx_msec_t                 started;
    ngx_msec_t                 deadline;
    ngx_msec_t                 quiet;      /* 0: no settle */
    ngx_msec_t                 last_output;
    uint64_t                   seen;       /* scroll head at the last look */
    size_t                     page;
    size_t                     base;       /* text from before the input */

    unsigned                   attached:1;
    unsigned                   claimed:1;  /* holds sh->api_busy */
    unsigned                   matched:1;
    unsigned                   timed_out:1;
    unsigned                   output:1;
    unsigned                   based:1;
    unsigned                   start:1;    /* start's answer */
    unsigned                   highlights:1;
    unsigned                   refilling:1; /* lost output comes from the
                                               archive: no answer yet */
};


typedef ngx_int_t (*ngx_pty_agent_tool_pt)(ngx_pty_agent_call_t *call,
    json_t *args);

typedef struct {
    const char                *name;
    ngx_pty_agent_tool_pt      handler;
    const char                *members;   /* its arguments, for the check */
    const char                *aliases;   /* old names still taken */
} ngx_pty_agent_tool_t;


static ngx_int_t ngx_pty_agent_start(ngx_pty_agent_call_t *call,
    json_t *args);
static ngx_int_t ngx_pty_agent_start_command(ngx_pty_agent_call_t *call,
    json_t *args, ngx_str_t *command);
static ngx_int_t ngx_pty_agent_write(ngx_pty_agent_call_t *call,
    json_t *args);
static ngx_pty_echo_t *ngx_pty_agent_echo(ngx_pty_agent_call_t *call,
    ngx_pty_session_sh_t *sh, u_char *buf, size_t len);
static ngx_int_t ngx_pty_agent_write_input(ngx_pty_agent_call_t *call,
    ngx_pty_session_t *s, ngx_str_t *input, ngx_uint_t submit,
    ngx_pty_agent_wait_t *w);
static ngx_int_t ngx_pty_agent_read(ngx_pty_agent_call_t *call,
    json_t *args);
static ngx_int_t ngx_pty_agent_kill(ngx_pty_agent_call_t *call,
    json_t *args);
static ngx_int_t ngx_pty_agent_list(ngx_pty_agent_call_t *call,
    json_t *args);
static ngx_int_t ngx_pty_agent_stat(ngx_pty_agent_call_t *call,
    json_t *args);
static ngx_int_t ngx_pty_agent_revoke(ngx_pty_agent_call_t *call,
    json_t *args);
static ngx_int_t ngx_pty_agent_access(ngx_pty_agent_call_t *call,
    ngx_pty_session_sh_t *sh, ngx_uint_t scope);
static void ngx_pty_agent_audit(ngx_pty_agent_call_t *call,
    ngx_pty_session_sh_t *sh, const char *event, ngx_str_t *command);

static ngx_int_t ngx_pty_agent_members(ngx_pty_agent_call_t *call,
    ngx_pty_agent_tool_t *tool, json_t *args);
static ngx_int_t ngx_pty_agent_wait_args(ngx_pty_agent_call_t *call,
    json_t *args, ngx_msec_t def, ngx_pty_agent_waitargs_t *wa);
static ngx_int_t ngx_pty_agent_policy(ngx_pty_agent_call_t *call,
    ngx_str_t *command, ngx_uint_t fixed, ngx_pty_start_t *st);
static ngx_int_t ngx_pty_agent_limits(ngx_pty_agent_call_t *call);
static ngx_int_t ngx_pty_agent_session(ngx_pty_agent_call_t *call,
    json_t *args, ngx_uint_t scope, ngx_pty_session_t **sp);

static ngx_pty_agent_wait_t *ngx_pty_agent_wait_create(
    ngx_pty_agent_call_t *call, ngx_pty_session_t *s,
    ngx_pty_agent_waitargs_t *wa, ngx_pty_agent_check_pt check,
    ngx_pty_agent_answer_pt answer);
static ngx_int_t ngx_pty_agent_wait(ngx_pty_agent_wait_t *w);
static void ngx_pty_agent_wait_notify(ngx_pty_listener_t *l);
static void ngx_pty_agent_wait_refilled(void *data);
static void ngx_pty_agent_wait_shutdown(ngx_pty_listener_t *l);
static void ngx_pty_agent_wait_wake(ngx_event_t *ev);
static void ngx_pty_agent_wait_timer(ngx_event_t *ev);
static void ngx_pty_agent_wait_tick(ngx_event_t *ev);
static void ngx_pty_agent_wait_finish(ngx_pty_agent_wait_t *w);
static void ngx_pty_agent_wait_detach(ngx_pty_agent_wait_t *w);
static void ngx_pty_agent_wait_release(ngx_pty_agent_wait_t *w);
static void ngx_pty_agent_wait_cleanup(void *data);

static ngx_int_t ngx_pty_agent_text_check(ngx_pty_agent_wait_t *w);
static ngx_int_t ngx_pty_agent_answer_region(ngx_pty_agent_wait_t *w,
    ngx_pty_text_view_t *v, size_t *from, size_t *to);
static void ngx_pty_agent_text_answer(ngx_pty_agent_wait_t *w);
static ngx_int_t ngx_pty_agent_closed_check(ngx_pty_agent_wait_t *w);
static void ngx_pty_agent_describe_answer(ngx_pty_agent_wait_t *w);
static ngx_int_t ngx_pty_agent_screen_check(ngx_pty_agent_wait_t *w);
static void ngx_pty_agent_screen_answer(ngx_pty_agent_wait_t *w);

static json_t *ngx_pty_agent_head(ngx_pty_session_sh_t *sh);
static void ngx_pty_agent_status(json_t *o, ngx_pty_session_sh_t *sh);
static void ngx_pty_agent_matched(ngx_pty_agent_wait_t *w, json_t *o);
static json_t *ngx_pty_agent_describe(ngx_pty_agent_call_t *call,
    ngx_pty_session_sh_t *sh, ngx_uint_t full);
static void ngx_pty_agent_screen_add(ngx_pty_agent_wait_t *w, json_t *o);
static ngx_int_t ngx_pty_agent_gone(ngx_pty_agent_call_t *call,
    ngx_str_t *name);
static void ngx_pty_agent_fact(ngx_pty_agent_call_t *call, const char *key,
    json_t *value);


static ngx_pty_agent_tool_t  ngx_pty_agent_tools[] = {

    { "start", ngx_pty_agent_start,
      "command cols rows wait_for wait_for_regex wait_ms settle_ms", "" },

    { "write", ngx_pty_agent_write,
      "id input submit wait_for wait_for_regex wait_ms settle_ms offset",
      "cursor" },

    { "read", ngx_pty_agent_read,
      "id wait_for wait_for_regex wait_ms settle_ms highlights", "" },

    { "kill", ngx_pty_agent_kill, "id", "" },

    { "list", ngx_pty_agent_list, "running command limit full archived",
      "" },

    { "status", ngx_pty_agent_stat, "", "" },

    { "revoke", ngx_pty_agent_revoke, "principal", "" },

    { "transcript", ngx_pty_transcript_tool, "id from limit text", "" },

    { NULL, NULL, NULL, NULL }
};


#define ngx_pty_agent_bad(call, code, msg)                                    \
    ngx_pty_agent_error(call, NGX_HTTP_BAD_REQUEST, code, msg)

#define ngx_pty_agent_is_closed(sh)  ((sh)->state >= NGX_PTY_STATE_CLOSED)


ngx_int_t
ngx_pty_agent_tool(ngx_str_t *name)
{
    ngx_uint_t  i;

    for (i = 0; ngx_pty_agent_tools[i].name; i++) {
        if (ngx_strlen(ngx_pty_agent_tools[i].name) == name->len
            && ngx_strncmp(ngx_pty_agent_tools[i].name, name->data,
                           name->len) == 0)
        {
            return i;
        }
    }

    return NGX_ERROR;
}


const char *
ngx_pty_agent_tool_name(ngx_uint_t tool)
{
    return ngx_pty_agent_tools[tool].name;
}


ngx_int_t
ngx_pty_agent_run(ngx_pty_agent_call_t *call, ngx_uint_t tool, json_t *args)
{
    ngx_int_t  rc;

    call->status = 0;
    call->answer = NULL;

    if (!json_is_object(args)) {
        return ngx_pty_agent_bad(call, "bad_json",
                                 "the arguments must be a JSON object");
    }

    rc = ngx_pty_agent_members(call, &ngx_pty_agent_tools[tool], args);

    if (rc == NGX_DECLINED) {
        rc = ngx_pty_agent_tools[tool].handler(call, args);
    }

    if (rc == NGX_OK && call->answer == NULL) {
        return NGX_ERROR;
    }

    return rc;
}


static ngx_uint_t
ngx_pty_agent_known(const char *members, const char *key, size_t len)
{
    const char  *m, *end;

    for (m = members; *m; m = *end ? end + 1 : end) {
        end = ngx_strchr(m, ' ');

        if (end == NULL) {
            end = m + ngx_strlen(m);
        }

        if ((size_t) (end - m) == len && ngx_strncmp(m, key, len) == 0) {
            return 1;
        }
    }

    return 0;
}


/* a typo must not fall back on a default silently */
static ngx_int_t
ngx_pty_agent_members(ngx_pty_agent_call_t *call, ngx_pty_agent_tool_t *tool,
    json_t *args)
{
    u_char      *msg;
    size_t       len;
    json_t      *v;
    const char  *key;

    json_object_foreach(args, key, v) {
        len = ngx_strlen(key);

        if (ngx_pty_agent_known(tool->members, key, len)
            || ngx_pty_agent_known(tool->aliases, key, len))
        {
            continue;
        }

        msg = ngx_pnalloc(call->pool, 320);
        if (msg == NULL) {
            return NGX_ERROR;
        }

        if (len > 64) {
            /* cut where a character starts */
            for (len = 64; len && (key[len] & 0xc0) == 0x80; len--) {
                /* void */
            }
        }

        ngx_snprintf(msg, 320, "unknown member \"%*s\": %s takes %s%Z",
                     len, key, tool->name,
                     *tool->members ? tool->members : "none");

        (void) ngx_pty_agent_bad(call, "unknown_member", (char *) msg);
        ngx_pty_agent_fact(call, "member", json_stringn(key, len));

        return NGX_OK;
    }

    return NGX_DECLINED;
}


/* members: absent or null gives the default; a wrong type fails */

ngx_int_t
ngx_pty_agent_uint(json_t *args, const char *name, ngx_uint_t min,
    ngx_uint_t max, ngx_uint_t def, ngx_uint_t *v)
{
    json_t  *j;

    j = json_object_get(args, name);

    if (j == NULL || json_is_null(j)) {
        *v = def;
        return NGX_OK;
    }

    if (!json_is_integer(j) || json_integer_value(j) < (json_int_t) min
        || json_integer_value(j) > (json_int_t) max)
    {
        return NGX_ERROR;
    }

    *v = (ngx_uint_t) json_integer_value(j);

    return NGX_OK;
}


static ngx_int_t
ngx_pty_agent_string(json_t *args, const char *name, ngx_str_t *v)
{
    json_t  *j;

    j = json_object_get(args, name);

    if (j == NULL || json_is_null(j)) {
        ngx_str_null(v);
        return NGX_OK;
    }

    if (!json_is_string(j)) {
        return NGX_ERROR;
    }

    v->data = (u_char *) json_string_value(j);
    v->len = json_string_length(j);

    return NGX_OK;
}


ngx_int_t
ngx_pty_agent_bool(json_t *args, const char *name, ngx_uint_t *v)
{
    json_t  *j;

    j = json_object_get(args, name);

    if (j == NULL || json_is_null(j)) {
        *v = 0;
        return NGX_OK;
    }

    if (!json_is_boolean(j)) {
        return NGX_ERROR;
    }

    *v = json_is_true(j);

    return NGX_OK;
}


/* a string member copied to the pool: the arguments go before a wait ends */
static ngx_int_t
ngx_pty_agent_copy(ngx_pty_agent_call_t *call, ngx_str_t *s)
{
    u_char  *p;

    if (s->len == 0) {
        return NGX_OK;
    }

    p = ngx_pnalloc(call->pool, s->len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(p, s->data, s->len);
    s->data = p;

    return NGX_OK;
}


/*
 * wait_for or wait_for_regex, wait_ms and settle_ms, shared by the tools
 * that wait: with something to wait for (a match, or the screen settling)
 * the call waits up to wait_ms (default pty_api_wait_for); without, it
 * waits wait_ms (default def).  Both are capped by pty_api_wait_max.
 * NGX_DECLINED to go on; NGX_OK: the error is set.
 */
static ngx_int_t
ngx_pty_agent_wait_args(ngx_pty_agent_call_t *call, json_t *args,
    ngx_msec_t def, ngx_pty_agent_waitargs_t *wa)
{
    u_char       buf[NGX_MAX_CONF_ERRSTR], *msg;
    ngx_str_t    re, err;
    ngx_uint_t   ms, settle;
    const char  *why;

    ngx_memzero(wa, sizeof(ngx_pty_agent_waitargs_t));

    if (ngx_pty_agent_string(args, "wait_for", &wa->match.literal) != NGX_OK
        || ngx_pty_agent_string(args, "wait_for_regex", &re) != NGX_OK)
    {
        return ngx_pty_agent_bad(call, "bad_request", "\"wait_for\" and "
                                 "\"wait_for_regex\" must be strings");
    }

    if (wa->match.literal.len && re.len) {
        return ngx_pty_agent_bad(call, "bad_request", "give \"wait_for\" or "
                                 "\"wait_for_regex\", not both");
    }

    if (wa->match.literal.len > NGX_PTY_AGENT_WAIT_FOR
        || re.len > NGX_PTY_AGENT_WAIT_FOR)
    {
        return ngx_pty_agent_bad(call, "bad_request", "\"wait_for\" is "
                                 "longer than 4096 bytes");
    }

    why = ngx_pty_match_literal_check(&wa->match.literal, buf);
    if (why) {
        return ngx_pty_agent_bad(call, "never_matches", why);
    }

    if (ngx_pty_agent_copy(call, &wa->match.literal) != NGX_OK) {
        return NGX_ERROR;
    }

    if (re.len) {
        err.data = buf;
        err.len = sizeof(buf);

        switch (ngx_pty_match_regex(call->pool, &wa->match, &re, &err)) {

        case NGX_OK:
            break;

        case NGX_DECLINED:
            msg = ngx_pnalloc(call->pool, err.len + 32);
            if (msg == NULL) {
                return NGX_ERROR;
            }

            ngx_sprintf(msg, "\"wait_for_regex\": %V%Z", &err);
            return ngx_pty_agent_bad(call, "bad_regex", (char *) msg);

        default:
            return NGX_ERROR;
        }
    }

    if (ngx_pty_agent_uint(args, "settle_ms", 1, NGX_MAX_INT32_VALUE, 0,
                           &settle) != NGX_OK)
    {
        return ngx_pty_agent_bad(call, "bad_request", "\"settle_ms\" must be "
                                 "a positive integer");
    }

    if (ngx_pty_matcher_set(&wa->match) || settle) {
        def = call->conf->api_wait_for;
    }

    if (ngx_pty_agent_uint(args, "wait_ms", 0, NGX_MAX_INT32_VALUE, def, &ms)
        != NGX_OK)
    {
        return ngx_pty_agent_bad(call, "bad_request", "\"wait_ms\" must be "
                                 "a non-negative integer");
    }

    if (ms > call->conf->api_wait_max || settle > call->conf->api_wait_max) {
        (void) ngx_pty_agent_bad(call, "wait_too_long", "\"wait_ms\" and "
                                 "\"settle_ms\" are at most the limit "
                                 "(pty_api_wait_max)");
        ngx_pty_agent_fact(call, "limit_ms",
                           json_integer(call->conf->api_wait_max));
        return NGX_OK;
    }

    wa->timeout = ms;
    wa->settle = settle;

    return NGX_DECLINED;
}


static ngx_int_t
ngx_pty_agent_start(ngx_pty_agent_call_t *call, json_t *args)
{
    u_char                    *msg;
    ngx_int_t                  rc;
    ngx_str_t                  command;
    ngx_pty_start_t            st;
    ngx_pty_session_t         *s;
    ngx_pty_agent_wait_t      *w;
    ngx_pty_agent_waitargs_t   wa;

    rc = ngx_pty_agent_access(call, NULL, NGX_PTY_SCOPE_START);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    rc = ngx_pty_agent_start_command(call, args, &command);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    ngx_memzero(&st, sizeof(ngx_pty_start_t));
    st.command = command.data;
    st.command_len = command.len;
    st.conf = call->conf;

    /* the starter owns it, in every location and worker */
    if (ngx_pty_auth_acl(call->request, &st.acl) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_pty_agent_uint(args, "cols", 1, NGX_PTY_MAX_SIZE,
                           call->conf->api_cols, &st.cols) != NGX_OK
        || ngx_pty_agent_uint(args, "rows", 1, NGX_PTY_MAX_SIZE,
                              call->conf->api_rows, &st.rows) != NGX_OK)
    {
        return ngx_pty_agent_bad(call, "bad_size", "\"cols\" and \"rows\" "
                                 "are integers in 1..1024");
    }

    if (st.cols * st.rows > call->conf->max_cells) {
        msg = ngx_pnalloc(call->pool, 128);
        if (msg == NULL) {
            return NGX_ERROR;
        }

        /* every worker's screen model of the session costs cols x rows */
        ngx_sprintf(msg, "\"cols\" x \"rows\" (%uix%ui = %ui cells) is above "
                    "the limit of %ui cells (pty_max_cells)%Z",
                    st.cols, st.rows, st.cols * st.rows,
                    call->conf->max_cells);

        return ngx_pty_agent_bad(call, "size_too_large", (char *) msg);
    }

    rc = ngx_pty_agent_wait_args(call, args, NGX_PTY_AGENT_START_WAIT, &wa);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    rc = ngx_pty_agent_policy(call, &command, call->conf->command.len != 0,
                              &st);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    rc = ngx_pty_agent_limits(call);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    s = ngx_pty_session_start(&st, ngx_cycle->log);
    if (s == NULL) {
        return ngx_pty_agent_error(call, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "zone_full", "no room for another "
                                   "session in the shared zone");
    }

    s->sh->loc_tag = call->loc_tag;

    /* as the record has it: masked with pty_redact */
    command.data = s->sh->command;
    command.len = s->sh->command_len;

    ngx_pty_agent_audit(call, s->sh, "session_start", &command);

    w = ngx_pty_agent_wait_create(call, s, &wa, ngx_pty_agent_text_check,
                                  ngx_pty_agent_text_answer);
    if (w == NULL) {
        ngx_pty_session_put(s);
        return NGX_ERROR;
    }

    w->reader = ngx_pty_reader_get(s);
    if (w->reader == NULL) {
        ngx_pty_session_put(s);
        return NGX_ERROR;
    }

    /* a new session: nobody else can be reading it yet */
    (void) ngx_pty_reader_claim(w->reader, s->sh);
    w->claimed = 1;
    w->start = 1;

    /* the first screen: settled once output pauses, or on the match */
    if (!ngx_pty_matcher_set(&w->match) && w->quiet == 0) {
        w->quiet = NGX_PTY_AGENT_QUIET;
    }

    return ngx_pty_agent_wait(w);
}


/*
 * start's "command", or the location's pty_command.  NGX_DECLINED to go
 * on; otherwise the error is set.
 */
static ngx_int_t
ngx_pty_agent_start_command(ngx_pty_agent_call_t *call, json_t *args,
    ngx_str_t *command)
{
    ngx_pty_loc_conf_t  *plcf;

    plcf = call->conf;

    if (ngx_pty_agent_string(args, "command", command) != NGX_OK) {
        return ngx_pty_agent_bad(call, "bad_request",
                                 "\"command\" must be a string");
    }

    if (plcf->command.len) {
        /* pty_command: this location runs that and nothing else */
        if (command->len
            && (command->len != plcf->command.len
                || ngx_strncmp(command->data, plcf->command.data,
                               command->len) != 0))
        {
            return ngx_pty_agent_error(call, NGX_HTTP_FORBIDDEN,
                                       "command_fixed", "this location runs "
                                       "only its pty_command; omit "
                                       "\"command\"");
        }

        *command = plcf->command;
    }

    if (command->len == 0) {
        return ngx_pty_agent_bad(call, "bad_request",
                                 "\"command\" must be a non-empty string");
    }

    if (ngx_strlen(command->data) != command->len) {
        return ngx_pty_agent_bad(call, "bad_request",
                                 "\"command\" must not contain NUL");
    }

    return NGX_DECLINED;
}


static ngx_int_t
ngx_pty_agent_write(ngx_pty_agent_call_t *call, json_t *args)
{
    ngx_int_t                  rc;
    json_int_t                 delivered;
    ngx_str_t                  input;
    ngx_uint_t                 submit, offset, waiting;
    ngx_pty_reader_t          *rd;
    ngx_pty_session_t         *s;
    ngx_pty_agent_wait_t      *w;
    ngx_pty_agent_waitargs_t   wa;

    if (ngx_pty_agent_string(args, "input", &input) != NGX_OK) {
        return ngx_pty_agent_bad(call, "bad_request",
                                 "\"input\" must be a string");
    }

    if (ngx_pty_agent_bool(args, "submit", &submit) != NGX_OK) {
        return ngx_pty_agent_bad(call, "bad_request",
                                 "\"submit\" must be a boolean");
    }

    /* "cursor": the name "offset" had before */
    if (ngx_pty_agent_uint(args, "offset", 0, NGX_MAX_INT_T_VALUE,
                           NGX_CONF_UNSET_UINT, &offset) != NGX_OK
        || (offset == NGX_CONF_UNSET_UINT
            && ngx_pty_agent_uint(args, "cursor", 0, NGX_MAX_INT_T_VALUE,
                                  NGX_CONF_UNSET_UINT, &offset) != NGX_OK))
    {
        return ngx_pty_agent_bad(call, "bad_request", "\"offset\" must be a "
                                 "non-negative integer");
    }

    rc = ngx_pty_agent_wait_args(call, args, call->conf->api_wait, &wa);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    if (input.len + 1 > call->conf->input_max) {
        (void) ngx_pty_agent_error(call, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                   "input_too_large", "\"input\" is longer "
                                   "than the limit (pty_input_max)");
        ngx_pty_agent_fact(call, "limit_bytes",
                           json_integer(call->conf->input_max - 1));
        return NGX_OK;
    }

    rc = ngx_pty_agent_session(call, args, NGX_PTY_SCOPE_CONTROL, &s);
    if (s == NULL) {
        return rc;
    }

    rd = ngx_pty_reader_get(s);
    if (rd == NULL) {
        ngx_pty_session_put(s);
        return NGX_ERROR;
    }

    if (ngx_pty_reader_claim(rd, s->sh) != NGX_OK) {
        ngx_pty_session_put(s);
        return ngx_pty_agent_error(call, NGX_HTTP_CONFLICT, "busy",
                                   "another call is waiting on this "
                                   "session");
    }

    if (offset != NGX_CONF_UNSET_UINT && offset != s->sh->api_delivered) {
        /* the view may go with the put */
        delivered = s->sh->api_delivered;
        ngx_pty_reader_unclaim(s->sh);
        ngx_pty_session_put(s);
        (void) ngx_pty_agent_error(call, NGX_HTTP_CONFLICT,
                                   "cursor_mismatch", "\"offset\" is not "
                                   "where this session's output was last "
                                   "read up to");
        ngx_pty_agent_fact(call, "offset", json_integer(delivered));
        return NGX_OK;
    }

    waiting = ngx_pty_reader_waiting(s->sh);

    w = ngx_pty_agent_wait_create(call, s, &wa, ngx_pty_agent_text_check,
                                  ngx_pty_agent_text_answer);
    if (w == NULL) {
        ngx_pty_reader_unclaim(s->sh);
        ngx_pty_session_put(s);
        return NGX_ERROR;
    }

    w->reader = rd;
    w->claimed = 1;

    rc = ngx_pty_agent_write_input(call, s, &input, submit, w);

    if (input.len || submit) {
        ngx_pty_audit(ngx_pty_auth_ident(call->request),
                      call->request->connection, "write",
                      "\"bytes\":%uz,\"accepted\":%s", input.len + submit,
                      rc == NGX_DECLINED ? "true" : "false");
    }

    if (rc != NGX_DECLINED) {
        ngx_pty_reader_unclaim(s->sh);
        ngx_pty_session_put(s);
        return rc;
    }

    if (waiting && !ngx_pty_matcher_set(&w->match) && w->quiet == 0) {
        /* the last answer said "more": the next page, at once */
        w->timeout = 0;
    }

    return ngx_pty_agent_wait(w);
}


/*
 * The echo the input will make: with pty_redact, its secrets masked as
 * the terminal's output will show them.
 */
static ngx_pty_echo_t *
ngx_pty_agent_echo(ngx_pty_agent_call_t *call, ngx_pty_session_sh_t *sh,
    u_char *buf, size_t len)
{
    u_char          *masked;
    ngx_pty_echo_t  *echo;

    masked = buf;

    if (sh->redact) {
        masked = ngx_pty_redact_copy(buf, len,
                                     call->request->connection->log);
    }

    if (masked == NULL) {
        return NULL;
    }

    echo = ngx_pty_echo_create(call->pool, masked, len);

    if (masked != buf) {
        ngx_free(masked);
    }

    return echo;
}


/*
 * The input of a write, decoded, to the terminal (or its owner's inbox),
 * and the echo it makes for the wait.  NGX_DECLINED to go on; otherwise
 * the error is set.
 */
static ngx_int_t
ngx_pty_agent_write_input(ngx_pty_agent_call_t *call, ngx_pty_session_t *s,
    ngx_str_t *input, ngx_uint_t submit, ngx_pty_agent_wait_t *w)
{
    u_char                *buf;
    size_t                 len;
    ngx_int_t              rc;
    ngx_pty_session_sh_t  *sh;

    sh = s->sh;

    buf = ngx_pnalloc(call->pool, input->len + 1);
    if (buf == NULL) {
        return NGX_ERROR;
    }

    len = ngx_pty_escape_decode(buf, input->data, input->len);

    if (submit) {
        buf[len++] = '\r';
    }

    if (len == 0) {
        return NGX_DECLINED;
    }

    if (ngx_pty_agent_is_closed(sh) || s->closed) {
        return ngx_pty_agent_error(call, NGX_HTTP_CONFLICT, "session_closed",
                                   "the program has exited; write with "
                                   "no input to read what is left");
    }

    ngx_pty_shm_lock(sh);
    sh->api_input = sh->scroll->head;
    ngx_pty_shm_unlock(sh);

    if (ngx_pty_matcher_set(&w->match)) {
        w->echo = ngx_pty_agent_echo(call, sh, buf, len);
        if (w->echo == NULL) {
            return NGX_ERROR;
        }
    }

    rc = ngx_pty_session_input(s, buf, len);

    if (rc == NGX_DECLINED) {
        return ngx_pty_agent_error(call, NGX_HTTP_CONFLICT, "not_running",
                                   "the terminal is not open yet");
    }

    if (rc != NGX_OK) {
        return ngx_pty_agent_error(call, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "input_failed", "the terminal did not "
                                   "take the input");
    }

    return NGX_DECLINED;
}


static ngx_int_t
ngx_pty_agent_read(ngx_pty_agent_call_t *call, json_t *args)
{
    ngx_int_t                  rc;
    ngx_uint_t                 highlights;
    ngx_pty_session_t         *s;
    ngx_pty_agent_wait_t      *w;
    ngx_pty_agent_waitargs_t   wa;

    if (ngx_pty_agent_bool(args, "highlights", &highlights) != NGX_OK) {
        return ngx_pty_agent_bad(call, "bad_request",
                                 "\"highlights\" must be a boolean");
    }

    rc = ngx_pty_agent_wait_args(call, args, 0, &wa);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    rc = ngx_pty_agent_session(call, args, NGX_PTY_SCOPE_OBSERVE, &s);
    if (s == NULL) {
        return rc;
    }

    w = ngx_pty_agent_wait_create(call, s, &wa, ngx_pty_agent_screen_check,
                                  ngx_pty_agent_screen_answer);
    if (w == NULL) {
        ngx_pty_session_put(s);
        return NGX_ERROR;
    }

    w->highlights = highlights;

    if (w->quiet) {
        /* settled: no change for settle_ms, counted from the call on */
        w->output = 1;
        w->last_output = ngx_current_msec;
    }

    return ngx_pty_agent_wait(w);
}


static ngx_int_t
ngx_pty_agent_kill(ngx_pty_agent_call_t *call, json_t *args)
{
    ngx_int_t                  rc;
    ngx_pty_session_t         *s;
    ngx_pty_agent_wait_t      *w;
    ngx_pty_agent_waitargs_t   wa;

    rc = ngx_pty_agent_session(call, args, NGX_PTY_SCOPE_KILL, &s);
    if (s == NULL) {
        return rc;
    }

    if (!ngx_pty_agent_is_closed(s->sh)) {
        ngx_pty_agent_audit(call, s->sh, "session_kill", NULL);
        (void) ngx_pty_session_kill(s, NGX_PTY_CLOSED_KILLED);
    }

    /* answer once Closed is out, so the exit code is in the answer */
    ngx_memzero(&wa, sizeof(ngx_pty_agent_waitargs_t));
    wa.timeout = NGX_PTY_AGENT_KILL_WAIT;

    w = ngx_pty_agent_wait_create(call, s, &wa, ngx_pty_agent_closed_check,
                                  ngx_pty_agent_describe_answer);
    if (w == NULL) {
        ngx_pty_session_put(s);
        return NGX_ERROR;
    }

    return ngx_pty_agent_wait(w);
}


static ngx_int_t
ngx_pty_agent_list(ngx_pty_agent_call_t *call, json_t *args)
{
    json_t                *list;
    ngx_int_t              rc;
    ngx_str_t              command;
    ngx_uint_t             running, full, limit, total, archived;
    ngx_queue_t           *q;
    ngx_pty_zone_t        *zone;
    ngx_pty_ident_t       *id;
    ngx_pty_session_sh_t  *sh;

    rc = ngx_pty_agent_access(call, NULL, NGX_PTY_SCOPE_OBSERVE);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    id = ngx_pty_auth_ident(call->request);
    if (id == NULL) {
        return NGX_ERROR;
    }

    if (ngx_pty_agent_bool(args, "running", &running) != NGX_OK
        || ngx_pty_agent_bool(args, "archived", &archived) != NGX_OK
        || ngx_pty_agent_bool(args, "full", &full) != NGX_OK
        || ngx_pty_agent_string(args, "command", &command) != NGX_OK
        || ngx_pty_agent_uint(args, "limit", 1, 100000, NGX_PTY_AGENT_LIST,
                              &limit) != NGX_OK)
    {
        return ngx_pty_agent_bad(call, "bad_request", "\"running\" and "
                                 "\"full\" are booleans, \"command\" a "
                                 "string, \"limit\" an integer from 1");
    }

    zone = ngx_pty_shm_zone();
    list = json_array();

    if (list == NULL) {
        return NGX_ERROR;
    }

    total = 0;

    ngx_shmtx_lock(&zone->shpool->mutex);

    /* newest first */
    for (q = ngx_queue_last(&zone->sh->sessions);
         q != ngx_queue_sentinel(&zone->sh->sessions);
         q = ngx_queue_prev(q))
    {
        sh = ngx_queue_data(q, ngx_pty_session_sh_t, queue);

        /* only what the principal may see: not even that it exists */
        if (ngx_pty_auth_right(id, sh) == NGX_PTY_RIGHT_NONE
            || (running && ngx_pty_agent_is_closed(sh))
            || (command.len
                && (command.len > sh->command_len
                    || ngx_strlcasestrn(sh->command,
                                        sh->command + sh->command_len,
                                        command.data, command.len - 1)
                       == NULL)))
        {
            continue;
        }

        if (total++ < limit) {
            json_array_append_new(list, ngx_pty_agent_describe(call, sh,
                                                               full));
        }
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    call->status = NGX_HTTP_OK;
    call->answer = json_pack("{s:o, s:I, s:b}", "sessions", list,
                             "total", (json_int_t) total,
                             "more", total > limit);

    if (archived && !running && call->answer && ngx_pty_store_enabled()) {
        /* and the ended sessions only the archive knows, after these */
        list = call->answer;
        call->answer = NULL;
        return ngx_pty_transcript_list(call, list, limit, &command);
    }

    return NGX_OK;
}


/* the zone's fill and this worker's part: what an operator sizes by */
static ngx_int_t
ngx_pty_agent_stat(ngx_pty_agent_call_t *call, json_t *args)
{
    ngx_int_t                rc;
    ngx_pty_shm_stat_t       zs;
    ngx_pty_sessions_stat_t  ws;

    rc = ngx_pty_agent_access(call, NULL, NGX_PTY_SCOPE_OBSERVE);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    ngx_pty_shm_stat(&zs);
    ngx_pty_sessions_stat(&ws);

    call->status = NGX_HTTP_OK;
    call->answer = json_pack("{s:{s:I, s:I, s:I}, s:{s:I, s:I},"
                             " s:{s:I, s:I, s:I, s:I, s:I},"
                             " s:{s:i, s:I, s:I, s:I}}",
                             "zone",
                             "size", (json_int_t) zs.size,
                             "used", (json_int_t) zs.used,
                             "free", (json_int_t) (zs.size - zs.used),
                             "sessions",
                             "total", (json_int_t) zs.sessions,
                             "running", (json_int_t) zs.running,
                             "buffers",
                             "ring", (json_int_t) zs.ring,
                             "ring_used", (json_int_t) zs.ring_used,
                             "scrollback", (json_int_t) zs.scroll,
                             "scrollback_used", (json_int_t) zs.scroll_used,
                             "inbox", (json_int_t) zs.inbox,
                             "worker",
                             "pid", (int) ngx_pid,
                             "sessions", (json_int_t) ws.views,
                             "owned", (json_int_t) ws.owned,
                             "screen_bytes", (json_int_t) ws.screens);

    return NGX_OK;
}


/*
 * pty:admin: every live connection of a principal ends now (auth ran at
 * its upgrade and will not run again on its own).
 */
static ngx_int_t
ngx_pty_agent_revoke(ngx_pty_agent_call_t *call, json_t *args)
{
    u_char      esc[NGX_PTY_PRINCIPAL_MAX * 6 + 1];
    ngx_int_t   rc;
    ngx_str_t   principal;
    ngx_uint_t  n;

    rc = ngx_pty_agent_access(call, NULL, NGX_PTY_SCOPE_ADMIN);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    if (ngx_pty_agent_string(args, "principal", &principal) != NGX_OK
        || principal.len == 0 || principal.len > NGX_PTY_PRINCIPAL_MAX)
    {
        return ngx_pty_agent_bad(call, "bad_request", "\"principal\" must "
                                 "be a string of 1 to 255 bytes");
    }

    if (ngx_pty_auth_revoke(&principal, call->log, &n) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_pty_audit(ngx_pty_auth_ident(call->request),
                  call->request->connection, "revoke",
                  "\"revoked\":\"%s\",\"connections\":%ui",
                  ngx_pty_audit_escape(esc, sizeof(esc), principal.data,
                                       principal.len), n);

    call->status = NGX_HTTP_OK;
    call->answer = json_pack("{s:s%, s:I}", "principal", principal.data,
                             principal.len, "connections", (json_int_t) n);

    return NGX_OK;
}


/*
 * May the caller do what scope names with sh (NULL: the scope alone)?
 * NGX_DECLINED to go on; otherwise the refusal is set (ngx_pty_auth.c:
 * a session it may not see is one that does not exist).
 */
static ngx_int_t
ngx_pty_agent_access(ngx_pty_agent_call_t *call, ngx_pty_session_sh_t *sh,
    ngx_uint_t scope)
{
    ngx_int_t  rc;

    rc = ngx_pty_auth_check(call->request, sh, scope);

    if (rc == NGX_OK) {
        return NGX_DECLINED;
    }

    if (rc == NGX_HTTP_INTERNAL_SERVER_ERROR) {
        return NGX_ERROR;
    }

    return ngx_pty_agent_refuse(call, rc);
}


ngx_int_t
ngx_pty_agent_refuse(ngx_pty_agent_call_t *call, ngx_int_t status)
{
    ngx_uint_t   st;
    const char  *code, *message;

    st = ngx_pty_auth_refusal_words(call->request, status, &code, &message);

    return ngx_pty_agent_error(call, st, code, message);
}


/* a state change, with the session and its command */
static void
ngx_pty_agent_audit(ngx_pty_agent_call_t *call, ngx_pty_session_sh_t *sh,
    const char *event, ngx_str_t *command)
{
    u_char            esc[1024];
    ngx_pty_ident_t  *id;

    if (!ngx_pty_audit_on()) {
        return;
    }

    id = ngx_pty_auth_ident(call->request);
    if (id == NULL) {
        return;
    }

    ngx_pty_auth_touch(id, sh);

    if (command == NULL) {
        ngx_pty_audit(id, call->request->connection, event, NULL);
        return;
    }

    ngx_pty_audit(id, call->request->connection, event,
                  "\"command\":\"%s\"",
                  ngx_pty_audit_escape(esc, sizeof(esc), command->data,
                                       command->len));
}


/*
 * Command policy (ngx_pty_policy.c): NGX_DECLINED to go on, with the words
 * to run in st when the location has pty_allow; otherwise the 403 is set.
 */
static ngx_int_t
ngx_pty_agent_policy(ngx_pty_agent_call_t *call, ngx_str_t *command,
    ngx_uint_t fixed, ngx_pty_start_t *st)
{
    size_t            n;
    ngx_int_t         rc;
    ngx_pty_policy_t  pol;
    u_char            cmd[NGX_PTY_LOG_STR];

    rc = ngx_pty_policy_decide(call->conf, call->pool, command, fixed, &pol);

    if (rc == NGX_ERROR) {
        return NGX_ERROR;
    }

    if (rc == NGX_OK) {
        st->argv = pol.argv;
        st->path = pol.path;
        return NGX_DECLINED;
    }

    n = ngx_pty_log_escape(cmd, sizeof(cmd), command->data, command->len);

    ngx_log_error(NGX_LOG_NOTICE, call->log, 0,
                  "pty: start of \"%*s\" refused: %s", n, cmd, pol.reason);

    return ngx_pty_agent_error(call, NGX_HTTP_FORBIDDEN, pol.code,
                               (char *) pol.reason);
}


/* the caps on live sessions; NGX_DECLINED to go on, else the 429 is set */
static ngx_int_t
ngx_pty_agent_limits(ngx_pty_agent_call_t *call)
{
    ngx_uint_t             here, all;
    ngx_queue_t           *q;
    ngx_pty_zone_t        *zone;
    ngx_pty_session_sh_t  *sh;

    if (call->conf->max_sessions == 0
        && call->main_conf->zone_max_sessions == 0)
    {
        return NGX_DECLINED;
    }

    zone = ngx_pty_shm_zone();
    here = 0;
    all = 0;

    ngx_shmtx_lock(&zone->shpool->mutex);

    for (q = ngx_queue_head(&zone->sh->sessions);
         q != ngx_queue_sentinel(&zone->sh->sessions);
         q = ngx_queue_next(q))
    {
        sh = ngx_queue_data(q, ngx_pty_session_sh_t, queue);

        if (sh->state < NGX_PTY_STATE_CLOSED) {
            all++;
            here += (sh->loc_tag == call->loc_tag);
        }
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (call->conf->max_sessions && here >= call->conf->max_sessions) {
        (void) ngx_pty_agent_error(call, NGX_HTTP_TOO_MANY_REQUESTS,
                                   "too_many_sessions", "this location's "
                                   "sessions are at the limit "
                                   "(pty_max_sessions)");
        ngx_pty_agent_fact(call, "limit",
                           json_integer(call->conf->max_sessions));
        return NGX_OK;
    }

    if (call->main_conf->zone_max_sessions
        && all >= call->main_conf->zone_max_sessions)
    {
        (void) ngx_pty_agent_error(call, NGX_HTTP_TOO_MANY_REQUESTS,
                                   "too_many_sessions", "the zone's sessions "
                                   "are at the limit "
                                   "(pty_zone_max_sessions)");
        ngx_pty_agent_fact(call, "limit",
                           json_integer(call->main_conf->zone_max_sessions));
        return NGX_OK;
    }

    return NGX_DECLINED;
}


/*
 * The session named by "id" (pty-N or the UUID), as this worker's view.
 * On failure *sp is NULL and the error is set.
 */
static ngx_int_t
ngx_pty_agent_session(ngx_pty_agent_call_t *call, json_t *args,
    ngx_uint_t scope, ngx_pty_session_t **sp)
{
    ngx_int_t              rc;
    ngx_str_t              name;
    ngx_pty_session_t     *s;
    ngx_pty_session_sh_t  *sh;

    *sp = NULL;

    if (ngx_pty_agent_string(args, "id", &name) != NGX_OK || name.len == 0) {
        return ngx_pty_agent_bad(call, "bad_request",
                                 "\"id\" must be a session name or id");
    }

    sh = ngx_pty_shm_session_find(&name);
    if (sh == NULL) {
        return ngx_pty_agent_gone(call, &name);
    }

    /* one the principal may not see is answered as one that is not */
    rc = ngx_pty_agent_access(call, sh, scope);
    if (rc != NGX_DECLINED) {
        ngx_pty_shm_session_release(sh);
        return rc;
    }

    s = ngx_pty_session_get(sh);
    ngx_pty_shm_session_release(sh);

    if (s == NULL) {
        return NGX_ERROR;
    }

    *sp = s;

    return NGX_OK;
}


/* waiters */

/*
 * A waiter on s, which it puts when done; on failure (NULL) the caller
 * still has s, to let go of what it holds first and then put it.
 */
static ngx_pty_agent_wait_t *
ngx_pty_agent_wait_create(ngx_pty_agent_call_t *call, ngx_pty_session_t *s,
    ngx_pty_agent_waitargs_t *wa, ngx_pty_agent_check_pt check,
    ngx_pty_agent_answer_pt answer)
{
    ngx_pty_agent_wait_t  *w;

    w = ngx_pcalloc(call->pool, sizeof(ngx_pty_agent_wait_t));
    if (w == NULL) {
        return NULL;
    }

    w->match = wa->match;
    w->check = check;
    w->answer = answer;
    w->call = call;
    w->session = s;
    w->page = call->conf->api_page_size;
    w->timeout = wa->timeout;
    w->quiet = wa->settle;
    w->started = ngx_current_msec;
    w->seen = s->sh->scroll->head;

    w->listener.notify = ngx_pty_agent_wait_notify;
    w->listener.shutdown = ngx_pty_agent_wait_shutdown;
    w->listener.data = w;

    w->timer.handler = ngx_pty_agent_wait_timer;
    w->timer.data = w;
    w->timer.log = call->log;

    w->wake.handler = ngx_pty_agent_wait_wake;
    w->wake.data = w;
    w->wake.log = call->log;

    w->tick.handler = ngx_pty_agent_wait_tick;
    w->tick.data = w;
    w->tick.log = call->log;

    return w;
}


static void
ngx_pty_agent_wait_arm(ngx_pty_agent_wait_t *w)
{
    ngx_msec_t  t;

    t = w->deadline - ngx_current_msec;

    if (w->quiet && w->output) {
        t = ngx_min(t, w->last_output + w->quiet - ngx_current_msec);
    }

    if ((ngx_msec_int_t) t <= 0) {
        t = 1;
    }

    if (w->timer.timer_set) {
        ngx_del_timer(&w->timer);
    }

    ngx_add_timer(&w->timer, t);
}


/* answers at once if it can (NGX_OK); else listens: NGX_AGAIN */
static ngx_int_t
ngx_pty_agent_wait(ngx_pty_agent_wait_t *w)
{
    ngx_pool_cleanup_t    *cln;
    ngx_pty_agent_call_t  *call;

    call = w->call;
    w->deadline = ngx_current_msec + w->timeout;

    w->refilling = (w->reader && w->claimed
                    && ngx_pty_reader_refill(w->reader, w->session->sh,
                                             call->log,
                                             ngx_pty_agent_wait_refilled, w)
                       == NGX_AGAIN);

    if (!w->refilling && (w->check(w) == NGX_OK || w->timeout == 0)) {
        w->answer(w);

        if (w->claimed) {
            w->claimed = 0;
            ngx_pty_reader_unclaim(w->session->sh);
        }

        ngx_pty_session_put(w->session);
        return NGX_OK;
    }

    cln = ngx_pool_cleanup_add(call->pool, 0);
    if (cln == NULL) {
        if (w->claimed) {
            ngx_pty_reader_unclaim(w->session->sh);
        }

        ngx_pty_session_put(w->session);
        return NGX_ERROR;
    }

    cln->handler = ngx_pty_agent_wait_cleanup;
    cln->data = w;

    ngx_pty_session_listen(w->session, &w->listener);
    w->attached = 1;
    call->wait = w;

    if (w->reader) {
        w->reader->busy = w;
    }

    ngx_pty_agent_wait_arm(w);

    if (call->progress && call->progress_interval) {
        ngx_add_timer(&w->tick, call->progress_interval);
    }

    return NGX_AGAIN;
}


/* the output the zone lost is here from the archive (or is not there) */
static void
ngx_pty_agent_wait_refilled(void *data)
{
    ngx_pty_agent_wait_t  *w = data;

    w->refilling = 0;

    ngx_pty_agent_wait_wake(&w->wake);
}


static void
ngx_pty_agent_wait_notify(ngx_pty_listener_t *l)
{
    ngx_pty_agent_wait_t  *w = l->data;

    /* one look per event loop turn, however many frames came */
    if (!w->wake.posted) {
        ngx_post_event(&w->wake, &ngx_posted_events);
    }
}


static void
ngx_pty_agent_wait_wake(ngx_event_t *ev)
{
    uint64_t               head;
    ngx_pty_agent_wait_t  *w;

    w = ev->data;

    if (w->refilling) {
        return;
    }

    head = w->session->sh->scroll->head;

    if (head != w->seen) {
        w->seen = head;
        w->output = 1;
        w->last_output = ngx_current_msec;

        if (w->quiet) {
            ngx_pty_agent_wait_arm(w);
        }
    }

    if (w->check(w) == NGX_OK) {
        ngx_pty_agent_wait_finish(w);
    }
}


static void
ngx_pty_agent_wait_timer(ngx_event_t *ev)
{
    ngx_pty_agent_wait_t  *w;

    w = ev->data;

    if (w->refilling) {
        /* the archive's read takes milliseconds: the answer waits for it */
        ngx_add_timer(&w->timer, 5);
        return;
    }

    if ((ngx_msec_int_t) (w->deadline - ngx_current_msec) <= 0) {
        /* one last look: output may have come with the deadline */
        if (w->check(w) != NGX_OK) {
            w->timed_out = ngx_pty_matcher_set(&w->match) || w->quiet;
        }

        ngx_pty_agent_wait_finish(w);
        return;
    }

    if (w->quiet && w->output
        && ngx_current_msec - w->last_output >= w->quiet
        && (!ngx_pty_matcher_set(&w->match) || w->matched))
    {
        ngx_pty_agent_wait_finish(w);
        return;
    }

    ngx_pty_agent_wait_arm(w);
}


static void
ngx_pty_agent_wait_tick(ngx_event_t *ev)
{
    ngx_pty_agent_wait_t  *w;
    ngx_pty_agent_call_t  *call;

    w = ev->data;
    call = w->call;

    ngx_add_timer(&w->tick, call->progress_interval);

    call->progress(call, ngx_current_msec - w->started, w->timeout);
}


static void
ngx_pty_agent_wait_finish(ngx_pty_agent_wait_t *w)
{
    ngx_pty_agent_call_t  *call;

    call = w->call;

    ngx_pty_agent_wait_detach(w);

    /* the answer reads the session: it goes before the view may go */
    w->answer(w);

    ngx_pty_agent_wait_release(w);

    call->done(call);
}


/* this worker exits: the waiting call gets an error and ends */
static void
ngx_pty_agent_wait_shutdown(ngx_pty_listener_t *l)
{
    ngx_pty_agent_wait_t  *w;
    ngx_pty_agent_call_t  *call;

    w = l->data;
    call = w->call;

    ngx_pty_agent_wait_detach(w);
    ngx_pty_agent_wait_release(w);

    (void) ngx_pty_agent_error(call, NGX_HTTP_SERVICE_UNAVAILABLE,
                               "shutting_down",
                               "nginx is stopping this worker");

    call->done(call);
}


void
ngx_pty_agent_cancel(ngx_pty_agent_call_t *call)
{
    ngx_pty_agent_wait_t  *w;

    w = call->wait;

    if (w) {
        ngx_pty_agent_wait_detach(w);
        ngx_pty_agent_wait_release(w);
    }
}


static void
ngx_pty_agent_wait_detach(ngx_pty_agent_wait_t *w)
{
    if (w->timer.timer_set) {
        ngx_del_timer(&w->timer);
    }

    if (w->tick.timer_set) {
        ngx_del_timer(&w->tick);
    }

    if (w->wake.posted) {
        ngx_delete_posted_event(&w->wake);
    }
}


static void
ngx_pty_agent_wait_release(ngx_pty_agent_wait_t *w)
{
    if (!w->attached) {
        return;
    }

    w->attached = 0;
    w->call->wait = NULL;

    if (w->reader && w->refilling) {
        ngx_pty_reader_refill_cancel(w->reader);
        w->refilling = 0;
    }

    if (w->reader && w->reader->busy == w) {
        w->reader->busy = NULL;
    }

    if (w->claimed) {
        w->claimed = 0;
        ngx_pty_reader_unclaim(w->session->sh);
    }

    /* may free this worker's view of the session */
    ngx_pty_session_unlisten(w->session, &w->listener);
}


/* the call's pool is freed (answered, or the client went away) */
static void
ngx_pty_agent_wait_cleanup(void *data)
{
    ngx_pty_agent_wait_t  *w = data;

    ngx_pty_agent_wait_detach(w);
    ngx_pty_agent_wait_release(w);
}


/* write and start: settled text */


/*
 * The text that may answer the input: after its echo; when a loss (the
 * scrollback wrapped before it was read) swallowed the echo, after the
 * loss, as the echo will not come any more
 */
static ngx_int_t
ngx_pty_agent_answer_region(ngx_pty_agent_wait_t *w, ngx_pty_text_view_t *v,
    size_t *from, size_t *to)
{
    size_t      base, gap;
    ngx_int_t   rc;

    base = ngx_min(w->base, v->len);

    rc = ngx_pty_echo_region(w->echo, (u_char *) v->data, v->len, base,
                             w->session->sh->tty_noecho, from, to);

    if (rc != NGX_AGAIN) {
        return rc;
    }

    gap = ngx_pty_reader_after_gap((u_char *) v->data, base, v->len);

    if (gap == 0) {
        return NGX_AGAIN;
    }

    *from = gap;
    *to = v->len;

    return NGX_OK;
}

static ngx_int_t
ngx_pty_agent_text_check(ngx_pty_agent_wait_t *w)
{
    size_t                 from, to;
    ngx_pty_reader_t      *rd;
    ngx_pty_text_view_t    v;
    ngx_pty_session_sh_t  *sh;

    rd = w->reader;
    sh = w->session->sh;

    if (!w->based) {
        /* the text from before the input: in the answer, not matched */
        if (sh->api_cursor < sh->api_input) {
            ngx_pty_reader_pull(rd, sh, w->page, sh->api_input);

            if (sh->api_cursor < sh->api_input) {
                /* a page of it: that first */
                return NGX_OK;
            }
        }

        if (ngx_pty_reader_peek(rd, &v) != NGX_OK) {
            return NGX_OK;
        }

        w->base = v.len;
        w->based = 1;
    }

    ngx_pty_reader_pull(rd, sh, w->page, 0);

    if (ngx_pty_reader_peek(rd, &v) != NGX_OK) {
        return NGX_OK;
    }

    if (ngx_pty_matcher_set(&w->match) && !w->matched
        && ngx_pty_agent_answer_region(w, &v, &from, &to) == NGX_OK
        && ngx_pty_match_find(&w->match, (u_char *) v.data + from, to - from,
                              w->call->log))
    {
        w->matched = 1;

        if (w->quiet == 0) {
            return NGX_OK;
        }
    }

    if (v.len + ngx_pty_reader_left(sh) >= w->page) {
        return NGX_OK;
    }

    if (ngx_pty_agent_is_closed(sh) && sh->api_cursor >= sh->scroll->head) {
        return NGX_OK;
    }

    return NGX_AGAIN;
}


/* the text part of write's and start's answers */
static void
ngx_pty_agent_text_answer(ngx_pty_agent_wait_t *w)
{
    json_t                *o;
    ngx_pty_agent_call_t  *call;
    ngx_pty_session_sh_t  *sh;

    call = w->call;
    sh = w->session->sh;

    o = w->start ? ngx_pty_agent_describe(call, sh, 1)
                 : ngx_pty_agent_head(sh);
    if (o == NULL) {
        return;
    }

    if (!w->start) {
        ngx_pty_agent_status(o, sh);
    }

    if (ngx_pty_reader_deliver(w->reader, sh, w->page, call->pool, "output",
                               o)
        != NGX_OK)
    {
        json_decref(o);
        (void) ngx_pty_agent_error(call, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                   "no_memory", "out of memory reading the "
                                   "output");
        return;
    }

    ngx_pty_agent_matched(w, o);

    /*
     * Let go before the answer leaves: its client may send the next
     * call through another worker as soon as it has read this one.
     */
    if (w->claimed) {
        w->claimed = 0;
        ngx_pty_reader_unclaim(sh);
    }

    if (w->start) {
        ngx_pty_agent_screen_add(w, o);
    }

    if (ngx_pty_agent_is_closed(sh)) {
        /* what was read of an ended session goes back to the zone */
        ngx_pty_session_settle(w->session);
    }

    call->status = NGX_HTTP_OK;
    call->answer = o;
}


/* kill: until Closed */

static ngx_int_t
ngx_pty_agent_closed_check(ngx_pty_agent_wait_t *w)
{
    return ngx_pty_agent_is_closed(w->session->sh) ? NGX_OK : NGX_AGAIN;
}


static void
ngx_pty_agent_describe_answer(ngx_pty_agent_wait_t *w)
{
    w->call->answer = ngx_pty_agent_describe(w->call, w->session->sh, 1);
    w->call->status = NGX_HTTP_OK;
}


/* read: the screen model */

typedef struct {
    ngx_pty_agent_wait_t      *wait;
    json_t                    *answer;    /* NULL: match only */
} ngx_pty_agent_screen_ctx_t;


static void
ngx_pty_agent_screen_find(ngx_pty_screen_t *screen, void *data)
{
    ngx_pty_agent_wait_t  *w = data;

    u_char  *text;
    size_t   len;

    text = ngx_pty_screen_text(screen, &len);
    if (text == NULL) {
        return;
    }

    if (ngx_pty_match_find(&w->match, text, len, w->call->log)) {
        w->matched = 1;
    }

    free(text);
}


static ngx_int_t
ngx_pty_agent_screen_check(ngx_pty_agent_wait_t *w)
{
    if (ngx_pty_agent_is_closed(w->session->sh)) {
        /* the screen will not change any more */
        return NGX_OK;
    }

    if (!ngx_pty_matcher_set(&w->match)) {
        return w->quiet ? NGX_AGAIN : NGX_OK;
    }

    if (!w->matched
        && ngx_pty_session_screen_apply(w->session, ngx_pty_agent_screen_find,
                                        w)
           != NGX_OK)
    {
        return NGX_OK;
    }

    return (w->matched && w->quiet == 0) ? NGX_OK : NGX_AGAIN;
}


static json_t *
ngx_pty_agent_highlights(ngx_pty_screen_t *screen, ngx_log_t *log)
{
    u_char                 *buf;
    size_t                  n, i, len;
    json_t                 *list;
    unsigned                cols, rows;
    ngx_pty_screen_span_t   spans[NGX_PTY_AGENT_SPANS];

    ngx_pty_screen_size(screen, &cols, &rows);

    list = json_array();
    buf = ngx_alloc((size_t) cols * 24, log);

    if (list == NULL || buf == NULL) {
        json_decref(list);
        ngx_free(buf);
        return NULL;
    }

    n = ngx_pty_screen_highlights(screen, spans, NGX_PTY_AGENT_SPANS);

    for (i = 0; i < ngx_min(n, NGX_PTY_AGENT_SPANS); i++) {
        len = ngx_pty_screen_span_text(screen, &spans[i], buf);

        json_array_append_new(list,
            json_pack("{s:i, s:i, s:i, s:s%}",
                      "row", (int) spans[i].row, "col", (int) spans[i].col,
                      "cols", (int) spans[i].cols, "text", buf, len));
    }

    ngx_free(buf);

    return list;
}


static void
ngx_pty_agent_screen_json(ngx_pty_screen_t *screen, void *data)
{
    ngx_pty_agent_screen_ctx_t  *ctx = data;

    u_char    *text;
    size_t     len;
    json_t    *o;
    unsigned   row, col, visible;

    o = ctx->answer;

    text = ngx_pty_screen_text(screen, &len);

    json_object_set_new(o, "screen", text ? json_stringn((char *) text, len)
                                          : json_string(""));
    free(text);

    ngx_pty_screen_cursor(screen, &row, &col, &visible);

    json_object_set_new(o, "cursor",
                        json_pack("{s:i, s:i, s:b}", "row", (int) row,
                                  "col", (int) col, "visible", (int) visible));

    if (ctx->wait->highlights) {
        json_object_set_new(o, "highlights",
                            ngx_pty_agent_highlights(screen,
                                                     ctx->wait->call->log));
    }
}


/* o.screen and o.cursor: the screen as it is now */
static void
ngx_pty_agent_screen_add(ngx_pty_agent_wait_t *w, json_t *o)
{
    ngx_pty_agent_screen_ctx_t  ctx;

    ctx.wait = w;
    ctx.answer = o;

    if (ngx_pty_session_screen_apply(w->session, ngx_pty_agent_screen_json,
                                     &ctx)
        != NGX_OK)
    {
        json_object_set_new(o, "screen", json_string(""));
    }
}


static void
ngx_pty_agent_screen_answer(ngx_pty_agent_wait_t *w)
{
    json_t                *o;
    ngx_pty_session_sh_t  *sh;

    sh = w->session->sh;

    o = ngx_pty_agent_head(sh);
    if (o == NULL) {
        return;
    }

    ngx_pty_agent_status(o, sh);
    ngx_pty_agent_screen_add(w, o);

    json_object_set_new(o, "cols", json_integer((json_int_t) sh->cols));
    json_object_set_new(o, "rows", json_integer((json_int_t) sh->rows));

    ngx_pty_agent_matched(w, o);

    w->call->status = NGX_HTTP_OK;
    w->call->answer = o;
}


/* answers */

static json_t *
ngx_pty_agent_head(ngx_pty_session_sh_t *sh)
{
    u_char  name[32];

    ngx_sprintf(name, "pty-%ui%Z", sh->name);

    return json_pack("{s:s, s:s#}", "id", (char *) name,
                     "session_id", (char *) sh->id, (size_t) NGX_PTY_ID_LEN);
}


static void
ngx_pty_agent_status(json_t *o, ngx_pty_session_sh_t *sh)
{
    ngx_uint_t  reason;

    json_object_set_new(o, "state",
                        json_string(sh->state == NGX_PTY_STATE_STARTING
                                    ? "starting"
                                    : sh->state == NGX_PTY_STATE_RUNNING
                                    ? "running" : "exited"));
    json_object_set_new(o, "running",
                        json_boolean(!ngx_pty_agent_is_closed(sh)));

    if (!ngx_pty_agent_is_closed(sh)) {
        return;
    }

    reason = ngx_min(sh->closed_reason, NGX_PTY_CLOSED_ERROR);

    json_object_set_new(o, "exit_code", sh->exit_code >= 0
                                        ? json_integer(sh->exit_code)
                                        : json_null());
    json_object_set_new(o, "closed_reason",
                        json_string(ngx_pty_closed_reasons[reason]));
}


static void
ngx_pty_agent_matched(ngx_pty_agent_wait_t *w, json_t *o)
{
    if (ngx_pty_matcher_set(&w->match)) {
        json_object_set_new(o, "matched", json_boolean(w->matched));
    }

    if (ngx_pty_matcher_set(&w->match) || w->quiet) {
        json_object_set_new(o, "timed_out", json_boolean(w->timed_out));
    }
}


/* a session, as list gives it (full: with where and how to attach) */
static json_t *
ngx_pty_agent_describe(ngx_pty_agent_call_t *call, ngx_pty_session_sh_t *sh,
    ngx_uint_t full)
{
    u_char   url[512];
    json_t  *o;

    o = ngx_pty_agent_head(sh);
    if (o == NULL) {
        return NULL;
    }

    ngx_pty_agent_status(o, sh);

    json_object_set_new(o, "command",
                        json_stringn((char *) sh->command, sh->command_len));
    json_object_set_new(o, "age_seconds",
                        json_integer((json_int_t) (ngx_time() - sh->created)));

    if (!full) {
        return o;
    }

    ngx_snprintf(url, sizeof(url) - 1,
                 "/agents/%V/sessions/%*s/attach%Z",
                 &call->main_conf->instance_id, (size_t) NGX_PTY_ID_LEN,
                 sh->id);

    json_object_set_new(o, "instance_id",
                        json_stringn((char *) call->main_conf->instance_id.data,
                                     call->main_conf->instance_id.len));
    json_object_set_new(o, "attach_path", json_string((char *) url));
    json_object_set_new(o, "cols", json_integer((json_int_t) sh->cols));
    json_object_set_new(o, "rows", json_integer((json_int_t) sh->rows));
    json_object_set_new(o, "sequence", json_integer((json_int_t) sh->seq));

    return o;
}


/* unknown_session, with what is known of one that was */
static ngx_int_t
ngx_pty_agent_gone(ngx_pty_agent_call_t *call, ngx_str_t *name)
{
    u_char           *msg;
    ngx_int_t         rc;
    ngx_uint_t        reason;
    ngx_pty_tomb_t    tomb;
    ngx_pty_ident_t  *id;
    u_char            ts[NGX_PTY_TS_LEN];

    id = ngx_pty_auth_ident(call->request);

    /* what became of a session is told only to who may see every one */
    rc = (id && (id->anonymous || (id->scopes & NGX_PTY_SCOPE_ADMIN)))
         ? ngx_pty_shm_tomb_find(name, &tomb) : NGX_ABORT;

    if (rc != NGX_OK) {
        return ngx_pty_agent_refuse(call, NGX_HTTP_NOT_FOUND);
    }

    msg = ngx_pnalloc(call->pool, 256);
    if (msg == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(msg, "the session has ended and is forgotten: ended sessions "
                "are kept for pty_closed_linger (%M s), or less when the "
                "zone needs the room%Z", call->conf->closed_linger / 1000);

    (void) ngx_pty_agent_error(call, NGX_HTTP_NOT_FOUND, "unknown_session",
                               (char *) msg);
    ngx_pty_agent_fact(call, "existed", json_true());

    if (tomb.closed_at) {
        reason = ngx_min(tomb.closed_reason, NGX_PTY_CLOSED_ERROR);

        ngx_pty_agent_fact(call, "ended_at",
                           json_stringn((char *) ts,
                                        ngx_pty_ts_format(ts, tomb.closed_at)
                                        - ts));
        ngx_pty_agent_fact(call, "exit_code", tomb.exit_code >= 0
                                              ? json_integer(tomb.exit_code)
                                              : json_null());
        ngx_pty_agent_fact(call, "closed_reason",
                           json_string(ngx_pty_closed_reasons[reason]));
    }

    return NGX_OK;
}


ngx_int_t
ngx_pty_agent_error(ngx_pty_agent_call_t *call, ngx_uint_t status,
    const char *code, const char *message)
{
    u_char        *p, *q;
    json_t        *m;
    const u_char  *c;

    json_decref(call->answer);

    call->status = status;
    call->answer = NULL;

    m = json_string(message);

    if (m == NULL) {
        /* it quotes input cut inside a character (a regex's error) */
        p = ngx_pnalloc(call->pool, ngx_strlen(message) + 1);
        if (p == NULL) {
            return NGX_OK;
        }

        for (c = (const u_char *) message, q = p; *c; c++) {
            *q++ = (*c < 0x80) ? *c : '?';
        }

        *q = '\0';
        m = json_string((char *) p);
    }

    call->answer = json_pack("{s:{s:s, s:o}}", "error", "code", code,
                             "message", m);

    return NGX_OK;
}


/* a fact an agent needs to recover, next to the error's message */
static void
ngx_pty_agent_fact(ngx_pty_agent_call_t *call, const char *key,
    json_t *value)
{
    json_t  *e;

    e = call->answer ? json_object_get(call->answer, "error") : NULL;

    if (e == NULL || value == NULL) {
        json_decref(value);
        return;
    }

    json_object_set_new(e, key, value);
}
