
/*
 * Token buckets and log limiters.
 */

#include "ngx_pty.h"
#include "ngx_pty_limit.h"


/* rate * ms stays far from 2^64 with rates up to NGX_PTY_RATE_MAX */
#define NGX_PTY_BUCKET_MAX_MS  (1 << 22)


void
ngx_pty_bucket_init(ngx_pty_bucket_t *b, ngx_pty_rate_t *rate)
{
    b->tokens = rate->burst;
    b->last = ngx_current_msec;
}


ngx_int_t
ngx_pty_bucket_take(ngx_pty_bucket_t *b, ngx_pty_rate_t *rate, size_t n)
{
    uint64_t        add;
    ngx_msec_int_t  elapsed;

    if (rate->rate == 0) {
        return NGX_OK;
    }

    elapsed = (ngx_msec_int_t) (ngx_current_msec - b->last);

    if (elapsed > 0) {
        elapsed = ngx_min(elapsed, NGX_PTY_BUCKET_MAX_MS);
        add = (uint64_t) elapsed * rate->rate / 1000;

        /* under one token: the time counts towards the next call */
        if (add) {
            b->tokens = (size_t) ngx_min(b->tokens + add,
                                         (uint64_t) rate->burst);
            b->last = ngx_current_msec;
        }
    }

    if (n > b->tokens) {
        return NGX_BUSY;
    }

    b->tokens -= n;

    return NGX_OK;
}


ngx_uint_t
ngx_pty_log_limit(ngx_pty_log_limit_t *ll, ngx_log_t *log, ngx_uint_t level,
    const char *what)
{
    if (ll->what != NULL
        && ngx_current_msec - ll->start < NGX_PTY_LOG_WINDOW)
    {
        ll->suppressed++;
        return 0;
    }

    ngx_pty_log_limit_end(ll, log);

    ll->start = ngx_current_msec;
    ll->level = level;
    ll->what = what;

    return 1;
}


void
ngx_pty_log_limit_end(ngx_pty_log_limit_t *ll, ngx_log_t *log)
{
    if (ll->suppressed) {
        ngx_log_error(ll->level, log, 0,
                      "pty: %ui more \"%s\" messages suppressed",
                      ll->suppressed, ll->what);
    }

    ll->suppressed = 0;
    ll->what = NULL;
}
