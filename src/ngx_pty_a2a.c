
/*
 * A2A tasks: "type this, wait for that, give me the result" through the
 * agent engine's write, in A2A's data model.  The ring is the task store
 * every worker reads: each change of a task is a TaskStatusUpdate frame
 * holding the whole Task, so GetTask and ListTasks read the newest frame
 * of each task, and a task is known as long as its frames are retained.
 * A running task's call lives on the worker that runs it.
 */

#include "ngx_pty.h"
#include "ngx_pty_a2a.h"
#include "ngx_pty_agent.h"
#include "ngx_pty_ext.h"
#include "ngx_pty_reader.h"
#include "ngx_pty_util.h"
#include "ngx_pty_redact.h"


#define NGX_PTY_A2A_SUBS       16     /* tasks one connection follows */
#define NGX_PTY_A2A_PAGE       50
#define NGX_PTY_A2A_PAGE_MAX   100
#define NGX_PTY_A2A_COST       1024   /* a task's frames, counted as input */
#define NGX_PTY_A2A_DELTA_MS   200    /* output deltas: at most 5 a second */
#define NGX_PTY_A2A_SHRINK     4096   /* texts of an update that did not fit */
#define NGX_PTY_A2A_OUTPUT_MAX (1024 * 1024)   /* a task's output, in pages */
#define NGX_PTY_A2A_MASKED     "[REDACTED]"   /* a text that could not be masked */

/* ,"payload":{"task_id":"<id>","delta":{"state":" opens every update */
#define NGX_PTY_A2A_PREFIX     ",\"payload\":{\"task_id\":\""
#define NGX_PTY_A2A_ID_AT      (sizeof(NGX_PTY_A2A_PREFIX) - 1)
#define NGX_PTY_A2A_CANCELED   "\",\"delta\":{\"state\":\"canceled\""
#define NGX_PTY_A2A_STATE_AT   (NGX_PTY_A2A_ID_AT + NGX_PTY_ID_LEN)


typedef struct {
    ngx_queue_t                queue;        /* this worker's running */
    ngx_pool_t                *pool;
    ngx_log_t                  log;          /* outlives the connection */
    ngx_pty_agent_call_t       call;
    ngx_pty_session_t         *session;
    ngx_pty_client_t          *client;       /* waits for the answer */
    json_t                    *req_id;       /* SendMessage's id */
    json_t                    *task;
    json_t                    *sp;           /* service_parameters */
    json_t                    *args;         /* the next page's write */
    u_char                    *out;          /* the pages so far */
    size_t                     out_len;
    size_t                     out_size;
    ngx_msec_t                 started;
    json_int_t                 wait_ms;      /* asked for, -1: the default */
    ngx_pty_listener_t         listener;     /* a cancel from elsewhere */
    ngx_event_t                wake;
    ngx_event_t                delta;        /* the next output delta */
    ngx_msec_t                 delta_at;
    size_t                     sent;         /* settled text sent so far */
    uint64_t                   cursor;
    u_char                     id[NGX_PTY_ID_LEN];
    unsigned                   streaming:1;
    unsigned                   listening:1;
    unsigned                   refused:1;
    unsigned                   read:1;       /* a page came */
    unsigned                   waits:1;      /* for wait_for(_regex) */
    unsigned                   matched:1;    /* and it came */
    unsigned                   stopping:1;   /* the worker quits */
} ngx_pty_a2a_task_t;


typedef struct {
    ngx_uint_t                 nsubs;
    u_char                     subs[NGX_PTY_A2A_SUBS][NGX_PTY_ID_LEN];
} ngx_pty_a2a_client_t;


typedef ngx_int_t (*ngx_pty_a2a_op_pt)(ngx_pty_client_t *cl, json_t *msg,
    json_t *payload, json_t *id);

typedef struct {
    const char                *name;
    ngx_pty_a2a_op_pt          handler;
} ngx_pty_a2a_op_t;


static ngx_int_t ngx_pty_a2a_send(ngx_pty_client_t *cl, json_t *msg,
    json_t *payload, json_t *id);
static ngx_int_t ngx_pty_a2a_send_streaming(ngx_pty_client_t *cl,
    json_t *msg, json_t *payload, json_t *id);
static ngx_int_t ngx_pty_a2a_get(ngx_pty_client_t *cl, json_t *msg,
    json_t *payload, json_t *id);
static ngx_int_t ngx_pty_a2a_list(ngx_pty_client_t *cl, json_t *msg,
    json_t *payload, json_t *id);
static ngx_int_t ngx_pty_a2a_cancel(ngx_pty_client_t *cl, json_t *msg,
    json_t *payload, json_t *id);
static ngx_int_t ngx_pty_a2a_subscribe(ngx_pty_client_t *cl, json_t *msg,
    json_t *payload, json_t *id);
static ngx_int_t ngx_pty_a2a_unsubscribe(ngx_pty_client_t *cl, json_t *msg,
    json_t *payload, json_t *id);
static ngx_int_t ngx_pty_a2a_params(ngx_pty_client_t *cl, json_t *msg,
    json_t *payload, json_t *id);

static ngx_int_t ngx_pty_a2a_start(ngx_pty_client_t *cl, json_t *payload,
    json_t *id, ngx_uint_t streaming);
static json_t *ngx_pty_a2a_args(ngx_pty_client_t *cl, json_t *message,
    const char **why);
static ngx_int_t ngx_pty_a2a_mask_parts(json_t *parts);
static json_t *ngx_pty_a2a_new_task(ngx_pty_a2a_task_t *t, json_t *message,
    ngx_pty_client_t *cl);
static ngx_pty_a2a_task_t *ngx_pty_a2a_create(ngx_pty_client_t *cl,
    json_t *message, json_t *args, json_t *id, ngx_uint_t streaming);
static void ngx_pty_a2a_free(ngx_pty_a2a_task_t *t);
static void ngx_pty_a2a_done(ngx_pty_agent_call_t *call);
static ngx_int_t ngx_pty_a2a_add_page(ngx_pty_a2a_task_t *t, json_t *page);
static ngx_uint_t ngx_pty_a2a_reads_on(ngx_pty_a2a_task_t *t, json_t *a);
static ngx_int_t ngx_pty_a2a_next_page(ngx_pty_a2a_task_t *t);
static void ngx_pty_a2a_end(ngx_pty_a2a_task_t *t, const char *state,
    const char *text);
static void ngx_pty_a2a_outcome(ngx_pty_a2a_task_t *t);
static ngx_int_t ngx_pty_a2a_event(ngx_pty_a2a_task_t *t, json_t *delta);
static ngx_pty_frame_t *ngx_pty_a2a_store(ngx_pty_session_t *s,
    ngx_log_t *log, const u_char *tid, json_t *task, json_t *delta,
    json_t *sp);
static ngx_pty_frame_t *ngx_pty_a2a_append(ngx_pty_session_t *s,
    ngx_log_t *log, const u_char *tid, json_t *task, json_t *delta,
    json_t *sp);
static void ngx_pty_a2a_shrink(json_t *list);
static void ngx_pty_a2a_watch(ngx_pty_a2a_task_t *t);
static void ngx_pty_a2a_notify(ngx_pty_listener_t *l);
static void ngx_pty_a2a_shutdown(ngx_pty_listener_t *l);
static void ngx_pty_a2a_quit(ngx_pty_listener_t *l);
static void ngx_pty_a2a_wake(ngx_event_t *ev);
static void ngx_pty_a2a_delta(ngx_event_t *ev);
static ngx_int_t ngx_pty_a2a_delta_text(ngx_pty_a2a_task_t *t,
    const u_char *text, size_t len);
static void ngx_pty_a2a_page_delta(ngx_pty_a2a_task_t *t, json_t *page);
static ngx_uint_t ngx_pty_a2a_foreign(ngx_pty_a2a_task_t *t);
static ngx_uint_t ngx_pty_a2a_may_control(ngx_pty_client_t *cl, json_t *id);
static ngx_int_t ngx_pty_a2a_cancel_remote(ngx_pty_client_t *cl,
    json_t *task, json_t *id);
