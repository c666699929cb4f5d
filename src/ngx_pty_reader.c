
/*
 * The agent reader: settled text of a session's scrollback, in pages,
 * from any worker (ngx_pty_reader.h).
 */

#include "ngx_pty.h"
#include "ngx_pty_session.h"
#include "ngx_pty_reader.h"
#include "ngx_pty_store.h"


#define NGX_PTY_READER_CHUNK  16384   /* raw bytes fed per step */


static void ngx_pty_reader_cleanup(void *data);
static void ngx_pty_reader_sync(ngx_pty_reader_t *rd,
    ngx_pty_session_sh_t *sh);
static size_t ngx_pty_reader_resync(ngx_pty_session_sh_t *sh, u_char *buf,
    size_t n, uint64_t *gap);
static void ngx_pty_reader_mark(ngx_pty_reader_t *rd, uint64_t gap);
static ngx_int_t ngx_pty_reader_keep(ngx_pty_session_sh_t *sh,
    const u_char *data, size_t len);
static void ngx_pty_reader_lost(ngx_pty_reader_t *rd,
    ngx_pty_session_sh_t *sh, size_t len);
static void ngx_pty_reader_refilled(ngx_pty_store_read_t *r);
static size_t ngx_pty_reader_arch_read(ngx_pty_reader_t *rd,
    ngx_pty_session_sh_t *sh, u_char *buf, size_t max);


ngx_pty_reader_t *
ngx_pty_reader_get(ngx_pty_session_t *s)
{
    ngx_pool_cleanup_t  *cln;
    ngx_pty_reader_t    *rd;

    if (s->api) {
        return s->api;
    }

    rd = ngx_pcalloc(s->pool, sizeof(ngx_pty_reader_t));
    if (rd == NULL) {
        return NULL;
    }

    cln = ngx_pool_cleanup_add(s->pool, 0);
    if (cln == NULL) {
        return NULL;
    }

    rd->text = ngx_pty_text_create(0);
    if (rd->text == NULL) {
        ngx_log_error(NGX_LOG_ERR, s->log, 0,
                      "pty: no memory for the settled text of pty-%ui",
                      s->sh->name);
        return NULL;
    }

    cln->handler = ngx_pty_reader_cleanup;
    cln->data = rd;
    s->api = rd;

    return rd;
}


static void
ngx_pty_reader_cleanup(void *data)
{
    ngx_pty_reader_t  *rd = data;

    ngx_pty_reader_refill_cancel(rd);
    ngx_free(rd->arch);
    ngx_pty_text_destroy(rd->text);
}


#define NGX_PTY_READER_REFILL  (4 * 1024 * 1024)


ngx_int_t
ngx_pty_reader_refill(ngx_pty_reader_t *rd, ngx_pty_session_sh_t *sh,
    ngx_log_t *log, ngx_pty_reader_refilled_pt refilled, void *data)
{
    uint64_t               tail, from;
    ngx_pty_store_read_t  *r;

    if (!ngx_pty_store_enabled() || rd->fetch) {
        return NGX_DECLINED;
    }

    ngx_pty_shm_lock(sh);
    tail = ngx_pty_scroll_tail(sh->scroll);
    from = sh->api_cursor;
    ngx_pty_shm_unlock(sh);

    if (from >= tail
        || (from >= rd->arch_off && from < rd->arch_off + rd->arch_len))
    {
        return NGX_DECLINED;
    }

    r = ngx_pty_store_read_create(log);
    if (r == NULL) {
        return NGX_DECLINED;
    }

    r->key.data = sh->id;
    r->key.len = NGX_PTY_ID_LEN;
    r->from = from;
    r->scroll = ngx_min(tail - from, NGX_PTY_READER_REFILL);
    r->handler = ngx_pty_reader_refilled;
    r->data = rd;

    if (ngx_pty_store_read_post(r) != NGX_OK) {
        ngx_pty_store_read_free(r);
        return NGX_DECLINED;
    }

    rd->fetch = r;
    rd->refilled = refilled;
    rd->refilled_data = data;

    return NGX_AGAIN;
}


static void
ngx_pty_reader_refilled(ngx_pty_store_read_t *r)
{
    ngx_pty_reader_t  *rd = r->data;

    rd->fetch = NULL;

    if (r->rc == NGX_OK && r->frames_len) {
        ngx_free(rd->arch);
        rd->arch = r->frames;
        rd->arch_len = r->frames_len;
        rd->arch_off = r->next;
        r->frames = NULL;
    }

    rd->refilled(rd->refilled_data);
}


