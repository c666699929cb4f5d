
/*
 * RFC 6455 on an upgraded nginx connection.
 */

#include "ngx_pty.h"
#include "ngx_pty_ws.h"

#include <ngx_sha1.h>


#define NGX_PTY_WS_GUID      "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define NGX_PTY_WS_IN_SIZE   16384
#define NGX_PTY_WS_LINGER    2000       /* ms to wait for the peer's close */

#define NGX_PTY_WS_CONT      0x0
#define NGX_PTY_WS_TEXT      0x1
#define NGX_PTY_WS_BINARY    0x2
#define NGX_PTY_WS_CLOSE     0x8
#define NGX_PTY_WS_PING      0x9
#define NGX_PTY_WS_PONG      0xa


static ngx_int_t ngx_pty_ws_upgrade(ngx_http_request_t *r,
    ngx_table_elt_t **key);
static ngx_uint_t ngx_pty_ws_key_valid(ngx_str_t *key);
static ngx_int_t ngx_pty_ws_accept_headers(ngx_http_request_t *r,
    ngx_table_elt_t *key);
ngx_table_elt_t *ngx_pty_ws_header(ngx_http_request_t *r,
    const char *name);
static ngx_int_t ngx_pty_ws_header_has(ngx_table_elt_t *h, const char *token);
static void ngx_pty_ws_read_handler(ngx_http_request_t *r);
static void ngx_pty_ws_write_handler(ngx_http_request_t *r);
static ngx_int_t ngx_pty_ws_parse(ngx_pty_ws_t *ws);
static ngx_int_t ngx_pty_ws_length(ngx_pty_ws_t *ws, u_char *p,
    uint64_t *len);
static ngx_int_t ngx_pty_ws_frame(ngx_pty_ws_t *ws, ngx_uint_t fin,
    ngx_uint_t opcode, u_char *p, size_t len);
static ngx_int_t ngx_pty_ws_control(ngx_pty_ws_t *ws, ngx_uint_t opcode,
    u_char *p, size_t len);
static void ngx_pty_ws_queue_control(ngx_pty_ws_t *ws, ngx_uint_t opcode,
    u_char *p, size_t len);
static void ngx_pty_ws_append(ngx_pty_ws_t *ws, ngx_pty_ws_block_t *b);
static void ngx_pty_ws_unlink(ngx_pty_ws_t *ws, ngx_pty_ws_block_t *b);
static void ngx_pty_ws_queue_reply(ngx_pty_ws_t *ws, ngx_pty_ws_block_t *b);
static void ngx_pty_ws_overflow(ngx_pty_ws_t *ws);
static ngx_int_t ngx_pty_ws_send(ngx_pty_ws_t *ws);
static void ngx_pty_ws_ping_handler(ngx_event_t *ev);
static void ngx_pty_ws_cleanup(void *data);


/*
 * Checks the upgrade and answers 101.  On refusal returns the HTTP status
 * with nothing sent; the caller answers with its JSON error body.
 */
