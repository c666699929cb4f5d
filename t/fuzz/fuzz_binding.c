
/*
 * libFuzzer harness: the pty-ws/v1 envelope check and op dispatch
 * (src/ngx_pty_binding.c, src/ngx_pty_ext.c, included for their static
 * functions) on a session record in a real zone (fuzz_env.h).
 *
 * Input: a config byte, then WebSocket messages separated by 0xff (a
 * byte UTF-8 never has; messages the WebSocket layer would refuse as
 * invalid UTF-8 are skipped).  The PTY, the other workers and the screen
 * are stand-ins (the --wrap functions below).  Invariants: no access out
 * of bounds (ASan), and every frame the client is sent is one text frame
 * of valid UTF-8 holding one JSON object.
 */

#include "fuzz_env.h"
#include "ngx_pty_binding.c"
#include "ngx_pty_ext.c"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

ngx_int_t __wrap_ngx_pty_session_input(ngx_pty_session_t *s, u_char *data,
    size_t len);
ngx_int_t __wrap_ngx_pty_session_resize(ngx_pty_session_t *s,
    ngx_uint_t cols, ngx_uint_t rows);
ngx_int_t __wrap_ngx_pty_session_request_keyframe(ngx_pty_session_t *s,
    uint32_t target);
void __wrap_ngx_pty_session_notify(ngx_pty_session_t *s);
ngx_int_t __wrap_ngx_pty_session_kill(ngx_pty_session_t *s,
    ngx_uint_t reason);
void __wrap_ngx_pty_session_unlisten(ngx_pty_session_t *s,
    ngx_pty_listener_t *l);


static ngx_uint_t  fuzz_cfg;


/* the session's answers: config bits say whether it refuses */
ngx_int_t
__wrap_ngx_pty_session_input(ngx_pty_session_t *s, u_char *data, size_t len)
{
    fuzz_assert(len <= 64 * 1024);
    return (fuzz_cfg & 0x10) ? NGX_DECLINED : NGX_OK;
}


ngx_int_t
__wrap_ngx_pty_session_resize(ngx_pty_session_t *s, ngx_uint_t cols,
    ngx_uint_t rows)
{
    fuzz_assert(cols >= 1 && cols <= 1024 && rows >= 1 && rows <= 1024);
    return (fuzz_cfg & 0x20) ? NGX_ERROR : NGX_OK;
}


ngx_int_t
__wrap_ngx_pty_session_request_keyframe(ngx_pty_session_t *s,
    uint32_t target)
{
    return (fuzz_cfg & 0x40) ? NGX_ERROR : NGX_OK;
}


void
__wrap_ngx_pty_session_notify(ngx_pty_session_t *s)
{
}


ngx_int_t
__wrap_ngx_pty_session_kill(ngx_pty_session_t *s, ngx_uint_t reason)
{
    return NGX_OK;
}


void
__wrap_ngx_pty_session_unlisten(ngx_pty_session_t *s, ngx_pty_listener_t *l)
{
}


