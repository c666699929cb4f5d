
/*
 * libFuzzer harness: the agent API's request handling (src/ngx_pty_api.c,
 * included for its static functions): the body put together from the
 * buffers it came in, the JSON parse, each call's validation and its
 * answer, on a session record in a real zone (fuzz_env.h) whose output is
 * the request body itself.
 *
 * Input: a byte choosing the call (start, write, kill, list, read or
 * status), the cuts (fuzz.h) that split the body into buffers,
 * then the body.  A call that waits is ended by its timer.  The PTY and
 * the session's other workers are stand-ins (the --wrap functions below).
 * Invariants: no access out of bounds (ASan); the request is finalized
 * once; every answer is one JSON object, or a status of 400 and above.
 */

#include "fuzz_env.h"
#include "ngx_pty_api.c"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

ngx_int_t __wrap_ngx_http_send_header(ngx_http_request_t *r);
ngx_pty_session_t *__wrap_ngx_pty_session_get(ngx_pty_session_sh_t *sh);
void __wrap_ngx_pty_session_put(ngx_pty_session_t *s);
void __wrap_ngx_pty_session_listen(ngx_pty_session_t *s,
    ngx_pty_listener_t *l);
void __wrap_ngx_pty_session_unlisten(ngx_pty_session_t *s,
    ngx_pty_listener_t *l);
ngx_int_t __wrap_ngx_pty_session_input(ngx_pty_session_t *s, u_char *data,
    size_t len);
ngx_int_t __wrap_ngx_pty_session_kill(ngx_pty_session_t *s,
    ngx_uint_t reason);
ngx_pty_session_t *__wrap_ngx_pty_session_start(ngx_pty_start_t *st,
    ngx_log_t *log);
ngx_int_t __wrap_ngx_pty_session_screen_apply(ngx_pty_session_t *s,
    ngx_pty_screen_handler_pt handler, void *data);
void __wrap_ngx_pty_session_settle(ngx_pty_session_t *s);
void __wrap_ngx_pty_sessions_stat(ngx_pty_sessions_stat_t *st);



static ngx_str_t  fuzz_acl = { 2, (u_char *) "O\0" };
static ngx_pty_session_t  *fuzz_session;
static ngx_int_t           fuzz_refs;
static ngx_uint_t          fuzz_headers;


ngx_int_t
__wrap_ngx_http_send_header(ngx_http_request_t *r)
{
    fuzz_headers++;
    return NGX_OK;
}


ngx_pty_session_t *
__wrap_ngx_pty_session_get(ngx_pty_session_sh_t *sh)
{
    fuzz_assert(sh == fuzz_session->sh);
    fuzz_refs++;
    return fuzz_session;
}


void
__wrap_ngx_pty_session_put(ngx_pty_session_t *s)
{
    fuzz_assert(s == fuzz_session && fuzz_refs > 0);
    fuzz_refs--;
}


void
__wrap_ngx_pty_session_listen(ngx_pty_session_t *s, ngx_pty_listener_t *l)
{
    ngx_queue_insert_tail(&s->listeners, &l->queue);
}


void
__wrap_ngx_pty_session_unlisten(ngx_pty_session_t *s, ngx_pty_listener_t *l)
{
    ngx_queue_remove(&l->queue);
    __wrap_ngx_pty_session_put(s);
}


ngx_int_t
__wrap_ngx_pty_session_input(ngx_pty_session_t *s, u_char *data, size_t len)
{
    fuzz_assert(len <= 64 * 1024 + 1);
    return NGX_OK;
}


ngx_int_t
__wrap_ngx_pty_session_kill(ngx_pty_session_t *s, ngx_uint_t reason)
{
    return NGX_OK;
}


ngx_pty_session_t *
__wrap_ngx_pty_session_start(ngx_pty_start_t *st, ngx_log_t *log)
{
    fuzz_assert(st->command_len > 0);
    fuzz_assert(st->cols >= 1 && st->cols <= 1024);
    fuzz_assert(st->rows >= 1 && st->rows <= 1024);
    return NULL;
}


ngx_int_t
__wrap_ngx_pty_session_screen_apply(ngx_pty_session_t *s,
    ngx_pty_screen_handler_pt handler, void *data)
{
    ngx_pty_screen_t  *screen;

    static u_char  text[] = "$ ready\r\n\x1b[7mmenu\x1b[m";

    screen = ngx_pty_screen_create(20, 4);
    fuzz_assert(screen != NULL);

    ngx_pty_screen_feed(screen, text, sizeof(text) - 1);
    handler(screen, data);
    ngx_pty_screen_destroy(screen);

    return NGX_OK;
}


void
__wrap_ngx_pty_session_settle(ngx_pty_session_t *s)
{
}


void
__wrap_ngx_pty_sessions_stat(ngx_pty_sessions_stat_t *st)
{
    ngx_memzero(st, sizeof(ngx_pty_sessions_stat_t));
}


