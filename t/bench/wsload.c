/*
 * A load client for pty-ws/v1: many sessions, many WebSocket clients,
 * one process, poll().
 *
 *   wsload PORT K LINES [TIMEOUT] < attach-paths
 *
 * Reads one attach path per line (one per session), opens K connections
 * per session (the first joins as controller, the rest as observers),
 * waits until every connection has its join Keyframe, then sends Enter on
 * every controller: the sessions run "read x; seq 1 LINES; sleep 0.2".
 * Reads until every connection has its session's Closed (or TIMEOUT
 * seconds, default 120), then checks, per connection:
 *
 *   - the sequence of every session frame after the join flush grows;
 *   - the decoded Output holds exactly the lines 1..LINES, in order
 *     (\r and the echoed newline of the Enter are ignored);
 *   - exactly one Closed.
 *
 * Prints a summary line; exits 1 on any failure.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"


#define NGX_LOAD_EXT                                                          \
    "https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1"

#define NGX_LOAD_HS         0       /* waiting for the 101 */
#define NGX_LOAD_WAIT       5       /* upgraded, the controller not joined */
#define NGX_LOAD_JOINING    1       /* joined, waiting for the Keyframe */
#define NGX_LOAD_JOINED     2       /* flush done */
#define NGX_LOAD_DRAIN      3       /* Closed seen, reading to the end */
#define NGX_LOAD_DONE       4


typedef struct {
    int             fd;
    int             session;
    int             controller;
    int             state;
    int             failed;
    int             closed;
    int             have_digits;

    unsigned char  *in;
    size_t          in_len;
    size_t          in_cap;

    uint64_t        last_seq;
    int             have_seq;

    unsigned long   expect;         /* the next line number owed */
    unsigned long   cur;
    unsigned long   frames;
    unsigned long   outputs;
    unsigned long   gaps;
} ngx_load_conn_t;


static ngx_load_conn_t  *conns;
static int               nconns;
static int               per;
static unsigned long     lines;
static int               failures;
static int               reported;



static void
die(const char *what)
{
    perror(what);
    exit(2);
}