ngx_int_t
ngx_pty_ws_handshake(ngx_http_request_t *r, ngx_pty_ws_t *ws)
{
    ngx_int_t            rc;
    ngx_table_elt_t     *key;
    ngx_pool_cleanup_t  *cln;

    rc = ngx_pty_ws_upgrade(r, &key);
    if (rc != NGX_OK) {
        return rc;
    }

    if (ngx_pty_ws_accept_headers(r, key) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_pty_ws_cleanup;
    cln->data = ws;

    ws->request = r;
    ws->connection = r->connection;
    ws->last_out = &ws->out;

    r->headers_out.status = NGX_HTTP_SWITCHING_PROTOCOLS;
    ngx_str_set(&r->headers_out.status_line, "101 Switching Protocols");
    r->headers_out.content_length_n = -1;
    r->keepalive = 0;

    if (ngx_http_send_header(r) == NGX_ERROR) {
        return NGX_ERROR;
    }

    if (ngx_http_send_special(r, NGX_HTTP_FLUSH) == NGX_ERROR) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* NGX_OK for a pty-ws/v1 upgrade, with its key; else the refusal's status */
static ngx_int_t
ngx_pty_ws_upgrade(ngx_http_request_t *r, ngx_table_elt_t **key)
{
    ngx_table_elt_t  *h;

    if (r->method != NGX_HTTP_GET) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    h = ngx_pty_ws_header(r, "Upgrade");
    if (h == NULL || !ngx_pty_ws_header_has(h, "websocket")) {
        return NGX_HTTP_PTY_UPGRADE_REQUIRED;
    }

    if (r->http_version != NGX_HTTP_VERSION_11) {
        /* no RFC 8441 here: HTTP/2 and HTTP/1.0 cannot upgrade */
        return NGX_HTTP_BAD_REQUEST;
    }

    h = ngx_pty_ws_header(r, "Connection");
    if (h == NULL || !ngx_pty_ws_header_has(h, "upgrade")) {
        return NGX_HTTP_BAD_REQUEST;
    }

    h = ngx_pty_ws_header(r, "Sec-WebSocket-Version");
    if (h == NULL || h->value.len != 2 || ngx_strncmp(h->value.data, "13", 2))
    {
        return NGX_HTTP_PTY_UPGRADE_REQUIRED;
    }

    *key = ngx_pty_ws_header(r, "Sec-WebSocket-Key");
    if (*key == NULL || !ngx_pty_ws_key_valid(&(*key)->value)) {
        return NGX_HTTP_BAD_REQUEST;
    }

    h = ngx_pty_ws_header(r, "Sec-WebSocket-Protocol");
    if (h == NULL || !ngx_pty_ws_header_has(h, NGX_PTY_SUBPROTOCOL)) {
        return NGX_HTTP_BAD_REQUEST;
    }

    return NGX_OK;
}


/* RFC 6455 4.1: base64 of 16 bytes, as its one canonical spelling */
static ngx_uint_t
ngx_pty_ws_key_valid(ngx_str_t *key)
{
    u_char     raw[18], text[24];
    ngx_str_t  dst, canon;

    if (key->len != 24) {
        return 0;
    }

    dst.data = raw;

    if (ngx_decode_base64(&dst, key) != NGX_OK || dst.len != 16) {
        return 0;
    }

    /* the decoder stops at '=' and drops extra bits: spell it back */
    canon.data = text;
    ngx_encode_base64(&canon, &dst);

    return canon.len == 24 && ngx_strncmp(canon.data, key->data, 24) == 0;
}


/* the 101's headers: Sec-WebSocket-Accept from the key, the subprotocol */
static ngx_int_t
ngx_pty_ws_accept_headers(ngx_http_request_t *r, ngx_table_elt_t *key)
{
    u_char      *p;
    ngx_str_t    src, dst;
    ngx_sha1_t   sha1;
    u_char       digest[20];

    ngx_sha1_init(&sha1);
    ngx_sha1_update(&sha1, key->value.data, key->value.len);
    ngx_sha1_update(&sha1, NGX_PTY_WS_GUID, sizeof(NGX_PTY_WS_GUID) - 1);
    ngx_sha1_final(digest, &sha1);

    p = ngx_pnalloc(r->pool, ngx_base64_encoded_length(20));
    if (p == NULL) {
        return NGX_ERROR;
    }

    src.data = digest;
    src.len = 20;
    dst.data = p;
    ngx_encode_base64(&dst, &src);

    if (ngx_pty_ws_add_header(r, "Upgrade", "websocket", 9) != NGX_OK
        || ngx_pty_ws_add_header(r, "Sec-WebSocket-Accept",
                                 (char *) dst.data, dst.len) != NGX_OK
        || ngx_pty_ws_add_header(r, "Sec-WebSocket-Protocol",
                                 NGX_PTY_SUBPROTOCOL,
                                 sizeof(NGX_PTY_SUBPROTOCOL) - 1) != NGX_OK
        || ngx_pty_worker_header(r) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* which worker serves a connection: tests pin clients to workers by it */
ngx_int_t
ngx_pty_worker_header(ngx_http_request_t *r)
{
    u_char  *p, *last;

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    last = ngx_sprintf(p, "%P", ngx_pid);

    return ngx_pty_ws_add_header(r, "X-Pty-Worker", (char *) p, last - p);
}


ngx_int_t
ngx_pty_ws_add_header(ngx_http_request_t *r, const char *name,
    const char *value, size_t len)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    h->key.data = (u_char *) name;
    h->key.len = ngx_strlen(name);
    h->value.data = (u_char *) value;
    h->value.len = len;

    return NGX_OK;
}


/* the first header of that name; repeated ones are joined by the caller */
ngx_table_elt_t *
ngx_pty_ws_header(ngx_http_request_t *r, const char *name)
{
    size_t            len;
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    len = ngx_strlen(name);
    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                return NULL;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len == len
            && ngx_strncasecmp(h[i].key.data, (u_char *) name, len) == 0)
        {
            return &h[i];
        }
    }
}


/* a comma-separated list header holds the token (case-insensitive) */
static ngx_int_t
ngx_pty_ws_header_has(ngx_table_elt_t *h, const char *token)
{
    u_char  *p, *last, *start;
    size_t   len;

    len = ngx_strlen(token);
    p = h->value.data;
    last = p + h->value.len;

    while (p < last) {
        while (p < last && (*p == ' ' || *p == '\t' || *p == ',')) {
            p++;
        }

        start = p;

        while (p < last && *p != ',') {
            p++;
        }

        while (p > start && (p[-1] == ' ' || p[-1] == '\t')) {
            p--;
        }

        if ((size_t) (p - start) == len
            && ngx_strncasecmp(start, (u_char *) token, len) == 0)
        {
            return 1;
        }

        while (p < last && *p != ',') {
            p++;
        }
    }

    return 0;
}


void
ngx_pty_ws_start(ngx_pty_ws_t *ws)
{
    u_char              *pos;
    size_t               n;
    ngx_http_request_t  *r;

    r = ws->request;

    r->read_event_handler = ngx_pty_ws_read_handler;
    r->write_event_handler = ngx_pty_ws_write_handler;
    r->main->count++;

    ngx_tcp_nodelay(ws->connection);

    ws->ping.handler = ngx_pty_ws_ping_handler;
    ws->ping.data = ws;
    ws->ping.log = ws->connection->log;
    ws->ping.cancelable = 1;
    ws->last_in = ngx_current_msec;
    ngx_add_timer(&ws->ping, ws->ping_interval);

    /* frames a client sent right behind its request are already read */
    if (r->header_in && r->header_in->pos < r->header_in->last) {
        pos = r->header_in->pos;
        n = r->header_in->last - pos;
        r->header_in->pos = r->header_in->last;

        ws->in = ngx_alloc(ngx_max(n, NGX_PTY_WS_IN_SIZE),
                           ws->connection->log);
        if (ws->in == NULL) {
            ngx_pty_ws_finalize(ws);
            return;
        }

        ws->in_size = ngx_max(n, NGX_PTY_WS_IN_SIZE);
        ngx_memcpy(ws->in, pos, n);
        ws->in_len = n;

        if (ngx_pty_ws_parse(ws) != NGX_OK) {
            return;
        }
    }

    if (ws->connection->read->ready) {
        ngx_post_event(ws->connection->read, &ngx_posted_events);
    }
}


static void
ngx_pty_ws_read_handler(ngx_http_request_t *r)
{
    ssize_t            n;
    ngx_pty_ws_t      *ws;
    ngx_connection_t  *c;

    ws = ngx_http_get_module_ctx(r, ngx_pty_module);
    c = r->connection;

    if (ws == NULL || ws->finished) {
        return;
    }

    if (ws->in == NULL) {
        ws->in = ngx_alloc(NGX_PTY_WS_IN_SIZE, c->log);
        if (ws->in == NULL) {
            ngx_pty_ws_finalize(ws);
            return;
        }

        ws->in_size = NGX_PTY_WS_IN_SIZE;
    }

    for ( ;; ) {
        if (ws->in_len == ws->in_size) {
            /* a frame header never exceeds 14 bytes: parse made room */
            ngx_pty_ws_finalize(ws);
            return;
        }

        n = c->recv(c, ws->in + ws->in_len, ws->in_size - ws->in_len);

        if (n == NGX_AGAIN) {
            if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
                ngx_pty_ws_finalize(ws);
            }

            return;
        }

        if (n == 0 || n == NGX_ERROR) {
            /* the peer went away without a close handshake */
            ngx_pty_ws_finalize(ws);
            return;
        }

        ws->in_len += n;
        ws->last_in = ngx_current_msec;

        if (ngx_pty_ws_parse(ws) != NGX_OK) {
            return;
        }
    }
}