static const char  *fuzz_calls[] = {
    "/api/start", "/api/write", "/api/kill", "/api/list", "/api/read",
    "/api/status"              /* the handler refuses others before */
};


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t                     n, left;
    json_t                    *j;
    ngx_buf_t                 *b;
    ngx_uint_t                 call;
    fuzz_cuts_t                cuts;
    ngx_chain_t              **ll, *cl;
    json_error_t               err;
    ngx_http_request_t        *r;
    ngx_pty_session_t          s;
    ngx_pty_loc_conf_t         plcf;
    ngx_pty_main_conf_t        pmcf;
    ngx_http_core_loc_conf_t   clcf;
    void                      *loc_conf[2], *main_conf[2];
    static fuzz_conn_t         fc;

    fuzz_env_init();

    if (size < 1) {
        return 0;
    }

    call = data[0] % (sizeof(fuzz_calls) / sizeof(fuzz_calls[0]));
    data++;
    size--;

    fuzz_cuts_init(&cuts, &data, &size);

    fuzz_zone_init();
    fuzz_conn_init(&fc);
    fuzz_headers = 0;
    fuzz_refs = 0;

    /* the configuration: defaults, a small page to exercise the spill */
    ngx_memzero(&plcf, sizeof(ngx_pty_loc_conf_t));
    plcf.handler = NGX_PTY_HANDLER_API;
    plcf.input_max = 64 * 1024;
    plcf.api_cols = 120;
    plcf.api_rows = 32;
    plcf.api_max_body = 1024 * 1024;
    plcf.api_page_size = 64;
    plcf.api_wait = 500;
    plcf.api_wait_for = 5000;
    plcf.api_wait_max = 60000;
    plcf.max_sessions = 1;
    ngx_memzero(&pmcf, sizeof(ngx_pty_main_conf_t));
    ngx_str_set(&pmcf.instance_id, "test");
    ngx_memzero(&clcf, sizeof(ngx_http_core_loc_conf_t));
    ngx_str_set(&clcf.name, "/api/");

    ngx_http_core_module.ctx_index = 0;
    ngx_pty_module.ctx_index = 1;
    loc_conf[0] = &clcf;
    loc_conf[1] = &plcf;
    main_conf[0] = NULL;
    main_conf[1] = &pmcf;

    /* the session pty-1, whose output so far is the body */
    ngx_memzero(&s, sizeof(ngx_pty_session_t));
    s.log = &fuzz_log;
    s.pool = ngx_create_pool(4096, &fuzz_log);
    fuzz_assert(s.pool != NULL);
    ngx_queue_init(&s.listeners);
    /* owned by the anonymous principal: the location has pty_auth off */
    s.sh = ngx_pty_shm_session_create(&fuzz_log, (u_char *) "sh", 2,
                                      &fuzz_acl, 80, 24, 4096, 4096);
    fuzz_assert(s.sh != NULL);

    /* names are random: the corpus calls it pty-1 */
    ngx_rbtree_delete(&ngx_pty_shm_zone()->sh->names, &s.sh->name_node);
    s.sh->name = 1;
    s.sh->name_node.key = 1;
    ngx_rbtree_insert(&ngx_pty_shm_zone()->sh->names, &s.sh->name_node);

    s.sh->state = NGX_PTY_STATE_RUNNING;
    ngx_pty_scroll_append(s.sh->scroll, (u_char *) data, size);
    fuzz_session = &s;

    r = &fc.r;
    r->loc_conf = loc_conf;
    r->main_conf = main_conf;
    r->method = NGX_HTTP_POST;
    r->uri.data = (u_char *) fuzz_calls[call];
    r->uri.len = ngx_strlen(fuzz_calls[call]);
    r->count = 1;
    fuzz_assert(ngx_list_init(&r->headers_out.headers, r->pool, 4,
                              sizeof(ngx_table_elt_t)) == NGX_OK);

    /* the body in the buffers the cuts make, each of exactly its size */
    r->request_body = ngx_pcalloc(r->pool, sizeof(ngx_http_request_body_t));
    fuzz_assert(r->request_body != NULL);
    ll = &r->request_body->bufs;

    for (left = size; left; left -= n, data += n) {
        n = fuzz_cuts_next(&cuts, left);

        b = ngx_calloc_buf(r->pool);
        cl = ngx_alloc_chain_link(r->pool);
        fuzz_assert(b && cl);
        b->start = ngx_alloc(n, &fuzz_log);
        fuzz_assert(b->start != NULL);
        ngx_memcpy(b->start, data, n);
        b->pos = b->start;
        b->last = b->start + n;
        b->end = b->last;
        b->temporary = 1;
        cl->buf = b;
        cl->next = NULL;
        *ll = cl;
        ll = &cl->next;
    }

    ngx_pty_api_body_handler(r);

    /* a waiting call: its deadline passes */
    if (fc.finalized == 0) {
        ngx_current_msec += 24 * 3600 * 1000;
        ngx_event_expire_timers();
    }

    fuzz_assert(fc.finalized == 1);
    fuzz_assert(fuzz_headers <= 1);

    if (fc.sent_len) {
        fuzz_assert(fc.sent[fc.sent_len - 1] == '\n');
        j = json_loadb((char *) fc.sent, fc.sent_len - 1, 0, &err);
        fuzz_assert(j != NULL && json_is_object(j));
        json_decref(j);
    }

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        ngx_free(cl->buf->start);
    }

    /* the request's pool first: its cleanups give their references back */
    ngx_destroy_pool(r->pool);
    r->pool = NULL;
    fuzz_assert(fuzz_refs == 0);
    ngx_destroy_pool(s.pool);
    fuzz_conn_free(&fc);

    return 0;
}
