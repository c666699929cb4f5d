/*
 * The soak client for pty-ws/v1: many sessions, many WebSocket clients,
 * one process, poll(), for a fixed time while nginx reloads under it.
 *
 *   wssoak PORT K SECONDS INPUT_MS DRAIN < attach-paths
 *
 * One attach path per line (one session each); K connections per session,
 * the first the controller, which types "in-S-K\r" every INPUT_MS while it
 * is joined as controller.  The sessions print "tick N" lines and answer
 * every input line with "got LINE" (see t/bench/soak.pl).  A client told
 * binding_goodbye reconnects at once and joins with replay_from its last
 * sequence.  After SECONDS the controllers stop typing; DRAIN seconds
 * later every client is checked:
 *
 *   - frame order: the sequence of every in-order session frame (all but
 *     the out-of-band RoleAssigned of a join) grows, across reconnects;
 *   - lost frames: every broadcast frame (Output, MembershipChanged,
 *     Resize, Closed) that any client of the session got, with a sequence
 *     in the client's window, this client got too, with the same id and
 *     data; the window starts at its first join and skips only what a
 *     PTY_OUTPUT_LAGGED said was dropped (lags are counted);
 *   - lines: the decoded Output is "tick N" lines with N growing by one
 *     (again except across a lag) and "got in-S-K" lines, none twice;
 *   - input: every line typed and not refused with an Error frame (those
 *     are typed again) came back as "got" to some client of the session.
 *
 * Prints one "key=value ..." summary line on stdout, details of every
 * failure (up to a limit) on stderr; exits 1 on any failure.  Built with
 * -DSOAK_DROP it drops one Output frame on every 7th client, to see the
 * checks catch it.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"


#define SOAK_EXT                                                              \
    "https://agentic-sandbox.aiwg.io/extensions/pty-extensions/v1"

#define SOAK_IDLE       0       /* no connection, reconnect at retry_at */
#define SOAK_HS         1       /* waiting for the 101 */
#define SOAK_WAIT       2       /* upgraded, the controller not joined yet */
#define SOAK_JOINING    3       /* joined, waiting for the flush's Keyframe */
#define SOAK_LIVE       4
#define SOAK_BYE        5       /* binding_goodbye seen, reading to the end */

/* the kinds of broadcast frames every client of a session must get */
#define SOAK_K_OUTPUT   1
#define SOAK_K_MEMBERS  2
#define SOAK_K_RESIZE   3
#define SOAK_K_CLOSED   4

#define SOAK_REPORT     40      /* failure lines printed at most */


typedef struct {
    uint64_t        lo;         /* frames in (lo, hi) were dropped: a lag */
    uint64_t        hi;
} soak_win_t;


typedef struct {
    double          sent_at;
    double          bye_after;  /* goodbye on its connection this much later */
    long            worker;
    int             sends;
    int             refused;
    int             seen;       /* some client got its "got" line */
    int             gen;        /* the controller connection it went on */
} soak_input_t;


typedef struct {
    char           *path;

    uint32_t       *hash;       /* per sequence: id + data hash, 0: none */
    uint8_t        *kind;
    uint64_t        cap;

    soak_input_t   *in;         /* per input number k (1..) */
    unsigned long   in_cap;
    unsigned long   next_k;
    unsigned long  *resend;
    int             nresend;
    int             rcap;
} soak_session_t;


typedef struct {
    int             fd;
    int             session;
    int             controller;
    int             state;
    int             joined;     /* has joined once */
    int             role_ctl;   /* joined as controller now */
    int             gen;        /* connection number */
    int             goodbye;
    int             out_of_range;   /* REPLAY_OUT_OF_RANGE in this join */
    long            worker;

    unsigned char  *in;
    size_t          in_len;
    size_t          in_cap;

    uint64_t        last_seq;
    int             have_seq;
    uint64_t        cover_from;

    soak_win_t     *wins;
    int             nwins;
    int             cwins;

    uint8_t        *bits;       /* broadcast sequences received */
    uint64_t        bits_cap;   /* in bits */
    uint8_t        *gots;       /* input numbers seen in "got" lines */
    unsigned long   gots_cap;   /* in bits */

    char            line[256];
    size_t          line_len;
    int             synced;     /* a whole line seen since join or lag */
    unsigned long   tick_expect;
    unsigned long   last_got;

    double          retry_at;
    double          next_input;
    double          next_role;
    double          bye_at;     /* goodbye received */
    double          down_at;    /* the connection went away */

    unsigned long   frames;
    unsigned long   outputs;
    unsigned long   ticks;
    unsigned long   got_lines;
} soak_conn_t;


static soak_conn_t     *conns;
static soak_session_t  *sessions;
static int              nconns;
static int              nsessions;
static int              per;
static int              port;
static int              stopping;
static int              input_ms;
static double           t0;

