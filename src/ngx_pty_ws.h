
/*
 * RFC 6455 server side on an upgraded nginx connection: handshake, frame
 * parsing (fragmentation, masking, control frames, limits, UTF-8), and a
 * send queue that never blocks the worker.
 */

#ifndef _NGX_PTY_WS_H_INCLUDED_
#define _NGX_PTY_WS_H_INCLUDED_


#include "ngx_pty.h"


#define NGX_PTY_WS_CLOSE_NORMAL        1000
#define NGX_PTY_WS_CLOSE_GOING_AWAY    1001
#define NGX_PTY_WS_CLOSE_PROTOCOL      1002
#define NGX_PTY_WS_CLOSE_BAD_DATA      1007
#define NGX_PTY_WS_CLOSE_POLICY        1008
#define NGX_PTY_WS_CLOSE_TOO_BIG       1009
#define NGX_PTY_WS_CLOSE_SERVER_ERROR  1011
#define NGX_PTY_WS_CLOSE_VIOLATION     4400
#define NGX_PTY_WS_CLOSE_NOT_FOUND     4404

#define NGX_PTY_WS_HEADER_MAX          10    /* server frames: unmasked */


typedef struct ngx_pty_ws_s  ngx_pty_ws_t;

typedef void (*ngx_pty_ws_message_pt)(ngx_pty_ws_t *ws, u_char *data,
    size_t len);
typedef void (*ngx_pty_ws_event_pt)(ngx_pty_ws_t *ws);


/*
 * A frame built once and queued to several connections: reference counted,
 * each connection's block points at its bytes (no copy per connection).
 */
typedef struct {
    ngx_uint_t                 refs;
    uint64_t                   key;          /* the builder's tag */
    u_char                    *pos;          /* header, then payload */
    u_char                    *last;
} ngx_pty_ws_shared_t;


/*
 * A queued frame: one allocation holding the link, the buffer and bytes,
 * or the link and a buffer over a shared frame's bytes.
 */
typedef struct {
    ngx_chain_t                cl;
    ngx_buf_t                  buf;
    ngx_pty_ws_shared_t       *shared;
    u_char                    *frame;        /* its start, once queued */
    ngx_uint_t                 reply;        /* counts as a reply */
} ngx_pty_ws_block_t;


struct ngx_pty_ws_s {
    ngx_connection_t          *connection;
    ngx_http_request_t        *request;
    void                      *data;

    ngx_pty_ws_message_pt      on_message;
    ngx_pty_ws_event_pt        on_writable;   /* the queue drained */
    ngx_pty_ws_event_pt        on_closed;     /* connection finished */

    size_t                     max_message;
    size_t                     send_limit;    /* bytes, see ngx_pty_ws_full */
    ngx_uint_t                 send_frames;   /* frames, likewise */
    ngx_msec_t                 ping_interval;
    ngx_msec_t                 pong_timeout;

    /* input */
    u_char                    *in;            /* raw bytes from the socket */
    size_t                     in_len;
    size_t                     in_size;

    u_char                    *msg;           /* message being assembled */
    size_t                     msg_len;
    size_t                     msg_size;
    ngx_uint_t                 msg_opcode;

    /* output: unsent frames; a reply is also counted apart */
    ngx_chain_t               *out;
    ngx_chain_t              **last_out;
    size_t                     out_bytes;
    ngx_uint_t                 out_frames;
    size_t                     reply_bytes;
    ngx_uint_t                 reply_frames;

    ngx_event_t                ping;
    ngx_msec_t                 last_in;

    unsigned                   awaiting_pong:1;
    unsigned                   close_sent:1;
    unsigned                   read_after_close:1;  /* data still taken */
    unsigned                   lingering:1;         /* for the peer's close */
    unsigned                   close_received:1;
    unsigned                   finished:1;
    unsigned                   overflowed:1;
};


/*
 * Output (ring frames) is queued only below this bound: beyond it the
 * client lags.  Replies have a bound of their own, and a client that
 * lets them pile up is closed (ngx_pty_ws_reply()).
 */
#define ngx_pty_ws_full(ws)                                                   \
    ((ws)->out_bytes >= (ws)->send_limit                                      \
     || (ws)->out_frames >= (ws)->send_frames)


ngx_int_t ngx_pty_ws_handshake(ngx_http_request_t *r, ngx_pty_ws_t *ws);
void ngx_pty_ws_start(ngx_pty_ws_t *ws);

/* X-Pty-Worker: the pid of the worker that answers (docs/API.md) */
ngx_int_t ngx_pty_worker_header(ngx_http_request_t *r);
ngx_int_t ngx_pty_ws_add_header(ngx_http_request_t *r, const char *name,
    const char *value, size_t len);
/* a request header by name (the first), or NULL */
ngx_table_elt_t *ngx_pty_ws_header(ngx_http_request_t *r, const char *name);

/* room for a text frame of at most max payload bytes, then commit */
u_char *ngx_pty_ws_reserve(ngx_pty_ws_t *ws, size_t max,
    ngx_pty_ws_block_t **block);
void ngx_pty_ws_commit(ngx_pty_ws_t *ws, ngx_pty_ws_block_t *block,
    u_char *end);
void ngx_pty_ws_queue(ngx_pty_ws_t *ws, ngx_pty_ws_block_t *block);
/* a shared text frame: payload room, commit once, queue to many */
ngx_pty_ws_shared_t *ngx_pty_ws_shared_alloc(size_t max, ngx_log_t *log);
#define ngx_pty_ws_shared_payload(sf)                                         \
    ((u_char *) (sf) + sizeof(ngx_pty_ws_shared_t) + NGX_PTY_WS_HEADER_MAX)
void ngx_pty_ws_shared_commit(ngx_pty_ws_shared_t *sf, u_char *end);
void ngx_pty_ws_shared_release(ngx_pty_ws_shared_t *sf);
ngx_int_t ngx_pty_ws_queue_shared(ngx_pty_ws_t *ws, ngx_pty_ws_shared_t *sf);

/* a text frame answering the client; NGX_ERROR: out of memory */
ngx_int_t ngx_pty_ws_reply(ngx_pty_ws_t *ws, u_char *data, size_t len);
void ngx_pty_ws_close(ngx_pty_ws_t *ws, ngx_uint_t code, const char *reason);
void ngx_pty_ws_flush(ngx_pty_ws_t *ws);
/* takes in what the peer has sent and the socket holds (a worker's exit) */
void ngx_pty_ws_read_pending(ngx_pty_ws_t *ws);
void ngx_pty_ws_finalize(ngx_pty_ws_t *ws);

ngx_int_t ngx_pty_utf8_valid(u_char *p, size_t len);


#endif /* _NGX_PTY_WS_H_INCLUDED_ */