void
ngx_pty_reader_refill_cancel(ngx_pty_reader_t *rd)
{
    ngx_pty_store_read_t  *r;

    r = rd->fetch;

    if (r) {
        r->cancelled = 1;
        rd->fetch = NULL;
    }
}


/* the archive's copy of what the zone lost at sh->api_cursor; locked */
static size_t
ngx_pty_reader_arch_read(ngx_pty_reader_t *rd, ngx_pty_session_sh_t *sh,
    u_char *buf, size_t max)
{
    size_t    n;
    uint64_t  tail, cursor;

    tail = ngx_pty_scroll_tail(sh->scroll);
    cursor = sh->api_cursor;

    if (cursor >= tail || cursor < rd->arch_off
        || cursor >= rd->arch_off + rd->arch_len)
    {
        return 0;
    }

    n = ngx_min(max, rd->arch_off + rd->arch_len - cursor);
    n = ngx_min(n, tail - cursor);

    ngx_memcpy(buf, rd->arch + (cursor - rd->arch_off), n);
    sh->api_cursor += n;

    if (sh->api_cursor >= rd->arch_off + rd->arch_len) {
        ngx_free(rd->arch);
        rd->arch = NULL;
        rd->arch_len = 0;
    }

    return n;
}


/*
 * One call at a time, in any worker: NGX_BUSY when another holds it.  A
 * holder that died (a killed worker) does not hold it.  Then this
 * worker's converter is made the current one.
 */
ngx_int_t
ngx_pty_reader_claim(ngx_pty_reader_t *rd, ngx_pty_session_sh_t *sh)
{
    ngx_atomic_uint_t  pid;

    if (rd->busy) {
        return NGX_BUSY;
    }

    for ( ;; ) {
        pid = sh->api_busy;

        if (pid == (ngx_atomic_uint_t) ngx_pid) {
            /* ours, and no call here waits: one left without letting go */
            break;
        }

        if (pid != 0 && ngx_pty_pid_alive((ngx_pid_t) pid)) {
            return NGX_BUSY;
        }

        if (ngx_atomic_cmp_set(&sh->api_busy, pid, ngx_pid)) {
            break;
        }
    }

    ngx_pty_reader_sync(rd, sh);

    return NGX_OK;
}


void
ngx_pty_reader_unclaim(ngx_pty_session_sh_t *sh)
{
    (void) ngx_atomic_cmp_set(&sh->api_busy, ngx_pid, 0);
}


/*
 * Another worker read last (or this view is new): the converter is
 * rebuilt from the start of the unfinished line, up to where the last
 * reader fed.  All of that was taken already (a call takes all it fed),
 * so what it gives now is dropped: the next take continues the stream
 * as the last reader's converter would have.  While skipping to a line
 * feed after a loss nothing was fed since the break: a fresh converter
 * is that one.
 */
static void
ngx_pty_reader_sync(ngx_pty_reader_t *rd, ngx_pty_session_sh_t *sh)
{
    u_char               buf[NGX_PTY_READER_CHUNK];
    size_t               n;
    uint64_t             off, missed;
    ngx_pty_text_view_t  v;

    if (sh->api_reader == ngx_pid && rd->epoch == sh->api_epoch) {
        return;
    }

    ngx_pty_text_reset(rd->text);

    off = sh->api_line;

    while (!sh->api_resync && off < sh->api_cursor) {
        ngx_pty_shm_lock(sh);
        n = ngx_pty_scroll_read(sh->scroll, &off, buf,
                                ngx_min(sizeof(buf), sh->api_cursor - off),
                                &missed);
        ngx_pty_shm_unlock(sh);

        if (n == 0 || ngx_pty_text_feed(rd->text, buf, n) != 0) {
            break;
        }
    }

    (void) ngx_pty_text_take(rd->text, &v);

    sh->api_reader = ngx_pid;
    rd->epoch = ngx_atomic_fetch_add(&sh->api_epoch, 1) + 1;
}


