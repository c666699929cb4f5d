
/*
 * A fast pty-ws/v1 client for the benchmarks: its own cost must not
 * dominate what it measures.
 *
 *   wsbench throughput PORT PATH
 *       joins, sends Enter (the session's command waits for it), then
 *       counts decoded Output bytes until Closed; prints
 *       "bytes seconds frames"
 *   wsbench echo PORT PATH N
 *       joins, then N times sends one byte and waits for the Output
 *       frame echoing it; prints the latencies in microseconds, sorted
 *   wsbench attach PORT PATH N
 *       N times connects, upgrades, joins and waits for the Keyframe;
 *       prints "total join" per attach in microseconds (each column
 *       sorted): from connect() and from sending the join request
 *   wsbench start PORT N COMMAND MARK
 *       N times POSTs /pty/start with wait_for MARK and reads the answer
 *       (then kills the session, untimed); prints the times in
 *       microseconds, sorted
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"


#define NGX_BENCH_EXT                                                         \
    "https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1"


static int            fd;
static double         join_sent;
static unsigned char  in[4 * 1024 * 1024];
static size_t         in_len;


static double *alloc_lat(int count);
static void print_sorted(double *lat, double *lat2, int count);



static void
die(const char *what)
{
    perror(what);
    exit(1);
}


/* the next complete frame's payload, in place in the input buffer */
static unsigned char *
next_frame(size_t *plen, size_t *consumed)
{
    int       op;
    ssize_t   n;
    size_t    hlen;
    uint64_t  len;

    for ( ;; ) {
        if (ngx_bench_ws_header(in, in_len, &op, &hlen, &len)
            && in_len >= hlen + len)
        {
            *plen = len;
            *consumed = hlen + len;
            return in + hlen;
        }

        n = read(fd, in + in_len, sizeof(in) - in_len);

        if (n <= 0) {
            return NULL;
        }

        in_len += n;
    }
}


static void
drop(size_t consumed)
{
    memmove(in, in + consumed, in_len - consumed);
    in_len -= consumed;
}


/* decoded length of the Output frame's data, or -1 for other frames */
static long
output_bytes(unsigned char *p, size_t len)
{
    char    *d, *e;
    size_t   n;

    if (memmem(p, len, "\"kind\":\"Output\"", 15) == NULL) {
        return -1;
    }

    d = memmem(p, len, "\"data\":\"", 8);
    if (d == NULL) {
        return -1;
    }

    d += 8;
    e = memchr(d, '"', (char *) p + len - d);
    if (e == NULL) {
        return -1;
    }

    n = e - d;

    return (long) (n / 4 * 3 - (n && e[-1] == '=') - (n > 1 && e[-2] == '='));
}


static void
connect_to(int port)
{
    fd = ngx_bench_connect(port);

    if (fd == -1) {
        die("connect");
    }
}