static void ngx_pty_a2a_status(json_t *task, const char *state,
    const char *text);
static ngx_pty_a2a_task_t *ngx_pty_a2a_running(ngx_pty_client_t *cl,
    json_t *task_id);
static json_t *ngx_pty_a2a_tasks(ngx_pty_client_t *cl, json_t *task_id);
static json_t *ngx_pty_a2a_find(ngx_pty_client_t *cl, json_t *payload,
    json_t *id);
static ngx_int_t ngx_pty_a2a_reply(ngx_pty_client_t *cl, const char *op,
    json_t *id, json_t *payload);
static ngx_int_t ngx_pty_a2a_sub(ngx_pty_client_t *cl, const u_char *tid);
static ngx_uint_t ngx_pty_a2a_terminal(json_t *task);


static ngx_pty_a2a_op_t  ngx_pty_a2a_ops[] = {
    { "SendMessage", ngx_pty_a2a_send },
    { "SendStreamingMessage", ngx_pty_a2a_send_streaming },
    { "GetTask", ngx_pty_a2a_get },
    { "ListTasks", ngx_pty_a2a_list },
    { "CancelTask", ngx_pty_a2a_cancel },
    { "SubscribeToTask", ngx_pty_a2a_subscribe },
    { "Unsubscribe", ngx_pty_a2a_unsubscribe },
    { "UpdateServiceParameters", ngx_pty_a2a_params },
    { NULL, NULL }
};


static ngx_queue_t  ngx_pty_a2a_tasks_running;
static ngx_uint_t   ngx_pty_a2a_inited;


ngx_int_t
ngx_pty_a2a_dispatch(ngx_pty_client_t *cl, json_t *msg, const char *op,
    json_t *id)
{
    json_t      *payload;
    ngx_uint_t   i;

    for (i = 0; ngx_pty_a2a_ops[i].name; i++) {
        if (ngx_strcmp(op, ngx_pty_a2a_ops[i].name) == 0) {
            break;
        }
    }

    if (ngx_pty_a2a_ops[i].name == NULL) {
        return NGX_DECLINED;
    }

    if (!ngx_pty_a2a_inited) {
        ngx_queue_init(&ngx_pty_a2a_tasks_running);
        ngx_pty_a2a_inited = 1;
    }

    if (cl->a2a == NULL) {
        cl->a2a = ngx_pcalloc(cl->ws.request->pool,
                              sizeof(ngx_pty_a2a_client_t));
        if (cl->a2a == NULL) {
            ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INTERNAL,
                                  "out of memory");
            return NGX_OK;
        }
    }

    payload = json_object_get(msg, "payload");
    if (payload == NULL || json_is_null(payload)) {
        payload = NULL;
    }

    if (ngx_pty_a2a_ops[i].handler(cl, msg, payload, id) == NGX_ERROR) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INTERNAL,
                              "the task could not be handled");
    }

    return NGX_OK;
}


/* SendMessage and SendStreamingMessage */

static ngx_int_t
ngx_pty_a2a_send(ngx_pty_client_t *cl, json_t *msg, json_t *payload,
    json_t *id)
{
    return ngx_pty_a2a_start(cl, payload, id, 0);
}


static ngx_int_t
ngx_pty_a2a_send_streaming(ngx_pty_client_t *cl, json_t *msg,
    json_t *payload, json_t *id)
{
    return ngx_pty_a2a_start(cl, payload, id, 1);
}


static ngx_int_t
ngx_pty_a2a_start(ngx_pty_client_t *cl, json_t *payload, json_t *id,
    ngx_uint_t streaming)
{
    json_t              *message, *args;
    ngx_int_t            rc;
    const char          *why;
    ngx_pty_a2a_task_t  *t;

    message = payload ? json_object_get(payload, "message") : NULL;

    if (!json_is_object(message)) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "\"payload.message\" must be an A2A Message");
        return NGX_OK;
    }

    if (!ngx_pty_a2a_may_control(cl, id)) {
        return NGX_OK;
    }

    args = ngx_pty_a2a_args(cl, message, &why);
    if (args == NULL) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST, why);
        return NGX_OK;
    }

    /* typed input, and frames in the ring for everyone: paced as input */
    if (ngx_pty_ext_paced(cl, id, NGX_PTY_A2A_COST + json_string_length(
                                      json_object_get(args, "input")))
        != NGX_OK)
    {
        json_decref(args);
        return NGX_OK;
    }

    t = ngx_pty_a2a_create(cl, message, args, id, streaming);
    if (t == NULL) {
        json_decref(args);
        return NGX_ERROR;
    }

    ngx_queue_insert_tail(&ngx_pty_a2a_tasks_running, &t->queue);

    rc = ngx_pty_agent_run(&t->call, NGX_PTY_AGENT_WRITE, args);
    json_decref(args);

    if (rc == NGX_ERROR) {
        ngx_queue_remove(&t->queue);
        ngx_pty_a2a_free(t);
        return NGX_ERROR;
    }

    if (rc == NGX_OK && t->call.status != NGX_HTTP_OK) {
        /* refused before anything was typed: no task */
        ngx_queue_remove(&t->queue);
        t->refused = 1;
        ngx_pty_a2a_outcome(t);
        return NGX_OK;
    }

    if (streaming) {
        if (ngx_pty_a2a_sub(cl, t->id) != NGX_OK) {
            ngx_pty_binding_error(cl, id, NGX_PTY_ERR_RATE_LIMITED,
                                  "this connection follows too many tasks");
        }

        payload = json_pack("{s:s#}", "task_id", t->id,
                            (int) NGX_PTY_ID_LEN);
        (void) ngx_pty_a2a_reply(cl, "SendStreamingMessage.Accepted", id,
                                 payload);
    }

    if (ngx_pty_a2a_event(t, NULL) != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, cl->ws.connection->log, 0,
                      "pty: task %*s: its update was not stored",
                      (size_t) NGX_PTY_ID_LEN, t->id);
    }

    /* before the answer: a first page at once may be followed by waits */
    ngx_pty_a2a_watch(t);

    if (rc == NGX_OK) {
        ngx_pty_a2a_done(&t->call);
    }

    return NGX_OK;
}


/* a task and its engine call, in a pool of its own */
static ngx_pty_a2a_task_t *
ngx_pty_a2a_create(ngx_pty_client_t *cl, json_t *message, json_t *args,
    json_t *id, ngx_uint_t streaming)
{
    json_t              *v;
    ngx_pool_t          *pool;
    ngx_http_request_t  *r;
    ngx_pty_a2a_task_t  *t;

    r = cl->ws.request;

    pool = ngx_create_pool(4096, cl->ws.connection->log);
    if (pool == NULL) {
        return NULL;
    }

    t = ngx_pcalloc(pool, sizeof(ngx_pty_a2a_task_t));
    if (t == NULL) {
        ngx_destroy_pool(pool);
        return NULL;
    }

    /* the connection's log, without its request context */
    t->log = *cl->ws.connection->log;
    t->log.handler = NULL;
    t->log.data = NULL;
    t->log.action = NULL;
    pool->log = &t->log;

    t->pool = pool;
    t->client = cl;
    t->streaming = streaming;
    t->req_id = json_incref(id);
    t->sp = cl->service_parameters ? json_deep_copy(cl->service_parameters)
                                   : NULL;
    ngx_pty_uuid7_text(t->id);

    /* a page of output is not the end: the next one is waited for */
    t->args = json_deep_copy(args);
    t->started = ngx_current_msec;
    v = json_object_get(args, "wait_ms");
    t->wait_ms = json_is_integer(v) ? json_integer_value(v) : -1;

    t->task = ngx_pty_a2a_new_task(t, message, cl);
    t->session = ngx_pty_session_get(cl->session->sh);

    if (t->args == NULL || t->task == NULL || t->session == NULL) {
        ngx_pty_a2a_free(t);
        return NULL;
    }

    json_object_del(t->args, "input");
    json_object_del(t->args, "submit");

    t->call.request = r;
    t->call.pool = pool;
    t->call.log = &t->log;
    t->call.conf = cl->conf;
    t->call.main_conf = ngx_http_get_module_main_conf(r, ngx_pty_module);
    t->call.done = ngx_pty_a2a_done;
    t->call.data = t;

    return t;
}