/*
 * Consumes whole frames from ws->in; a data frame's payload may arrive in
 * pieces, so it is unmasked into the message buffer as it comes.
 */
static ngx_int_t
ngx_pty_ws_parse(ngx_pty_ws_t *ws)
{
    u_char      *p, *last, *mask, *payload;
    size_t       hlen, have;
    uint64_t     len;
    ngx_uint_t   fin, opcode, i;

    p = ws->in;
    last = ws->in + ws->in_len;

    while (last - p >= 2 && !ws->finished) {

        fin = p[0] & 0x80;
        opcode = p[0] & 0x0f;
        len = p[1] & 0x7f;
        hlen = 2;

        if (len == 126) {
            hlen += 2;

        } else if (len == 127) {
            hlen += 8;
        }

        if (p[1] & 0x80) {
            hlen += 4;
        }

        if ((size_t) (last - p) < hlen) {
            break;
        }

        if (ngx_pty_ws_length(ws, p, &len) != NGX_OK) {
            return NGX_ERROR;
        }

        if ((p[0] & 0x70) || !(p[1] & 0x80)) {
            /* reserved bits without an extension, or an unmasked frame */
            ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_PROTOCOL,
                             (p[0] & 0x70) ? "reserved bits set"
                                           : "client frames must be masked");
            return NGX_ERROR;
        }

        if (opcode >= 8 && (!fin || len > 125)) {
            ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_PROTOCOL,
                             "bad control frame");
            return NGX_ERROR;
        }

        /* msg_len <= max_message always: compare without adding */
        if (opcode < 8 && len > ws->max_message - ws->msg_len) {
            ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_TOO_BIG,
                             "message too big");
            return NGX_ERROR;
        }

        /* from here len <= max(125, max_message): hlen + len cannot wrap */

        if (hlen + len > ws->in_size) {
            /* the frame cannot fit the input buffer: grow it once */
            u_char  *in;

            in = ngx_alloc(hlen + len, ws->connection->log);
            if (in == NULL) {
                ngx_pty_ws_finalize(ws);
                return NGX_ERROR;
            }

            ngx_memcpy(in, p, last - p);
            ngx_free(ws->in);
            ws->in = in;
            ws->in_size = hlen + len;
            ws->in_len = last - p;
            return NGX_OK;
        }

        have = last - p;

        if (have < hlen + len) {
            break;
        }

        mask = p + hlen - 4;
        payload = p + hlen;

        for (i = 0; i < len; i++) {
            payload[i] ^= mask[i & 3];
        }

        if (ngx_pty_ws_frame(ws, fin, opcode, payload, (size_t) len)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        p += hlen + len;
    }

    if (ws->finished) {
        return NGX_ERROR;
    }

    ws->in_len = last - p;

    if (ws->in_len && p != ws->in) {
        ngx_memmove(ws->in, p, ws->in_len);
    }

    return NGX_OK;
}


