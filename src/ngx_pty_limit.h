
/*
 * Limits on what one client can make a worker do: a token bucket for
 * rates, and a log limiter that turns a flood of one message into its
 * first line and a count.
 */

#ifndef _NGX_PTY_LIMIT_H_INCLUDED_
#define _NGX_PTY_LIMIT_H_INCLUDED_


#include "ngx_pty.h"


#define NGX_PTY_RATE_MAX        (1024 * 1024 * 1024)  /* rate and burst */
#define NGX_PTY_LOG_WINDOW      10000                 /* ms per episode */


/* a token bucket's state; its rate and burst are ngx_pty_rate_t */
typedef struct {
    size_t                     tokens;
    ngx_msec_t                 last;        /* when tokens were counted */
} ngx_pty_bucket_t;


/*
 * One log message of one client (or session): the first line of an
 * episode is logged, the rest of it counted and summed up in one line
 * when the next episode starts or the limiter ends.
 */
typedef struct {
    ngx_msec_t                 start;       /* of the episode */
    ngx_uint_t                 suppressed;
    ngx_uint_t                 level;
    const char                *what;        /* names the message */
} ngx_pty_log_limit_t;


void ngx_pty_bucket_init(ngx_pty_bucket_t *b, ngx_pty_rate_t *rate);
/* NGX_OK: n tokens taken; NGX_BUSY: fewer left, none taken */
ngx_int_t ngx_pty_bucket_take(ngx_pty_bucket_t *b, ngx_pty_rate_t *rate,
    size_t n);

/* 1: log it now; 0: counted and suppressed */
ngx_uint_t ngx_pty_log_limit(ngx_pty_log_limit_t *ll, ngx_log_t *log,
    ngx_uint_t level, const char *what);
/* the episode ends: the count of what was suppressed, if any */
void ngx_pty_log_limit_end(ngx_pty_log_limit_t *ll, ngx_log_t *log);


#endif /* _NGX_PTY_LIMIT_H_INCLUDED_ */