/* every server frame: a text frame of one JSON object, or a close */
static void
fuzz_check_sent(u_char *p, size_t len)
{
    size_t        hlen;
    uint64_t      plen;
    json_t       *j;
    ngx_uint_t    opcode, i;
    json_error_t  err;

    while (len) {
        fuzz_assert(len >= 2);
        fuzz_assert(p[0] & 0x80);              /* FIN: never fragmented */
        fuzz_assert(!(p[1] & 0x80));           /* servers do not mask */

        opcode = p[0] & 0x0f;
        plen = p[1] & 0x7f;
        hlen = 2;

        if (plen == 126) {
            fuzz_assert(len >= 4);
            plen = ((uint64_t) p[2] << 8) | p[3];
            hlen = 4;

        } else if (plen == 127) {
            fuzz_assert(len >= 10);
            for (plen = 0, i = 0; i < 8; i++) {
                plen = (plen << 8) | p[2 + i];
            }
            hlen = 10;
        }

        fuzz_assert(len - hlen >= plen);

        if (opcode == 0x1) {                   /* text */
            fuzz_assert(fuzz_utf8_valid(p + hlen, plen));
            j = json_loadb((char *) p + hlen, plen, 0, &err);
            if (j == NULL || !json_is_object(j)) {
                fprintf(stderr, "bad frame: %.*s\n", (int) plen, p + hlen);
                abort();
            }
            json_decref(j);

        } else {
            fuzz_assert(opcode == 0x8);          /* close */
        }

        p += hlen + plen;
        len -= hlen + plen;
    }
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    u_char                *end, *next;
    ngx_pty_client_t      *cl;
    ngx_pty_session_t     *s;
    ngx_pty_loc_conf_t     conf;
    ngx_str_t              acl;
    static fuzz_conn_t     fc;
    static ngx_pty_ident_t ident;

    fuzz_env_init();

    if (size < 1) {
        return 0;
    }

    fuzz_cfg = data[0];
    data++;
    size--;

    fuzz_zone_init();
    fuzz_conn_init(&fc);

    ngx_memzero(&conf, sizeof(ngx_pty_loc_conf_t));
    conf.params.max_controllers = 1 + (fuzz_cfg & 1);
    conf.params.max_observers = 1 + ((fuzz_cfg >> 1) & 3);
    conf.input_max = 64 * 1024;
    conf.ws_max_message = 1024 * 1024;
    conf.ws_send_buffer = 256 * 1024;
    conf.terminate_on_last_controller = (fuzz_cfg >> 3) & 1;

    s = calloc(1, sizeof(ngx_pty_session_t));
    fuzz_assert(s != NULL);
    s->log = &fuzz_log;
    s->pool = ngx_create_pool(4096, &fuzz_log);
    fuzz_assert(s->pool != NULL);
    ngx_queue_init(&s->listeners);
    /* anonymous (pty_auth off): the owner "", every default scope */
    ngx_str_set(&acl, "O\0");
    s->sh = ngx_pty_shm_session_create(&fuzz_log, (u_char *) "sh", 2, &acl,
                                       80, 24, 4096, 4096);
    fuzz_assert(s->sh != NULL);
    s->sh->state = (fuzz_cfg & 0x80) ? NGX_PTY_STATE_CLOSED
                                     : NGX_PTY_STATE_RUNNING;
    ngx_pty_ring_limits(s->sh, 64, 64 * 1024, 256 * 1024);

    cl = calloc(1, sizeof(ngx_pty_client_t));
    fuzz_assert(cl != NULL);
    ngx_memzero(&ident, sizeof(ngx_pty_ident_t));
    ngx_str_set(&ident.principal, "");
    ident.anonymous = 1;
    ident.scopes = NGX_PTY_SCOPE_DEFAULT;
    ident.right = NGX_PTY_RIGHT_OWNER;
    ident.role = -1;

    cl->conf = &conf;
    cl->ident = &ident;
    cl->session = s;
    cl->first_frame = 1;
    cl->client_id = 7;
    cl->ws.data = cl;
    cl->ws.connection = &fc.c;
    cl->ws.request = &fc.r;
    cl->ws.last_out = &cl->ws.out;
    cl->ws.on_message = ngx_pty_binding_message;
    cl->ws.on_closed = ngx_pty_binding_closed;
    cl->ws.max_message = conf.ws_max_message;
    cl->ws.send_limit = conf.ws_send_buffer;
    cl->ws.ping_interval = 30000;
    cl->ws.pong_timeout = 10000;
    cl->keyframe_ev.log = &fuzz_log;
    cl->keyframe_ev.data = cl;
    cl->ext_active = (fuzz_cfg >> 2) & 1;

    fuzz_assert(ngx_pty_binding_cache_join(cl) == NGX_OK);

    for (end = (u_char *) data + size; (u_char *) data < end && !cl->ws.finished;
         data = next + 1)
    {
        next = memchr(data, 0xff, end - (u_char *) data);
        if (next == NULL) {
            next = end;
        }

        if (fuzz_utf8_valid(data, next - (u_char *) data)) {
            cl->ws.on_message(&cl->ws, (u_char *) data, next - (u_char *) data);
        }

        if (next == end) {
            break;
        }
    }

    ngx_pty_ws_finalize(&cl->ws);
    fuzz_check_sent(fc.sent, fc.sent_len);

    fuzz_conn_free(&fc);
    ngx_destroy_pool(s->pool);
    free(cl);
    free(s);

    return 0;
}