/*
 * The payload length of the frame header at p, whose length code and
 * extension are in the buffer.  RFC 6455 5.2: the 64-bit form's top bit
 * is 0, and each form is used only for lengths the shorter cannot carry.
 */
static ngx_int_t
ngx_pty_ws_length(ngx_pty_ws_t *ws, u_char *p, uint64_t *len)
{
    uint64_t    n;
    ngx_uint_t  i;

    n = p[1] & 0x7f;

    if (n == 126) {
        n = ((uint64_t) p[2] << 8) | p[3];

        if (n < 126) {
            goto bad;
        }

    } else if (n == 127) {
        if (p[2] & 0x80) {
            goto bad;
        }

        for (n = 0, i = 0; i < 8; i++) {
            n = (n << 8) | p[2 + i];
        }

        if (n < 65536) {
            goto bad;
        }
    }

    *len = n;

    return NGX_OK;

bad:

    ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_PROTOCOL, "bad payload length");

    return NGX_ERROR;
}


static ngx_int_t
ngx_pty_ws_frame(ngx_pty_ws_t *ws, ngx_uint_t fin, ngx_uint_t opcode,
    u_char *p, size_t len)
{
    u_char  *msg;
    size_t   size;

    if (opcode >= 8) {
        return ngx_pty_ws_control(ws, opcode, p, len);
    }

    if (ws->close_sent && !ws->read_after_close) {
        return NGX_OK;          /* data after our close is dropped */
    }

    switch (opcode) {

    case NGX_PTY_WS_CONT:
        if (ws->msg_opcode == 0) {
            ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_PROTOCOL,
                             "continuation without a message");
            return NGX_ERROR;
        }

        break;

    case NGX_PTY_WS_TEXT:
    case NGX_PTY_WS_BINARY:
        if (ws->msg_opcode != 0) {
            ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_PROTOCOL,
                             "new message inside a fragmented one");
            return NGX_ERROR;
        }

        if (opcode == NGX_PTY_WS_BINARY) {
            /* pty-ws/v1 carries text frames only */
            ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_VIOLATION,
                             "binary frames are not part of pty-ws/v1");
            return NGX_ERROR;
        }

        ws->msg_opcode = opcode;
        ws->msg_len = 0;
        break;

    default:
        ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_PROTOCOL, "unknown opcode");
        return NGX_ERROR;
    }

    if (fin && ws->msg_len == 0) {
        /* the common case: one frame, no copy */
        msg = p;
        size = len;

    } else {
        if (ws->msg_len + len > ws->msg_size) {
            size = ngx_max(ws->msg_len + len, 2 * ws->msg_size);
            size = ngx_min(ngx_max(size, 4096), ws->max_message);

            msg = ngx_alloc(size, ws->connection->log);
            if (msg == NULL) {
                ngx_pty_ws_finalize(ws);
                return NGX_ERROR;
            }

            if (ws->msg) {
                ngx_memcpy(msg, ws->msg, ws->msg_len);
                ngx_free(ws->msg);
            }

            ws->msg = msg;
            ws->msg_size = size;
        }

        if (len) {
            /* empty fragments come before any buffer is allocated */
            ngx_memcpy(ws->msg + ws->msg_len, p, len);
            ws->msg_len += len;
        }

        if (!fin) {
            return NGX_OK;
        }

        msg = ws->msg;
        size = ws->msg_len;
    }

    ws->msg_opcode = 0;
    ws->msg_len = 0;

    if (!ngx_pty_utf8_valid(msg, size)) {
        ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_BAD_DATA, "invalid UTF-8");
        return NGX_ERROR;
    }

    ws->on_message(ws, msg, size);

    return ws->finished ? NGX_ERROR : NGX_OK;
}