void
ngx_pty_reader_pull(ngx_pty_reader_t *rd, ngx_pty_session_sh_t *sh,
    size_t page, uint64_t limit)
{
    u_char               buf[NGX_PTY_READER_CHUNK], *p, *lf;
    size_t               n, max, skip;
    uint64_t             missed, gap;
    ngx_uint_t           brk, ended;
    ngx_pty_text_view_t  v;

    gap = 0;

    for ( ;; ) {
        if (ngx_pty_text_peek(rd->text, &v) != 0
            || v.len + sh->api_spill_len >= page)
        {
            return;
        }

        ngx_pty_shm_lock(sh);

        if (limit && sh->api_cursor >= limit) {
            ngx_pty_shm_unlock(sh);
            return;
        }

        max = limit ? ngx_min(sizeof(buf), limit - sh->api_cursor)
                    : sizeof(buf);

        missed = 0;
        n = ngx_pty_reader_arch_read(rd, sh, buf, max);

        if (n == 0) {
            n = ngx_pty_scroll_read(sh->scroll, &sh->api_cursor, buf, max,
                                    &missed);
        }

        brk = (missed && !sh->api_resync);

        if (missed) {
            sh->api_missed += missed;
            sh->api_gap += missed;
            sh->api_resync = 1;
        }

        skip = sh->api_resync ? ngx_pty_reader_resync(sh, buf, n, &gap) : 0;
        p = buf + skip;

        lf = (buf + n > p) ? memrchr(p, '\n', buf + n - p) : NULL;

        if (lf) {
            sh->api_line = sh->api_cursor - n + (lf - buf) + 1;
        }

        /* the program ended inside a loss: the marker goes at the end */
        ended = (n == 0 && sh->api_resync
                 && sh->state >= NGX_PTY_STATE_CLOSED
                 && sh->api_cursor >= sh->scroll->head);

        if (ended) {
            gap = sh->api_gap;
            sh->api_gap = 0;
            sh->api_resync = 0;
        }

        ngx_pty_shm_unlock(sh);

        if (brk) {
            (void) ngx_pty_text_break(rd->text);
        }

        if ((skip && !sh->api_resync) || ended) {
            ngx_pty_reader_mark(rd, gap);
        }

        if (n == 0) {
            return;
        }

        if (buf + n > p && ngx_pty_text_feed(rd->text, p, buf + n - p) != 0) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                          "pty: no memory for the settled text of pty-%ui",
                          sh->name);
            return;
        }
    }
}


/*
 * After a loss: raw bytes up to the next line feed are skipped (counted
 * as missed); returns how many.  Finding it ends the loss, whose size is
 * then in *gap.  Caller holds the session lock.
 */
static size_t
ngx_pty_reader_resync(ngx_pty_session_sh_t *sh, u_char *buf, size_t n,
    uint64_t *gap)
{
    u_char  *lf;
    size_t   skip;

    lf = memchr(buf, '\n', n);
    skip = lf ? (size_t) (lf - buf) + 1 : n;

    sh->api_missed += skip;
    sh->api_gap += skip;

    if (lf) {
        *gap = sh->api_gap;
        sh->api_gap = 0;
        sh->api_resync = 0;
        sh->api_line = sh->api_cursor - n + skip;
    }

    return skip;
}


static void
ngx_pty_reader_mark(ngx_pty_reader_t *rd, uint64_t gap)
{
    u_char  note[64], *p;

    p = ngx_snprintf(note, sizeof(note), NGX_PTY_READER_GAP, gap);

    (void) ngx_pty_text_note(rd->text, note, p - note);
}


/*
 * Where the text after the last loss note in text[from, len) starts, or 0
 * when there is none: what a loss may have swallowed (an input's echo)
 * is not waited for past it
 */
size_t
ngx_pty_reader_after_gap(const u_char *text, size_t from, size_t len)
{
    size_t         pre, post;
    const u_char  *p, *q, *last;

    pre = sizeof("[pty: ") - 1;
    post = sizeof(" bytes of output missed]\n") - 1;
    last = NULL;

    for (p = text + from; p + pre + post <= text + len; p = q + 1) {
        q = memchr(p, '\n', text + len - p);
        if (q == NULL) {
            break;
        }

        if (q + 1 - p >= (ssize_t) (pre + post)
            && ngx_strncmp(p, "[pty: ", pre) == 0
            && ngx_strncmp(q + 1 - post, " bytes of output missed]\n", post)
               == 0)
        {
            last = q + 1;
        }
    }

    return last ? (size_t) (last - text) : 0;
}