static void
ngx_pty_a2a_free(ngx_pty_a2a_task_t *t)
{
    if (t->session) {
        ngx_pty_session_put(t->session);
    }

    json_decref(t->call.answer);
    json_decref(t->task);
    json_decref(t->sp);
    json_decref(t->args);
    json_decref(t->req_id);

    if (t->out) {
        ngx_free(t->out);
    }

    ngx_destroy_pool(t->pool);
}


/* the engine's write arguments from a Message; NULL and *why if bad */
static json_t *
ngx_pty_a2a_args(ngx_pty_client_t *cl, json_t *message, const char **why)
{
    size_t       i, len;
    u_char      *buf, *p;
    json_t      *parts, *part, *meta, *args, *v;
    const char  *key;

    parts = json_object_get(message, "parts");

    if (!json_is_array(parts)) {
        *why = "\"message.parts\" must be an array of parts";
        return NULL;
    }

    len = 0;

    json_array_foreach(parts, i, part) {
        v = json_object_get(part, "text");

        if (!json_is_string(v)) {
            *why = "only text parts are input to a terminal";
            return NULL;
        }

        len += json_string_length(v);
    }

    if (len + 1 > cl->conf->input_max) {
        *why = "the text is longer than the limit (pty_input_max)";
        return NULL;
    }

    buf = ngx_alloc(len + 1, cl->ws.connection->log);
    if (buf == NULL) {
        *why = "out of memory";
        return NULL;
    }

    p = buf;

    json_array_foreach(parts, i, part) {
        v = json_object_get(part, "text");
        p = ngx_cpymem(p, json_string_value(v), json_string_length(v));
    }

    args = json_pack("{s:s#, s:s#}", "id", cl->session->sh->id,
                     (int) NGX_PTY_ID_LEN, "input", buf, (int) len);
    ngx_free(buf);

    if (args == NULL) {
        *why = "the text must be UTF-8";
        return NULL;
    }

    meta = json_object_get(message, "metadata");

    if (meta && !json_is_object(meta)) {
        *why = "\"message.metadata\" must be an object";
        goto bad;
    }

    /* the engine checks their types and answers a bad one */
    json_object_foreach(meta, key, v) {
        if (ngx_strcmp(key, "submit") == 0
            || ngx_strcmp(key, "wait_for") == 0
            || ngx_strcmp(key, "wait_for_regex") == 0
            || ngx_strcmp(key, "wait_ms") == 0
            || ngx_strcmp(key, "settle_ms") == 0)
        {
            json_object_set(args, key, v);
        }
    }

    return args;

bad:

    json_decref(args);

    return NULL;
}


/*
 * pty_redact: the task keeps the message as the terminal shows its input,
 * its secrets masked, in the ring, the archive and every answer; the
 * terminal gets it as sent.
 */