/* counters for the summary */
static unsigned long    c_frames, c_outputs, c_ticks, c_gots;
static unsigned long    c_reconnects, c_lags, c_lag_skipped, c_refused;
static unsigned long    c_role_waits, c_unclean, c_connect_fail;
static unsigned long    c_reordered, c_lost, c_corrupt, c_tick_gaps;
static unsigned long    c_stray, c_dup_got, c_input_reorder, c_lost_input;
static unsigned long    c_out_of_range, c_errors, c_not_live, c_inputs;
static double           c_max_rejoin, c_bye_min = -1, c_bye_max = -1;
static int              reported;



static void
die(const char *what)
{
    perror(what);
    exit(2);
}


static void *
xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (p == NULL) {
        die("realloc");
    }

    return p;
}


static void
report(soak_conn_t *c, const char *fmt, ...)
{
    va_list  ap;

    if (reported++ >= SOAK_REPORT) {
        return;
    }

    fprintf(stderr, "%7.2fs conn %d (session %d, %s, worker %ld): ",
            ngx_bench_now() - t0, c ? (int) (c - conns) : -1,
            c ? c->session : -1,
            c ? (c->controller ? "controller" : "observer") : "-",
            c ? c->worker : 0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}


/* grows a bit set to hold bit n */
static void
bit_set(uint8_t **bits, uint64_t *cap, uint64_t n)
{
    uint64_t  ncap;

    if (n >= *cap) {
        ncap = *cap ? *cap : 4096;
        while (ncap <= n) {
            ncap *= 2;
        }

        *bits = xrealloc(*bits, ncap / 8);
        memset(*bits + *cap / 8, 0, (ncap - *cap) / 8);
        *cap = ncap;
    }

    (*bits)[n / 8] |= 1 << (n % 8);
}


static int
bit_get(uint8_t *bits, uint64_t cap, uint64_t n)
{
    return n < cap && (bits[n / 8] & (1 << (n % 8)));
}


static soak_input_t *
input_of(soak_session_t *s, unsigned long k)
{
    unsigned long  ncap;

    if (k >= s->in_cap) {
        ncap = s->in_cap ? s->in_cap : 256;
        while (ncap <= k) {
            ncap *= 2;
        }

        s->in = xrealloc(s->in, ncap * sizeof(soak_input_t));
        memset(s->in + s->in_cap, 0, (ncap - s->in_cap) * sizeof(soak_input_t));
        s->in_cap = ncap;
    }

    return &s->in[k];
}


static void
conn_close(soak_conn_t *c, const char *why)
{
    if (c->fd != -1) {
        close(c->fd);
        c->fd = -1;
    }

    c->in_len = 0;
    c->state = SOAK_IDLE;
    c->role_ctl = 0;
    c->down_at = ngx_bench_now();
    c->retry_at = c->down_at;

    if (!c->goodbye && !stopping && c_unclean++ < 5) {
        report(c, "connection ended without binding_goodbye: %s (last "
               "sequence %llu)", why, (unsigned long long) c->last_seq);
    }
}


static int
send_all(soak_conn_t *c, const void *p, size_t len)
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
            conn_close(c, n == 0 ? "write 0" : strerror(errno));
            return -1;
        }

        p = (const char *) p + n;
        len -= n;
    }

    return 0;
}


static int
send_text(soak_conn_t *c, const char *text)
{
    size_t         n;
    unsigned char  buf[1024];

    n = ngx_bench_ws_text(buf, sizeof(buf), text);

    return (n == 0) ? -1 : send_all(c, buf, n);
}


