
/*
 * libFuzzer harness: the WebSocket frame parser (src/ngx_pty_ws.c, whose
 * static ngx_pty_ws_parse() is reached by including the file).
 *
 * Input: a config byte (max message size), the cuts (fuzz.h), then the
 * bytes a client sends.  They are given to the parser the way the read
 * handler does, once whole and once in the pieces the cuts make.
 * Invariants: no access out of bounds (ASan), every message delivered is
 * valid UTF-8 and within the limit, and both runs deliver the same
 * messages, send the same bytes and end in the same state.
 */

#include "fuzz_env.h"
#include "ngx_pty_ws.c"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


typedef struct {
    fuzz_conn_t          fc;
    ngx_pty_ws_t         ws;
    u_char              *msgs;        /* length, then bytes, per message */
    size_t               msgs_len;
    size_t               msgs_size;
    ngx_uint_t           count;
} fuzz_ws_run_t;


static void
fuzz_ws_message(ngx_pty_ws_t *ws, u_char *data, size_t len)
{
    fuzz_ws_run_t  *run;

    run = ws->data;

    fuzz_assert(len <= ws->max_message);
    fuzz_assert(fuzz_utf8_valid(data, len));

    if (run->msgs_len + sizeof(size_t) + len > run->msgs_size) {
        run->msgs_size = 2 * (run->msgs_len + sizeof(size_t) + len);
        run->msgs = realloc(run->msgs, run->msgs_size);
        fuzz_assert(run->msgs != NULL);
    }

    memcpy(run->msgs + run->msgs_len, &len, sizeof(size_t));
    memcpy(run->msgs + run->msgs_len + sizeof(size_t), data, len);
    run->msgs_len += sizeof(size_t) + len;
    run->count++;
}


/* the read handler's loop, with recv() giving the pieces */
static void
fuzz_ws_run(fuzz_ws_run_t *run, const uint8_t *data, size_t size,
    fuzz_cuts_t *cuts, size_t max_message)
{
    size_t         n;
    ngx_pty_ws_t  *ws;

    ngx_memzero(run, sizeof(fuzz_ws_run_t));
    fuzz_conn_init(&run->fc);

    ws = &run->ws;
    ws->connection = &run->fc.c;
    ws->request = &run->fc.r;
    ws->data = run;
    ws->on_message = fuzz_ws_message;
    ws->max_message = max_message;
    ws->send_limit = 1024 * 1024;
    ws->ping_interval = 30000;
    ws->pong_timeout = 10000;
    ws->last_out = &ws->out;

    ws->in = ngx_alloc(NGX_PTY_WS_IN_SIZE, &fuzz_log);
    fuzz_assert(ws->in != NULL);
    ws->in_size = NGX_PTY_WS_IN_SIZE;

    while (size && !ws->finished) {
        if (ws->in_len == ws->in_size) {
            ngx_pty_ws_finalize(ws);
            break;
        }

        n = cuts ? fuzz_cuts_next(cuts, size) : size;
        n = ngx_min(n, ws->in_size - ws->in_len);

        ngx_memcpy(ws->in + ws->in_len, data, n);
        ws->in_len += n;
        data += n;
        size -= n;

        if (ngx_pty_ws_parse(ws) != NGX_OK) {
            break;
        }
    }
}


static void
fuzz_ws_free(fuzz_ws_run_t *run)
{
    ngx_pty_ws_cleanup(&run->ws);
    fuzz_conn_free(&run->fc);
    free(run->msgs);
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t                 max_message;
    fuzz_cuts_t            cuts;
    static fuzz_ws_run_t   whole, pieces;

    fuzz_env_init();

    if (size < 1) {
        return 0;
    }

    /* 1 byte .. 128 KiB, or the directive's default */
    max_message = (data[0] & 0x80) ? (size_t) 1 << (data[0] % 18)
                                   : 1024 * 1024;
    data++;
    size--;

    fuzz_cuts_init(&cuts, &data, &size);

    fuzz_ws_run(&whole, data, size, NULL, max_message);
    fuzz_ws_run(&pieces, data, size, &cuts, max_message);

    fuzz_assert(whole.count == pieces.count);
    fuzz_assert(whole.msgs_len == pieces.msgs_len);
    fuzz_assert(whole.msgs_len == 0
                || memcmp(whole.msgs, pieces.msgs, whole.msgs_len) == 0);
    fuzz_assert(whole.fc.sent_len == pieces.fc.sent_len);
    fuzz_assert(whole.fc.sent_len == 0
                || memcmp(whole.fc.sent, pieces.fc.sent,
                          whole.fc.sent_len) == 0);
    fuzz_assert(whole.ws.finished == pieces.ws.finished);
    fuzz_assert(whole.ws.close_sent == pieces.ws.close_sent);
    fuzz_assert(whole.ws.close_received == pieces.ws.close_received);

    fuzz_ws_free(&whole);
    fuzz_ws_free(&pieces);

    return 0;
}