static ngx_int_t
ngx_pty_a2a_mask_parts(json_t *parts)
{
    u_char  *masked;
    size_t   len, i;
    json_t  *part, *v, *text;

    json_array_foreach(parts, i, part) {
        v = json_object_get(part, "text");
        len = json_string_length(v);

        if (len == 0) {
            continue;           /* none, or not a string */
        }

        masked = ngx_pty_redact_copy((u_char *) json_string_value(v), len,
                                     ngx_cycle->log);
        if (masked == NULL) {
            return NGX_ERROR;
        }

        if (masked == (u_char *) json_string_value(v)) {
            continue;
        }

        text = json_stringn((char *) masked, len);
        ngx_free(masked);

        /* a mask that cut a character in two is not UTF-8: all of it */
        if (text == NULL) {
            text = json_string(NGX_PTY_A2A_MASKED);
        }

        if (text == NULL || json_object_set_new(part, "text", text) != 0) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static json_t *
ngx_pty_a2a_new_task(ngx_pty_a2a_task_t *t, json_t *message,
    ngx_pty_client_t *cl)
{
    json_t  *task, *ctx, *hist;

    ctx = json_object_get(message, "contextId");

    hist = json_deep_copy(message);
    if (hist == NULL) {
        return NULL;
    }

    if (cl->session->sh->redact
        && ngx_pty_a2a_mask_parts(json_object_get(hist, "parts")) != NGX_OK)
    {
        json_decref(hist);
        return NULL;
    }

    json_object_set_new(hist, "taskId", json_stringn((char *) t->id,
                                                     NGX_PTY_ID_LEN));

    task = json_pack("{s:s#, s:O?, s:s, s:{}, s:[o], s:[]}",
                     "id", t->id, (int) NGX_PTY_ID_LEN,
                     "contextId", json_is_string(ctx) ? ctx : NULL,
                     "kind", "task",
                     "status",
                     "history", hist,
                     "artifacts");

    if (task == NULL) {
        return NULL;
    }

    if (!json_is_string(ctx)) {
        /* one context per terminal session */
        json_object_set_new(task, "contextId",
                            json_stringn((char *) cl->session->sh->id,
                                         NGX_PTY_ID_LEN));
    }

    ngx_pty_a2a_status(task, "working", NULL);

    return task;
}


/* the engine answered: the task's outcome */
static void
ngx_pty_a2a_done(ngx_pty_agent_call_t *call)
{
    json_t              *a, *v;
    const char          *state, *why;
    ngx_pty_a2a_task_t  *t;

    t = call->data;
    a = call->answer;

    ngx_queue_remove(&t->queue);

    if (ngx_pty_a2a_foreign(t)) {
        /* canceled through another worker, which stored the update */
        ngx_pty_a2a_status(t->task, "canceled", "canceled by a client");
        ngx_pty_a2a_outcome(t);
        return;
    }

    if (call->status != NGX_HTTP_OK) {
        v = json_object_get(json_object_get(a, "error"), "message");
        ngx_pty_a2a_end(t, "failed", json_is_string(v) ? json_string_value(v)
                                                       : "the write failed");
        return;
    }

    if (ngx_pty_a2a_add_page(t, json_object_get(a, "output")) != NGX_OK) {
        ngx_pty_a2a_end(t, "failed", "out of memory");
        return;
    }

    if (json_object_get(a, "matched")) {
        t->waits = 1;
        t->matched |= json_is_true(json_object_get(a, "matched"));
    }

    if (ngx_pty_a2a_reads_on(t, a)) {
        ngx_pty_a2a_page_delta(t, json_object_get(a, "output"));

        switch (ngx_pty_a2a_next_page(t)) {
        case NGX_AGAIN:
            return;
        case NGX_ERROR:
            ngx_pty_a2a_end(t, "failed", "the next page could not be read");
            return;
        case NGX_ABORT:
            ngx_pty_a2a_end(t, t->matched ? "completed" : "input-required",
                            "the sender went away; more output is "
                            "waiting: send an empty message for the rest");
            return;
        default: /* NGX_DECLINED: the output is over the cap */
            ngx_pty_a2a_end(t, t->matched ? "completed" : "input-required",
                            "the output is over 1 MiB; send an empty "
                            "message for the rest");
            return;
        }
    }

    if (t->waits && !t->matched
        && json_is_false(json_object_get(a, "running")))
    {
        state = "failed";
        why = "the program exited before what was waited for came";

    } else if (t->waits ? !t->matched
                        : (json_is_true(json_object_get(a, "timed_out"))
                           && json_is_true(json_object_get(a, "running"))))
    {
        state = "input-required";
        why = "the wait timed out; the program is still running";

    } else {
        state = "completed";
        why = NULL;
    }

    /* the engine's facts, less the text that is the artifact */
    v = json_deep_copy(a);
    if (v) {
        json_object_del(v, "output");

        if (t->waits) {
            /* of the whole task: the pages after a match wait for none */
            json_object_set_new(v, "matched", json_boolean(t->matched));
        }

        json_object_set_new(t->task, "metadata", v);
    }

    ngx_pty_a2a_end(t, state, why);
}


/*
 * Whether the task reads another page.  A wait also ends when a page is
 * full, whether or not more text waits just then: until what is waited
 * for came, that wait goes on; once it came (or without one), the text
 * already waiting is read too, at once, for it may hold the match.
 */
static ngx_uint_t
ngx_pty_a2a_reads_on(ngx_pty_a2a_task_t *t, json_t *a)
{
    if (json_is_true(json_object_get(a, "timed_out"))
        || json_string_length(json_object_get(a, "output")) == 0)
    {
        /* over, or no progress */
        return 0;
    }

    if (json_is_true(json_object_get(a, "more"))) {
        return 1;
    }

    /* a full page ends on a character, up to 3 bytes short */
    return t->waits && !t->matched
           && json_is_true(json_object_get(a, "running"))
           && json_string_length(json_object_get(a, "output")) + 4
              > t->call.conf->api_page_size;
}


/* adds a page to the task's output */
static ngx_int_t
ngx_pty_a2a_add_page(ngx_pty_a2a_task_t *t, json_t *page)
{
    size_t   add, size;
    u_char  *buf;

    add = json_string_length(page);

    if (t->out_len + add > t->out_size) {
        /* doubled: a task of many pages copies its output a few times */
        size = ngx_max(2 * t->out_size, t->out_len + add);

        buf = ngx_alloc(size, t->call.log);
        if (buf == NULL) {
            return NGX_ERROR;
        }

        if (t->out_len) {
            ngx_memcpy(buf, t->out, t->out_len);
        }

        if (t->out) {
            ngx_free(t->out);
        }

        t->out = buf;
        t->out_size = size;
    }

    if (add) {
        ngx_memcpy(t->out + t->out_len, json_string_value(page), add);
        t->out_len += add;
    }

    t->read = 1;

    return NGX_OK;
}


/*
 * A page read on from: what the deltas did not send of it yet is streamed
 * now (else a client would see it only in the final artifact), and the
 * deltas go on from the reader's next page.
 */
static void
ngx_pty_a2a_page_delta(ngx_pty_a2a_task_t *t, json_t *page)
{
    size_t  add;

    add = json_string_length(page);

    if (add > t->sent
        && ngx_pty_a2a_delta_text(t, (const u_char *) json_string_value(page)
                                     + t->sent, add - t->sent)
           != NGX_OK)
    {
        ngx_log_error(NGX_LOG_ERR, t->call.log, 0,
                      "pty: task %*s: a page's update was not stored",
                      (size_t) NGX_PTY_ID_LEN, t->id);
    }

    t->sent = (t->sent > add) ? t->sent - add : 0;
}


/*
 * Starts the wait for the next page.  NGX_AGAIN: waiting or ended;
 * NGX_DECLINED: the output is over the cap; NGX_ABORT: the connection
 * that sent the task has gone (the engine's checks need its request);
 * NGX_ERROR.
 */
static ngx_int_t
ngx_pty_a2a_next_page(ngx_pty_a2a_task_t *t)
{
    ngx_int_t   rc;
    ngx_msec_t  waited;
    json_int_t  wait;

    if (t->out_len >= NGX_PTY_A2A_OUTPUT_MAX) {
        return NGX_DECLINED;
    }

    if (t->client == NULL) {
        return NGX_ABORT;
    }

    if (t->matched) {
        /* what waits is read at once */
        json_object_del(t->args, "wait_for");
        json_object_del(t->args, "wait_for_regex");
        json_object_del(t->args, "settle_ms");
    }

    /* the wait_ms asked for is for the whole task */
    wait = t->wait_ms;
    waited = ngx_current_msec - t->started;

    if (wait >= 0) {
        json_object_set_new(t->args, "wait_ms",
                            json_integer(wait > (json_int_t) waited
                                         ? wait - (json_int_t) waited : 0));
    }

    json_decref(t->call.answer);
    t->call.answer = NULL;

    ngx_queue_insert_tail(&ngx_pty_a2a_tasks_running, &t->queue);

    rc = ngx_pty_agent_run(&t->call, NGX_PTY_AGENT_WRITE, t->args);

    if (rc == NGX_OK) {
        ngx_pty_a2a_done(&t->call);
        return NGX_AGAIN;
    }

    if (rc == NGX_ERROR) {
        ngx_queue_remove(&t->queue);
        return NGX_ERROR;
    }

    return NGX_AGAIN;
}


/* the terminal update, the SendMessage answer, and the end of t */
static void
ngx_pty_a2a_end(ngx_pty_a2a_task_t *t, const char *state, const char *text)
{
    json_t  *delta, *parts;

    delta = json_pack("{s:s}", "state", state);

    if (t->read) {
        /* pages end on characters: the whole is UTF-8 */
        parts = json_pack("[{s:s, s:s%}]", "kind", "text", "text",
                          t->out ? (char *) t->out : "", t->out_len);
        json_array_append_new(json_object_get(t->task, "artifacts"),
                              json_pack("{s:s, s:s, s:O}",
                                        "artifactId", "output",
                                        "name", "output", "parts", parts));
        json_object_set_new(delta, "parts", parts);
    }

    ngx_pty_a2a_status(t->task, state, text);

    if (ngx_pty_a2a_event(t, delta) != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, t->call.log, 0,
                      "pty: task %*s: its final update was not stored",
                      (size_t) NGX_PTY_ID_LEN, t->id);
    }

    json_decref(delta);

    ngx_pty_a2a_outcome(t);
}


/* answers the sender (if still here) and frees the task's call */
static void
ngx_pty_a2a_outcome(ngx_pty_a2a_task_t *t)
{
    json_t            *err;
    ngx_uint_t         code, st;
    ngx_pty_client_t  *cl;

    cl = t->client;
    st = t->call.status;

    if (cl && !cl->ws.finished && t->refused) {
        /* the engine said no before anything was typed: no task */
        err = json_object_get(json_object_get(t->call.answer, "error"),
                              "message");
        code = (st == NGX_HTTP_FORBIDDEN) ? NGX_PTY_ERR_PERMISSION_DENIED
               : (st == NGX_HTTP_TOO_MANY_REQUESTS) ? NGX_PTY_ERR_RATE_LIMITED
               : (st >= NGX_HTTP_INTERNAL_SERVER_ERROR) ? NGX_PTY_ERR_INTERNAL
               : NGX_PTY_ERR_INVALID_REQUEST;

        ngx_pty_binding_error(cl, t->req_id, code,
                              json_is_string(err) ? json_string_value(err)
                                                  : "refused");

    } else if (cl && !cl->ws.finished && !t->streaming) {
        (void) ngx_pty_a2a_reply(cl, "SendMessage.Response", t->req_id,
                                 json_pack("{s:O}", "task", t->task));
    }

    if (cl && !cl->ws.finished) {
        ngx_pty_ws_flush(&cl->ws);
    }

    if (t->wake.posted) {
        ngx_delete_posted_event(&t->wake);
    }

    if (t->delta.timer_set) {
        ngx_del_timer(&t->delta);
    }

    if (t->listening) {
        /* the task's reference goes with it: the view may be freed */
        t->listening = 0;
        ngx_pty_session_unlisten(t->session, &t->listener);
        t->session = NULL;
    }

    ngx_pty_a2a_free(t);
}


static void
ngx_pty_a2a_status(json_t *task, const char *state, const char *text)
{
    u_char   ts[NGX_PTY_TS_LEN], mid[NGX_PTY_ID_LEN];
    json_t  *status, *msg;

    ngx_pty_ts_format(ts, ngx_pty_now_ms());
    ngx_pty_uuid7_text(mid);

    status = json_pack("{s:s, s:s#}", "state", state,
                       "timestamp", ts, (int) NGX_PTY_TS_LEN);
    if (status == NULL) {
        return;
    }

    if (text) {
        msg = json_pack("{s:s, s:s, s:s%, s:[{s:s, s:s}], s:O}",
                        "kind", "message", "role", "agent",
                        "messageId", mid, (size_t) NGX_PTY_ID_LEN,
                        "parts", "kind", "text", "text", text,
                        "taskId", json_object_get(task, "id"));
        if (msg) {
            json_object_set_new(status, "message", msg);
        }
    }

    json_object_set_new(task, "status", status);
}


/* a TaskStatusUpdate of t into the session's ring */
static ngx_int_t
ngx_pty_a2a_event(ngx_pty_a2a_task_t *t, json_t *delta)
{
    return ngx_pty_a2a_store(t->session, t->call.log, t->id, t->task, delta,
                             t->sp)
           ? NGX_OK : NGX_ERROR;
}


/*
 * An update that does not fit the ring is stored with its long texts cut
 * to their ends, so that the ring still tells the task's state (the
 * SendMessage answer has them whole).
 */
static ngx_pty_frame_t *
ngx_pty_a2a_store(ngx_pty_session_t *s, ngx_log_t *log, const u_char *tid,
    json_t *task, json_t *delta, json_t *sp)
{
    json_t           *t2, *d2;
    ngx_pty_frame_t  *f;

    f = ngx_pty_a2a_append(s, log, tid, task, delta, sp);
    if (f) {
        return f;
    }

    t2 = json_deep_copy(task);
    d2 = delta ? json_deep_copy(delta) : NULL;

    if (t2 == NULL || (delta && d2 == NULL)) {
        json_decref(t2);
        json_decref(d2);
        return NULL;
    }

    ngx_pty_a2a_shrink(json_object_get(t2, "history"));
    ngx_pty_a2a_shrink(json_object_get(t2, "artifacts"));
    ngx_pty_a2a_shrink(d2);

    f = ngx_pty_a2a_append(s, log, tid, t2, d2, sp);

    json_decref(t2);
    json_decref(d2);

    return f;
}


/* text parts in messages or artifacts (or a delta) cut to their last bytes */
static void
ngx_pty_a2a_shrink(json_t *list)
{
    size_t       i, j, len, cut;
    json_t      *item, *parts, *part, *text;
    const char  *data;
    u_char       buf[NGX_PTY_A2A_SHRINK + 64], *p;

    if (json_is_object(list)) {
        list = json_pack("[O]", list);
        ngx_pty_a2a_shrink(list);
        json_decref(list);
        return;
    }

    json_array_foreach(list, i, item) {
        parts = json_object_get(item, "parts");

        json_array_foreach(parts, j, part) {
            text = json_object_get(part, "text");
            len = json_string_length(text);

            if (len <= NGX_PTY_A2A_SHRINK) {
                continue;
            }

            data = json_string_value(text);
            cut = len - NGX_PTY_A2A_SHRINK;

            /* start on a character */
            while (cut < len && (data[cut] & 0xc0) == 0x80) {
                cut++;
            }

            p = ngx_sprintf(buf, "[%uz bytes cut]", cut);
            p = ngx_cpymem(p, data + cut, len - cut);

            json_object_set_new(part, "text",
                                json_stringn((char *) buf, p - buf));
        }
    }
}


static ngx_pty_frame_t *
ngx_pty_a2a_append(ngx_pty_session_t *s, ngx_log_t *log,
    const u_char *tid, json_t *task, json_t *delta, json_t *sp)
{
    char             *text;
    size_t            len;
    json_t           *o;
    u_char           *buf, *p;
    ngx_pty_frame_t  *f;

    /* the delta first: a cancel is seen at a fixed place (foreign) */
    o = delta ? json_pack("{s:O, s:O}", "delta", delta, "task", task)
              : json_pack("{s:{s:s}, s:O}", "delta", "state", "working",
                          "task", task);
    if (o == NULL) {
        return NULL;
    }

    text = json_dumps(o, JSON_COMPACT);
    json_decref(o);

    if (text == NULL) {
        return NULL;
    }

    /* payload and service_parameters after the envelope's head */
    len = NGX_PTY_A2A_ID_AT + NGX_PTY_ID_LEN + 2 + ngx_strlen(text) + 64;

    if (sp) {
        len += json_dumpb(sp, NULL, 0, JSON_COMPACT);
    }

    /* not from the task's pool: a long task stores many updates */
    buf = ngx_alloc(len, log);
    if (buf == NULL) {
        free(text);
        return NULL;
    }

    p = ngx_pty_cpylit(buf, NGX_PTY_A2A_PREFIX);
    p = ngx_cpymem(p, tid, NGX_PTY_ID_LEN);
    p = ngx_pty_cpylit(p, "\",");
    p = ngx_cpymem(p, text + 1, ngx_strlen(text) - 1);   /* {"delta":..} */
    free(text);

    if (sp) {
        p = ngx_pty_cpylit(p, ",\"service_parameters\":");
        p += json_dumpb(sp, (char *) p, buf + len - p, JSON_COMPACT);
    }

    f = ngx_pty_session_append(s, NGX_PTY_FRAME_TASK, 0, buf, p - buf);
    ngx_free(buf);

    return f;
}


/*
 * A running task watches the ring for a CancelTask answered by another
 * worker: an update of its id that it did not store.
 */
static void
ngx_pty_a2a_watch(ngx_pty_a2a_task_t *t)
{
    t->wake.handler = ngx_pty_a2a_wake;
    t->wake.data = t;
    t->wake.log = t->call.log;
    t->delta.handler = ngx_pty_a2a_delta;
    t->delta.data = t;
    t->delta.log = t->call.log;
    t->delta.cancelable = 1;

    t->listener.notify = ngx_pty_a2a_notify;
    t->listener.shutdown = ngx_pty_a2a_shutdown;
    t->listener.quit = ngx_pty_a2a_quit;
    t->listener.data = t;

    ngx_pty_shm_lock(t->session->sh);
    t->cursor = t->session->sh->ring->head;
    ngx_pty_shm_unlock(t->session->sh);

    ngx_pty_session_listen(t->session, &t->listener);
    t->listening = 1;
}


static void
ngx_pty_a2a_notify(ngx_pty_listener_t *l)
{
    ngx_pty_a2a_task_t  *t = l->data;

    if (!t->wake.posted) {
        ngx_post_event(&t->wake, &ngx_posted_events);
    }
}


/*
 * The worker exits: the engine's wait, shut down too, ends the task.  The
 * listener leaves the queue now (left in place, it would be removed for
 * it, then again by the task's end), but the task keeps its reference
 * (unlisten would give it up, and the task's end again): the view is
 * pinned until every listener has gone, so the last update is stored.
 */
static void
ngx_pty_a2a_shutdown(ngx_pty_listener_t *l)
{
    ngx_pty_a2a_task_t  *t = l->data;

    if (t->wake.posted) {
        ngx_delete_posted_event(&t->wake);
    }

    t->listening = 0;
    ngx_queue_remove(&l->queue);
}


/*
 * The worker is told to quit: a task's wait cannot go to another worker,
 * and would hold this one for up to its wait_ms.  It ends (failed) once
 * the walk over the listeners is over; the program runs on.
 */
static void
ngx_pty_a2a_quit(ngx_pty_listener_t *l)
{
    ngx_pty_a2a_task_t  *t = l->data;

    t->stopping = 1;

    if (!t->wake.posted) {
        ngx_post_event(&t->wake, &ngx_posted_events);
    }
}


static void
ngx_pty_a2a_wake(ngx_event_t *ev)
{
    ngx_pty_a2a_task_t  *t;

    t = ev->data;

    if (t->stopping) {
        ngx_pty_agent_cancel(&t->call);
        ngx_queue_remove(&t->queue);
        ngx_pty_a2a_end(t, "failed", "nginx is stopping this worker; the "
                        "program runs on (reconnect, and send it again)");
        return;
    }

    if (!ngx_pty_a2a_foreign(t)) {
        if (!t->delta.timer_set) {
            /* the output since the last delta, once the engine took it in */
            ngx_add_timer(&t->delta, ngx_max(t->delta_at, ngx_current_msec)
                                     - ngx_current_msec + 1);
        }

        return;
    }

    /* the other worker stored the canceled update and sent the interrupt */
    ngx_pty_agent_cancel(&t->call);
    ngx_queue_remove(&t->queue);
    ngx_pty_a2a_status(t->task, "canceled", "canceled by a client");
    ngx_pty_a2a_outcome(t);
}


/*
 * The settled lines the engine's converter holds beyond what was sent,
 * as an update whose task carries its status only (the full task is in
 * the updates before and after it).
 */
static void
ngx_pty_a2a_delta(ngx_event_t *ev)
{
    ngx_pty_reader_t     *rd;
    ngx_pty_a2a_task_t   *t;
    ngx_pty_text_view_t   v;

    t = ev->data;
    rd = t->session->api;

    if (rd == NULL || rd->busy == NULL
        || ngx_pty_reader_peek(rd, &v) != NGX_OK || v.stable <= t->sent)
    {
        return;
    }

    if (ngx_pty_a2a_delta_text(t, v.data + t->sent, v.stable - t->sent)
        == NGX_OK)
    {
        t->sent = v.stable;
    }
}


/* stores a "working" update whose task carries its status only */
static ngx_int_t
ngx_pty_a2a_delta_text(ngx_pty_a2a_task_t *t, const u_char *text,
    size_t len)
{
    json_t     *task, *delta;
    ngx_int_t   rc;

    task = json_pack("{s:O, s:O, s:s, s:O}",
                     "id", json_object_get(t->task, "id"),
                     "contextId", json_object_get(t->task, "contextId"),
                     "kind", "task",
                     "status", json_object_get(t->task, "status"));
    delta = json_pack("{s:s, s:[{s:s, s:s%}]}", "state", "working",
                      "parts", "kind", "text", "text", text, len);

    rc = NGX_ERROR;

    if (task && delta
        && ngx_pty_a2a_store(t->session, t->call.log, t->id, task, delta,
                             t->sp)
           != NULL)
    {
        t->delta_at = ngx_current_msec + NGX_PTY_A2A_DELTA_MS;
        rc = NGX_OK;
    }

    json_decref(task);
    json_decref(delta);

    return rc;
}


/* 1: the ring has a canceled update of t, stored by another worker */
static ngx_uint_t
ngx_pty_a2a_foreign(ngx_pty_a2a_task_t *t)
{
    ngx_uint_t             canceled;
    ngx_pty_frame_t       *f;
    ngx_pty_session_sh_t  *sh;

    if (!t->listening) {
        return 0;
    }

    sh = t->session->sh;
    canceled = 0;

    ngx_pty_shm_lock(sh);

    if (t->cursor < sh->ring->tail) {
        t->cursor = sh->ring->tail;
    }

    while ((f = ngx_pty_ring_read(sh->ring, &t->cursor))) {
        if (f->kind == NGX_PTY_FRAME_TASK
            && f->len >= NGX_PTY_A2A_STATE_AT
                         + sizeof(NGX_PTY_A2A_CANCELED) - 1
            && ngx_memcmp(ngx_pty_frame_data(f) + NGX_PTY_A2A_ID_AT, t->id,
                          NGX_PTY_ID_LEN) == 0
            && ngx_memcmp(ngx_pty_frame_data(f) + NGX_PTY_A2A_STATE_AT,
                          NGX_PTY_A2A_CANCELED,
                          sizeof(NGX_PTY_A2A_CANCELED) - 1) == 0)
        {
            canceled = 1;
            break;
        }
    }

    ngx_pty_shm_unlock(sh);

    return canceled;
}


u_char *
ngx_pty_a2a_frame_write(u_char *p, ngx_pty_frame_t *f)
{
    p = ngx_pty_cpylit(p, "{\"op\":\"TaskStatusUpdate\",\"id\":\"");
    p = ngx_pty_uuid_format(p, f->id);
    p = ngx_pty_cpylit(p, "\",\"ts\":\"");
    p = ngx_pty_ts_format(p, f->ts);
    p = ngx_sprintf(p, "\",\"sequence\":%uL", f->seq);
    p = ngx_cpymem(p, ngx_pty_frame_data(f), f->len);
    *p++ = '}';

    return p;
}


ngx_uint_t
ngx_pty_a2a_wants(ngx_pty_client_t *cl, ngx_pty_frame_t *f)
{
    ngx_uint_t             i;
    ngx_pty_a2a_client_t  *ac;

    ac = cl->a2a;

    if (ac == NULL || f->kind != NGX_PTY_FRAME_TASK
        || f->len < NGX_PTY_A2A_ID_AT + NGX_PTY_ID_LEN)
    {
        return 0;
    }

    for (i = 0; i < ac->nsubs; i++) {
        if (ngx_memcmp(ngx_pty_frame_data(f) + NGX_PTY_A2A_ID_AT,
                       ac->subs[i], NGX_PTY_ID_LEN)
            == 0)
        {
            return 1;
        }
    }

    return 0;
}


void
ngx_pty_a2a_closed(ngx_pty_client_t *cl)
{
    ngx_queue_t         *q;
    ngx_pty_a2a_task_t  *t;

    if (!ngx_pty_a2a_inited) {
        return;
    }

    for (q = ngx_queue_head(&ngx_pty_a2a_tasks_running);
         q != ngx_queue_sentinel(&ngx_pty_a2a_tasks_running);
         q = ngx_queue_next(q))
    {
        t = ngx_queue_data(q, ngx_pty_a2a_task_t, queue);

        if (t->client == cl) {
            /* the task runs on; its updates stay in the ring */
            t->client = NULL;
        }
    }
}


/* GetTask, ListTasks, CancelTask */

static ngx_int_t
ngx_pty_a2a_get(ngx_pty_client_t *cl, json_t *msg, json_t *payload,
    json_t *id)
{
    json_t      *task, *hist, *n;
    json_int_t   keep;

    n = payload ? json_object_get(payload, "history_length") : NULL;

    if (n && !json_is_null(n)
        && !(json_is_integer(n) && json_integer_value(n) >= 0))
    {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "\"history_length\" must be a non-negative "
                              "integer");
        return NGX_OK;
    }

    task = ngx_pty_a2a_find(cl, payload, id);
    if (task == NULL) {
        return NGX_OK;
    }

    hist = json_object_get(task, "history");

    if (json_is_integer(n) && json_is_array(hist)) {
        keep = json_integer_value(n);

        while ((json_int_t) json_array_size(hist) > keep) {
            json_array_remove(hist, 0);
        }
    }

    return ngx_pty_a2a_reply(cl, "GetTask.Response", id,
                             json_pack("{s:o}", "task", task));
}