static void
b64enc(const char *src, size_t len, char *dst)
{
    size_t               i;
    uint32_t             v;
    static const char    tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    for (i = 0; i + 2 < len; i += 3) {
        v = (uint8_t) src[i] << 16 | (uint8_t) src[i + 1] << 8
            | (uint8_t) src[i + 2];
        *dst++ = tab[v >> 18];
        *dst++ = tab[(v >> 12) & 63];
        *dst++ = tab[(v >> 6) & 63];
        *dst++ = tab[v & 63];
    }

    if (len - i == 1) {
        v = (uint8_t) src[i] << 16;
        *dst++ = tab[v >> 18];
        *dst++ = tab[(v >> 12) & 63];
        *dst++ = '=';
        *dst++ = '=';

    } else if (len - i == 2) {
        v = (uint8_t) src[i] << 16 | (uint8_t) src[i + 1] << 8;
        *dst++ = tab[v >> 18];
        *dst++ = tab[(v >> 12) & 63];
        *dst++ = tab[(v >> 6) & 63];
        *dst++ = '=';
    }

    *dst = '\0';
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


/* the string value of "key":"..." in a message, or NULL */
static char *
str_of(unsigned char *p, size_t len, const char *key, size_t *vlen)
{
    char           pat[64];
    size_t         n;
    unsigned char *v, *e;

    n = snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    v = memmem(p, len, pat, n);
    if (v == NULL) {
        return NULL;
    }

    v += n;
    e = memchr(v, '"', p + len - v);
    if (e == NULL) {
        return NULL;
    }

    *vlen = e - v;
    return (char *) v;
}


static int
num_of(unsigned char *p, size_t len, const char *key, uint64_t *val)
{
    char           pat[64];
    size_t         n;
    unsigned char *v, *end;

    n = snprintf(pat, sizeof(pat), "\"%s\":", key);
    v = memmem(p, len, pat, n);
    if (v == NULL) {
        return 0;
    }

    end = p + len;
    v += n;

    if (v == end || *v < '0' || *v > '9') {
        return 0;
    }

    for (*val = 0; v < end && *v >= '0' && *v <= '9'; v++) {
        *val = *val * 10 + (*v - '0');
    }

    return 1;
}


static uint32_t
fnv(uint32_t h, const char *p, size_t len)
{
    while (len--) {
        h = (h ^ (uint8_t) *p++) * 16777619u;
    }

    return h;
}


/* one whole line of decoded Output (without \r\n) */
static void
output_line(soak_conn_t *c, char *l, size_t len)
{
    char            *e;
    unsigned long    n, s, k;
    soak_input_t    *in;
    soak_session_t  *ss;

    l[len] = '\0';

    if (!c->synced) {
        /* the first line after a join or lag may have begun before it */
        c->synced = 1;
        return;
    }

    if (strncmp(l, "tick ", 5) == 0) {
        n = strtoul(l + 5, &e, 10);
        if (*e != '\0' || n == 0) {
            goto stray;
        }

        c->ticks++;

        if (c->tick_expect && n != c->tick_expect) {
            c_tick_gaps++;
            report(c, "tick %lu where %lu was owed (last sequence %llu)",
                   n, c->tick_expect, (unsigned long long) c->last_seq);
        }

        c->tick_expect = n + 1;
        return;
    }

    if (strncmp(l, "got in-", 7) == 0) {
        s = strtoul(l + 7, &e, 10);
        if (*e != '-' || (int) s != c->session) {
            goto stray;
        }

        k = strtoul(e + 1, &e, 10);
        ss = &sessions[c->session];

        if (*e != '\0' || k == 0 || k >= ss->next_k) {
            goto stray;
        }

        c->got_lines++;
        in = input_of(ss, k);
        in->seen = 1;

        if (bit_get(c->gots, c->gots_cap, k)) {
            c_dup_got++;
            report(c, "\"got in-%d-%lu\" twice", c->session, k);
            return;
        }

        bit_set(&c->gots, &c->gots_cap, k);

        if (k < c->last_got && !in->refused
            && !input_of(ss, c->last_got)->refused)
        {
            c_input_reorder++;
            report(c, "\"got in-%d-%lu\" after in-%d-%lu", c->session, k,
                   c->session, c->last_got);
        }

        if (k > c->last_got) {
            c->last_got = k;
        }

        return;
    }

stray:

    c_stray++;
    report(c, "unexpected line \"%.80s\"", l);
}


static void
output_byte(soak_conn_t *c, unsigned char ch)
{
    if (ch == '\r') {
        return;
    }

    if (ch == '\n') {
        output_line(c, c->line, c->line_len);
        c->line_len = 0;
        return;
    }

    if (c->line_len < sizeof(c->line) - 1) {
        c->line[c->line_len++] = ch;
    }
}


static void
output(soak_conn_t *c, char *d, size_t len)
{
    int           v, bits;
    unsigned int  acc;

    acc = 0;
    bits = 0;

    for ( ; len--; d++) {
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


/* a broadcast frame: the same for every client of the session */
static void
broadcast(soak_conn_t *c, uint64_t seq, int kind, unsigned char *p,
    size_t len, char *data, size_t dlen)
{
    char            *id;
    size_t           idlen;
    uint32_t         h;
    uint64_t         ncap;
    soak_session_t  *s;

    s = &sessions[c->session];

    id = str_of(p, len, "id", &idlen);
    h = fnv(2166136261u, id ? id : "", id ? idlen : 0);
    h = fnv(h, data ? data : "", data ? dlen : 0) | 1;

    if (seq >= s->cap) {
        ncap = s->cap ? s->cap : 4096;
        while (ncap <= seq) {
            ncap *= 2;
        }

        s->hash = xrealloc(s->hash, ncap * sizeof(uint32_t));
        s->kind = xrealloc(s->kind, ncap);
        memset(s->hash + s->cap, 0, (ncap - s->cap) * sizeof(uint32_t));
        memset(s->kind + s->cap, 0, ncap - s->cap);
        s->cap = ncap;
    }

    if (s->hash[seq] == 0) {
        s->hash[seq] = h;
        s->kind[seq] = kind;

    } else if (s->hash[seq] != h || s->kind[seq] != kind) {
        c_corrupt++;
        report(c, "frame %llu differs from another client's",
               (unsigned long long) seq);
    }

    bit_set(&c->bits, &c->bits_cap, seq);
}


static void
goodbye(soak_conn_t *c)
{
    unsigned long    k;
    soak_input_t    *in;
    soak_session_t  *s;

    c->goodbye = 1;
    c->bye_at = ngx_bench_now();
    c->state = SOAK_BYE;

    if (!c->controller) {
        return;
    }

    /* for the report of a lost input: how long before the goodbye it went */
    s = &sessions[c->session];

    for (k = s->next_k - 1; k > 0; k--) {
        in = input_of(s, k);

        if (in->gen != c->gen || c->bye_at - in->sent_at > 30) {
            break;
        }

        in->bye_after = c->bye_at - in->sent_at;
    }
}


static void
refused(soak_conn_t *c, unsigned char *p, size_t len)
{
    int              sn;
    char            *id, *code, *e;
    size_t           idlen, clen;
    unsigned long    k;
    soak_session_t  *s;

    id = str_of(p, len, "id", &idlen);
    code = str_of(p, len, "code", &clen);

    if (id == NULL || idlen < 3 || strncmp(id, "i-", 2) != 0) {
        c_errors++;
        report(c, "Error frame: %.*s", (int) (len < 300 ? len : 300), p);
        return;
    }

    sn = strtol(id + 2, &e, 10);
    k = (*e == '-') ? strtoul(e + 1, NULL, 10) : 0;

    if (sn != c->session || k == 0 || k >= sessions[sn].next_k) {
        c_errors++;
        report(c, "Error frame for an unknown input: %.*s",
               (int) (len < 300 ? len : 300), p);
        return;
    }

    /* refused: nothing of it reached the terminal, type it again */
    s = &sessions[sn];
    input_of(s, k)->refused++;
    c_refused++;

    if (c_refused <= 5) {
        report(c, "input in-%d-%lu refused (%.*s), typed again", sn, k,
               code ? (int) clen : 1, code ? code : "?");
    }

    if (s->nresend == s->rcap) {
        s->rcap = s->rcap ? s->rcap * 2 : 16;
        s->resend = xrealloc(s->resend, s->rcap * sizeof(unsigned long));
    }

    s->resend[s->nresend++] = k;
}


static int join(soak_conn_t *c);


/* frames in (lo, hi) were dropped for this client: it lagged */
static void
lag_window(soak_conn_t *c, uint64_t lo, uint64_t hi, int lag)
{
    if (c->nwins == c->cwins) {
        c->cwins = c->cwins ? c->cwins * 2 : 4;
        c->wins = xrealloc(c->wins, c->cwins * sizeof(soak_win_t));
    }

    c->wins[c->nwins].lo = lo;
    c->wins[c->nwins].hi = hi;
    c->nwins++;

    if (lag && hi > lo + 1) {
        c_lag_skipped += hi - lo - 1;
    }

    /* the lines start over after the Keyframe */
    c->synced = 0;
    c->line_len = 0;
    c->tick_expect = 0;
}


/* the join flush is over: its Keyframe came */
static void
joined(soak_conn_t *c)
{
    int           i;
    double        now;
    soak_conn_t  *o;

    now = ngx_bench_now();
    c->state = SOAK_LIVE;

    if (c->joined && now - c->down_at > c_max_rejoin) {
        c_max_rejoin = now - c->down_at;
    }

    if (!c->joined && c->controller) {
        /* the observers join after the session's first joiner */
        for (i = 1; i < per; i++) {
            o = &conns[c->session * per + i];

            if (o->fd != -1 && o->state == SOAK_WAIT) {
                (void) join(o);
            }
        }
    }

    if (c->controller && c->next_input < now) {
        c->next_input = now;
    }

    c->joined = 1;
}


/* a session frame, in order unless it is a join's RoleAssigned */
static void
session_frame(soak_conn_t *c, unsigned char *p, size_t len)
{
    char      *kind, *data, *code;
    size_t     klen, dlen, clen;
    uint64_t   seq, prev;

    kind = str_of(p, len, "kind", &klen);
    if (kind == NULL || !num_of(p, len, "sequence", &seq)) {
        c_errors++;
        report(c, "session frame without kind or sequence: %.*s",
               (int) (len < 200 ? len : 200), p);
        return;
    }

#define KIND(k)  (klen == sizeof(k) - 1 && memcmp(kind, k, klen) == 0)

    if (KIND("RoleAssigned")) {
        c->role_ctl = (memmem(p, len, "\"role\":\"controller\"", 19) != NULL);

        if (c->controller && !c->role_ctl) {
            c_role_waits++;
            c->next_role = ngx_bench_now();
        }

        if (!c->joined) {
            c->cover_from = seq;
        }

        if (c->state == SOAK_JOINING) {
            return;     /* out of band, ahead of the replay */
        }
    }

    c->frames++;

    if (c->have_seq && seq <= c->last_seq) {
        c_reordered++;
        report(c, "%.*s sequence %llu after %llu", (int) klen, kind,
               (unsigned long long) seq, (unsigned long long) c->last_seq);
        return;
    }

    prev = c->have_seq ? c->last_seq : seq - 1;
    c->last_seq = seq;
    c->have_seq = 1;

    if (c->out_of_range) {
        /* the frames the replay could not give are counted as lost */
        c->out_of_range = 0;
        lag_window(c, prev, seq, 0);
    }

    if (KIND("Output")) {
#ifdef SOAK_DROP
        if (c->outputs == 100 && (c - conns) % 7 == 0) {
            c->outputs++;
            return;
        }
#endif
        c->outputs++;
        data = str_of(p, len, "data", &dlen);
        if (data == NULL) {
            c_errors++;
            report(c, "Output without data");
            return;
        }

        broadcast(c, seq, SOAK_K_OUTPUT, p, len, data, dlen);
        output(c, data, dlen);
        return;
    }

    if (KIND("MembershipChanged")) {
        broadcast(c, seq, SOAK_K_MEMBERS, p, len, NULL, 0);
        return;
    }

    if (KIND("Resize")) {
        broadcast(c, seq, SOAK_K_RESIZE, p, len, NULL, 0);
        return;
    }

    if (KIND("Closed")) {
        broadcast(c, seq, SOAK_K_CLOSED, p, len, NULL, 0);
        c_errors++;
        report(c, "session closed: %.*s", (int) (len < 300 ? len : 300), p);
        return;
    }

    if (KIND("Keyframe")) {
        if (c->state == SOAK_JOINING) {
            joined(c);
        }

        return;
    }

    if (KIND("Error")) {
        code = str_of(p, len, "code", &clen);

        if (code == NULL || clen != 17
            || memcmp(code, "PTY_OUTPUT_LAGGED", 17) != 0)
        {
            c_errors++;
            report(c, "PTY Error frame: %.*s", (int) (len < 300 ? len : 300),
                   p);
            return;
        }

        /* what came between our last frame and this one was dropped */
        c_lags++;
        lag_window(c, prev, seq, 1);
        return;
    }

    if (!KIND("RoleAssigned")) {
        c_errors++;
        report(c, "unknown frame: %.*s", (int) (len < 200 ? len : 200), p);
    }

#undef KIND
}


/* one text message from the server */
static void
message(soak_conn_t *c, unsigned char *p, size_t len)
{
    char    *op, *code, *reason;
    size_t   oplen, clen, rlen;

    op = str_of(p, len, "op", &oplen);
    if (op == NULL) {
        c_errors++;
        report(c, "message without op: %.*s", (int) (len < 200 ? len : 200),
               p);
        return;
    }

#define OP(o)  (oplen == sizeof(o) - 1 && memcmp(op, o, oplen) == 0)

    if (OP("pty.session_frame")) {
        session_frame(c, p, len);
        return;
    }

    if (OP("binding_goodbye")) {
        reason = str_of(p, len, "reason", &rlen);

        if (reason == NULL || rlen != 15
            || memcmp(reason, "server_shutdown", 15) != 0)
        {
            c_errors++;
            report(c, "goodbye: %.*s", (int) (len < 200 ? len : 200), p);
        }

        goodbye(c);
        return;
    }

    if (OP("Error")) {
        code = str_of(p, len, "code", &clen);

        if (code && clen == 19 && memcmp(code, "REPLAY_OUT_OF_RANGE", 19) == 0)
        {
            c_out_of_range++;
            c->out_of_range = 1;
            report(c, "REPLAY_OUT_OF_RANGE for replay_from %llu",
                   (unsigned long long) c->last_seq);
            return;
        }

        refused(c, p, len);
        return;
    }

    if (OP("binding_hello")) {
        return;
    }

    c_errors++;
    report(c, "unexpected message: %.*s", (int) (len < 200 ? len : 200), p);

#undef OP
}


/* the complete frames in the input buffer */
static void
frames(soak_conn_t *c)
{
    int             op;
    size_t          hlen, off;
    uint64_t        len;
    unsigned char  *in, pong[6 + 125];

    off = 0;
    in = c->in;

    while (c->fd != -1
           && ngx_bench_ws_header(in + off, c->in_len - off, &op, &hlen, &len))
    {
        if (c->in_len - off < hlen + len) {
            break;
        }

        if (op == 0x1) {
            message(c, in + off + hlen, len);

        } else if (op == 0x9 && len <= 125) {
            /* a pong, masked with 0, with the ping's payload */
            pong[0] = 0x8a;
            pong[1] = 0x80 | len;
            memset(pong + 2, 0, 4);
            memcpy(pong + 6, in + off + hlen, len);

            if (send_all(c, pong, 6 + len) != 0) {
                return;
            }

        } else if (op == 0x8) {
            conn_close(c, "close frame");
            return;

        } else if (op != 0xa) {
            c_errors++;
            report(c, "frame with opcode %d", op);
        }

        off += hlen + len;
    }

    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
}


static int
join(soak_conn_t *c)
{
    char  buf[512], replay[64];

    c->state = SOAK_JOINING;
    c->goodbye = 0;

    replay[0] = '\0';

    if (c->joined) {
        snprintf(replay, sizeof(replay), "\"replay_from\":%llu,",
                 (unsigned long long) c->last_seq);
    }

    snprintf(buf, sizeof(buf),
             "{\"op\":\"pty.join_session\",\"id\":\"j-%d-%d\","
             "\"extensions\":[\"" SOAK_EXT "\"],%s"
             "\"payload\":{\"role\":\"%s\"}}",
             (int) (c - conns), c->gen, replay,
             c->controller ? "controller" : "observer");

    return send_text(c, buf);
}


/* the 101 and its X-Pty-Worker; then the join, or the wait for one */
static int
upgraded(soak_conn_t *c)
{
    unsigned char  *end, *w;

    end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (end == NULL) {
        return 0;
    }

    if (memcmp(c->in, "HTTP/1.1 101", 12) != 0) {
        c_errors++;
        report(c, "upgrade refused: %.40s", c->in);
        c->goodbye = 1;
        conn_close(c, "upgrade refused");
        c->retry_at += 0.5;
        return -1;
    }

    *end = '\0';
    w = (unsigned char *) strcasestr((char *) c->in, "\r\nX-Pty-Worker: ");
    c->worker = w ? strtol((char *) w + 16, NULL, 10) : 0;

    end += 4;
    memmove(c->in, end, c->in + c->in_len - end);
    c->in_len -= end - c->in;

    if (c->controller || c->joined
        || conns[c->session * per].joined)
    {
        return join(c);
    }

    c->state = SOAK_WAIT;
    return 0;
}


static void
readable(soak_conn_t *c)
{
    ssize_t  n;

    for ( ;; ) {
        if (c->in_cap - c->in_len < 16384) {
            c->in_cap *= 2;
            c->in = xrealloc(c->in, c->in_cap);
        }

        n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);

        if (n == -1 && errno == EAGAIN) {
            return;
        }

        if (n <= 0) {
            conn_close(c, n == 0 ? "eof" : strerror(errno));
            return;
        }

        c->in_len += n;

        if (c->state == SOAK_HS && upgraded(c) != 0) {
            return;
        }

        if (c->state != SOAK_HS) {
            frames(c);
        }

        if (c->fd == -1) {
            return;
        }
    }
}


static void
open_conn(soak_conn_t *c)
{
    char  req[2048];

    c->fd = ngx_bench_connect(port);
    if (c->fd == -1) {
        c_connect_fail++;
        c->retry_at = ngx_bench_now() + 0.1;
        return;
    }

    c->gen++;
    c->goodbye = 0;
    c->state = SOAK_HS;
    c->in_len = 0;

    if (c->joined) {
        c_reconnects++;
    }

    snprintf(req, sizeof(req),
             "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             "Sec-WebSocket-Protocol: pty-ws.v1\r\n\r\n",
             sessions[c->session].path);

    if (send_all(c, req, strlen(req)) != 0) {
        return;
    }

    if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) == -1) {
        die("fcntl");
    }
}