static ngx_int_t
ngx_pty_ws_control(ngx_pty_ws_t *ws, ngx_uint_t opcode, u_char *p,
    size_t len)
{
    ngx_uint_t  code;

    switch (opcode) {

    case NGX_PTY_WS_PING:
        if (!ws->close_sent) {
            ngx_pty_ws_queue_control(ws, NGX_PTY_WS_PONG, p, len);
            ngx_pty_ws_flush(ws);
        }

        return NGX_OK;

    case NGX_PTY_WS_PONG:
        ws->awaiting_pong = 0;
        return NGX_OK;

    case NGX_PTY_WS_CLOSE:
        ws->close_received = 1;

        if (ws->close_sent) {
            ngx_pty_ws_finalize(ws);
            return NGX_ERROR;
        }

        code = NGX_PTY_WS_CLOSE_NORMAL;

        if (len == 1) {
            code = NGX_PTY_WS_CLOSE_PROTOCOL;

        } else if (len >= 2) {
            code = ((ngx_uint_t) p[0] << 8) | p[1];

            /* RFC 6455 7.4: codes a peer may send (1012-1014 by IANA) */
            if (code < 1000 || code == 1004 || code == 1005 || code == 1006
                || (code > 1014 && code < 3000) || code > 4999)
            {
                code = NGX_PTY_WS_CLOSE_PROTOCOL;

            } else if (!ngx_pty_utf8_valid(p + 2, len - 2)) {
                code = NGX_PTY_WS_CLOSE_BAD_DATA;
            }
        }

        /* echo the peer's code, as RFC 6455 5.5.1 suggests */
        ngx_pty_ws_close(ws, code, "");
        return NGX_ERROR;

    default:
        ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_PROTOCOL, "unknown opcode");
        return NGX_ERROR;
    }
}


static ngx_pty_ws_block_t *
ngx_pty_ws_block(ngx_pty_ws_t *ws, size_t size)
{
    ngx_pty_ws_block_t  *b;

    b = ngx_alloc(sizeof(ngx_pty_ws_block_t) + size, ws->connection->log);
    if (b == NULL) {
        return NULL;
    }

    ngx_memzero(b, sizeof(ngx_pty_ws_block_t));
    b->cl.buf = &b->buf;
    b->buf.start = (u_char *) b + sizeof(ngx_pty_ws_block_t);
    b->buf.end = b->buf.start + size;
    b->buf.pos = b->buf.start;
    b->buf.last = b->buf.start;
    b->buf.temporary = 1;

    return b;
}


static u_char *
ngx_pty_ws_write_header(u_char *p, ngx_uint_t opcode, size_t len)
{
    *p++ = (u_char) (0x80 | opcode);

    if (len < 126) {
        *p++ = (u_char) len;

    } else if (len < 65536) {
        *p++ = 126;
        *p++ = (u_char) (len >> 8);
        *p++ = (u_char) len;

    } else {
        *p++ = 127;
        *p++ = 0; *p++ = 0; *p++ = 0; *p++ = 0;
        *p++ = (u_char) (len >> 24);
        *p++ = (u_char) (len >> 16);
        *p++ = (u_char) (len >> 8);
        *p++ = (u_char) len;
    }

    return p;
}


/* room for a text frame of at most max bytes; see ngx_pty_ws_commit() */
u_char *
ngx_pty_ws_reserve(ngx_pty_ws_t *ws, size_t max, ngx_pty_ws_block_t **block)
{
    ngx_pty_ws_block_t  *b;

    b = ngx_pty_ws_block(ws, NGX_PTY_WS_HEADER_MAX + max);
    if (b == NULL) {
        return NULL;
    }

    *block = b;

    return b->buf.start + NGX_PTY_WS_HEADER_MAX;
}


/* writes a text frame's header right before its payload; returns it */
static u_char *
ngx_pty_ws_text_header(u_char *payload, u_char *end)
{
    u_char  *p, hdr[NGX_PTY_WS_HEADER_MAX];
    size_t   hlen;

    hlen = ngx_pty_ws_write_header(hdr, NGX_PTY_WS_TEXT, end - payload) - hdr;

    p = payload - hlen;
    ngx_memcpy(p, hdr, hlen);

    return p;
}


/* writes the header right before the payload that ends at end, queues */
void
ngx_pty_ws_commit(ngx_pty_ws_t *ws, ngx_pty_ws_block_t *b, u_char *end)
{
    b->buf.pos = ngx_pty_ws_text_header(b->buf.start + NGX_PTY_WS_HEADER_MAX,
                                        end);
    b->buf.last = end;

    ngx_pty_ws_queue(ws, b);
}