static ngx_int_t
ngx_pty_a2a_list(ngx_pty_client_t *cl, json_t *msg, json_t *payload,
    json_t *id)
{
    size_t       i, n;
    json_t      *all, *out, *task, *v, *filter, *token, *ctx, *state;
    json_int_t   size;
    const char  *tid, *last;

    v = payload ? json_object_get(payload, "page_size") : NULL;
    token = payload ? json_object_get(payload, "page_token") : NULL;
    filter = payload ? json_object_get(payload, "filter") : NULL;

    size = NGX_PTY_A2A_PAGE;

    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1
            || json_integer_value(v) > NGX_PTY_A2A_PAGE_MAX)
        {
            ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                                  "\"page_size\" must be 1..100");
            return NGX_OK;
        }

        size = json_integer_value(v);
    }

    if ((token && !json_is_null(token) && !json_is_string(token))
        || (filter && !json_is_null(filter) && !json_is_object(filter)))
    {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "\"page_token\" is a string, \"filter\" an "
                              "object");
        return NGX_OK;
    }

    ctx = json_is_object(filter) ? json_object_get(filter, "contextId")
                                 : NULL;
    state = json_is_object(filter) ? json_object_get(filter, "state") : NULL;

    all = ngx_pty_a2a_tasks(cl, NULL);
    out = json_array();

    if (all == NULL || out == NULL) {
        json_decref(all);
        json_decref(out);
        return NGX_ERROR;
    }

    /* newest first: task ids are UUIDv7, the array is oldest first */
    last = NULL;
    n = 0;

    for (i = json_array_size(all); i-- > 0; /* void */) {
        task = json_array_get(all, i);
        tid = json_string_value(json_object_get(task, "id"));

        if (json_is_string(token) && json_string_length(token)
            && ngx_strcmp(tid, json_string_value(token)) >= 0)
        {
            continue;
        }

        if (json_is_string(ctx)
            && !json_equal(ctx, json_object_get(task, "contextId")))
        {
            continue;
        }

        if (json_is_string(state)
            && !json_equal(state, json_object_get(json_object_get(task,
                                                          "status"), "state")))
        {
            continue;
        }

        if ((json_int_t) n == size) {
            break;
        }

        json_array_append(out, task);
        last = tid;
        n++;
    }

    v = json_pack("{s:o, s:s}", "tasks", out, "next_page_token",
                  (i != (size_t) -1 && (json_int_t) n == size && last)
                  ? last : "");
    json_decref(all);

    return ngx_pty_a2a_reply(cl, "ListTasks.Response", id, v);
}