/* the controller types its next line (or one refused before) */
static void
type_line(soak_conn_t *c, double now)
{
    char             text[64], b64[128], msg[512];
    unsigned long    k;
    soak_input_t    *in;
    soak_session_t  *s;

    s = &sessions[c->session];

    if (s->nresend) {
        k = s->resend[0];
        memmove(s->resend, s->resend + 1,
                --s->nresend * sizeof(unsigned long));

    } else {
        k = s->next_k++;
    }

    in = input_of(s, k);
    in->sent_at = now;
    in->worker = c->worker;
    in->gen = c->gen;
    in->bye_after = -1;
    in->sends++;
    c_inputs++;

    snprintf(text, sizeof(text), "in-%d-%lu\r", c->session, k);
    b64enc(text, strlen(text), b64);
    snprintf(msg, sizeof(msg),
             "{\"op\":\"pty.session_input\",\"id\":\"i-%d-%lu\","
             "\"payload\":{\"data\":\"%s\"}}", c->session, k, b64);

    (void) send_text(c, msg);
}


/* timers: reconnects, typing, asking for the controller role back */
static void
timers(double now, int typing)
{
    int           i;
    char          msg[256];
    soak_conn_t  *c;

    for (i = 0; i < nconns; i++) {
        c = &conns[i];

        if (c->state == SOAK_IDLE && !stopping && now >= c->retry_at) {
            open_conn(c);
            continue;
        }

        if (!c->controller || c->state != SOAK_LIVE) {
            continue;
        }

        if (!c->role_ctl) {
            if (now >= c->next_role) {
                c->next_role = now + 0.2;
                snprintf(msg, sizeof(msg),
                         "{\"op\":\"pty.request_role\",\"id\":\"r-%d\","
                         "\"payload\":{\"role\":\"controller\"}}", i);
                (void) send_text(c, msg);
            }

            continue;
        }

        /* a tick says the program runs, with the echo off */
        if (typing && c->ticks > 0 && now >= c->next_input) {
            c->next_input += input_ms / 1000.0;
            if (c->next_input < now) {
                c->next_input = now + input_ms / 1000.0;
            }

            type_line(c, now);
        }
    }
}