static void
connect_join(int port, const char *path)
{
    char            req[2048];
    size_t          len, consumed;
    unsigned char  *p, *end;

    connect_to(port);

    snprintf(req, sizeof(req),
             "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             "Sec-WebSocket-Protocol: pty-ws.v1\r\n\r\n", path);
    ngx_bench_send_all(fd, req, strlen(req));

    for ( ;; ) {
        ssize_t n = read(fd, in + in_len, sizeof(in) - in_len);

        if (n <= 0) {
            die("handshake");
        }

        in_len += n;
        end = memmem(in, in_len, "\r\n\r\n", 4);

        if (end) {
            if (memcmp(in, "HTTP/1.1 101", 12) != 0) {
                fprintf(stderr, "upgrade refused\n");
                exit(1);
            }

            drop(end + 4 - in);
            break;
        }
    }

    join_sent = ngx_bench_now();

    ngx_bench_send_text(fd, "{\"op\":\"pty.join_session\","
              "\"id\":\"00000000-0000-7000-8000-000000000001\","
              "\"extensions\":[\"" NGX_BENCH_EXT "\"],"
              "\"payload\":{\"role\":\"controller\"}}");

    /* the initial flush ends with our Keyframe */
    for ( ;; ) {
        p = next_frame(&len, &consumed);
        if (p == NULL) {
            die("join");
        }

        if (memmem(p, len, "\"kind\":\"Keyframe\"", 17)) {
            drop(consumed);
            return;
        }

        drop(consumed);
    }
}


static void
send_input(const char *b64)
{
    char  buf[256];

    snprintf(buf, sizeof(buf),
             "{\"op\":\"pty.session_input\","
             "\"id\":\"00000000-0000-7000-8000-000000000002\","
             "\"payload\":{\"data\":\"%s\"}}", b64);
    ngx_bench_send_text(fd, buf);
}


static int
throughput(void)
{
    long            n;
    size_t          len, consumed;
    double          start, last;
    unsigned long   total, frames;
    unsigned char  *p;

    send_input("DQ==");     /* Enter */

    total = 0;
    frames = 0;
    start = 0;
    last = ngx_bench_now();

    for ( ;; ) {
        p = next_frame(&len, &consumed);
        if (p == NULL) {
            break;
        }

        n = output_bytes(p, len);

        if (n >= 0) {
            if (frames++ == 0) {
                start = ngx_bench_now();
            }

            total += n;
            last = ngx_bench_now();

        } else if (memmem(p, len, "\"kind\":\"Closed\"", 15)) {
            drop(consumed);
            break;
        }

        drop(consumed);
    }

    printf("%lu %.6f %lu\n", total, last - start, frames);

    return 0;
}


static int
cmp(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}


static int
echo(int count)
{
    int             i;
    double          t0, *lat;
    size_t          len, consumed;
    unsigned char  *p;

    lat = alloc_lat(count);

    for (i = 0; i < count; i++) {
        t0 = ngx_bench_now();
        send_input("eA==");     /* "x" */

        for ( ;; ) {
            p = next_frame(&len, &consumed);
            if (p == NULL) {
                die("echo");
            }

            if (output_bytes(p, len) > 0) {
                drop(consumed);
                break;
            }

            drop(consumed);
        }

        lat[i] = (ngx_bench_now() - t0) * 1e6;
    }

    print_sorted(lat, NULL, count);

    return 0;
}


static double *
alloc_lat(int count)
{
    double  *lat;

    lat = calloc(count ? count : 1, sizeof(double));
    if (lat == NULL) {
        die("calloc");
    }

    return lat;
}


static void
print_sorted(double *lat, double *lat2, int count)
{
    int  i;

    qsort(lat, count, sizeof(double), cmp);

    if (lat2) {
        qsort(lat2, count, sizeof(double), cmp);
    }

    for (i = 0; i < count; i++) {
        if (lat2) {
            printf("%.1f %.1f\n", lat[i], lat2[i]);

        } else {
            printf("%.1f\n", lat[i]);
        }
    }
}


static int
attach(int port, const char *path, int count)
{
    int      i;
    double   t0, t1, *lat, *join;

    lat = alloc_lat(count);
    join = alloc_lat(count);

    for (i = 0; i < count; i++) {
        t0 = ngx_bench_now();
        connect_join(port, path);
        t1 = ngx_bench_now();

        lat[i] = (t1 - t0) * 1e6;
        join[i] = (t1 - join_sent) * 1e6;

        close(fd);
        in_len = 0;
    }

    print_sorted(lat, join, count);

    return 0;
}


/* one HTTP/1.1 POST with Connection: close; the answer in the buffer */
static void
post(int port, const char *path, const char *body)
{
    char     req[1024];
    ssize_t  n;

    connect_to(port);

    snprintf(req, sizeof(req),
             "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/json\r\nConnection: close\r\n"
             "Content-Length: %zu\r\n\r\n%s", path, strlen(body), body);
    ngx_bench_send_all(fd, req, strlen(req));

    in_len = 0;

    while ((n = read(fd, in + in_len, sizeof(in) - 1 - in_len)) > 0) {
        in_len += n;
    }

    in[in_len] = '\0';
    close(fd);

    if (memcmp(in, "HTTP/1.1 200", 12) != 0) {
        fprintf(stderr, "%s: %.200s\n", path, in);
        exit(1);
    }
}


static int
start(int port, int count, const char *command, const char *mark)
{
    int      i;
    char     body[1024], id[64], *p;
    double   t0, *lat;

    if (strpbrk(command, "\"\\") || strpbrk(mark, "\"\\")) {
        fprintf(stderr, "wsbench: no quotes or backslashes, please\n");
        return 2;
    }

    lat = alloc_lat(count);

    for (i = 0; i < count; i++) {
        snprintf(body, sizeof(body),
                 "{\"command\":\"%s\",\"cols\":120,\"rows\":30,"
                 "\"wait_for\":\"%s\",\"wait_ms\":10000}", command, mark);

        t0 = ngx_bench_now();
        post(port, "/pty/start", body);
        lat[i] = (ngx_bench_now() - t0) * 1e6;

        if (strstr((char *) in, "\"matched\":true") == NULL) {
            fprintf(stderr, "start: %s did not appear\n", mark);
            return 1;
        }

        p = strstr((char *) in, "\"id\":\"");
        if (p == NULL || sscanf(p + 6, "%63[^\"]", id) != 1) {
            fprintf(stderr, "start: no id\n");
            return 1;
        }

        snprintf(body, sizeof(body), "{\"id\":\"%s\"}", id);
        post(port, "/pty/kill", body);
    }

    print_sorted(lat, NULL, count);

    return 0;
}


int
main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: wsbench throughput|echo|attach PORT PATH [N]"
                "\n       wsbench start PORT N COMMAND MARK\n");
        return 2;
    }

    if (strcmp(argv[1], "start") == 0) {
        return argc < 6 ? 2 : start(atoi(argv[2]), atoi(argv[3]), argv[4],
                                    argv[5]);
    }

    if (strcmp(argv[1], "attach") == 0) {
        return attach(atoi(argv[2]), argv[3], argc > 4 ? atoi(argv[4]) : 100);
    }

    connect_join(atoi(argv[2]), argv[3]);

    if (strcmp(argv[1], "throughput") == 0) {
        return throughput();
    }

    return echo(argc > 4 ? atoi(argv[4]) : 1000);
}