ngx_int_t
ngx_pty_reader_peek(ngx_pty_reader_t *rd, ngx_pty_text_view_t *v)
{
    return ngx_pty_text_peek(rd->text, v) == 0 ? NGX_OK : NGX_ERROR;
}


ngx_uint_t
ngx_pty_reader_waiting(ngx_pty_session_sh_t *sh)
{
    return sh->api_spill_len || sh->api_cursor < sh->scroll->head;
}


size_t
ngx_pty_reader_left(ngx_pty_session_sh_t *sh)
{
    return sh->api_spill_len;
}


ngx_int_t
ngx_pty_reader_deliver(ngx_pty_reader_t *rd, ngx_pty_session_sh_t *sh,
    size_t page, ngx_pool_t *pool, const char *key, json_t *o)
{
    u_char               *data;
    size_t                len, total;
    ngx_pty_zone_t       *zone;
    ngx_pty_text_view_t   v;

    if (ngx_pty_text_take(rd->text, &v) != 0) {
        return NGX_ERROR;
    }

    sh->api_missed += v.dropped;
    total = sh->api_spill_len + v.len;

    if (sh->api_spill_len == 0) {
        data = (u_char *) v.data;

    } else {
        /* what an earlier call left comes first, topped up to a page */
        data = ngx_pnalloc(pool, total);
        if (data == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(data, sh->api_spill, sh->api_spill_len);
        ngx_memcpy(data + sh->api_spill_len, v.data, v.len);
    }

    len = total;

    if (len > page) {
        for (len = page; len > 0 && (data[len] & 0xc0) == 0x80; len--) {
            /* void */
        }

        if (ngx_pty_reader_keep(sh, data + len, total - len) != NGX_OK) {
            ngx_pty_reader_lost(rd, sh, total - len);
        }

    } else if (sh->api_spill_len) {
        zone = ngx_pty_shm_zone();
        ngx_slab_free(zone->shpool, sh->api_spill);
        sh->api_spill = NULL;
        sh->api_spill_len = 0;
        sh->api_spill_size = 0;
    }

    if (json_object_set_new(o, key, json_stringn((char *) data, len)) != 0) {
        return NGX_ERROR;
    }

    sh->api_delivered += len;

    json_object_set_new(o, "missed",
                        json_integer((json_int_t) sh->api_missed));
    json_object_set_new(o, "more", json_boolean(ngx_pty_reader_waiting(sh)));
    json_object_set_new(o, "offset",
                        json_integer((json_int_t) sh->api_delivered));

    sh->api_missed = 0;

    return NGX_OK;
}


/* the rest of a take, in the zone for whoever reads next */
static ngx_int_t
ngx_pty_reader_keep(ngx_pty_session_sh_t *sh, const u_char *data,
    size_t len)
{
    u_char          *p;
    ngx_pty_zone_t  *zone;

    zone = ngx_pty_shm_zone();

    if (len > sh->api_spill_size) {
        /* a full zone forgets sessions that ended before this one first */
        p = ngx_pty_shm_alloc(sh, len);
        if (p == NULL) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                          "pty: shared zone is full, cannot keep %uz bytes "
                          "of output of pty-%ui for the next read; raise "
                          "the size in \"pty_zone\"", len, sh->name);
            return NGX_ERROR;
        }

        if (sh->api_spill) {
            ngx_slab_free(zone->shpool, sh->api_spill);
        }

        sh->api_spill = p;
        sh->api_spill_size = len;
    }

    /* data may point into the old spill's copy in the pool, never into it */
    ngx_memcpy(sh->api_spill, data, len);
    sh->api_spill_len = len;

    return NGX_OK;
}


/*
 * A full zone lost the rest of a take: like a loss of raw output, the
 * text goes on at the next line boundary after a marker.
 */
static void
ngx_pty_reader_lost(ngx_pty_reader_t *rd, ngx_pty_session_sh_t *sh,
    size_t len)
{
    ngx_pty_zone_t  *zone;

    if (sh->api_spill) {
        zone = ngx_pty_shm_zone();
        ngx_slab_free(zone->shpool, sh->api_spill);
        sh->api_spill = NULL;
        sh->api_spill_size = 0;
    }

    sh->api_spill_len = 0;

    ngx_pty_shm_lock(sh);
    sh->api_missed += len;
    sh->api_gap += len;
    sh->api_resync = 1;
    ngx_pty_shm_unlock(sh);

    (void) ngx_pty_text_break(rd->text);
}