static void
poll_once(struct pollfd *pfds, int *idx, int ms)
{
    int  i, n;

    n = 0;

    for (i = 0; i < nconns; i++) {
        if (conns[i].fd != -1) {
            pfds[n].fd = conns[i].fd;
            pfds[n].events = POLLIN;
            pfds[n].revents = 0;
            idx[n++] = i;
        }
    }

    if (poll(pfds, n, ms) == -1 && errno != EINTR) {
        die("poll");
    }

    for (i = 0; i < n; i++) {
        if (pfds[i].revents && conns[idx[i]].fd == pfds[i].fd) {
            readable(&conns[idx[i]]);
        }
    }
}


static int
in_window(soak_conn_t *c, uint64_t seq)
{
    int  i;

    for (i = 0; i < c->nwins; i++) {
        if (seq > c->wins[i].lo && seq < c->wins[i].hi) {
            return 1;
        }
    }

    return 0;
}


/* every broadcast frame of its session in its window, this client got */
static void
check_frames(soak_conn_t *c)
{
    uint64_t         seq, lost;
    soak_session_t  *s;

    s = &sessions[c->session];
    lost = 0;

    for (seq = c->cover_from + 1; seq <= c->last_seq && seq < s->cap; seq++) {
        if (s->hash[seq] == 0 || bit_get(c->bits, c->bits_cap, seq)
            || in_window(c, seq))
        {
            continue;
        }

        if (lost++ < 3) {
            report(c, "lost frame %llu (%s)", (unsigned long long) seq,
                   s->kind[seq] == SOAK_K_OUTPUT ? "Output"
                   : s->kind[seq] == SOAK_K_MEMBERS ? "MembershipChanged"
                   : "other");
        }
    }

    c_lost += lost;
}


