
/*
 * A fan-out client for pty-ws/v1: one controller and N observers of one
 * session, all in this process, epoll.
 *
 *   wsfanout PORT PATH N WORKERS [TIMEOUT]
 *
 * Connects the controller, then N observers, each joined (its Keyframe
 * received) before the next connects.  Connections are spread evenly over
 * WORKERS nginx workers (X-Pty-Worker of the 101; a connection landing on
 * a worker that has more than its share is closed and made again; the
 * config must listen with reuseport).  Then sends Enter on the
 * controller (the session runs "read x; <cmd>") and reads every
 * connection until its Closed or TIMEOUT seconds (default 300).
 *
 * Every Output frame is counted (its decoded length) and its base64 text
 * hashed in order; every client must end with the same count and hash as
 * the controller, no Error frame (PTY_OUTPUT_LAGGED included) and one
 * Closed.  Prints one line per client:
 *
 *     controller|observer WORKER-PID BYTES SECONDS FRAMES
 *
 * SECONDS runs from the client's first Output frame to its last.  Exits 1
 * if any check fails.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"


#define NGX_FAN_EXT                                                           \
    "https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1"

#define NGX_FAN_MAX_WORKERS  16


typedef struct {
    int             fd;
    int             controller;
    long            worker;
    int             closed;
    int             errors;
    int             done;

    unsigned char  *in;
    size_t          in_len;
    size_t          in_cap;

    unsigned long   bytes;
    unsigned long   frames;
    uint64_t        hash;
    double          first;
    double          last;
} ngx_fan_conn_t;


static ngx_fan_conn_t  *conns;
static int              nconns;



static void
die(const char *what)
{
    perror(what);
    exit(2);
}


/*
 * The Output's base64 text, hashed 32 bytes at a time in four independent
 * lanes (one chain of multiplies would make this client's own cost count).
 * Frames are hashed whole, so every client hashes the same pieces.
 */
static uint64_t
hash_text(uint64_t h, const unsigned char *p, size_t n)
{
    uint64_t  w[4], l[4];
    int       i;

    l[0] = h;
    l[1] = h ^ 0x9e3779b97f4a7c15ULL;
    l[2] = h ^ 0xc2b2ae3d27d4eb4fULL;
    l[3] = h ^ 0x165667b19e3779f9ULL;

    for ( ; n >= 32; p += 32, n -= 32) {
        memcpy(w, p, 32);

        for (i = 0; i < 4; i++) {
            l[i] = (l[i] ^ w[i]) * 0x100000001b3ULL;
        }
    }

    h = l[0] ^ (l[1] * 3) ^ (l[2] * 5) ^ (l[3] * 7);

    for ( ; n; p++, n--) {
        h = (h ^ *p) * 0x100000001b3ULL;
    }

    return h;
}


/* one text message; returns 1 on this connection's join Keyframe */
static int
message(ngx_fan_conn_t *c, unsigned char *p, size_t len)
{
    size_t          head, n;
    unsigned char  *k, *d, *e;

    head = len < 256 ? len : 256;

    k = memmem(p, head, "\"kind\":\"", 8);
    if (k == NULL) {
        return 0;       /* binding_hello */
    }

    k += 8;

    if (memcmp(k, "Output\"", 7) == 0) {
        d = memmem(k, p + head - k, "\"data\":\"", 8);
        e = p + len - 3;

        if (d == NULL || len < 3 || *e != '"' || e < d + 8) {
            fprintf(stderr, "malformed Output frame\n");
            c->errors++;
            return 0;
        }

        d += 8;
        n = e - d;

        c->last = ngx_bench_now();
        if (c->frames++ == 0) {
            c->first = c->last;
        }

        c->bytes += n / 4 * 3 - (n && e[-1] == '=') - (n > 1 && e[-2] == '=');
        c->hash = hash_text(c->hash, d, n);
        return 0;
    }

    if (memcmp(k, "Keyframe\"", 9) == 0) {
        return 1;
    }

    if (memcmp(k, "Closed\"", 7) == 0) {
        c->closed++;
        c->done = 1;
        return 0;
    }

    if (memcmp(k, "Error\"", 6) == 0) {
        fprintf(stderr, "%s on worker %ld: %.*s\n",
                c->controller ? "controller" : "observer", c->worker,
                (int) (len < 300 ? len : 300), p);
        c->errors++;
    }

    return 0;
}