static void
ngx_pty_ws_block_free(ngx_chain_t *cl)
{
    ngx_pty_ws_block_t  *b;

    b = (ngx_pty_ws_block_t *) cl;    /* the link is the block's first field */

    if (b->shared) {
        ngx_pty_ws_shared_release(b->shared);
    }

    ngx_free(b);
}


/* output: its callers stop at ngx_pty_ws_full() */
void
ngx_pty_ws_queue(ngx_pty_ws_t *ws, ngx_pty_ws_block_t *b)
{
    if (ws->close_sent || ws->finished) {
        ngx_pty_ws_block_free(&b->cl);
        return;
    }

    ngx_pty_ws_append(ws, b);
}


static void
ngx_pty_ws_append(ngx_pty_ws_t *ws, ngx_pty_ws_block_t *b)
{
    size_t  size;

    size = b->buf.last - b->buf.pos;

    b->frame = b->buf.pos;
    *ws->last_out = &b->cl;
    ws->last_out = &b->cl.next;
    ws->out_bytes += size;
    ws->out_frames++;

    if (b->reply) {
        ws->reply_bytes += size;
        ws->reply_frames++;
    }
}


/* a block leaves the queue (the caller has counted its unsent bytes) */
static void
ngx_pty_ws_unlink(ngx_pty_ws_t *ws, ngx_pty_ws_block_t *b)
{
    ws->out_frames--;

    if (b->reply) {
        ws->reply_bytes -= b->buf.last - b->frame;
        ws->reply_frames--;
    }

    ngx_pty_ws_block_free(&b->cl);
}


/*
 * Replies (pongs, Errors) come as fast as the client sends: a client
 * that sends and never reads must not grow the worker.  Past their own
 * bound the connection is closed.
 */
static void
ngx_pty_ws_queue_reply(ngx_pty_ws_t *ws, ngx_pty_ws_block_t *b)
{
    if (ws->close_sent || ws->finished) {
        ngx_pty_ws_block_free(&b->cl);
        return;
    }

    if (ws->reply_bytes >= ws->send_limit
        || ws->reply_frames >= ws->send_frames)
    {
        ngx_pty_ws_block_free(&b->cl);
        ngx_pty_ws_overflow(ws);
        return;
    }

    b->reply = 1;
    ngx_pty_ws_append(ws, b);
}


/* what the peer has not begun to get is dropped, then close 1008 */
static void
ngx_pty_ws_overflow(ngx_pty_ws_t *ws)
{
    ngx_chain_t         *cl, *next;
    ngx_connection_t    *c;
    ngx_pty_ws_block_t  *b;

    c = ws->connection;

    ngx_log_error(NGX_LOG_INFO, c->log, 0,
                  "pty: client does not read its replies (%ui frames, "
                  "%uz bytes unsent), closing", ws->out_frames,
                  ws->out_bytes);

    ws->overflowed = 1;

    cl = ws->out;
    b = (ngx_pty_ws_block_t *) cl;

    if (b && b->buf.pos != b->frame) {
        /* a frame partly sent is finished: frames never interleave */
        cl = cl->next;
        b->cl.next = NULL;
        ws->last_out = &b->cl.next;

    } else {
        ws->out = NULL;
        ws->last_out = &ws->out;
    }

    for ( /* void */ ; cl; cl = next) {
        next = cl->next;
        b = (ngx_pty_ws_block_t *) cl;
        ws->out_bytes -= b->buf.last - b->buf.pos;
        ngx_pty_ws_unlink(ws, b);
    }

    if (c->write->timer_set) {
        /* re-armed for the close's linger */
        ngx_del_timer(c->write);
    }

    ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_POLICY, "send queue full");
}


/* room for a text frame of at most max payload bytes, one reference */
ngx_pty_ws_shared_t *
ngx_pty_ws_shared_alloc(size_t max, ngx_log_t *log)
{
    ngx_pty_ws_shared_t  *sf;

    sf = ngx_alloc(sizeof(ngx_pty_ws_shared_t) + NGX_PTY_WS_HEADER_MAX + max,
                   log);
    if (sf == NULL) {
        return NULL;
    }

    sf->refs = 1;
    sf->key = 0;
    sf->pos = ngx_pty_ws_shared_payload(sf);
    sf->last = sf->pos;

    return sf;
}


void
ngx_pty_ws_shared_commit(ngx_pty_ws_shared_t *sf, u_char *end)
{
    sf->pos = ngx_pty_ws_text_header(ngx_pty_ws_shared_payload(sf), end);
    sf->last = end;
}


void
ngx_pty_ws_shared_release(ngx_pty_ws_shared_t *sf)
{
    if (--sf->refs == 0) {
        ngx_free(sf);
    }
}