static ngx_int_t
ngx_pty_a2a_cancel(ngx_pty_client_t *cl, json_t *msg, json_t *payload,
    json_t *id)
{
    json_t              *task;
    ngx_pty_a2a_task_t  *t;

    t = ngx_pty_a2a_running(cl, payload ? json_object_get(payload, "task_id")
                                        : NULL);

    if (t == NULL) {
        task = ngx_pty_a2a_find(cl, payload, id);
        if (task == NULL) {
            return NGX_OK;
        }

        if (ngx_pty_a2a_terminal(task)) {
            ngx_pty_binding_error(cl, id, NGX_PTY_ERR_TASK_NOT_CANCELABLE,
                                  "the task has ended");
            json_decref(task);
            return NGX_OK;
        }

        /* it runs on another worker */
        return ngx_pty_a2a_cancel_remote(cl, task, id);
    }

    if (!ngx_pty_a2a_may_control(cl, id)) {
        return NGX_OK;
    }

    /* the wait ends now; the program gets the interrupt */
    ngx_pty_agent_cancel(&t->call);
    ngx_queue_remove(&t->queue);

    (void) ngx_pty_session_input(t->session, (u_char *) "\x03", 1);

    task = json_incref(t->task);
    ngx_pty_a2a_end(t, "canceled", "canceled by the client");

    (void) ngx_pty_a2a_reply(cl, "CancelTask.Response", id,
                             json_pack("{s:o}", "task", task));

    return NGX_OK;
}