/* handles the complete frames in the buffer; returns 1 after a Keyframe */
static int
frames(ngx_fan_conn_t *c)
{
    int             op, key;
    size_t          hlen, off;
    uint64_t        len;
    unsigned char  *in;

    off = 0;
    in = c->in;
    key = 0;

    while (ngx_bench_ws_header(in + off, c->in_len - off, &op, &hlen, &len)) {

        if (c->in_len - off < hlen + len) {
            if (hlen + len > c->in_cap) {
                c->in_cap = hlen + len + 65536;
                c->in = realloc(c->in, c->in_cap);
                if (c->in == NULL) {
                    die("realloc");
                }
                in = c->in;
            }

            break;
        }

        if (op == 0x1) {
            key |= message(c, in + off + hlen, len);

        } else if (op == 0x8) {
            c->done = 1;
        }

        off += hlen + len;
    }

    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;

    return key;
}


static ssize_t
fill(ngx_fan_conn_t *c)
{
    ssize_t  n;

    if (c->in_cap - c->in_len < 65536) {
        c->in_cap *= 2;
        c->in = realloc(c->in, c->in_cap);
        if (c->in == NULL) {
            die("realloc");
        }
    }

    n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);

    if (n > 0) {
        c->in_len += n;
    }

    return n;
}