static void
fail(ngx_load_conn_t *c, const char *fmt, ...)
{
    va_list  ap;

    if (!c->failed) {
        c->failed = 1;
        failures++;
    }

    if (reported++ < 30) {
        fprintf(stderr, "conn %d (session %d, %s): ", (int) (c - conns),
                c->session, c->controller ? "controller" : "observer");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
}


static void
finish(ngx_load_conn_t *c)
{
    if (c->fd != -1) {
        close(c->fd);
        c->fd = -1;
    }

    c->state = NGX_LOAD_DONE;
}


static int
send_all(ngx_load_conn_t *c, const void *p, size_t len)
{
    ssize_t        n;
    struct pollfd  pfd;

    while (len) {
        n = write(c->fd, p, len);

        if (n == -1 && errno == EAGAIN) {
            pfd.fd = c->fd;
            pfd.events = POLLOUT;
            (void) poll(&pfd, 1, 1000);
            continue;
        }

        if (n <= 0) {
            fail(c, "write: %s", strerror(errno));
            finish(c);
            return -1;
        }

        p = (const char *) p + n;
        len -= n;
    }

    return 0;
}


/* one masked text frame (mask 0: the XOR is the identity) */
static int
send_text(ngx_load_conn_t *c, const char *text)
{
    size_t         n;
    unsigned char  buf[1024];

    n = ngx_bench_ws_text(buf, sizeof(buf), text);

    return (n == 0) ? -1 : send_all(c, buf, n);
}


static int
b64val(int ch)
{
    if (ch >= 'A' && ch <= 'Z') {
        return ch - 'A';
    }

    if (ch >= 'a' && ch <= 'z') {
        return ch - 'a' + 26;
    }

    if (ch >= '0' && ch <= '9') {
        return ch - '0' + 52;
    }

    if (ch == '+') {
        return 62;
    }

    if (ch == '/') {
        return 63;
    }

    return -1;
}


/* feeds decoded Output bytes to the line checker */
static void
output_byte(ngx_load_conn_t *c, unsigned char ch)
{
    if (ch >= '0' && ch <= '9') {
        c->cur = c->cur * 10 + (ch - '0');
        c->have_digits = 1;
        return;
    }

    if (ch == '\r') {
        return;
    }

    if (ch == '\n') {
        if (!c->have_digits) {
            return;         /* the echoed Enter */
        }

        if (c->cur != c->expect) {
            fail(c, "line %lu where %lu was owed", c->cur, c->expect);
            c->expect = c->cur;
        }

        c->expect++;
        c->cur = 0;
        c->have_digits = 0;
        return;
    }

    fail(c, "unexpected output byte 0x%02x", ch);
}


static void
output(ngx_load_conn_t *c, unsigned char *p, size_t len)
{
    int             v, bits;
    unsigned int    acc;
    unsigned char  *d, *e;

    d = memmem(p, len, "\"data\":\"", 8);
    if (d == NULL) {
        fail(c, "Output without data");
        return;
    }

    d += 8;
    e = memchr(d, '"', p + len - d);
    if (e == NULL) {
        fail(c, "Output data unterminated");
        return;
    }

    acc = 0;
    bits = 0;

    for ( ; d < e; d++) {
        v = b64val(*d);

        if (v < 0) {
            continue;       /* '=', or a JSON escape's backslash */
        }

        acc = (acc << 6) | v;
        bits += 6;

        if (bits >= 8) {
            bits -= 8;
            output_byte(c, (unsigned char) (acc >> bits));
            acc &= (1u << bits) - 1;
        }
    }
}


/* one text message from the server */
static int join(ngx_load_conn_t *c);


static void
message(ngx_load_conn_t *c, unsigned char *p, size_t len)
{
    int               i;
    char             *s, *k;
    ngx_load_conn_t  *o;
    uint64_t        seq;
    unsigned char  *end;

    if (memmem(p, len < 64 ? len : 64, "\"op\":\"pty.session_frame\"", 24)
        == NULL)
    {
        if (c->state >= NGX_LOAD_JOINED
            && memmem(p, len, "rror", 4) != NULL)
        {
            fail(c, "error answer: %.*s", (int) (len < 300 ? len : 300), p);
        }

        return;     /* binding_hello, answers */
    }

    k = memmem(p, len, "\"kind\":\"", 8);
    if (k == NULL) {
        fail(c, "session frame without kind");
        return;
    }

    k += 8;

    if (c->state == NGX_LOAD_JOINING) {
        if (strncmp(k, "Error\"", 6) == 0) {
            fail(c, "Error frame in the join flush: %.*s",
                 (int) (len < 300 ? len : 300), p);
        }

        if (strncmp(k, "Keyframe\"", 9) == 0) {
            c->state = NGX_LOAD_JOINED;

            if (c->controller) {
                for (i = 1; i < per; i++) {
                    o = &conns[c->session * per + i];

                    if (o->fd != -1 && o->state == NGX_LOAD_WAIT) {
                        (void) join(o);
                    }
                }
            }
        }

        return;     /* the rest of the flush */
    }

    c->frames++;

    s = memmem(p, len, "\"sequence\":", 11);
    if (s == NULL) {
        fail(c, "session frame without sequence");

    } else {
        end = p + len;
        s += 11;

        for (seq = 0; (unsigned char *) s < end && *s >= '0' && *s <= '9';
             s++)
        {
            seq = seq * 10 + (*s - '0');
        }

        if (c->have_seq && seq <= c->last_seq) {
            fail(c, "sequence %llu after %llu", (unsigned long long) seq,
                 (unsigned long long) c->last_seq);

        } else if (c->have_seq && seq != c->last_seq + 1) {
            c->gaps++;
        }

        c->last_seq = seq;
        c->have_seq = 1;
    }

    if (strncmp(k, "Output\"", 7) == 0) {
        c->outputs++;

        if (c->state == NGX_LOAD_DRAIN) {
            fail(c, "Output after Closed");
        }

        output(c, p, len);
        return;
    }

    if (strncmp(k, "Closed\"", 7) == 0) {
        if (c->closed++) {
            fail(c, "Closed #%d", c->closed);
        }

        c->state = NGX_LOAD_DRAIN;
        return;
    }

    if (c->frames < 4 && getenv("WSLOAD_TRACE")) {
        fprintf(stderr, "conn %d: %.*s\n", (int) (c - conns),
                (int) (len < 200 ? len : 200), p);
    }

    if (strncmp(k, "Error\"", 6) == 0) {
        fail(c, "Error frame: %.*s", (int) (len < 300 ? len : 300), p);
    }
}


/* parses the complete frames in the input buffer */
static void
frames(ngx_load_conn_t *c)
{
    int             op;
    size_t          hlen, off;
    uint64_t        len;
    unsigned char  *in;

    off = 0;
    in = c->in;

    while (c->fd != -1
           && ngx_bench_ws_header(in + off, c->in_len - off, &op, &hlen, &len))
    {
        if (c->in_len - off < hlen + len) {
            break;
        }

        if (op == 0x1 || op == 0x2) {
            message(c, in + off + hlen, len);

        } else if (op == 0x9 && len <= 125) {
            /* pong, masked with 0, the ping's payload */
            unsigned char  pong[6 + 125];

            pong[0] = 0x8a;
            pong[1] = 0x80 | len;
            memset(pong + 2, 0, 4);
            memcpy(pong + 6, in + off + hlen, len);

            if (send_all(c, pong, 6 + len) != 0) {
                return;
            }

        } else if (op == 0x8) {
            if (c->state != NGX_LOAD_DRAIN) {
                fail(c, "server closed the WebSocket before Closed "
                     "(code %d, reason \"%.*s\", after %lu frames, "
                     "next line owed %lu)",
                     len >= 2 ? (in[off + hlen] << 8) | in[off + hlen + 1] : 0,
                     len > 2 ? (int) len - 2 : 0, in + off + hlen + 2,
                     c->frames, c->expect);
            }

            finish(c);
        }

        off += hlen + len;
    }

    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
}


static int
join(ngx_load_conn_t *c)
{
    char  buf[512];

    c->state = NGX_LOAD_JOINING;

    snprintf(buf, sizeof(buf),
             "{\"op\":\"pty.join_session\","
             "\"id\":\"00000000-0000-7000-8000-000000000001\","
             "\"extensions\":[\"" NGX_LOAD_EXT "\"],"
             "\"payload\":{\"role\":\"%s\"}}",
             c->controller ? "controller" : "observer");

    return send_text(c, buf);
}


static void
readable(ngx_load_conn_t *c)
{
    ssize_t        n;
    unsigned char *end;

    for ( ;; ) {
        if (c->in_cap - c->in_len < 16384) {
            c->in_cap *= 2;
            c->in = realloc(c->in, c->in_cap);
            if (c->in == NULL) {
                die("realloc");
            }
        }

        n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);

        if (n == -1 && errno == EAGAIN) {
            return;
        }

        if (n <= 0) {
            if (c->state != NGX_LOAD_DRAIN) {
                fail(c, "connection closed (%s) before Closed",
                     n == 0 ? "eof" : strerror(errno));
            }

            finish(c);
            return;
        }

        c->in_len += n;

        if (c->state == NGX_LOAD_HS) {
            end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
            if (end == NULL) {
                continue;
            }

            if (memcmp(c->in, "HTTP/1.1 101", 12) != 0) {
                fail(c, "upgrade refused: %.*s", 40, c->in);
                finish(c);
                return;
            }

            memmove(c->in, end + 4, c->in + c->in_len - (end + 4));
            c->in_len -= end + 4 - c->in;
            /*
             * only a fresh session's first joiner is its controller:
             * the observers join after the controller's Keyframe
             */
            if (c->controller) {
                if (join(c) != 0) {
                    return;
                }

            } else {
                c->state = NGX_LOAD_WAIT;
                if (conns[c->session * per].state == NGX_LOAD_JOINED) {
                    if (join(c) != 0) {
                        return;
                    }
                }
            }
        }

        frames(c);

        if (c->fd == -1) {
            return;
        }
    }
}