/* every line typed and not refused came back once */
static void
check_inputs(soak_session_t *s, int sn)
{
    unsigned long   k;
    soak_input_t   *in;

    for (k = 1; k < s->next_k; k++) {
        in = input_of(s, k);

        if (in->seen || in->sends == 0) {
            continue;
        }

        if (in->sends == in->refused) {
            continue;       /* refused at its last try too: nothing owed */
        }

        c_lost_input++;

        if (in->bye_after >= 0) {
            if (c_bye_min < 0 || in->bye_after < c_bye_min) {
                c_bye_min = in->bye_after;
            }

            if (in->bye_after > c_bye_max) {
                c_bye_max = in->bye_after;
            }
        }

        if (reported++ < SOAK_REPORT) {
            fprintf(stderr, "lost input in-%d-%lu: typed at %.2fs (%d "
                    "times, %d refused) to worker %ld, ", sn, k,
                    in->sent_at - t0, in->sends, in->refused, in->worker);

            if (in->bye_after >= 0) {
                fprintf(stderr, "%.0f ms before that connection's goodbye\n",
                        in->bye_after * 1000);

            } else {
                fprintf(stderr, "no goodbye on that connection after it\n");
            }
        }
    }
}


int
main(int argc, char **argv)
{
    int             i, j, *idx, failures;
    char            line[4096];
    size_t          len, cap;
    double          seconds, drain, now, end, wall;
    soak_conn_t    *c;
    struct timespec ts;
    struct rlimit   rl;
    struct pollfd  *pfds;

    if (argc < 6) {
        fprintf(stderr, "usage: wssoak PORT K SECONDS INPUT_MS DRAIN "
                "< paths\n");
        return 2;
    }

    port = atoi(argv[1]);
    per = atoi(argv[2]);
    seconds = atof(argv[3]);
    input_ms = atoi(argv[4]);
    drain = atof(argv[5]);

    if (per < 1 || input_ms < 1) {
        fprintf(stderr, "wssoak: K and INPUT_MS must be positive\n");
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        (void) setrlimit(RLIMIT_NOFILE, &rl);
    }

    cap = 0;

    while (fgets(line, sizeof(line), stdin)) {
        len = strcspn(line, "\r\n");
        if (len == 0) {
            continue;
        }

        line[len] = '\0';

        if ((size_t) nsessions == cap) {
            cap = cap ? cap * 2 : 64;
            sessions = xrealloc(sessions, cap * sizeof(soak_session_t));
        }

        memset(&sessions[nsessions], 0, sizeof(soak_session_t));
        sessions[nsessions].path = strdup(line);
        sessions[nsessions].next_k = 1;
        nsessions++;
    }

    nconns = nsessions * per;
    conns = calloc(nconns, sizeof(soak_conn_t));
    pfds = calloc(nconns, sizeof(struct pollfd));
    idx = calloc(nconns, sizeof(int));

    if (conns == NULL || pfds == NULL || idx == NULL) {
        die("calloc");
    }

    for (i = 0; i < nconns; i++) {
        conns[i].fd = -1;
    }

    t0 = ngx_bench_now();
    clock_gettime(CLOCK_REALTIME, &ts);
    wall = ts.tv_sec + ts.tv_nsec / 1e9;
    srandom(getpid());

    for (i = 0; i < nsessions; i++) {
        for (j = 0; j < per; j++) {
            c = &conns[i * per + j];
            c->session = i;
            c->controller = (j == 0);
            c->in_cap = 32768;
            c->in = xrealloc(NULL, c->in_cap);
            /* the controllers do not all type at once */
            c->next_input = t0 + (random() % input_ms) / 1000.0;
            open_conn(c);
        }

        /* keep the accept queues and our buffers moving */
        poll_once(pfds, idx, 0);
    }

    end = t0 + seconds;

    for ( ;; ) {
        now = ngx_bench_now();

        if (now >= end + drain) {
            break;
        }

        timers(now, now < end);
        poll_once(pfds, idx, 10);
    }

    stopping = 1;
    reported = 0;       /* the final checks get their own lines */

    for (i = 0; i < nconns; i++) {
        c = &conns[i];

        c_frames += c->frames;
        c_outputs += c->outputs;
        c_ticks += c->ticks;
        c_gots += c->got_lines;

        if (c->state != SOAK_LIVE) {
            c_not_live++;
            report(c, "not joined at the end (state %d)", c->state);
        }

        check_frames(c);
    }

    for (i = 0; i < nsessions; i++) {
        check_inputs(&sessions[i], i);
    }

    failures = (c_reordered + c_lost + c_corrupt + c_tick_gaps + c_stray
                + c_dup_got + c_input_reorder + c_lost_input + c_out_of_range
                + c_errors + c_not_live) != 0;

    printf("sessions=%d clients=%d seconds=%.1f frames=%lu outputs=%lu "
           "ticks=%lu got_lines=%lu inputs=%lu refused=%lu "
           "reconnects=%lu max_rejoin_ms=%.0f unclean=%lu connect_fail=%lu "
           "role_waits=%lu lags=%lu lag_skipped=%lu out_of_range=%lu "
           "reordered=%lu lost_frames=%lu corrupt=%lu tick_gaps=%lu "
           "stray_lines=%lu dup_got=%lu input_reordered=%lu "
           "lost_input=%lu lost_bye_min_ms=%.0f lost_bye_max_ms=%.0f "
           "errors=%lu not_live=%lu start=%.3f\n",
           nsessions, nconns, ngx_bench_now() - t0, c_frames, c_outputs,
           c_ticks, c_gots, c_inputs, c_refused, c_reconnects,
           c_max_rejoin * 1000, c_unclean, c_connect_fail, c_role_waits,
           c_lags, c_lag_skipped, c_out_of_range, c_reordered, c_lost,
           c_corrupt, c_tick_gaps, c_stray, c_dup_got, c_input_reorder,
           c_lost_input, c_bye_min * 1000, c_bye_max * 1000, c_errors,
           c_not_live, wall);

    for (i = 0; i < nconns; i++) {
        if (conns[i].fd != -1) {
            close(conns[i].fd);
        }
    }

    return failures;
}