/* connects and upgrades; returns the worker pid that answered */
static long
upgrade(ngx_fan_conn_t *c, int port, const char *path)
{
    char            req[2048], *w;
    unsigned char  *end;

    c->fd = ngx_bench_connect(port);
    if (c->fd == -1) {
        die("connect");
    }

    snprintf(req, sizeof(req),
             "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             "Sec-WebSocket-Protocol: pty-ws.v1\r\n\r\n", path);
    ngx_bench_send_all(c->fd, req, strlen(req));

    c->in_len = 0;

    for ( ;; ) {
        if (fill(c) <= 0) {
            die("handshake");
        }

        end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
        if (end) {
            break;
        }
    }

    if (memcmp(c->in, "HTTP/1.1 101", 12) != 0) {
        fprintf(stderr, "upgrade refused: %.40s\n", c->in);
        exit(2);
    }

    *end = '\0';
    w = strcasestr((char *) c->in, "\r\nX-Pty-Worker:");
    c->worker = w ? strtol(w + 15, NULL, 10) : 0;

    end += 4;
    memmove(c->in, end, c->in + c->in_len - end);
    c->in_len -= end - c->in;

    return c->worker;
}


static void
join(ngx_fan_conn_t *c)
{
    char  buf[512];

    snprintf(buf, sizeof(buf),
             "{\"op\":\"pty.join_session\","
             "\"id\":\"00000000-0000-7000-8000-000000000001\","
             "\"extensions\":[\"" NGX_FAN_EXT "\"],"
             "\"payload\":{\"role\":\"%s\"}}",
             c->controller ? "controller" : "observer");
    ngx_bench_send_text(c->fd, buf);

    /* the join flush ends with this connection's Keyframe */
    while (!frames(c)) {
        if (fill(c) <= 0) {
            die("join");
        }
    }
}


int
main(int argc, char **argv)
{
    int                  port, n, workers, i, j, k, ep, left, tries, bad;
    int                  seen, count[NGX_FAN_MAX_WORKERS], min;
    long                 pid[NGX_FAN_MAX_WORKERS];
    ssize_t              r;
    double               deadline, timeout;
    ngx_fan_conn_t      *c;
    struct epoll_event   ev, evs[64];

    if (argc < 5) {
        fprintf(stderr, "usage: wsfanout PORT PATH OBSERVERS WORKERS "
                "[TIMEOUT]\n");
        return 2;
    }

    port = atoi(argv[1]);
    n = atoi(argv[3]);
    workers = atoi(argv[4]);
    timeout = argc > 5 ? atof(argv[5]) : 300;

    if (workers < 1 || workers > NGX_FAN_MAX_WORKERS || n < 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }

    nconns = n + 1;
    conns = calloc(nconns, sizeof(ngx_fan_conn_t));
    if (conns == NULL) {
        die("calloc");
    }

    seen = 0;

    for (i = 0; i < nconns; i++) {
        c = &conns[i];
        c->controller = (i == 0);
        c->in_cap = 1 << 20;
        c->in = malloc(c->in_cap);
        c->hash = 0xcbf29ce484222325ULL;
        if (c->in == NULL) {
            die("malloc");
        }

        for (tries = 0; ; tries++) {
            (void) upgrade(c, port, argv[2]);

            for (j = 0; j < seen && pid[j] != c->worker; j++) { /* void */ }

            if (j == seen && seen < NGX_FAN_MAX_WORKERS) {
                pid[seen] = c->worker;
                count[seen++] = 0;
            }

            /* a worker not yet seen, or one of those with the fewest */
            for (min = nconns, k = 0; k < seen; k++) {
                min = count[k] < min ? count[k] : min;
            }

            if (tries >= 200
                || (j < seen && count[j] == min
                    && (seen >= workers || count[j] == 0)))
            {
                count[j]++;
                break;
            }

            close(c->fd);
        }

        join(c);
    }

    ep = epoll_create1(0);
    if (ep == -1) {
        die("epoll_create1");
    }

    for (i = 0; i < nconns; i++) {
        if (fcntl(conns[i].fd, F_SETFL,
                  fcntl(conns[i].fd, F_GETFL) | O_NONBLOCK) == -1)
        {
            die("fcntl");
        }

        ev.events = EPOLLIN;
        ev.data.u32 = i;

        if (epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev) == -1) {
            die("epoll_ctl");
        }

        /* what came after the join Keyframe */
        (void) frames(&conns[i]);
    }

    /* Enter: the session's command waits for it */
    ngx_bench_send_text(conns[0].fd,
              "{\"op\":\"pty.session_input\","
              "\"id\":\"00000000-0000-7000-8000-000000000002\","
              "\"payload\":{\"data\":\"DQ==\"}}");

    deadline = ngx_bench_now() + timeout;
    left = nconns;

    while (left && ngx_bench_now() < deadline) {
        k = epoll_wait(ep, evs, 64, 1000);

        if (k == -1) {
            if (errno == EINTR) {
                continue;
            }

            die("epoll_wait");
        }

        for (j = 0; j < k; j++) {
            c = &conns[evs[j].data.u32];

            if (c->fd == -1) {
                continue;
            }

            r = fill(c);

            if (r == -1 && errno == EAGAIN) {
                continue;
            }

            if (r > 0) {
                (void) frames(c);
            }

            if (r <= 0 || c->done) {
                (void) epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->fd = -1;
                left--;
            }
        }
    }

    bad = 0;

    for (i = 0; i < nconns; i++) {
        c = &conns[i];

        printf("%s %ld %lu %.6f %lu\n",
               c->controller ? "controller" : "observer", c->worker,
               c->bytes, c->last - c->first, c->frames);

        if (c->closed != 1 || c->errors
            || c->bytes != conns[0].bytes || c->hash != conns[0].hash)
        {
            fprintf(stderr, "client %d (%s, worker %ld): %lu bytes (the "
                    "controller %lu), %s hash, %d Closed, %d errors\n", i,
                    c->controller ? "controller" : "observer", c->worker,
                    c->bytes, conns[0].bytes,
                    c->hash == conns[0].hash ? "same" : "another",
                    c->closed, c->errors);
            bad++;
        }
    }

    for (k = 0; k < seen; k++) {
        if (count[k] == 0) {
            continue;
        }

        fprintf(stderr, "worker %ld: %d clients\n", pid[k], count[k]);
    }

    return bad ? 1 : 0;
}