static int
open_conn(ngx_load_conn_t *c, int port, const char *path)
{
    char  req[2048];

    c->fd = ngx_bench_connect(port);
    if (c->fd == -1) {
        fail(c, "connect: %s", strerror(errno));
        finish(c);
        return -1;
    }

    snprintf(req, sizeof(req),
             "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             "Sec-WebSocket-Protocol: pty-ws.v1\r\n\r\n", path);

    if (send_all(c, req, strlen(req)) != 0) {
        return -1;
    }

    if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) == -1) {
        die("fcntl");
    }

    return 0;
}


/* poll()s every open connection once; returns how many are open */
static int
poll_once(struct pollfd *pfds, int *idx, int ms)
{
    int  i, n, open;

    n = 0;

    for (i = 0; i < nconns; i++) {
        if (conns[i].fd != -1) {
            pfds[n].fd = conns[i].fd;
            pfds[n].events = POLLIN;
            pfds[n].revents = 0;
            idx[n++] = i;
        }
    }

    if (n == 0) {
        return 0;
    }

    if (poll(pfds, n, ms) == -1 && errno != EINTR) {
        die("poll");
    }

    open = 0;

    for (i = 0; i < n; i++) {
        if (pfds[i].revents) {
            readable(&conns[idx[i]]);
        }

        open += (conns[idx[i]].fd != -1);
    }

    return open;
}