/* the running task's worker sees the update in the ring and ends it */
static ngx_int_t
ngx_pty_a2a_cancel_remote(ngx_pty_client_t *cl, json_t *task, json_t *id)
{
    json_t  *delta;

    if (!ngx_pty_a2a_may_control(cl, id)) {
        json_decref(task);
        return NGX_OK;
    }

    delta = json_pack("{s:s}", "state", "canceled");
    if (delta == NULL) {
        json_decref(task);
        return NGX_ERROR;
    }

    (void) ngx_pty_session_input(cl->session, (u_char *) "\x03", 1);

    ngx_pty_a2a_status(task, "canceled", "canceled by a client");

    if (ngx_pty_a2a_store(cl->session, cl->ws.connection->log,
                          (u_char *) json_string_value(json_object_get(task,
                                                                       "id")),
                          task, delta, cl->service_parameters)
        == NULL)
    {
        ngx_log_error(NGX_LOG_ERR, cl->ws.connection->log, 0,
                      "pty: a task's canceled update was not stored");
    }

    json_decref(delta);

    return ngx_pty_a2a_reply(cl, "CancelTask.Response", id,
                             json_pack("{s:o}", "task", task));
}


/* observers and principals without pty:control may not type or cancel */
static ngx_uint_t
ngx_pty_a2a_may_control(ngx_pty_client_t *cl, json_t *id)
{
    if ((cl->joined && cl->role == NGX_PTY_ROLE_OBSERVER)
        || !ngx_pty_auth_may_control(cl->ident))
    {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_PERMISSION_DENIED,
                              "an observer may not send input or cancel");
        return 0;
    }

    return 1;
}


/* SubscribeToTask, Unsubscribe, UpdateServiceParameters */

static ngx_int_t
ngx_pty_a2a_subscribe(ngx_pty_client_t *cl, json_t *msg, json_t *payload,
    json_t *id)
{
    json_t                *task, *from;
    uint64_t               seq, first;
    ngx_pty_session_sh_t  *sh;

    task = ngx_pty_a2a_find(cl, payload, id);
    if (task == NULL) {
        return NGX_OK;
    }

    if (ngx_pty_a2a_sub(cl, (u_char *) json_string_value(
                                json_object_get(task, "id")))
        != NGX_OK)
    {
        json_decref(task);
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_RATE_LIMITED,
                              "this connection follows too many tasks");
        return NGX_OK;
    }

    json_decref(task);

    from = json_object_get(msg, "replay_from");
    sh = cl->session->sh;

    ngx_pty_shm_lock(sh);

    seq = sh->seq;
    first = ngx_pty_ring_first_seq(sh->ring);

    if (!cl->joined) {
        if (json_is_integer(from)) {
            if (first && (uint64_t) json_integer_value(from) + 1 < first) {
                ngx_pty_shm_unlock(sh);
                ngx_pty_binding_error(cl, id,
                                      NGX_PTY_ERR_REPLAY_OUT_OF_RANGE,
                                      "replay_from is before the oldest "
                                      "retained frame");
                return NGX_OK;
            }

            cl->cursor = ngx_pty_ring_find(sh->ring,
                                           json_integer_value(from));

        } else if (!cl->a2a_watch) {
            cl->cursor = sh->ring->head;
        }

        cl->a2a_watch = 1;
    }

    ngx_pty_shm_unlock(sh);

    (void) ngx_pty_a2a_reply(cl, "SubscribeToTask.Accepted", id,
                             json_pack("{s:I}", "current_sequence",
                                       (json_int_t) seq));

    ngx_pty_binding_pull(cl);

    return NGX_OK;
}


static ngx_int_t
ngx_pty_a2a_unsubscribe(ngx_pty_client_t *cl, json_t *msg, json_t *payload,
    json_t *id)
{
    json_t                *tid;
    ngx_uint_t             i;
    ngx_pty_a2a_client_t  *ac;

    ac = cl->a2a;
    tid = payload ? json_object_get(payload, "task_id") : NULL;

    for (i = 0; json_is_string(tid) && i < ac->nsubs; i++) {
        if (json_string_length(tid) == NGX_PTY_ID_LEN
            && ngx_memcmp(ac->subs[i], json_string_value(tid),
                          NGX_PTY_ID_LEN) == 0)
        {
            ngx_memmove(ac->subs[i], ac->subs[i + 1],
                        (ac->nsubs - i - 1) * NGX_PTY_ID_LEN);
            ac->nsubs--;

            return ngx_pty_a2a_reply(cl, "Unsubscribe.Response", id,
                                     json_pack("{s:O}", "task_id", tid));
        }
    }

    ngx_pty_binding_error(cl, id, NGX_PTY_ERR_TASK_NOT_FOUND,
                          "this connection does not follow that task");
    return NGX_OK;
}


static ngx_int_t
ngx_pty_a2a_params(ngx_pty_client_t *cl, json_t *msg, json_t *payload,
    json_t *id)
{
    json_t  *sp, *v;

    sp = payload ? json_object_get(payload, "service_parameters") : NULL;

    if (sp == NULL) {
        sp = json_object_get(msg, "service_parameters");
    }

    if (!json_is_object(sp)) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "\"payload.service_parameters\" must be an "
                              "object");
        return NGX_OK;
    }

    if (cl->service_parameters) {
        json_decref(cl->service_parameters);
    }

    cl->service_parameters = json_incref(sp);

    v = json_object_get(sp, "trace_id");
    if (json_is_string(v)) {
        ngx_pty_auth_trace(cl->ident, json_string_value(v),
                           json_string_length(v));
    }

    return ngx_pty_a2a_reply(cl, "UpdateServiceParameters.Response", id,
                             json_pack("{s:O}", "service_parameters", sp));
}