/* queues a committed shared frame: a block of links over its bytes */
ngx_int_t
ngx_pty_ws_queue_shared(ngx_pty_ws_t *ws, ngx_pty_ws_shared_t *sf)
{
    ngx_pty_ws_block_t  *b;

    b = ngx_pty_ws_block(ws, 0);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->buf.temporary = 0;
    b->buf.memory = 1;
    b->buf.start = sf->pos;
    b->buf.end = sf->last;
    b->buf.pos = sf->pos;
    b->buf.last = sf->last;
    b->shared = sf;
    sf->refs++;

    ngx_pty_ws_queue(ws, b);

    return NGX_OK;
}


/* exactly the frame's size: a reply flood holds no slack */
ngx_int_t
ngx_pty_ws_reply(ngx_pty_ws_t *ws, u_char *data, size_t len)
{
    ngx_pty_ws_block_t  *b;

    b = ngx_pty_ws_block(ws, NGX_PTY_WS_HEADER_MAX + len);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->buf.last = ngx_pty_ws_write_header(b->buf.last, NGX_PTY_WS_TEXT, len);
    b->buf.last = ngx_cpymem(b->buf.last, data, len);

    ngx_pty_ws_queue_reply(ws, b);

    return NGX_OK;
}


/* a control frame: a close goes in whatever the bounds, the rest reply */
static void
ngx_pty_ws_queue_control(ngx_pty_ws_t *ws, ngx_uint_t opcode, u_char *p,
    size_t len)
{
    ngx_pty_ws_block_t  *b;

    b = ngx_pty_ws_block(ws, 2 + len);
    if (b == NULL) {
        ngx_pty_ws_finalize(ws);
        return;
    }

    b->buf.last = ngx_pty_ws_write_header(b->buf.last, opcode, len);
    b->buf.last = ngx_cpymem(b->buf.last, p, len);

    if (opcode == NGX_PTY_WS_CLOSE) {
        ngx_pty_ws_append(ws, b);
        return;
    }

    ngx_pty_ws_queue_reply(ws, b);
}


void
ngx_pty_ws_close(ngx_pty_ws_t *ws, ngx_uint_t code, const char *reason)
{
    u_char  buf[125];
    size_t  len;

    if (ws->close_sent || ws->finished) {
        return;
    }

    len = ngx_min(ngx_strlen(reason), sizeof(buf) - 2);
    buf[0] = (u_char) (code >> 8);
    buf[1] = (u_char) code;
    ngx_memcpy(buf + 2, reason, len);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ws->connection->log, 0,
                   "pty ws close %ui \"%s\"", code, reason);

    ngx_pty_ws_queue_control(ws, NGX_PTY_WS_CLOSE, buf, len + 2);
    ws->close_sent = 1;

    ngx_pty_ws_flush(ws);
}


void
ngx_pty_ws_flush(ngx_pty_ws_t *ws)
{
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    if (ws->finished) {
        return;
    }

    c = ws->connection;
    r = ws->request;

    if (r->out) {
        /* the 101 response is still on its way */
        if (ngx_http_output_filter(r, NULL) == NGX_ERROR) {
            ngx_pty_ws_finalize(ws);
            return;
        }

        if (r->out) {
            goto again;
        }
    }

    if (ws->out && ngx_pty_ws_send(ws) != NGX_OK) {
        ngx_pty_ws_finalize(ws);
        return;
    }

    if (ws->out) {
        goto again;
    }

    if (ws->close_sent) {
        if (ws->close_received) {
            ngx_pty_ws_finalize(ws);
            return;
        }

        /* give the peer a moment to answer our close, counted once */
        if (!ws->lingering) {
            ws->lingering = 1;

            if (c->write->timer_set) {
                ngx_del_timer(c->write);
            }

            ngx_add_timer(c->write, NGX_PTY_WS_LINGER);
        }

        return;
    }

    if (c->write->timer_set) {
        ngx_del_timer(c->write);
    }

    return;

again:

    if (!c->write->timer_set) {
        /* a client closed for not reading is not waited for long */
        ngx_add_timer(c->write, ws->overflowed
                                ? NGX_PTY_WS_LINGER
                                : ws->ping_interval + ws->pong_timeout);
    }

    if (ngx_handle_write_event(c->write, 0) != NGX_OK) {
        ngx_pty_ws_finalize(ws);
    }
}


/*
 * Sends what the socket takes.  The links sent are freed and the bytes
 * counted off as they go: no link is walked twice, however long the
 * queue (the counts are checked on every frame queued).
 */