int
main(int argc, char **argv)
{
    int             port, k, nsessions, i, j, *idx, pending, open, bad;
    char            line[4096], **paths;
    size_t          len, cap;
    double          start, deadline, joined, drain_until, timeout;
    unsigned long   total, gaps;
    struct rlimit   rl;
    struct pollfd  *pfds;

    if (argc < 4) {
        fprintf(stderr, "usage: wsload PORT K LINES [TIMEOUT] < paths\n");
        return 2;
    }

    port = atoi(argv[1]);
    k = atoi(argv[2]);
    per = k;
    lines = strtoul(argv[3], NULL, 10);
    timeout = argc > 4 ? atof(argv[4]) : 120;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        (void) setrlimit(RLIMIT_NOFILE, &rl);
    }

    paths = NULL;
    cap = 0;
    nsessions = 0;

    while (fgets(line, sizeof(line), stdin)) {
        len = strcspn(line, "\r\n");
        if (len == 0) {
            continue;
        }

        line[len] = '\0';

        if ((size_t) nsessions == cap) {
            cap = cap ? cap * 2 : 64;
            paths = realloc(paths, cap * sizeof(char *));
            if (paths == NULL) {
                die("realloc");
            }
        }

        paths[nsessions++] = strdup(line);
    }

    nconns = nsessions * k;
    conns = calloc(nconns, sizeof(ngx_load_conn_t));
    pfds = calloc(nconns, sizeof(struct pollfd));
    idx = calloc(nconns, sizeof(int));

    if (conns == NULL || pfds == NULL || idx == NULL) {
        die("calloc");
    }

    for (i = 0; i < nconns; i++) {
        conns[i].fd = -1;
    }

    start = ngx_bench_now();
    deadline = start + timeout;

    /* session by session, their connections one after another */
    for (i = 0; i < nsessions; i++) {
        for (j = 0; j < k; j++) {
            ngx_load_conn_t *c = &conns[i * k + j];

            c->session = i;
            c->controller = (j == 0);
            c->expect = 1;
            c->in_cap = 65536;
            c->in = malloc(c->in_cap);
            if (c->in == NULL) {
                die("malloc");
            }

            (void) open_conn(c, port, paths[i]);
        }

        /* keep the accept queues and our buffers moving */
        (void) poll_once(pfds, idx, 0);
    }

    /* every connection has its join Keyframe */
    for ( ;; ) {
        pending = 0;

        for (i = 0; i < nconns; i++) {
            pending += (conns[i].fd != -1
                        && conns[i].state != NGX_LOAD_JOINED);
        }

        if (pending == 0) {
            break;
        }

        if (ngx_bench_now() > deadline) {
            for (i = 0; i < nconns; i++) {
                if (conns[i].fd != -1 && conns[i].state != NGX_LOAD_JOINED) {
                    fail(&conns[i], "no join Keyframe before the deadline");
                    finish(&conns[i]);
                }
            }

            break;
        }

        (void) poll_once(pfds, idx, 100);
    }

    joined = ngx_bench_now();

    for (i = 0; i < nconns; i++) {
        if (conns[i].controller && conns[i].fd != -1) {
            (void) send_text(&conns[i],
                        "{\"op\":\"pty.session_input\","
                        "\"id\":\"00000000-0000-7000-8000-000000000002\","
                        "\"payload\":{\"data\":\"DQ==\"}}");
        }
    }

    /* until every connection has Closed, then 2 s more for duplicates */
    drain_until = 0;

    for ( ;; ) {
        open = poll_once(pfds, idx, 50);

        if (open == 0) {
            break;
        }

        if (ngx_bench_now() > deadline) {
            break;
        }

        pending = 0;

        for (i = 0; i < nconns; i++) {
            pending += (conns[i].fd != -1
                        && conns[i].state != NGX_LOAD_DRAIN);
        }

        if (pending == 0) {
            if (drain_until == 0) {
                drain_until = ngx_bench_now() + 2;

            } else if (ngx_bench_now() > drain_until) {
                break;
            }
        }
    }

    total = 0;
    gaps = 0;

    for (i = 0; i < nconns; i++) {
        ngx_load_conn_t *c = &conns[i];

        total += c->frames;
        gaps += c->gaps;

        if (c->failed) {
            continue;
        }

        bad = 0;

        if (c->closed != 1) {
            fail(c, "%d Closed frames (state %d, %lu frames, "
                 "next line owed %lu)", c->closed, c->state, c->frames,
                 c->expect);
            bad = 1;
        }

        if (!bad && (c->expect != lines + 1 || c->have_digits)) {
            fail(c, "lines 1..%lu received, %lu owed", c->expect - 1, lines);
        }
    }

    for (i = 0; i < nconns; i++) {
        if (conns[i].fd != -1) {
            close(conns[i].fd);
        }
    }

    printf("sessions %d connections %d frames %lu gaps %lu failures %d "
           "join %.2fs elapsed %.2fs\n", nsessions, nconns, total, gaps,
           failures, joined - start, ngx_bench_now() - start);

    return failures ? 1 : 0;
}
