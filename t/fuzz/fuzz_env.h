
/*
 * ngx_pty_module fuzz harnesses: the little of an nginx worker that the
 * harnesses linking nginx's core need (a log, the timer tree, a fake
 * connection whose sends always complete), and the stand-ins for the HTTP
 * functions that would finalize a real request.  The harness is linked
 * with --wrap for those (see the Makefile's fuzz rules).
 */

#ifndef _NGX_PTY_FUZZ_ENV_H_INCLUDED_
#define _NGX_PTY_FUZZ_ENV_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include "ngx_pty.h"
#include "ngx_pty_shm.h"
#include "fuzz.h"


typedef struct {
    ngx_connection_t     c;
    ngx_event_t          rev;
    ngx_event_t          wev;
    ngx_http_request_t   r;
    u_char              *sent;        /* every byte the server sent */
    size_t               sent_len;
    size_t               sent_size;
    ngx_uint_t           finalized;
} fuzz_conn_t;


ngx_int_t __wrap_ngx_http_finalize_request(ngx_http_request_t *r,
    ngx_int_t rc);
ngx_int_t __wrap_ngx_handle_write_event(ngx_event_t *wev, size_t lowat);
ngx_int_t __wrap_ngx_handle_read_event(ngx_event_t *rev, ngx_uint_t flags);
ngx_int_t __wrap_ngx_http_output_filter(ngx_http_request_t *r,
    ngx_chain_t *in);


static ngx_log_t        fuzz_log;
static ngx_open_file_t  fuzz_log_file;
static ngx_cycle_t      fuzz_cycle;


/* once per process: logging off, the page size the pools want */
static ngx_inline void
fuzz_env_init(void)
{
    if (fuzz_log.file) {
        return;
    }

    fuzz_log_file.fd = ngx_stderr;
    fuzz_log.file = &fuzz_log_file;
    fuzz_log.log_level = getenv("FUZZ_LOG") ? NGX_LOG_DEBUG_ALL : 0;

    ngx_pagesize = getpagesize();
    for (ngx_pagesize_shift = 0; (1U << ngx_pagesize_shift) < ngx_pagesize;
         ngx_pagesize_shift++) { /* void */ }
    ngx_cacheline_size = NGX_CPU_CACHE_LINE;
    ngx_pid = getpid();

    ngx_time_init();

    fuzz_cycle.log = &fuzz_log;
    ngx_cycle = &fuzz_cycle;
}


/*
 * A pty_zone in process memory, made afresh for every input: slab pool and
 * the module's table, as nginx and ngx_pty_shm_init_zone() make them.
 */
#define FUZZ_ZONE_SIZE  (4 * 1024 * 1024)

static u_char  *fuzz_zone_mem;

static ngx_inline void
fuzz_zone_init(void)
{
    ngx_slab_pool_t  *sp;
    ngx_shm_zone_t    zone;

    if (fuzz_zone_mem == NULL) {
        fuzz_zone_mem = mmap(NULL, FUZZ_ZONE_SIZE, PROT_READ|PROT_WRITE,
                             MAP_ANON|MAP_SHARED, -1, 0);
        fuzz_assert(fuzz_zone_mem != MAP_FAILED);
        ngx_slab_sizes_init();
    }

    sp = (ngx_slab_pool_t *) fuzz_zone_mem;
    ngx_memzero(sp, sizeof(ngx_slab_pool_t));
    sp->end = fuzz_zone_mem + FUZZ_ZONE_SIZE;
    sp->min_shift = 3;
    sp->addr = fuzz_zone_mem;
    fuzz_assert(ngx_shmtx_create(&sp->mutex, &sp->lock, NULL) == NGX_OK);
    ngx_slab_init(sp);

    ngx_memzero(&zone, sizeof(ngx_shm_zone_t));
    zone.shm.addr = fuzz_zone_mem;
    zone.shm.size = FUZZ_ZONE_SIZE;
    zone.shm.log = &fuzz_log;
    fuzz_assert(ngx_pty_shm_init_zone(&zone, NULL) == NGX_OK);
}


static ngx_inline ngx_chain_t *
fuzz_send_chain(ngx_connection_t *c, ngx_chain_t *in, off_t limit)
{
    size_t        n;
    fuzz_conn_t  *fc;

    fc = (fuzz_conn_t *) c;

    for ( /* void */ ; in; in = in->next) {
        n = in->buf->last - in->buf->pos;

        if (fc->sent_len + n > fc->sent_size) {
            fc->sent_size = 2 * (fc->sent_len + n);
            fc->sent = realloc(fc->sent, fc->sent_size);
            fuzz_assert(fc->sent != NULL);
        }

        memcpy(fc->sent + fc->sent_len, in->buf->pos, n);
        fc->sent_len += n;
        in->buf->pos = in->buf->last;
    }

    return NULL;
}


static ngx_inline void
fuzz_conn_init(fuzz_conn_t *fc)
{
    ngx_memzero(fc, sizeof(fuzz_conn_t));

    fc->c.log = &fuzz_log;
    fc->c.read = &fc->rev;
    fc->c.write = &fc->wev;
    fc->c.send_chain = fuzz_send_chain;
    fc->c.fd = -1;
    fc->rev.log = &fuzz_log;
    fc->rev.data = &fc->c;
    fc->wev.log = &fuzz_log;
    fc->wev.data = &fc->c;
    fc->wev.write = 1;
    fc->r.connection = &fc->c;
    fc->r.main = &fc->r;
    fc->c.data = &fc->r;

    /* what the request's handlers allocate from (A2A clients, tasks) */
    fc->r.pool = ngx_create_pool(4096, &fuzz_log);
    fuzz_assert(fc->r.pool != NULL);
    fc->c.pool = fc->r.pool;

    /* timers of the previous run point into freed memory: start afresh */
    (void) ngx_event_timer_init(&fuzz_log);
}


static ngx_inline void
fuzz_conn_free(fuzz_conn_t *fc)
{
    free(fc->sent);
    fc->sent = NULL;

    if (fc->r.pool) {
        ngx_destroy_pool(fc->r.pool);
        fc->r.pool = NULL;
    }
}


ngx_int_t
__wrap_ngx_http_finalize_request(ngx_http_request_t *r, ngx_int_t rc)
{
    ((fuzz_conn_t *) r->connection)->finalized++;
    return NGX_OK;
}


ngx_int_t
__wrap_ngx_handle_write_event(ngx_event_t *wev, size_t lowat)
{
    return NGX_OK;
}


ngx_int_t
__wrap_ngx_handle_read_event(ngx_event_t *rev, ngx_uint_t flags)
{
    return NGX_OK;
}


/* the response body joins what the connection sent */
ngx_int_t
__wrap_ngx_http_output_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    (void) fuzz_send_chain(r->connection, in, 0);
    return NGX_OK;
}


#endif /* _NGX_PTY_FUZZ_ENV_H_INCLUDED_ */