static ngx_int_t
ngx_pty_ws_send(ngx_pty_ws_t *ws)
{
    u_char              *head_pos;
    ngx_chain_t         *cl, *head, *next;
    ngx_connection_t    *c;
    ngx_pty_ws_block_t  *b;

    c = ws->connection;
    head = ws->out;
    head_pos = head->buf->pos;      /* the head may be partly sent before */

    cl = c->send_chain(c, ws->out, 0);

    if (cl == NGX_CHAIN_ERROR) {
        return NGX_ERROR;
    }

    while (ws->out != cl) {
        next = ws->out->next;
        b = (ngx_pty_ws_block_t *) ws->out;
        ws->out_bytes -= b->buf.last
                         - ((ws->out == head) ? head_pos : b->frame);
        ngx_pty_ws_unlink(ws, b);
        ws->out = next;
    }

    if (ws->out == NULL) {
        ws->last_out = &ws->out;
        return NGX_OK;
    }

    /* the first link left may be partly sent now */
    b = (ngx_pty_ws_block_t *) ws->out;
    ws->out_bytes -= b->buf.pos - ((ws->out == head) ? head_pos : b->frame);

    return NGX_OK;
}


static void
ngx_pty_ws_write_handler(ngx_http_request_t *r)
{
    ngx_pty_ws_t      *ws;
    ngx_connection_t  *c;

    ws = ngx_http_get_module_ctx(r, ngx_pty_module);
    c = r->connection;

    if (ws == NULL || ws->finished) {
        return;
    }

    if (c->write->timedout) {
        /* a peer that reads nothing for this long is gone */
        c->write->timedout = 0;
        c->timedout = 1;
        ngx_pty_ws_finalize(ws);
        return;
    }

    ngx_pty_ws_flush(ws);

    if (!ws->finished && !ws->close_sent
        && ws->out_bytes < ws->send_limit / 2
        && ws->out_frames < ws->send_frames / 2 && ws->on_writable)
    {
        ws->on_writable(ws);
    }
}


static void
ngx_pty_ws_ping_handler(ngx_event_t *ev)
{
    ngx_pty_ws_t  *ws;

    ws = ev->data;

    if (ws->finished) {
        return;
    }

    if (ws->awaiting_pong) {
        ngx_log_error(NGX_LOG_INFO, ws->connection->log, 0,
                      "pty: no pong within %M ms, closing", ws->pong_timeout);
        ngx_pty_ws_close(ws, NGX_PTY_WS_CLOSE_SERVER_ERROR, "ping timeout");
        ngx_pty_ws_finalize(ws);
        return;
    }

    if (ngx_current_msec - ws->last_in >= ws->ping_interval) {
        ws->awaiting_pong = 1;
        ngx_pty_ws_queue_control(ws, NGX_PTY_WS_PING, (u_char *) "pty", 3);
        ngx_pty_ws_flush(ws);
        ngx_add_timer(&ws->ping, ws->pong_timeout);
        return;
    }

    ngx_add_timer(&ws->ping, ws->ping_interval
                             - (ngx_current_msec - ws->last_in));
}


void
ngx_pty_ws_read_pending(ngx_pty_ws_t *ws)
{
    if (ws->finished || ws->close_sent) {
        return;
    }

    ngx_pty_ws_read_handler(ws->request);
}


void
ngx_pty_ws_finalize(ngx_pty_ws_t *ws)
{
    if (ws->finished) {
        return;
    }

    ngx_pty_ws_cleanup(ws);

    ngx_http_finalize_request(ws->request, NGX_HTTP_CLOSE);
}


static void
ngx_pty_ws_cleanup(void *data)
{
    ngx_pty_ws_t  *ws = data;

    ngx_chain_t  *next;

    if (ws->finished) {
        return;
    }

    ws->finished = 1;

    if (ws->on_closed) {
        ws->on_closed(ws);
    }

    if (ws->ping.timer_set) {
        ngx_del_timer(&ws->ping);
    }

    if (ws->ping.posted) {
        ngx_delete_posted_event(&ws->ping);
    }

    while (ws->out) {
        next = ws->out->next;
        ngx_pty_ws_block_free(ws->out);
        ws->out = next;
    }

    if (ws->in) {
        ngx_free(ws->in);
        ws->in = NULL;
    }

    if (ws->msg) {
        ngx_free(ws->msg);
        ws->msg = NULL;
    }
}


/* strict UTF-8: no overlongs, no surrogates, nothing above U+10FFFF */
ngx_int_t
ngx_pty_utf8_valid(u_char *p, size_t len)
{
    u_char    *last;
    uint32_t   c, min;
    ngx_uint_t n;

    last = p + len;

    while (p < last) {
        c = *p++;

        if (c < 0x80) {
            continue;
        }

        if (c >= 0xc2 && c <= 0xdf) {
            n = 1; c &= 0x1f; min = 0x80;

        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2; c &= 0x0f; min = 0x800;

        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3; c &= 0x07; min = 0x10000;

        } else {
            return 0;
        }

        if ((size_t) (last - p) < n) {
            return 0;
        }

        while (n--) {
            if ((*p & 0xc0) != 0x80) {
                return 0;
            }

            c = (c << 6) | (*p++ & 0x3f);
        }

        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
            return 0;
        }
    }

    return 1;
}