/* lookups */

static ngx_pty_a2a_task_t *
ngx_pty_a2a_running(ngx_pty_client_t *cl, json_t *task_id)
{
    ngx_queue_t         *q;
    ngx_pty_a2a_task_t  *t;

    if (!json_is_string(task_id)
        || json_string_length(task_id) != NGX_PTY_ID_LEN)
    {
        return NULL;
    }

    for (q = ngx_queue_head(&ngx_pty_a2a_tasks_running);
         q != ngx_queue_sentinel(&ngx_pty_a2a_tasks_running);
         q = ngx_queue_next(q))
    {
        t = ngx_queue_data(q, ngx_pty_a2a_task_t, queue);

        if (t->session->sh == cl->session->sh
            && ngx_memcmp(t->id, json_string_value(task_id),
                          NGX_PTY_ID_LEN) == 0)
        {
            return t;
        }
    }

    return NULL;
}


/* the task named by payload.task_id (a new reference), or an Error sent */
static json_t *
ngx_pty_a2a_find(ngx_pty_client_t *cl, json_t *payload, json_t *id)
{
    json_t  *tid, *all, *task;

    tid = payload ? json_object_get(payload, "task_id") : NULL;

    if (!json_is_string(tid) || json_string_length(tid) == 0) {
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_INVALID_REQUEST,
                              "\"payload.task_id\" must be a task id");
        return NULL;
    }

    all = ngx_pty_a2a_tasks(cl, tid);
    task = json_array_get(all, 0);

    if (task == NULL) {
        json_decref(all);
        ngx_pty_binding_error(cl, id, NGX_PTY_ERR_TASK_NOT_FOUND,
                              "no such task in this session");
        return NULL;
    }

    task = json_deep_copy(task);
    json_decref(all);

    return task;
}


/*
 * The session's tasks, oldest first, each as its newest update in the
 * ring says (only task_id's when given).  Frames are copied out under
 * the lock and parsed after.
 */
static json_t *
ngx_pty_a2a_tasks(ngx_pty_client_t *cl, json_t *task_id)
{
    size_t                 i;
    u_char                *d;
    json_t                *all, *order, *o, *task, *prev;
    uint64_t               off;
    ngx_str_t             *s;
    ngx_pool_t            *pool;
    ngx_array_t            copies;
    ngx_pty_frame_t       *f;
    ngx_pty_session_sh_t  *sh;

    pool = ngx_create_pool(4096, cl->ws.connection->log);
    if (pool == NULL) {
        return NULL;
    }

    if (ngx_array_init(&copies, pool, 16, sizeof(ngx_str_t)) != NGX_OK) {
        ngx_destroy_pool(pool);
        return NULL;
    }

    sh = cl->session->sh;

    ngx_pty_shm_lock(sh);

    for (off = sh->ring->tail; (f = ngx_pty_ring_read(sh->ring, &off)); ) {
        d = ngx_pty_frame_data(f);

        if (f->kind != NGX_PTY_FRAME_TASK
            || f->len < NGX_PTY_A2A_ID_AT + NGX_PTY_ID_LEN
            || (task_id && (json_string_length(task_id) != NGX_PTY_ID_LEN
                            || ngx_memcmp(d + NGX_PTY_A2A_ID_AT,
                                          json_string_value(task_id),
                                          NGX_PTY_ID_LEN))))
        {
            continue;
        }

        s = ngx_array_push(&copies);
        if (s == NULL) {
            break;
        }

        /* ,"payload":{...},... -> {"payload":{...},...} */
        s->len = f->len + 1;
        s->data = ngx_pnalloc(pool, s->len);
        if (s->data == NULL) {
            copies.nelts--;
            break;
        }

        s->data[0] = '{';
        ngx_memcpy(s->data + 1, d + 1, f->len - 1);
        s->data[s->len - 1] = '}';
    }

    ngx_pty_shm_unlock(sh);

    all = json_object();
    order = json_array();
    s = copies.elts;

    for (i = 0; all && order && i < copies.nelts; i++) {
        o = json_loadb((char *) s[i].data, s[i].len, 0, NULL);
        task = json_object_get(json_object_get(o, "payload"), "task");

        if (json_is_string(json_object_get(task, "id"))) {
            prev = json_object_get(all, json_string_value(
                                       json_object_get(task, "id")));

            if (prev == NULL) {
                json_array_append(order, json_object_get(task, "id"));

            } else if (json_object_get(task, "history") == NULL) {
                /* an output delta: the rest is as the update before */
                json_object_set(task, "history",
                                json_object_get(prev, "history"));
                json_object_set(task, "artifacts",
                                json_object_get(prev, "artifacts"));
            }

            json_object_set(all, json_string_value(
                                json_object_get(task, "id")), task);
        }

        json_decref(o);
    }

    ngx_destroy_pool(pool);

    for (i = 0; all && order && i < json_array_size(order); i++) {
        json_array_set(order, i, json_object_get(all, json_string_value(
                                     json_array_get(order, i))));
    }

    json_decref(all);

    return order;
}


/* helpers */

static ngx_int_t
ngx_pty_a2a_reply(ngx_pty_client_t *cl, const char *op, json_t *id,
    json_t *payload)
{
    char       *text;
    json_t     *frame;
    ngx_int_t   rc;
    u_char      ts[NGX_PTY_TS_LEN];

    if (payload == NULL) {
        return NGX_ERROR;
    }

    ngx_pty_ts_format(ts, ngx_pty_now_ms());

    frame = json_pack("{s:s, s:O, s:s#, s:o}", "op", op, "id", id,
                      "ts", ts, (int) NGX_PTY_TS_LEN, "payload", payload);
    if (frame == NULL) {
        return NGX_ERROR;
    }

    if (cl->service_parameters) {
        /* the trace follows every answer about a task */
        json_object_set(frame, "service_parameters", cl->service_parameters);
    }

    text = json_dumps(frame, JSON_COMPACT);
    json_decref(frame);

    if (text == NULL) {
        return NGX_ERROR;
    }

    rc = ngx_pty_ws_reply(&cl->ws, (u_char *) text, ngx_strlen(text));
    free(text);

    if (rc != NGX_OK) {
        ngx_pty_ws_finalize(&cl->ws);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_pty_a2a_sub(ngx_pty_client_t *cl, const u_char *tid)
{
    ngx_uint_t             i;
    ngx_pty_a2a_client_t  *ac;

    ac = cl->a2a;

    for (i = 0; i < ac->nsubs; i++) {
        if (ngx_memcmp(ac->subs[i], tid, NGX_PTY_ID_LEN) == 0) {
            return NGX_OK;
        }
    }

    if (ac->nsubs == NGX_PTY_A2A_SUBS) {
        return NGX_DECLINED;
    }

    ngx_memcpy(ac->subs[ac->nsubs++], tid, NGX_PTY_ID_LEN);

    if (!cl->joined && !cl->a2a_watch) {
        /* from now on, this client walks the ring for its tasks */
        ngx_pty_shm_lock(cl->session->sh);
        cl->cursor = cl->session->sh->ring->head;
        ngx_pty_shm_unlock(cl->session->sh);
        cl->a2a_watch = 1;
    }

    return NGX_OK;
}


static ngx_uint_t
ngx_pty_a2a_terminal(json_t *task)
{
    const char  *state;

    state = json_string_value(json_object_get(json_object_get(task,
                                                              "status"),
                                              "state"));

    return state == NULL
           || (ngx_strcmp(state, "working") != 0
               && ngx_strcmp(state, "submitted") != 0);
}
